"""The embedded store: one SQLite file (WAL) holding documents, chunks, FTS5 full text
and vectors. Vector search is exact: a float32 matrix of the chunks' embeddings is
kept in memory per model and refreshed when the database changes; the scope is turned
into a row mask before any score is computed."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import uuid
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from ..errors import InvalidRequest, NotFound, StoreError
from ..types import Chunk, Document, Hit, KnowledgeBase, Scope
from .textquery import fts5_match

_DOC_COLUMNS = ("id, tenant, kb_id, filename, title, content_type, size, content_hash, source_url, "
                "version, status, importance, record_id, error, created_at, updated_at, mode")
_CHUNK_COLUMNS = ("document_id, idx, text, heading_path, pages, char_start, char_end, "
                  "token_count, content_hash")


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def migrations(dialect: str) -> list[tuple[int, str, str]]:
    """(number, name, sql) of the numbered migrations shipped for `dialect`."""
    folder = resources.files("groundwork.store") / "migrations" / dialect
    found = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            found.append((int(entry.name.split("_", 1)[0]), entry.name, entry.read_text()))
    return sorted(found)


@dataclass
class _VectorIndex:
    version: int
    rebuild: int
    rowids: np.ndarray
    matrix: np.ndarray
    tenant: np.ndarray  # integer codes, see `codes`
    kb: np.ndarray
    document: np.ndarray
    record: np.ndarray
    codes: dict[str, dict[str | None, int]]


class SQLiteStore:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None,
                                       timeout=30)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open {self.path}: {exc}") from None
        self._db.row_factory = sqlite3.Row
        self._lock = threading.RLock()
        self._indexes: dict[str, _VectorIndex] = {}
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON"):
            self._db.execute(f"PRAGMA {pragma}")
        self.applied_migrations = self.migrate()  # what this open applied (`groundwork migrate`)

    # -- plumbing ---------------------------------------------------------------
    @contextmanager
    def transaction(self):
        """One atomic unit of work: all of it lands, or none of it does."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            else:
                self._db.execute("COMMIT")

    def _query(self, sql: str, params: Sequence = ()) -> list[sqlite3.Row]:
        with self._lock:
            try:
                return self._db.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"query failed: {exc}") from None

    def migrate(self) -> list[str]:
        """Apply the numbered migrations not yet applied; returns their names."""
        applied = []
        with self.transaction() as db:
            db.execute("CREATE TABLE IF NOT EXISTS schema_migrations "
                       "(number INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)")
            done = {row[0] for row in db.execute("SELECT number FROM schema_migrations")}
            for number, name, sql in migrations("sqlite"):
                if number in done:
                    continue
                for statement in _statements(sql):
                    db.execute(statement)
                db.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)", (number, name, time.time()))
                applied.append(name)
        return applied

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- knowledge bases --------------------------------------------------------
    def create_kb(self, tenant: str, name: str, description: str = "") -> KnowledgeBase:
        kb = KnowledgeBase(new_id("kb"), tenant, name, description, time.time())
        try:
            with self.transaction() as db:
                db.execute("INSERT INTO kbs VALUES (?, ?, ?, ?, ?)",
                           (kb.id, tenant, name, description, kb.created_at))
        except sqlite3.IntegrityError:
            raise InvalidRequest(f"knowledge base {name!r} already exists") from None
        return kb

    def get_kb(self, tenant: str, name_or_id: str) -> KnowledgeBase:
        rows = self._query("SELECT id, tenant, name, description, created_at FROM kbs "
                           "WHERE tenant = ? AND (id = ? OR name = ?)", (tenant, name_or_id, name_or_id))
        if not rows:
            raise NotFound(f"knowledge base {name_or_id!r} not found")
        return KnowledgeBase(*rows[0])

    def list_kbs(self, tenant: str) -> list[KnowledgeBase]:
        rows = self._query("SELECT id, tenant, name, description, created_at FROM kbs "
                           "WHERE tenant = ? ORDER BY name", (tenant,))
        return [KnowledgeBase(*row) for row in rows]

    def delete_kb(self, tenant: str, kb_id: str) -> None:
        kb = self.get_kb(tenant, kb_id)
        for document in self.list_documents(tenant, kb.id):
            self.delete_document(tenant, document.id)
        with self.transaction() as db:
            db.execute("DELETE FROM kbs WHERE tenant = ? AND id = ?", (tenant, kb.id))

    # -- documents --------------------------------------------------------------
    def put_document(self, document: Document, source_key: str) -> None:
        d = document
        with self.transaction() as db:
            db.execute(
                f"INSERT INTO documents ({_DOC_COLUMNS}, source_key) VALUES "
                "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (id) DO UPDATE SET filename = excluded.filename, title = excluded.title, "
                "content_type = excluded.content_type, size = excluded.size, "
                "content_hash = excluded.content_hash, source_url = excluded.source_url, "
                "version = excluded.version, status = excluded.status, importance = excluded.importance, "
                "error = excluded.error, updated_at = excluded.updated_at, source_key = excluded.source_key, "
                "mode = excluded.mode",
                (d.id, d.tenant, d.kb_id, d.filename, d.title, d.content_type, d.size, d.content_hash,
                 d.source_url, d.version, d.status, d.importance, d.record_id, d.error,
                 d.created_at, d.updated_at, d.mode, source_key))

    def get_document(self, tenant: str, document_id: str) -> Document:
        rows = self._query(f"SELECT {_DOC_COLUMNS} FROM documents WHERE tenant = ? AND id = ?",
                           (tenant, document_id))
        if not rows:
            raise NotFound(f"document {document_id!r} not found")
        return Document(*rows[0])

    def find_document(self, tenant: str, kb_id: str | None, *, source_key: str | None = None,
                      content_hash: str | None = None) -> Document | None:
        clauses, params = ["tenant = ?", "kb_id IS ?"], [tenant, kb_id]
        if source_key is not None:
            clauses.append("source_key = ?")
            params.append(source_key)
        if content_hash is not None:
            clauses.append("content_hash = ?")
            params.append(content_hash)
        rows = self._query(f"SELECT {_DOC_COLUMNS} FROM documents WHERE {' AND '.join(clauses)} "
                           "ORDER BY updated_at DESC LIMIT 1", params)
        return Document(*rows[0]) if rows else None

    def list_documents(self, tenant: str, kb_id: str | None = None, *,
                       modes: Sequence[str] | None = None) -> list[Document]:
        """A tenant's documents (in one kb), optionally only those with one of `modes`."""
        clauses, params = ["tenant = ?"], [tenant]
        if kb_id is not None:
            clauses.append("kb_id = ?")
            params.append(kb_id)
        if modes is not None:
            clauses.append(f"mode IN ({','.join('?' * len(modes))})" if modes else "0")
            params.extend(modes)
        rows = self._query(f"SELECT {_DOC_COLUMNS} FROM documents WHERE {' AND '.join(clauses)} "
                           "ORDER BY created_at", params)
        return [Document(*row) for row in rows]

    def set_status(self, tenant: str, document_id: str, status: str, *,
                   error: str | None = None, progress: dict | None = None) -> None:
        with self.transaction() as db:
            cur = db.execute("UPDATE documents SET status = ?, error = ?, updated_at = ?, "
                             "progress = COALESCE(?, progress) WHERE tenant = ? AND id = ?",
                             (status, error, time.time(),
                              json.dumps(progress) if progress is not None else None, tenant, document_id))
            if cur.rowcount == 0:
                raise NotFound(f"document {document_id!r} not found")

    def get_progress(self, tenant: str, document_id: str) -> dict:
        rows = self._query("SELECT progress FROM documents WHERE tenant = ? AND id = ?", (tenant, document_id))
        if not rows:
            raise NotFound(f"document {document_id!r} not found")
        return json.loads(rows[0][0])

    def delete_document(self, tenant: str, document_id: str) -> None:
        """Forget a document: its row, text, chunks, full-text entries and the vectors
        no other chunk still uses."""
        self.get_document(tenant, document_id)
        with self.transaction() as db:
            hashes = [r[0] for r in db.execute("SELECT content_hash FROM chunks WHERE document_id = ?",
                                               (document_id,))]
            self._delete_chunks(db, document_id)
            self._bump(db, rebuild=bool(hashes))
            db.execute("DELETE FROM document_texts WHERE document_id = ?", (document_id,))
            db.execute("DELETE FROM documents WHERE tenant = ? AND id = ?", (tenant, document_id))
            self._drop_orphan_embeddings(db, hashes)

    # -- content ----------------------------------------------------------------
    def put_text(self, tenant: str, document_id: str, text: str) -> None:
        self.get_document(tenant, document_id)
        with self.transaction() as db:
            db.execute("INSERT INTO document_texts VALUES (?, ?) ON CONFLICT (document_id) "
                       "DO UPDATE SET text = excluded.text", (document_id, text))

    def get_text(self, tenant: str, document_id: str) -> str:
        rows = self._query("SELECT t.text FROM document_texts t JOIN documents d ON d.id = t.document_id "
                           "WHERE d.tenant = ? AND d.id = ?", (tenant, document_id))
        if not rows:
            raise NotFound(f"no extracted text for document {document_id!r}")
        return rows[0][0]

    def replace_chunks(self, tenant: str, document_id: str, chunks: Sequence[Chunk]) -> None:
        document = self.get_document(tenant, document_id)
        with self.transaction() as db:
            old = [r[0] for r in db.execute("SELECT content_hash FROM chunks WHERE document_id = ?",
                                            (document_id,))]
            self._delete_chunks(db, document_id)
            self._bump(db, rebuild=bool(old))
            for c in chunks:
                cur = db.execute(
                    f"INSERT INTO chunks (tenant, kb_id, record_id, {_CHUNK_COLUMNS}) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (tenant, document.kb_id, document.record_id, document_id, c.index, c.text,
                     json.dumps(list(c.heading_path)), json.dumps(list(c.pages)), c.char_start,
                     c.char_end, c.token_count, c.content_hash))
                db.execute("INSERT INTO chunks_fts (rowid, body) VALUES (?, ?)",
                           (cur.lastrowid, c.embed_text))
            self._drop_orphan_embeddings(db, set(old) - {c.content_hash for c in chunks})

    def _delete_chunks(self, db: sqlite3.Connection, document_id: str) -> None:
        db.execute("DELETE FROM chunks_fts WHERE rowid IN (SELECT rowid FROM chunks WHERE document_id = ?)",
                   (document_id,))
        db.execute("DELETE FROM chunks WHERE document_id = ?", (document_id,))

    def _drop_orphan_embeddings(self, db: sqlite3.Connection, hashes) -> None:
        for h in set(hashes):
            if db.execute("SELECT 1 FROM chunks WHERE content_hash = ? LIMIT 1", (h,)).fetchone() is None:
                db.execute("DELETE FROM embeddings WHERE content_hash = ?", (h,))

    def get_chunks(self, tenant: str, document_id: str) -> list[Chunk]:
        rows = self._query(f"SELECT {_CHUNK_COLUMNS} FROM chunks WHERE tenant = ? AND document_id = ? "
                           "ORDER BY idx", (tenant, document_id))
        return [_chunk(row) for row in rows]

    def chunk_counts(self, tenant: str, document_ids: Sequence[str]) -> dict[str, int]:
        if not document_ids:
            return {}
        marks = ",".join("?" * len(document_ids))
        rows = self._query(f"SELECT document_id, COUNT(*) FROM chunks WHERE tenant = ? AND "
                           f"document_id IN ({marks}) GROUP BY document_id", (tenant, *document_ids))
        return {row[0]: row[1] for row in rows}

    # -- embeddings -------------------------------------------------------------
    def missing_embeddings(self, model_id: str, hashes: Sequence[str]) -> list[str]:
        wanted = list(dict.fromkeys(hashes))
        have: set[str] = set()
        for start in range(0, len(wanted), 500):
            part = wanted[start:start + 500]
            rows = self._query(f"SELECT content_hash FROM embeddings WHERE model_id = ? AND content_hash "
                               f"IN ({','.join('?' * len(part))})", (model_id, *part))
            have.update(row[0] for row in rows)
        return [h for h in wanted if h not in have]

    def put_embeddings(self, model_id: str, hashes: Sequence[str], vectors: np.ndarray) -> None:
        vectors = np.asarray(vectors, dtype=np.float32)
        if len(hashes) != len(vectors):
            raise StoreError("put_embeddings: hashes and vectors differ in length")
        if not len(hashes):
            return
        dim = int(vectors.shape[1])
        with self.transaction() as db:
            row = db.execute("SELECT dim FROM embedding_models WHERE model_id = ?", (model_id,)).fetchone()
            if row is None:
                db.execute("INSERT INTO embedding_models VALUES (?, ?, ?)", (model_id, dim, time.time()))
            elif row[0] != dim:
                raise StoreError(f"model {model_id} has dimension {row[0]} in this store, got {dim}")
            # Vectors for chunks already indexed change matrix rows; others only come
            # into the matrix with chunks written later (appended).
            self._bump(db, rebuild=any(
                db.execute(f"SELECT 1 FROM chunks WHERE content_hash IN ({','.join('?' * len(part))}) LIMIT 1",
                           part).fetchone() for part in (hashes[i:i + 500] for i in range(0, len(hashes), 500))))
            db.executemany("INSERT OR REPLACE INTO embeddings VALUES (?, ?, ?, ?)",
                           [(model_id, h, dim, v.tobytes()) for h, v in zip(hashes, vectors)])

    # -- domain objects -------------------------------------------------------
    def put_object(self, tenant: str, kind: str, object_id: str, data: dict) -> None:
        now = time.time()
        with self.transaction() as db:
            db.execute("INSERT INTO objects VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, kind, id) "
                       "DO UPDATE SET data = excluded.data, updated_at = excluded.updated_at",
                       (tenant, kind, object_id, json.dumps(data), now, now))

    def get_object(self, tenant: str, kind: str, object_id: str) -> dict:
        rows = self._query("SELECT data FROM objects WHERE tenant = ? AND kind = ? AND id = ?",
                           (tenant, kind, object_id))
        if not rows:
            raise NotFound(f"{kind} {object_id!r} not found")
        return json.loads(rows[0][0])

    def list_objects(self, tenant: str, kind: str) -> list[dict]:
        rows = self._query("SELECT data FROM objects WHERE tenant = ? AND kind = ? ORDER BY created_at, id",
                           (tenant, kind))
        return [json.loads(row[0]) for row in rows]

    def delete_object(self, tenant: str, kind: str, object_id: str) -> None:
        with self.transaction() as db:
            cur = db.execute("DELETE FROM objects WHERE tenant = ? AND kind = ? AND id = ?",
                             (tenant, kind, object_id))
            if cur.rowcount == 0:
                raise NotFound(f"{kind} {object_id!r} not found")

    # -- search -----------------------------------------------------------------
    def vector_search(self, scope: Scope, model_id: str, vector: np.ndarray, k: int) -> list[Hit]:
        index = self._vector_index(model_id)
        mask = self._mask(index, scope)
        candidates = np.flatnonzero(mask)
        if not len(candidates) or k <= 0:
            return []
        query = np.asarray(vector, dtype=np.float32)
        if len(candidates) * 8 > len(index.rowids):
            # A broad scope: one matrix-vector product beats copying most rows out first.
            scores = (index.matrix @ query)[candidates]
        else:
            scores = index.matrix[candidates] @ query
        take = min(k, len(candidates))
        top = np.argpartition(-scores, take - 1)[:take]
        top = top[np.argsort(-scores[top])]
        ranked = [(int(index.rowids[candidates[i]]), float(scores[i])) for i in top]
        return self._hits(ranked, "vector")

    def text_search(self, scope: Scope, query: str, k: int) -> list[Hit]:
        match = fts5_match(query)
        if match is None or k <= 0:
            return []
        where, params = _scope_sql(scope, "c.")
        rows = self._query(
            "SELECT c.rowid, -bm25(chunks_fts) AS score FROM chunks_fts JOIN chunks c ON "
            f"c.rowid = chunks_fts.rowid WHERE chunks_fts MATCH ? AND {where} "
            "ORDER BY bm25(chunks_fts) LIMIT ?", (match, *params, k))
        return self._hits([(row[0], float(row[1])) for row in rows], "text")

    def _hits(self, ranked: list[tuple[int, float]], kind: str) -> list[Hit]:
        if not ranked:
            return []
        marks = ",".join("?" * len(ranked))
        rows = self._query(f"SELECT rowid, {_CHUNK_COLUMNS} FROM chunks WHERE rowid IN ({marks})",
                           [r for r, _ in ranked])
        chunks = {row[0]: _chunk(tuple(row)[1:]) for row in rows}
        doc_ids = list({c.document_id for c in chunks.values()})
        drows = self._query(f"SELECT {_DOC_COLUMNS} FROM documents WHERE id IN ({','.join('?' * len(doc_ids))})",
                            doc_ids)
        documents = {row[0]: Document(*row) for row in drows}
        hits = []
        for rowid, score in ranked:
            chunk = chunks.get(rowid)
            if chunk is None or chunk.document_id not in documents:
                continue  # deleted between the ranking and this read
            hits.append(Hit(chunk=chunk, document=documents[chunk.document_id], score=score,
                            vector_score=score if kind == "vector" else None,
                            text_score=score if kind == "text" else None))
        return hits

    def _version(self) -> tuple[int, int]:
        """(version, rebuild): bumped by chunk and embedding writes only, from any
        process; `rebuild` only by writes that invalidate rows already in the matrix."""
        return tuple(self._query("SELECT version, rebuild FROM index_version WHERE id = 1")[0])

    @staticmethod
    def _bump(db: sqlite3.Connection, *, rebuild: bool = False) -> None:
        db.execute("UPDATE index_version SET version = version + 1, rebuild = rebuild + ? WHERE id = 1",
                   (int(rebuild),))

    def _vector_index(self, model_id: str) -> _VectorIndex:
        """The model's matrix, refreshed when the index changed: new chunks are appended
        (rows are loaded in rowid order, so new ones have higher rowids); a deletion or a
        replaced vector rebuilds it."""
        with self._lock:  # one refresh at a time: codes are assigned by dictionary size
            return self._refresh_vector_index(model_id)

    def _refresh_vector_index(self, model_id: str) -> _VectorIndex:
        version, rebuild = self._version()
        index = self._indexes.get(model_id)
        if index is not None and index.version == version:
            return index
        append = index is not None and index.rebuild == rebuild and len(index.rowids)
        after = int(index.rowids[-1]) if append else -1
        rows = self._query("SELECT c.rowid, c.tenant, c.kb_id, c.document_id, c.record_id, e.vector "
                           "FROM chunks c JOIN embeddings e ON e.content_hash = c.content_hash "
                           "AND e.model_id = ? WHERE c.rowid > ? ORDER BY c.rowid", (model_id, after))
        codes = index.codes if append else {"tenant": {}, "kb": {}, "document": {}, "record": {}}

        def encode(axis: str, position: int) -> np.ndarray:
            table = codes[axis]
            return np.fromiter((table.setdefault(r[position], len(table)) for r in rows), dtype=np.int32,
                               count=len(rows))

        dim = len(rows[0][5]) // 4 if rows else (index.matrix.shape[1] if append else 0)
        matrix = (np.frombuffer(b"".join(r[5] for r in rows), dtype=np.float32).reshape(len(rows), dim)
                  if rows else np.zeros((0, dim), dtype=np.float32))
        fresh = _VectorIndex(
            version=version, rebuild=rebuild,
            rowids=np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows)), matrix=matrix,
            tenant=encode("tenant", 1), kb=encode("kb", 2), document=encode("document", 3),
            record=encode("record", 4), codes=codes)
        if append:
            fresh = _VectorIndex(
                version=version, rebuild=rebuild, codes=codes,
                rowids=np.concatenate([index.rowids, fresh.rowids]),
                matrix=np.concatenate([index.matrix, fresh.matrix]) if len(rows) else index.matrix,
                **{axis: np.concatenate([getattr(index, axis), getattr(fresh, axis)])
                   for axis in ("tenant", "kb", "document", "record")})
        self._indexes[model_id] = fresh
        return fresh

    @staticmethod
    def _mask(index: _VectorIndex, scope: Scope) -> np.ndarray:
        def allowed(axis: str, column: np.ndarray, values) -> np.ndarray:
            wanted = [index.codes[axis][v] for v in values if v in index.codes[axis]]
            return np.isin(column, np.asarray(wanted, dtype=np.int32))

        mask = allowed("tenant", index.tenant, [scope.tenant])
        if scope.kb_ids is not None:
            mask &= allowed("kb", index.kb, scope.kb_ids)
        if scope.document_ids is not None:
            mask &= allowed("document", index.document, scope.document_ids)
        if scope.record_ids is not None:
            mask &= allowed("record", index.record, scope.record_ids)
        return mask

    # -- moving data between stores (groundwork.transfer) -------------------------
    def put_kb(self, kb: KnowledgeBase) -> None:
        """Add a knowledge base under its own id (copied from another store). The same kb
        again is a no-op; another kb with that name or id is an InvalidRequest."""
        try:
            with self.transaction() as db:
                db.execute("INSERT INTO kbs VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
                           (kb.id, kb.tenant, kb.name, kb.description, kb.created_at))
                row = db.execute("SELECT tenant, name FROM kbs WHERE id = ?", (kb.id,)).fetchone()
                if tuple(row) != (kb.tenant, kb.name):
                    raise InvalidRequest(f"knowledge base id {kb.id!r} is already in use")
        except sqlite3.IntegrityError:
            raise InvalidRequest(f"knowledge base {kb.name!r} already exists with another id") from None

    def get_source_key(self, tenant: str, document_id: str) -> str:
        """The key re-ingestion matches a document by (a file's resolved path, a URL...)."""
        rows = self._query("SELECT source_key FROM documents WHERE tenant = ? AND id = ?", (tenant, document_id))
        if not rows:
            raise NotFound(f"document {document_id!r} not found")
        return rows[0][0]

    def embedding_models(self) -> dict[str, int]:
        """{model id: dimension} of every model that has stored embeddings here."""
        return {row[0]: row[1] for row in self._query("SELECT model_id, dim FROM embedding_models")}

    def get_embeddings(self, model_id: str, hashes: Sequence[str]) -> np.ndarray:
        """The stored vectors of `hashes` under `model_id`, one row each, in that order;
        NotFound if the model or any of the vectors is missing."""
        dims = self.embedding_models()
        if model_id not in dims:
            raise NotFound(f"no embeddings of model {model_id!r}")
        wanted = list(dict.fromkeys(hashes))
        found: dict[str, bytes] = {}
        for start in range(0, len(wanted), 500):
            part = wanted[start:start + 500]
            rows = self._query(f"SELECT content_hash, vector FROM embeddings WHERE model_id = ? AND content_hash "
                               f"IN ({','.join('?' * len(part))})", (model_id, *part))
            found.update((row[0], row[1]) for row in rows)
        missing = [h for h in wanted if h not in found]
        if missing:
            raise NotFound(f"{len(missing)} embeddings of model {model_id!r} not found (e.g. {missing[0]})")
        return np.frombuffer(b"".join(found[h] for h in hashes), dtype=np.float32).reshape(len(hashes),
                                                                                          dims[model_id])

    # -- knowledge graph and kb map (groundwork.graph, groundwork.kbmap) ----------
    # Rows carry the document's tenant/kb/record and go with it (ON DELETE CASCADE).
    def put_graph(self, tenant: str, document_id: str, entities, relations) -> None:
        """Replace a document's entities and relations."""
        d = self.get_document(tenant, document_id)
        owner = (tenant, d.kb_id, d.record_id, document_id)
        with self.transaction() as db:
            db.execute("DELETE FROM kg_entities WHERE document_id = ?", (document_id,))
            db.execute("DELETE FROM kg_relations WHERE document_id = ?", (document_id,))
            db.executemany(
                "INSERT INTO kg_entities VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (document_id, "
                "entity_key) DO UPDATE SET mentions = mentions + excluded.mentions",
                [(*owner, e.key, e.name, e.type, e.description, e.mentions, json.dumps(list(e.chunks)))
                 for e in entities])
            db.executemany(
                "INSERT INTO kg_relations VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (document_id, "
                "source_key, target_key, type) DO UPDATE SET weight = weight + excluded.weight",
                [(*owner, r.source, r.target, r.type, r.weight, r.description, json.dumps(list(r.chunks)))
                 for r in relations])

    def get_graph(self, tenant: str, document_id: str):
        """(entities, relations) stored for one document."""
        from ..graph import Entity, Relation

        ents = self._query("SELECT entity_key, name, type, description, mentions, chunks FROM kg_entities "
                           "WHERE tenant = ? AND document_id = ? ORDER BY mentions DESC, entity_key",
                           (tenant, document_id))
        rels = self._query("SELECT source_key, target_key, type, weight, description, chunks FROM kg_relations "
                           "WHERE tenant = ? AND document_id = ? ORDER BY weight DESC, source_key, target_key, type",
                           (tenant, document_id))
        return ([Entity(*row[:5], chunks=tuple(json.loads(row[5]))) for row in ents],
                [Relation(*row[:5], chunks=tuple(json.loads(row[5]))) for row in rels])

    def graph_neighbourhood(self, scope: Scope, keys: Sequence[str], *, hops: int = 2, limit: int = 15,
                            relation_limit: int = 20):
        """Entities named by `keys` and those up to `hops` relations away (either
        direction), ranked by distance then by the weight of their links one step
        closer (seeds: all their links); one recursive CTE, scope filtered in SQL."""
        from ..graph import GraphResult, build_result

        where, params = _scope_sql(scope, "c.")
        if where == "0" or not keys or limit <= 0:
            return GraphResult()
        wanted = json.dumps(list(dict.fromkeys(keys)))
        other = "CASE WHEN c.source_key = {0}.entity_key THEN c.target_key ELSE c.source_key END"
        reached = self._query(
            "WITH RECURSIVE walk(entity_key, depth) AS ("
            f" SELECT DISTINCT c.entity_key, 0 FROM kg_entities c WHERE {where}"
            "  AND c.entity_key IN (SELECT value FROM json_each(?))"
            f" UNION SELECT {other.format('w')}, w.depth + 1 FROM walk w JOIN kg_relations c"
            f"  ON (c.source_key = w.entity_key OR c.target_key = w.entity_key) WHERE w.depth < ? AND {where}),"
            " reached AS (SELECT entity_key, MIN(depth) AS depth FROM walk GROUP BY entity_key),"
            " strength AS (SELECT x.entity_key, SUM(c.weight) AS weight FROM reached x JOIN kg_relations c"
            f"  ON (c.source_key = x.entity_key OR c.target_key = x.entity_key) AND {where}"
            f"  JOIN reached y ON y.entity_key = {other.format('x')}"
            "  AND (x.depth = 0 OR y.depth = x.depth - 1) GROUP BY x.entity_key)"
            " SELECT r.entity_key, r.depth FROM reached r LEFT JOIN strength s ON s.entity_key = r.entity_key"
            " ORDER BY r.depth, COALESCE(s.weight, 0) DESC, r.entity_key LIMIT ?",
            (*params, wanted, int(hops), *params, *params, int(limit)))
        ranked = [(row[0], row[1]) for row in reached]
        if not ranked:
            return GraphResult()
        chosen = json.dumps([key for key, _ in ranked])
        ents = self._query("SELECT c.entity_key, c.name, c.type, c.description, c.mentions, c.document_id, "
                           f"c.chunks FROM kg_entities c WHERE {where} AND c.entity_key IN "
                           "(SELECT value FROM json_each(?)) ORDER BY c.document_id", (*params, chosen))
        rels = self._query("SELECT c.source_key, c.target_key, c.type, c.weight, c.description, c.document_id, "
                           f"c.chunks FROM kg_relations c WHERE {where} AND c.source_key IN "
                           "(SELECT value FROM json_each(?)) AND c.target_key IN (SELECT value FROM json_each(?)) "
                           "ORDER BY c.document_id", (*params, chosen, chosen))
        return build_result(ranked, ((*row[:6], json.loads(row[6])) for row in ents),
                            ((*row[:6], json.loads(row[6])) for row in rels), relation_limit)

    def put_summary(self, tenant: str, document_id: str, summary: str, topics: Sequence[str],
                    keywords=None) -> None:
        """Set a document's KB-map summary and topics, and replace its keyword counts
        when `keywords` ({term: count}) is given."""
        d = self.get_document(tenant, document_id)
        with self.transaction() as db:
            db.execute("INSERT INTO document_summaries VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (document_id) "
                       "DO UPDATE SET summary = excluded.summary, topics = excluded.topics, "
                       "updated_at = excluded.updated_at",
                       (document_id, tenant, d.kb_id, summary, json.dumps(list(topics)), time.time()))
            if keywords is not None:
                db.execute("DELETE FROM document_terms WHERE document_id = ?", (document_id,))
                db.executemany("INSERT INTO document_terms VALUES (?, ?, ?, ?, ?)",
                               [(document_id, tenant, d.kb_id, term, int(n)) for term, n in keywords.items()])

    def kb_map(self, tenant: str, kb_id: str):
        """One MapEntry per document of the kb (ready, or summarised), in ingest order."""
        from ..kbmap import MapEntry

        rows = self._query("SELECT d.id, d.title, d.filename, s.summary, s.topics FROM documents d "
                           "LEFT JOIN document_summaries s ON s.document_id = d.id WHERE d.tenant = ? AND "
                           "d.kb_id = ? AND (d.status = 'ready' OR s.document_id IS NOT NULL) "
                           "ORDER BY d.created_at, d.id", (tenant, kb_id))
        return [MapEntry(row[0], row[1], row[2], row[3] or "", tuple(json.loads(row[4] or "[]"))) for row in rows]

    def document_keywords(self, tenant: str, document_ids: Sequence[str]) -> dict[str, dict[str, int]]:
        """{document id: {term: count}} stored by put_summary, for these documents."""
        found: dict[str, dict[str, int]] = {}
        # "+tenant": look the few ids up by primary key, not by the tenant's index
        rows = self._query("SELECT document_id, term, count FROM document_terms WHERE document_id IN "
                           "(SELECT value FROM json_each(?)) AND +tenant = ? ORDER BY count DESC, term",
                           (json.dumps(list(document_ids)), tenant))
        for document_id, term, count in rows:
            found.setdefault(document_id, {})[term] = count
        return found

    def term_counts(self, tenant: str, kb_id: str, terms: Sequence[str]) -> tuple[int, dict[str, int]]:
        """(summarised documents in the kb, {term: how many of them have it as a keyword})."""
        total = self._query("SELECT COUNT(*) FROM document_summaries WHERE tenant = ? AND kb_id = ?",
                            (tenant, kb_id))[0][0]
        rows = self._query("SELECT term, COUNT(*) FROM document_terms WHERE tenant = ? AND kb_id = ? AND "
                           "term IN (SELECT value FROM json_each(?)) GROUP BY term",
                           (tenant, kb_id, json.dumps(list(dict.fromkeys(terms)))))
        return total, {row[0]: row[1] for row in rows}


def _scope_sql(scope: Scope, prefix: str = "") -> tuple[str, list]:
    clauses, params = [f"{prefix}tenant = ?"], [scope.tenant]
    for column, values in (("kb_id", scope.kb_ids), ("document_id", scope.document_ids),
                           ("record_id", scope.record_ids)):
        if values is not None:
            if not values:
                return "0", []
            clauses.append(f"{prefix}{column} IN ({','.join('?' * len(values))})")
            params.extend(values)
    return " AND ".join(clauses), params


def _chunk(row) -> Chunk:
    doc_id, idx, text, heading_path, pages, start, end, tokens, content_hash = tuple(row)
    return Chunk(document_id=doc_id, index=idx, text=text, heading_path=tuple(json.loads(heading_path)),
                 pages=tuple(json.loads(pages)), char_start=start, char_end=end, token_count=tokens,
                 content_hash=content_hash)


def _statements(sql: str) -> list[str]:
    """Split a migration file into statements (no semicolons inside our statements)."""
    lines = [line for line in sql.splitlines() if not line.strip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]
