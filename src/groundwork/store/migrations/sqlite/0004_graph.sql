-- Knowledge graph (groundwork.graph) and KB map (groundwork.kbmap). Rows belong to one
-- document and go with it (ON DELETE CASCADE, in the same statement that deletes the
-- document); re-ingesting a document replaces them. `tenant`, `kb_id`, `record_id` are
-- copied from the document so every graph query filters its scope in SQL.
-- `chunks`: JSON array of the chunk indexes (of `document_id`) a fact came from.
CREATE TABLE kg_entities (
    tenant      TEXT NOT NULL,
    kb_id       TEXT,
    record_id   TEXT,
    document_id TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    entity_key  TEXT NOT NULL,
    name        TEXT NOT NULL,
    type        TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    mentions    INTEGER NOT NULL DEFAULT 1,
    chunks      TEXT NOT NULL DEFAULT '[]',
    PRIMARY KEY (document_id, entity_key)
);
CREATE INDEX kg_entities_key ON kg_entities (tenant, entity_key);

-- `related_to` is undirected and stored once per pair (source_key < target_key); typed
-- relations keep the direction the text gave them.
CREATE TABLE kg_relations (
    tenant      TEXT NOT NULL,
    kb_id       TEXT,
    record_id   TEXT,
    document_id TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    source_key  TEXT NOT NULL,
    target_key  TEXT NOT NULL,
    type        TEXT NOT NULL,
    weight      INTEGER NOT NULL DEFAULT 1,
    description TEXT NOT NULL DEFAULT '',
    chunks      TEXT NOT NULL DEFAULT '[]',
    PRIMARY KEY (document_id, source_key, target_key, type)
);
CREATE INDEX kg_relations_source ON kg_relations (tenant, source_key);
CREATE INDEX kg_relations_target ON kg_relations (tenant, target_key);

-- One summary per kb document (`topics`: TEXT array) and its keywords, one row per
-- term: `term_counts` (document frequencies against the kb) reads them through an index.
CREATE TABLE document_summaries (
    document_id TEXT PRIMARY KEY REFERENCES documents(id) ON DELETE CASCADE,
    tenant      TEXT NOT NULL,
    kb_id       TEXT,
    summary     TEXT NOT NULL DEFAULT '',
    topics      TEXT NOT NULL DEFAULT '[]',
    updated_at  REAL NOT NULL
);
CREATE INDEX document_summaries_kb ON document_summaries (tenant, kb_id);

CREATE TABLE document_terms (
    document_id TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    tenant      TEXT NOT NULL,
    kb_id       TEXT,
    term        TEXT NOT NULL,
    count       INTEGER NOT NULL,
    PRIMARY KEY (document_id, term)
);
CREATE INDEX document_terms_kb ON document_terms (tenant, kb_id, term);
