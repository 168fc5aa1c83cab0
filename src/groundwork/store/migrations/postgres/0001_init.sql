-- Core tables: knowledge bases, documents, chunks, full text, the embedding-model registry.
-- Vectors live in one table per embedding model, created by the store on first use
-- (see groundwork/store/postgres.py): HNSW needs a fixed vector(dim) column.
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE kbs (
    id          TEXT PRIMARY KEY,
    tenant      TEXT NOT NULL,
    name        TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    created_at  DOUBLE PRECISION NOT NULL,
    UNIQUE (tenant, name)
);

CREATE TABLE documents (
    id           TEXT PRIMARY KEY,
    tenant       TEXT NOT NULL,
    kb_id        TEXT REFERENCES kbs(id) ON DELETE CASCADE,
    record_id    TEXT,
    source_key   TEXT NOT NULL,
    filename     TEXT NOT NULL,
    title        TEXT NOT NULL,
    content_type TEXT NOT NULL,
    size         BIGINT NOT NULL,
    content_hash TEXT NOT NULL,
    source_url   TEXT,
    version      INTEGER NOT NULL DEFAULT 1,
    status       TEXT NOT NULL,
    importance   DOUBLE PRECISION NOT NULL DEFAULT 1.0,
    error        TEXT,
    progress     JSONB NOT NULL DEFAULT '{}',
    created_at   DOUBLE PRECISION NOT NULL,
    updated_at   DOUBLE PRECISION NOT NULL
);
CREATE INDEX documents_tenant_kb ON documents (tenant, kb_id);
CREATE INDEX documents_hash ON documents (tenant, content_hash);
CREATE INDEX documents_source ON documents (tenant, kb_id, source_key);

-- Extracted text, cached so "full" mode never re-parses the original.
CREATE TABLE document_texts (
    document_id TEXT PRIMARY KEY REFERENCES documents(id) ON DELETE CASCADE,
    tenant      TEXT NOT NULL,
    text        TEXT NOT NULL
);

-- body_tsv indexes heading path + text (what the embedder sees); the jsonb-to-text
-- cast is immutable, array_to_string is not, hence JSONB for heading_path.
CREATE TABLE chunks (
    id            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant        TEXT NOT NULL,
    kb_id         TEXT,
    record_id     TEXT,
    document_id   TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    idx           INTEGER NOT NULL,
    text          TEXT NOT NULL,
    heading_path  JSONB NOT NULL DEFAULT '[]',
    pages         JSONB NOT NULL DEFAULT '[]',
    char_start    INTEGER NOT NULL,
    char_end      INTEGER NOT NULL,
    token_count   INTEGER NOT NULL,
    content_hash  TEXT NOT NULL,
    body_tsv      TSVECTOR GENERATED ALWAYS AS
                  (to_tsvector('english'::regconfig, heading_path::text || ' ' || text)) STORED,
    UNIQUE (document_id, idx)
);
CREATE INDEX chunks_scope ON chunks (tenant, kb_id);
CREATE INDEX chunks_record ON chunks (tenant, record_id) WHERE record_id IS NOT NULL;
CREATE INDEX chunks_hash ON chunks (content_hash);
CREATE INDEX chunks_fts ON chunks USING GIN (body_tsv);

-- One row per embedding model; its vectors live in `table_name`
-- (content_hash TEXT PRIMARY KEY, embedding vector(dim), HNSW vector_cosine_ops).
CREATE TABLE embedding_models (
    model_id   TEXT PRIMARY KEY,
    dim        INTEGER NOT NULL,
    table_name TEXT NOT NULL UNIQUE,
    first_used DOUBLE PRECISION NOT NULL
);
