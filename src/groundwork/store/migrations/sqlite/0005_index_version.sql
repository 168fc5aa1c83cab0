-- A counter bumped only by writes that change what vector search sees (chunks,
-- embeddings, deletions), so a chat turn or a job heartbeat in the same file does not
-- force the in-memory vector matrix to be rebuilt.
CREATE TABLE index_version (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL
);
INSERT INTO index_version VALUES (1, 0);
