-- Ingestion jobs (groundwork.jobs_postgres): one row per attempt series of one document.
-- state: queued -> running -> done | failed | cancelled (document deleted) | superseded
-- (a newer submission took over); a running job whose lease expired (its worker died)
-- goes back to queued, or to failed after max_attempts. Times are epoch seconds on the
-- database's clock, the one clock every worker machine shares.
CREATE TABLE jobs (
    id           TEXT PRIMARY KEY,
    seq          BIGINT GENERATED ALWAYS AS IDENTITY,  -- submission order within one clock tick
    tenant       TEXT NOT NULL,
    document_id  TEXT NOT NULL,
    state        TEXT NOT NULL,
    payload      JSONB NOT NULL DEFAULT '{}',
    attempts     INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL,
    run_after    DOUBLE PRECISION NOT NULL,
    lease_owner  TEXT,                                -- host:pid:id of the worker holding it
    lease_until  DOUBLE PRECISION,
    last_error   TEXT,
    claimed_by   TEXT[] NOT NULL DEFAULT '{}',        -- every worker that claimed it, in order
    created_at   DOUBLE PRECISION NOT NULL,
    updated_at   DOUBLE PRECISION NOT NULL
);
-- At most one waiting job per document: submitting the same document again refreshes it.
CREATE UNIQUE INDEX jobs_one_queued ON jobs (tenant, document_id) WHERE state = 'queued';
CREATE INDEX jobs_due ON jobs (run_after, seq) WHERE state = 'queued';
CREATE INDEX jobs_leases ON jobs (lease_until) WHERE state = 'running';
CREATE INDEX jobs_document ON jobs (tenant, document_id);
