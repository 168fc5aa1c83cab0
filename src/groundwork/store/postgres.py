"""The store at scale: PostgreSQL with pgvector, over a psycopg 3 connection pool.

Same tables and semantics as the SQLite store; every tenant row carries `tenant` and
every query filters on it in SQL. Full text: a generated `tsvector` column over heading
path + text, GIN index, `ts_rank_cd`.

Vectors are keyed by (model id, chunk content hash) as in SQLite, but HNSW needs a
column of one fixed dimension, so each model gets its own table
`embeddings_<sha256(model_id)[:16]>` (content_hash PRIMARY KEY, embedding vector(dim)),
created on the model's first `put_embeddings` and registered in `embedding_models`. Its
HNSW index (`vector_cosine_ops`) is built after that first batch is copied in (a bulk
build is several times faster than growing the graph row by row). Above 2,000
dimensions (pgvector's HNSW limit) there is no index and search is exact. Embeddings
carry no tenant (the protocol shares them by content hash); tenant isolation of vectors
comes from the join to chunks.

Search joins chunks to the model's table on content_hash with the scope in the WHERE
clause, `ORDER BY embedding <=> q LIMIT k`, score = 1 - cosine distance. A plain HNSW
scan stops after `ef_search` candidates, so a selective scope would get fewer than k
rows: each search transaction sets pgvector 0.8's `hnsw.iterative_scan` (relaxed_order
by default, rows re-sorted), `hnsw.max_scan_tuples` and `hnsw.ef_search`. Iterative
scans under a 1% filter still lose recall (0.8 at 100k in bench/), so a scope of at
most `exact_below` chunks (a count that stops there decides) is ranked exactly with
cosine_distance(), which no index serves: documents, records, small tenants. Search
statements are never prepared, so the planner always sees the real scope.
`explain_vector_search` shows the settings and plan in effect.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Mapping, Sequence
from contextlib import contextmanager

import numpy as np

from ..errors import ConfigError, InvalidRequest, NotFound, StoreError
from ..types import Chunk, Document, Hit, KnowledgeBase, Scope
from .sqlite import migrations, new_id
from .textquery import keywords

try:
    import psycopg
    from pgvector.psycopg import register_vector
    from psycopg import sql
    from psycopg.types.json import Jsonb
    from psycopg_pool import ConnectionPool
except ImportError as exc:  # only needed when a postgresql:// URL is configured
    raise ConfigError(f"GROUNDWORK_DATABASE_URL points at PostgreSQL but {exc.name} is not installed: "
                      "pip install 'psycopg[binary]' psycopg-pool pgvector") from None

_DOC_COLUMNS = ("id, tenant, kb_id, filename, title, content_type, size, content_hash, source_url, "
                "version, status, importance, record_id, error, created_at, updated_at, mode")
_CHUNK_COLUMNS = ("document_id, idx, text, heading_path, pages, char_start, char_end, "
                  "token_count, content_hash")
_CHUNK_INSERT = f"tenant, kb_id, record_id, {_CHUNK_COLUMNS}"
_MIGRATION_LOCK = 0x67726F756E64  # "ground": one advisory lock key for all migrating processes
_HNSW_MAX_DIM = 2000
_VECTOR_LITERAL = re.compile(r"'\[[^\]]*\]'::vector")
_ITERATIVE_MODES = ("off", "relaxed_order", "strict_order")


def _prefixed(columns: str, prefix: str) -> str:
    return ", ".join(prefix + c.strip() for c in columns.split(","))


def migrate(url: str) -> list[str]:
    """Apply the numbered migrations not yet applied to the database at `url`; returns
    their names. An advisory lock makes concurrent openers wait instead of racing. An
    up-to-date schema is detected with reads alone, so a read replica opens too."""
    applied = []
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            if conn.execute("SELECT to_regclass('schema_migrations')").fetchone()[0] is not None:
                done = {row[0] for row in conn.execute("SELECT number FROM schema_migrations")}
                if all(number in done for number, _, _ in migrations("postgres")):
                    return applied
        with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations (number INTEGER PRIMARY KEY, "
                         "name TEXT NOT NULL, applied_at DOUBLE PRECISION NOT NULL)")
            done = {row[0] for row in conn.execute("SELECT number FROM schema_migrations")}
            for number, name, text in migrations("postgres"):
                if number in done:
                    continue
                conn.execute(text)
                conn.execute("INSERT INTO schema_migrations VALUES (%s, %s, %s)", (number, name, time.time()))
                applied.append(name)
    except psycopg.Error as exc:
        raise StoreError(f"cannot migrate the PostgreSQL store: {exc}") from None
    return applied


class PostgresStore:
    def __init__(self, url: str, *, pool_size: int = 8, ef_search: int = 100,
                 iterative_scan: str = "relaxed_order", max_scan_tuples: int = 20_000,
                 hnsw_m: int = 16, hnsw_ef_construction: int = 64, exact_below: int = 1000,
                 search_settings: Mapping[str, str] | None = None) -> None:
        """`exact_below`: scopes of at most this many chunks are searched exactly (0: never
        force it). `search_settings`: more settings for each search transaction."""
        if iterative_scan not in _ITERATIVE_MODES:
            raise ConfigError(f"iterative_scan must be one of {_ITERATIVE_MODES}, got {iterative_scan!r}")
        if hnsw_ef_construction < 2 * hnsw_m:  # pgvector's rule, checked now rather than at the first index build
            raise ConfigError(f"HNSW ef_construction (GROUNDWORK_PG_HNSW_EF_CONSTRUCTION={hnsw_ef_construction}) "
                              f"must be at least 2 * m (GROUNDWORK_PG_HNSW_M={hnsw_m})")
        self.url = url
        self.search_settings = {"hnsw.ef_search": str(int(ef_search)), "hnsw.iterative_scan": iterative_scan,
                                "hnsw.max_scan_tuples": str(int(max_scan_tuples)), **(search_settings or {})}
        self._hnsw = (int(hnsw_m), int(hnsw_ef_construction))
        self.exact_below = int(exact_below)
        self._models: dict[str, tuple[str, int]] = {}  # model id -> (table, dim); never change
        self.applied_migrations = self.migrate()  # before the pool: register_vector needs the extension
        self._pool = ConnectionPool(url, min_size=1, max_size=pool_size, kwargs={"autocommit": True},
                                    configure=register_vector, open=False, name="groundwork")
        try:
            self._pool.open(wait=True, timeout=30)
        except psycopg.Error as exc:
            self._pool.close()
            raise StoreError(f"cannot open a PostgreSQL connection pool: {exc}") from None

    # -- plumbing ---------------------------------------------------------------
    @contextmanager
    def _conn(self):
        """A pooled autocommit connection; psycopg errors become Groundwork errors here."""
        try:
            with self._pool.connection() as conn:
                yield conn
        except psycopg.Error as exc:
            raise StoreError(f"query failed: {exc}") from None

    @contextmanager
    def transaction(self):
        """One atomic unit of work: all of it lands, or none of it does."""
        with self._conn() as conn, conn.transaction():
            yield conn

    def _rows(self, query, params: Sequence = ()) -> list[tuple]:
        with self._conn() as conn:
            return conn.execute(query, params).fetchall()

    def _one(self, query, params: Sequence, missing: str) -> tuple:
        rows = self._rows(query, params)
        if not rows:
            raise NotFound(missing)
        return rows[0]

    def _change(self, query, params: Sequence, missing: str) -> None:
        with self._conn() as conn:
            if conn.execute(query, params).rowcount == 0:
                raise NotFound(missing)

    def migrate(self) -> list[str]:
        """Apply the numbered migrations not yet applied; returns their names."""
        return migrate(self.url)

    def close(self) -> None:
        self._pool.close()

    # -- knowledge bases --------------------------------------------------------
    def create_kb(self, tenant: str, name: str, description: str = "") -> KnowledgeBase:
        kb = KnowledgeBase(new_id("kb"), tenant, name, description, time.time())
        with self._conn() as conn:
            try:
                conn.execute("INSERT INTO kbs VALUES (%s, %s, %s, %s, %s)",
                             (kb.id, tenant, name, description, kb.created_at))
            except psycopg.errors.UniqueViolation:
                raise InvalidRequest(f"knowledge base {name!r} already exists") from None
        return kb

    def get_kb(self, tenant: str, name_or_id: str) -> KnowledgeBase:
        return KnowledgeBase(*self._one("SELECT id, tenant, name, description, created_at FROM kbs WHERE "
                                        "tenant = %s AND (id = %s OR name = %s)", (tenant, name_or_id, name_or_id),
                                        f"knowledge base {name_or_id!r} not found"))

    def list_kbs(self, tenant: str) -> list[KnowledgeBase]:
        rows = self._rows("SELECT id, tenant, name, description, created_at FROM kbs "
                          "WHERE tenant = %s ORDER BY name", (tenant,))
        return [KnowledgeBase(*row) for row in rows]

    def delete_kb(self, tenant: str, kb_id: str) -> None:
        kb = self.get_kb(tenant, kb_id)
        with self.transaction() as conn:
            hashes = [r[0] for r in conn.execute("SELECT DISTINCT content_hash FROM chunks "
                                                 "WHERE tenant = %s AND kb_id = %s", (tenant, kb.id))]
            conn.execute("DELETE FROM documents WHERE tenant = %s AND kb_id = %s", (tenant, kb.id))
            conn.execute("DELETE FROM kbs WHERE tenant = %s AND id = %s", (tenant, kb.id))
            self._drop_orphan_embeddings(conn, hashes)

    # -- documents --------------------------------------------------------------
    def put_document(self, document: Document, source_key: str) -> None:
        d = document
        with self._conn() as conn:
            cur = conn.execute(
                f"INSERT INTO documents ({_DOC_COLUMNS}, source_key) VALUES "
                "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (id) DO UPDATE SET filename = excluded.filename, title = excluded.title, "
                "content_type = excluded.content_type, size = excluded.size, "
                "content_hash = excluded.content_hash, source_url = excluded.source_url, "
                "version = excluded.version, status = excluded.status, importance = excluded.importance, "
                "error = excluded.error, updated_at = excluded.updated_at, source_key = excluded.source_key, "
                "mode = excluded.mode "
                "WHERE documents.tenant = excluded.tenant",
                (d.id, d.tenant, d.kb_id, d.filename, d.title, d.content_type, d.size, d.content_hash,
                 d.source_url, d.version, d.status, d.importance, d.record_id, d.error,
                 d.created_at, d.updated_at, d.mode, source_key))
            if cur.rowcount == 0:  # the id exists in another tenant: never overwrite across tenants
                raise InvalidRequest(f"document id {d.id!r} is already in use")

    def get_document(self, tenant: str, document_id: str) -> Document:
        return Document(*self._one(f"SELECT {_DOC_COLUMNS} FROM documents WHERE tenant = %s AND id = %s",
                                   (tenant, document_id), f"document {document_id!r} not found"))

    def find_document(self, tenant: str, kb_id: str | None, *, source_key: str | None = None,
                      content_hash: str | None = None) -> Document | None:
        clauses = ["tenant = %s", "kb_id IS NULL" if kb_id is None else "kb_id = %s"]
        params = [tenant] if kb_id is None else [tenant, kb_id]
        for column, value in (("source_key", source_key), ("content_hash", content_hash)):
            if value is not None:
                clauses.append(f"{column} = %s")
                params.append(value)
        rows = self._rows(f"SELECT {_DOC_COLUMNS} FROM documents WHERE {' AND '.join(clauses)} "
                          "ORDER BY updated_at DESC LIMIT 1", params)
        return Document(*rows[0]) if rows else None

    def list_documents(self, tenant: str, kb_id: str | None = None, *,
                       modes: Sequence[str] | None = None) -> list[Document]:
        """A tenant's documents (in one kb), optionally only those with one of `modes`."""
        rows = self._rows(f"SELECT {_DOC_COLUMNS} FROM documents WHERE tenant = %s "
                          "AND (%s::text IS NULL OR kb_id = %s) AND (%s::text[] IS NULL OR mode = ANY(%s)) "
                          "ORDER BY created_at",
                          (tenant, kb_id, kb_id, None if modes is None else list(modes),
                           None if modes is None else list(modes)))
        return [Document(*row) for row in rows]

    def set_status(self, tenant: str, document_id: str, status: str, *,
                   error: str | None = None, progress: dict | None = None) -> None:
        self._change("UPDATE documents SET status = %s, error = %s, updated_at = %s, "
                     "progress = COALESCE(%s::jsonb, progress) WHERE tenant = %s AND id = %s",
                     (status, error, time.time(), Jsonb(progress) if progress is not None else None,
                      tenant, document_id), f"document {document_id!r} not found")

    def get_progress(self, tenant: str, document_id: str) -> dict:
        return self._one("SELECT progress FROM documents WHERE tenant = %s AND id = %s", (tenant, document_id),
                         f"document {document_id!r} not found")[0]

    def delete_document(self, tenant: str, document_id: str) -> None:
        """Forget a document: its row, text, chunks (and so their full text) and the
        vectors no other chunk still uses."""
        with self.transaction() as conn:
            hashes = [r[0] for r in conn.execute("SELECT content_hash FROM chunks WHERE tenant = %s "
                                                 "AND document_id = %s", (tenant, document_id))]
            cur = conn.execute("DELETE FROM documents WHERE tenant = %s AND id = %s", (tenant, document_id))
            if cur.rowcount == 0:
                raise NotFound(f"document {document_id!r} not found")
            self._drop_orphan_embeddings(conn, hashes)

    # -- content ----------------------------------------------------------------
    def put_text(self, tenant: str, document_id: str, text: str) -> None:
        self._change("INSERT INTO document_texts (document_id, tenant, text) SELECT id, tenant, %s "
                     "FROM documents WHERE tenant = %s AND id = %s ON CONFLICT (document_id) "
                     "DO UPDATE SET text = excluded.text", (text, tenant, document_id),
                     f"document {document_id!r} not found")

    def get_text(self, tenant: str, document_id: str) -> str:
        return self._one("SELECT text FROM document_texts WHERE tenant = %s AND document_id = %s",
                         (tenant, document_id), f"no extracted text for document {document_id!r}")[0]

    def replace_chunks(self, tenant: str, document_id: str, chunks: Sequence[Chunk]) -> None:
        with self.transaction() as conn:
            # Locking the document row serialises concurrent replacements of one document.
            row = conn.execute("SELECT kb_id, record_id FROM documents WHERE tenant = %s AND id = %s "
                               "FOR UPDATE", (tenant, document_id)).fetchone()
            if row is None:
                raise NotFound(f"document {document_id!r} not found")
            old = {r[0] for r in conn.execute("SELECT content_hash FROM chunks WHERE document_id = %s",
                                              (document_id,))}
            conn.execute("DELETE FROM chunks WHERE document_id = %s", (document_id,))
            with conn.cursor().copy(f"COPY chunks ({_CHUNK_INSERT}) FROM STDIN") as copy:
                for c in chunks:
                    copy.write_row((tenant, row[0], row[1], document_id, c.index, c.text,
                                    Jsonb(list(c.heading_path)), Jsonb(list(c.pages)), c.char_start,
                                    c.char_end, c.token_count, c.content_hash))
            self._drop_orphan_embeddings(conn, old - {c.content_hash for c in chunks})

    def _drop_orphan_embeddings(self, conn, hashes) -> None:
        hashes = list(set(hashes))
        if not hashes:
            return
        for (table,) in conn.execute("SELECT table_name FROM embedding_models").fetchall():
            conn.execute(sql.SQL("DELETE FROM {} e WHERE e.content_hash = ANY(%s) AND NOT EXISTS "
                                 "(SELECT 1 FROM chunks c WHERE c.content_hash = e.content_hash)")
                         .format(sql.Identifier(table)), (hashes,))

    def get_chunks(self, tenant: str, document_id: str) -> list[Chunk]:
        rows = self._rows(f"SELECT {_CHUNK_COLUMNS} FROM chunks WHERE tenant = %s AND document_id = %s "
                          "ORDER BY idx", (tenant, document_id))
        return [_chunk(row) for row in rows]

    def chunk_counts(self, tenant: str, document_ids: Sequence[str]) -> dict[str, int]:
        if not document_ids:
            return {}
        rows = self._rows("SELECT document_id, COUNT(*) FROM chunks WHERE tenant = %s AND "
                          "document_id = ANY(%s) GROUP BY document_id", (tenant, list(document_ids)))
        return {row[0]: row[1] for row in rows}

    # -- embeddings -------------------------------------------------------------
    def _model(self, conn, model_id: str) -> tuple[str, int] | None:
        """(table, dim) of a model's vectors, or None before its first embedding."""
        if model_id not in self._models:
            row = conn.execute("SELECT table_name, dim FROM embedding_models WHERE model_id = %s",
                               (model_id,)).fetchone()
            if row is None:
                return None
            self._models[model_id] = (row[0], row[1])
        return self._models[model_id]

    def missing_embeddings(self, model_id: str, hashes: Sequence[str]) -> list[str]:
        wanted = list(dict.fromkeys(hashes))
        with self._conn() as conn:
            model = self._model(conn, model_id)
            if model is None or not wanted:
                return wanted
            have = {r[0] for r in conn.execute(sql.SQL("SELECT content_hash FROM {} WHERE content_hash = ANY(%s)")
                                               .format(sql.Identifier(model[0])), (wanted,))}
        return [h for h in wanted if h not in have]

    def put_embeddings(self, model_id: str, hashes: Sequence[str], vectors: np.ndarray) -> None:
        vectors = np.asarray(vectors, dtype=np.float32)
        if len(hashes) != len(vectors):
            raise StoreError("put_embeddings: hashes and vectors differ in length")
        if not len(hashes):
            return
        dim = int(vectors.shape[1])
        rows = dict(zip(hashes, vectors))  # the last vector of a repeated hash wins
        with self.transaction() as conn:
            model = self._model(conn, model_id)
            if model is None:
                conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                             ("groundwork.embeddings:" + model_id,))
                model = self._model(conn, model_id)
            if model is None:
                self._create_model_table(conn, model_id, dim, rows)
                return
            table, known_dim = model
            if known_dim != dim:
                raise StoreError(f"model {model_id} has dimension {known_dim} in this store, got {dim}")
            conn.cursor().executemany(
                sql.SQL("INSERT INTO {} (content_hash, embedding) VALUES (%s, %s) ON CONFLICT (content_hash) "
                        "DO UPDATE SET embedding = excluded.embedding").format(sql.Identifier(table)),
                list(rows.items()))

    def _create_model_table(self, conn, model_id: str, dim: int, rows: dict[str, np.ndarray]) -> None:
        table = "embeddings_" + hashlib.sha256(model_id.encode()).hexdigest()[:16]
        ident = sql.Identifier(table)
        conn.execute(sql.SQL(f"CREATE TABLE {{}} (content_hash TEXT PRIMARY KEY, embedding vector({dim}) NOT NULL)")
                     .format(ident))
        with conn.cursor().copy(sql.SQL("COPY {} (content_hash, embedding) FROM STDIN WITH (FORMAT BINARY)")
                                .format(ident)) as copy:
            copy.set_types(["text", "vector"])
            for item in rows.items():
                copy.write_row(item)
        if dim <= _HNSW_MAX_DIM:
            m, ef_construction = self._hnsw
            conn.execute(sql.SQL(f"CREATE INDEX {{}} ON {{}} USING hnsw (embedding vector_cosine_ops) "
                                 f"WITH (m = {m}, ef_construction = {ef_construction})")
                         .format(sql.Identifier(table + "_hnsw"), ident))
        conn.execute(sql.SQL("ANALYZE {}").format(ident))  # the planner's costs need row counts now
        conn.execute("INSERT INTO embedding_models VALUES (%s, %s, %s, %s)", (model_id, dim, table, time.time()))

    # -- domain objects -------------------------------------------------------
    def put_object(self, tenant: str, kind: str, object_id: str, data: dict) -> None:
        now = time.time()
        with self._conn() as conn:
            conn.execute("INSERT INTO objects VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (tenant, kind, id) "
                         "DO UPDATE SET data = excluded.data, updated_at = excluded.updated_at",
                         (tenant, kind, object_id, Jsonb(data), now, now))

    def get_object(self, tenant: str, kind: str, object_id: str) -> dict:
        return self._one("SELECT data FROM objects WHERE tenant = %s AND kind = %s AND id = %s",
                         (tenant, kind, object_id), f"{kind} {object_id!r} not found")[0]

    def list_objects(self, tenant: str, kind: str) -> list[dict]:
        rows = self._rows("SELECT data FROM objects WHERE tenant = %s AND kind = %s ORDER BY created_at, id",
                          (tenant, kind))
        return [row[0] for row in rows]

    def delete_object(self, tenant: str, kind: str, object_id: str) -> None:
        self._change("DELETE FROM objects WHERE tenant = %s AND kind = %s AND id = %s",
                     (tenant, kind, object_id), f"{kind} {object_id!r} not found")

    # -- search -----------------------------------------------------------------
    @contextmanager
    def _vector_search(self, scope: Scope, model_id: str, vector: np.ndarray, k: int):
        """A search transaction with the search settings SET LOCAL (so pooled connections
        never carry them elsewhere); yields (conn, ranking query, params), or None when
        nothing can match."""
        with self.transaction() as conn:
            model = self._model(conn, model_id)
            if model is None or k <= 0 or _nothing(scope):
                yield None
                return
            vector = np.asarray(vector, dtype=np.float32).ravel()
            if len(vector) != model[1]:
                raise StoreError(f"model {model_id} has dimension {model[1]} in this store, got {len(vector)}")
            conn.execute("SELECT set_config(name, value, true) FROM unnest(%s::text[], %s::text[]) "
                         "AS s(name, value)", (list(self.search_settings), list(self.search_settings.values())))
            where, params = _scope_sql(scope)
            # cosine_distance() is <=> that no index serves: an exact scan of a small scope.
            distance = "cosine_distance(e.embedding, %s)" if self._small(conn, where, params) else "e.embedding <=> %s"
            query = sql.SQL(f"SELECT c.id, {distance} AS distance FROM {{}} e JOIN chunks c "
                            f"ON c.content_hash = e.content_hash WHERE {where} "
                            "ORDER BY distance LIMIT %s").format(sql.Identifier(model[0]))
            yield conn, query, [vector, *params, k]

    def _small(self, conn, where: str, params: list) -> bool:
        """Whether the scope holds at most `exact_below` chunks (counting no further)."""
        if self.exact_below <= 0:
            return False
        count = conn.execute(f"SELECT count(*) FROM (SELECT 1 FROM chunks c WHERE {where} LIMIT %s) s",
                             [*params, self.exact_below + 1], prepare=False).fetchone()[0]
        return count <= self.exact_below

    def vector_search(self, scope: Scope, model_id: str, vector: np.ndarray, k: int) -> list[Hit]:
        with self._vector_search(scope, model_id, vector, k) as search:
            if search is None:
                return []
            conn, ranked, params = search
            # relaxed_order may return the k rows slightly out of order: re-sort them.
            rows = conn.execute(sql.SQL("WITH ranked AS MATERIALIZED ({}) SELECT {}, 1 - r.distance FROM ranked r "
                                        "JOIN chunks c ON c.id = r.id JOIN documents d ON d.id = c.document_id "
                                        "ORDER BY r.distance, c.id").format(ranked, _HIT_COLUMNS),
                                params, prepare=False).fetchall()
        return [_hit(row, "vector") for row in rows]

    def explain_vector_search(self, scope: Scope, model_id: str, vector: np.ndarray, k: int, *,
                              analyze: bool = True) -> dict:
        """The settings in effect and the plan of `vector_search`'s ranking query, both read
        inside one search transaction: {"settings": {name: value}, "plan": text}."""
        with self._vector_search(scope, model_id, vector, k) as search:
            if search is None:
                return {"settings": {}, "plan": ""}
            conn, ranked, params = search
            explain = sql.SQL("EXPLAIN (ANALYZE) {}" if analyze else "EXPLAIN {}").format(ranked)
            plan = [_VECTOR_LITERAL.sub("$vector", r[0]) for r in conn.execute(explain, params, prepare=False)]
            settings = {name: conn.execute("SELECT current_setting(%s)", (name,)).fetchone()[0]
                        for name in self.search_settings}
        return {"settings": settings, "plan": "\n".join(plan)}

    def text_search(self, scope: Scope, query: str, k: int) -> list[Hit]:
        tsquery = _tsquery(query)
        if tsquery is None or k <= 0 or _nothing(scope):
            return []
        where, params = _scope_sql(scope)
        rows = self._rows(sql.SQL(
            "WITH ranked AS MATERIALIZED (SELECT c.id, ts_rank_cd(c.body_tsv, q, 1) AS score "
            "FROM chunks c, to_tsquery('english'::regconfig, %s) q "
            f"WHERE c.body_tsv @@ q AND {where} ORDER BY score DESC, c.id LIMIT %s) "
            "SELECT {}, r.score FROM ranked r JOIN chunks c ON c.id = r.id "
            "JOIN documents d ON d.id = c.document_id ORDER BY r.score DESC, c.id").format(_HIT_COLUMNS),
            [tsquery, *params, k])
        return [_hit(row, "text") for row in rows]

    # -- moving data between stores (groundwork.transfer) -------------------------
    def put_kb(self, kb: KnowledgeBase) -> None:
        """Add a knowledge base under its own id (copied from another store). The same kb
        again is a no-op; another kb with that name or id is an InvalidRequest."""
        with self._conn() as conn:
            try:
                conn.execute("INSERT INTO kbs VALUES (%s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
                             (kb.id, kb.tenant, kb.name, kb.description, kb.created_at))
            except psycopg.errors.UniqueViolation:
                raise InvalidRequest(f"knowledge base {kb.name!r} already exists with another id") from None
            row = conn.execute("SELECT tenant, name FROM kbs WHERE id = %s", (kb.id,)).fetchone()
        if row != (kb.tenant, kb.name):
            raise InvalidRequest(f"knowledge base id {kb.id!r} is already in use")

    def get_source_key(self, tenant: str, document_id: str) -> str:
        """The key re-ingestion matches a document by (a file's resolved path, a URL...)."""
        return self._one("SELECT source_key FROM documents WHERE tenant = %s AND id = %s", (tenant, document_id),
                         f"document {document_id!r} not found")[0]

    def embedding_models(self) -> dict[str, int]:
        """{model id: dimension} of every model that has stored embeddings here."""
        return {row[0]: row[1] for row in self._rows("SELECT model_id, dim FROM embedding_models")}

    def get_embeddings(self, model_id: str, hashes: Sequence[str]) -> np.ndarray:
        """The stored vectors of `hashes` under `model_id`, one row each, in that order;
        NotFound if the model or any of the vectors is missing."""
        with self._conn() as conn:
            model = self._model(conn, model_id)
            if model is None:
                raise NotFound(f"no embeddings of model {model_id!r}")
            table, dim = model
            found = dict(conn.execute(sql.SQL("SELECT content_hash, embedding FROM {} WHERE content_hash = ANY(%s)")
                                      .format(sql.Identifier(table)), (list(set(hashes)),)).fetchall())
        missing = [h for h in dict.fromkeys(hashes) if h not in found]
        if missing:
            raise NotFound(f"{len(missing)} embeddings of model {model_id!r} not found (e.g. {missing[0]})")
        out = np.empty((len(hashes), dim), dtype=np.float32)
        for i, h in enumerate(hashes):
            out[i] = found[h].to_numpy()  # pgvector's Vector
        return out

    # -- knowledge graph and kb map (groundwork.graph, groundwork.kbmap) ----------
    # Rows carry the document's tenant/kb/record and go with it (ON DELETE CASCADE).
    def put_graph(self, tenant: str, document_id: str, entities, relations) -> None:
        """Replace a document's entities and relations."""
        with self.transaction() as conn:
            row = conn.execute("SELECT kb_id, record_id FROM documents WHERE tenant = %s AND id = %s FOR UPDATE",
                               (tenant, document_id)).fetchone()
            if row is None:
                raise NotFound(f"document {document_id!r} not found")
            owner = (tenant, row[0], row[1], document_id)
            conn.execute("DELETE FROM kg_entities WHERE document_id = %s", (document_id,))
            conn.execute("DELETE FROM kg_relations WHERE document_id = %s", (document_id,))
            cur = conn.cursor()
            cur.executemany(
                "INSERT INTO kg_entities VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (document_id, "
                "entity_key) DO UPDATE SET mentions = kg_entities.mentions + excluded.mentions",
                [(*owner, e.key, e.name, e.type, e.description, e.mentions, Jsonb(list(e.chunks)))
                 for e in entities])
            cur.executemany(
                "INSERT INTO kg_relations VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (document_id, "
                "source_key, target_key, type) DO UPDATE SET weight = kg_relations.weight + excluded.weight",
                [(*owner, r.source, r.target, r.type, r.weight, r.description, Jsonb(list(r.chunks)))
                 for r in relations])

    def get_graph(self, tenant: str, document_id: str):
        """(entities, relations) stored for one document."""
        from ..graph import Entity, Relation

        ents = self._rows("SELECT entity_key, name, type, description, mentions, chunks FROM kg_entities "
                          "WHERE tenant = %s AND document_id = %s ORDER BY mentions DESC, entity_key",
                          (tenant, document_id))
        rels = self._rows("SELECT source_key, target_key, type, weight, description, chunks FROM kg_relations "
                          "WHERE tenant = %s AND document_id = %s ORDER BY weight DESC, source_key, target_key, type",
                          (tenant, document_id))
        return ([Entity(*row[:5], chunks=tuple(row[5])) for row in ents],
                [Relation(*row[:5], chunks=tuple(row[5])) for row in rels])

    def graph_neighbourhood(self, scope: Scope, keys: Sequence[str], *, hops: int = 2, limit: int = 15,
                            relation_limit: int = 20):
        """Entities named by `keys` and those up to `hops` relations away (either
        direction), ranked by distance then by the weight of their links one step
        closer (seeds: all their links); one recursive CTE, scope filtered in SQL."""
        from ..graph import GraphResult, build_result

        if _nothing(scope) or not keys or limit <= 0:
            return GraphResult()
        where, params = _scope_sql(scope)
        wanted = list(dict.fromkeys(keys))
        other = "CASE WHEN c.source_key = {0}.entity_key THEN c.target_key ELSE c.source_key END"
        ranked = [(row[0], row[1]) for row in self._rows(
            "WITH RECURSIVE walk(entity_key, depth) AS ("
            f" SELECT DISTINCT c.entity_key, 0 FROM kg_entities c WHERE {where} AND c.entity_key = ANY(%s)"
            f" UNION SELECT {other.format('w')}, w.depth + 1 FROM walk w JOIN kg_relations c"
            f"  ON (c.source_key = w.entity_key OR c.target_key = w.entity_key) WHERE w.depth < %s AND {where}),"
            " reached AS (SELECT entity_key, MIN(depth) AS depth FROM walk GROUP BY entity_key),"
            " strength AS (SELECT x.entity_key, SUM(c.weight) AS weight FROM reached x JOIN kg_relations c"
            f"  ON (c.source_key = x.entity_key OR c.target_key = x.entity_key) AND {where}"
            f"  JOIN reached y ON y.entity_key = {other.format('x')}"
            "  AND (x.depth = 0 OR y.depth = x.depth - 1) GROUP BY x.entity_key)"
            " SELECT r.entity_key, r.depth FROM reached r LEFT JOIN strength s ON s.entity_key = r.entity_key"
            " ORDER BY r.depth, COALESCE(s.weight, 0) DESC, r.entity_key LIMIT %s",
            (*params, wanted, int(hops), *params, *params, int(limit)))]
        if not ranked:
            return GraphResult()
        chosen = [key for key, _ in ranked]
        ents = self._rows("SELECT c.entity_key, c.name, c.type, c.description, c.mentions, c.document_id, "
                          f"c.chunks FROM kg_entities c WHERE {where} AND c.entity_key = ANY(%s) "
                          "ORDER BY c.document_id", (*params, chosen))
        rels = self._rows("SELECT c.source_key, c.target_key, c.type, c.weight, c.description, c.document_id, "
                          f"c.chunks FROM kg_relations c WHERE {where} AND c.source_key = ANY(%s) "
                          "AND c.target_key = ANY(%s) ORDER BY c.document_id", (*params, chosen, chosen))
        return build_result(ranked, ents, rels, relation_limit)

    def put_summary(self, tenant: str, document_id: str, summary: str, topics: Sequence[str],
                    keywords=None) -> None:
        """Set a document's KB-map summary and topics, and replace its keyword counts
        when `keywords` ({term: count}) is given."""
        with self.transaction() as conn:
            row = conn.execute("SELECT kb_id FROM documents WHERE tenant = %s AND id = %s FOR UPDATE",
                               (tenant, document_id)).fetchone()
            if row is None:
                raise NotFound(f"document {document_id!r} not found")
            conn.execute("INSERT INTO document_summaries VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (document_id) "
                         "DO UPDATE SET summary = excluded.summary, topics = excluded.topics, "
                         "updated_at = excluded.updated_at",
                         (document_id, tenant, row[0], summary, Jsonb(list(topics)), time.time()))
            if keywords is not None:
                conn.execute("DELETE FROM document_terms WHERE document_id = %s", (document_id,))
                conn.cursor().executemany("INSERT INTO document_terms VALUES (%s, %s, %s, %s, %s)",
                                          [(document_id, tenant, row[0], term, int(n))
                                           for term, n in keywords.items()])

    def kb_map(self, tenant: str, kb_id: str):
        """One MapEntry per document of the kb (ready, or summarised), in ingest order."""
        from ..kbmap import MapEntry

        rows = self._rows("SELECT d.id, d.title, d.filename, s.summary, s.topics FROM documents d "
                          "LEFT JOIN document_summaries s ON s.document_id = d.id WHERE d.tenant = %s AND "
                          "d.kb_id = %s AND (d.status = 'ready' OR s.document_id IS NOT NULL) "
                          "ORDER BY d.created_at, d.id", (tenant, kb_id))
        return [MapEntry(row[0], row[1], row[2], row[3] or "", tuple(row[4] or ())) for row in rows]

    def document_keywords(self, tenant: str, document_ids: Sequence[str]) -> dict[str, dict[str, int]]:
        """{document id: {term: count}} stored by put_summary, for these documents."""
        found: dict[str, dict[str, int]] = {}
        for document_id, term, count in self._rows(
                "SELECT document_id, term, count FROM document_terms WHERE tenant = %s AND "
                "document_id = ANY(%s) ORDER BY count DESC, term", (tenant, list(document_ids))):
            found.setdefault(document_id, {})[term] = count
        return found

    def term_counts(self, tenant: str, kb_id: str, terms: Sequence[str]) -> tuple[int, dict[str, int]]:
        """(summarised documents in the kb, {term: how many of them have it as a keyword})."""
        total = self._rows("SELECT COUNT(*) FROM document_summaries WHERE tenant = %s AND kb_id = %s",
                           (tenant, kb_id))[0][0]
        rows = self._rows("SELECT term, COUNT(*) FROM document_terms WHERE tenant = %s AND kb_id = %s AND "
                          "term = ANY(%s) GROUP BY term", (tenant, kb_id, list(dict.fromkeys(terms))))
        return total, {row[0]: row[1] for row in rows}


_HIT_COLUMNS = sql.SQL(_prefixed(_CHUNK_COLUMNS, "c.") + ", " + _prefixed(_DOC_COLUMNS, "d."))


def _tsquery(query: str) -> str | None:
    """Keywords OR-ed as a to_tsquery expression. Each keyword is reduced to word
    characters and quoted, so no user text is ever parsed as tsquery syntax."""
    terms = [re.sub(r"\W", "", t) for t in keywords(query)]
    terms = [t for t in terms if t]
    return " | ".join(f"'{t}'" for t in terms) if terms else None


def _nothing(scope: Scope) -> bool:
    return any(values is not None and not values
               for values in (scope.kb_ids, scope.document_ids, scope.record_ids))


def _scope_sql(scope: Scope) -> tuple[str, list]:
    clauses, params = ["c.tenant = %s"], [scope.tenant]
    for column, values in (("kb_id", scope.kb_ids), ("document_id", scope.document_ids),
                           ("record_id", scope.record_ids)):
        if values is not None:
            clauses.append(f"c.{column} = ANY(%s)")
            params.append(list(values))
    return " AND ".join(clauses), params


def _chunk(row) -> Chunk:
    doc_id, idx, text, heading_path, pages, start, end, tokens, content_hash = row
    return Chunk(document_id=doc_id, index=idx, text=text, heading_path=tuple(heading_path),
                 pages=tuple(pages), char_start=start, char_end=end, token_count=tokens,
                 content_hash=content_hash)


def _hit(row, kind: str) -> Hit:
    score = float(row[-1])
    return Hit(chunk=_chunk(row[:9]), document=Document(*row[9:-1]), score=score,
               vector_score=score if kind == "vector" else None,
               text_score=score if kind == "text" else None)
