-- Domain objects (assistants, templates, records, conversations, access tokens) as
-- typed JSON documents per tenant; their shape lives in groundwork.domain.
CREATE TABLE objects (
    tenant     TEXT NOT NULL,
    kind       TEXT NOT NULL,
    id         TEXT NOT NULL,
    data       TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (tenant, kind, id)
);
