-- Domain objects (assistants, templates, records, conversations, access tokens) as
-- typed JSON documents per tenant; their shape lives in groundwork.domain.
CREATE TABLE objects (
    tenant     TEXT NOT NULL,
    kind       TEXT NOT NULL,
    id         TEXT NOT NULL,
    data       JSONB NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (tenant, kind, id)
);
