-- Ingestion jobs (groundwork.jobs): one row per attempt series of one document.
-- state: queued -> running -> done | failed | cancelled (document deleted) | superseded
-- (a newer submission took over); a running job whose lease expired (its worker died)
-- goes back to queued, or to failed after max_attempts.
CREATE TABLE jobs (
    id           TEXT PRIMARY KEY,
    tenant       TEXT NOT NULL,
    document_id  TEXT NOT NULL,
    state        TEXT NOT NULL,
    payload      TEXT NOT NULL DEFAULT '{}',
    attempts     INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL,
    run_after    REAL NOT NULL,
    lease_owner  TEXT,
    lease_until  REAL,
    last_error   TEXT,
    created_at   REAL NOT NULL,
    updated_at   REAL NOT NULL
);
-- At most one waiting job per document: submitting the same document again refreshes it.
CREATE UNIQUE INDEX jobs_one_queued ON jobs (tenant, document_id) WHERE state = 'queued';
CREATE INDEX jobs_due ON jobs (state, run_after);
CREATE INDEX jobs_document ON jobs (tenant, document_id);
