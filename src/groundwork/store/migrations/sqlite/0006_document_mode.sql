-- How a kb's chats use a document: rag (chunks), full (whole text) or auto.
ALTER TABLE documents ADD COLUMN mode TEXT NOT NULL DEFAULT 'rag';
