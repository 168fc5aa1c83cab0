-- Core tables: knowledge bases, documents, chunks, full text, embeddings.
CREATE TABLE kbs (
    id          TEXT PRIMARY KEY,
    tenant      TEXT NOT NULL,
    name        TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    created_at  REAL NOT NULL,
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
    size         INTEGER NOT NULL,
    content_hash TEXT NOT NULL,
    source_url   TEXT,
    version      INTEGER NOT NULL DEFAULT 1,
    status       TEXT NOT NULL,
    importance   REAL NOT NULL DEFAULT 1.0,
    error        TEXT,
    progress     TEXT NOT NULL DEFAULT '{}',
    created_at   REAL NOT NULL,
    updated_at   REAL NOT NULL
);
CREATE INDEX documents_tenant_kb ON documents (tenant, kb_id);
CREATE INDEX documents_hash ON documents (tenant, content_hash);
CREATE INDEX documents_source ON documents (tenant, kb_id, source_key);

-- Extracted text, cached so "full" mode never re-parses the original.
CREATE TABLE document_texts (
    document_id TEXT PRIMARY KEY REFERENCES documents(id) ON DELETE CASCADE,
    text        TEXT NOT NULL
);

CREATE TABLE chunks (
    rowid         INTEGER PRIMARY KEY,
    tenant        TEXT NOT NULL,
    kb_id         TEXT,
    record_id     TEXT,
    document_id   TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    idx           INTEGER NOT NULL,
    text          TEXT NOT NULL,
    heading_path  TEXT NOT NULL DEFAULT '[]',
    pages         TEXT NOT NULL DEFAULT '[]',
    char_start    INTEGER NOT NULL,
    char_end      INTEGER NOT NULL,
    token_count   INTEGER NOT NULL,
    content_hash  TEXT NOT NULL,
    UNIQUE (document_id, idx)
);
CREATE INDEX chunks_scope ON chunks (tenant, kb_id);
CREATE INDEX chunks_hash ON chunks (content_hash);

-- Full text over heading path + chunk text; rowid = chunks.rowid.
CREATE VIRTUAL TABLE chunks_fts USING fts5 (body, tokenize = 'porter unicode61');

-- One vector per (chunk content, embedding model): switching models keeps chunks.
CREATE TABLE embeddings (
    model_id     TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    dim          INTEGER NOT NULL,
    vector       BLOB NOT NULL,
    PRIMARY KEY (model_id, content_hash)
);

CREATE TABLE embedding_models (
    model_id   TEXT PRIMARY KEY,
    dim        INTEGER NOT NULL,
    first_used REAL NOT NULL
);
