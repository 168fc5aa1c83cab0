-- Counts the writes that invalidate rows already in the in-memory vector matrix
-- (deleted chunks, replaced vectors); other index writes only append rows.
ALTER TABLE index_version ADD COLUMN rebuild INTEGER NOT NULL DEFAULT 0;
