"""PostgreSQL-only behaviour: filtered HNSW with iterative scans, migrations, the pool.
The shared Store contract runs against PostgreSQL in test_store.py."""

from __future__ import annotations

import threading

import numpy as np
import psycopg
import pytest

from groundwork.store.postgres import PostgresStore, migrate
from groundwork.store.sqlite import migrations
from groundwork.types import Chunk, Document, Scope

N, DIM, K = 20_000, 384, 10
SMALL = np.arange(0, N, 100)  # tenant "small" owns 1% of the rows, spread over the graph
# A coarse graph builds in seconds; recall is not what these tests measure.
FAST_HNSW = {"hnsw_m": 8, "hnsw_ef_construction": 16}


def add_document(store, tenant: str, doc_id: str, rows) -> None:
    store.put_document(Document(id=doc_id, tenant=tenant, kb_id=None, filename=f"{doc_id}.txt", title=doc_id,
                                content_type="text/plain", size=1, content_hash=doc_id), source_key=doc_id)
    store.replace_chunks(tenant, doc_id, [Chunk(document_id=doc_id, index=j, text=f"row {i}", content_hash=f"h{i}")
                                          for j, i in enumerate(rows)])


@pytest.fixture
def loaded(pg_url):
    """20,000 random 384-d unit vectors; 200 belong to tenant "small", the rest to "big"."""
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((N, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    store = PostgresStore(pg_url, **FAST_HNSW)
    add_document(store, "small", "s", SMALL)
    big = np.setdiff1d(np.arange(N), SMALL)
    for part in range(4):
        add_document(store, "big", f"b{part}", big[part::4])
    store.put_embeddings("m", [f"h{i}" for i in range(N)], vectors)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("ANALYZE")  # what autovacuum would do shortly after a bulk load
    yield store, vectors, rng
    store.close()


def exact_top(vectors, rows, query, k=K) -> list[str]:
    return [f"h{rows[i]}" for i in np.argsort(-(vectors[rows] @ query))[:k]]


def test_filtered_hnsw_returns_full_top_k_with_iterative_scan(loaded, pg_url):
    store, vectors, rng = loaded
    query = rng.standard_normal(DIM).astype(np.float32)
    query /= np.linalg.norm(query)

    # As configured, a scope of at most `exact_below` (1,000) chunks is searched exactly.
    hits = store.vector_search(Scope("small"), "m", query, K)
    assert len(hits) == K and {h.document.tenant for h in hits} == {"small"}
    assert [h.chunk.content_hash for h in hits] == exact_top(vectors, SMALL, query)
    plan = store.explain_vector_search(Scope("small"), "m", query, K)["plan"]
    assert "cosine_distance(e.embedding, $vector)" in plan and "_hnsw" not in plan

    # Force the HNSW plan under the 1% filter (no exact path, no Sort allowed): without
    # iterative scans it stops after ef_search candidates and returns ~1 row; with them, k.
    forced = {"exact_below": 0, "search_settings": {"enable_sort": "off"}, **FAST_HNSW}
    plain = PostgresStore(pg_url, iterative_scan="off", **forced)
    iterative = PostgresStore(pg_url, **forced)
    try:
        assert len(plain.vector_search(Scope("small"), "m", query, K)) < K
        hits = iterative.vector_search(Scope("small"), "m", query, K)
        assert len(hits) == K and {h.document.tenant for h in hits} == {"small"}
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True)
        assert scores[0] == pytest.approx(float(vectors[int(hits[0].chunk.content_hash[1:])] @ query), abs=1e-5)

        explained = iterative.explain_vector_search(Scope("small"), "m", query, K)
        assert explained["settings"] == {"hnsw.ef_search": "100", "hnsw.iterative_scan": "relaxed_order",
                                         "hnsw.max_scan_tuples": "20000", "enable_sort": "off"}
        assert "_hnsw on embeddings_" in explained["plan"]
        assert "tenant = 'small'" in explained["plan"] and "Sort" not in explained["plan"]
        assert "rows=10" in explained["plan"].splitlines()[0]  # EXPLAIN ANALYZE: the limit was reached
    finally:
        plain.close()
        iterative.close()

    # Unforced, a broad filter (99% of the rows) is served by the HNSW index.
    plan = store.explain_vector_search(Scope("big"), "m", query, K, analyze=False)["plan"]
    assert "_hnsw on embeddings_" in plan and "Order By: (embedding <=> $vector)" in plan


def test_migrations_are_recorded_once_even_when_opened_concurrently(pg_url):
    names = [name for _, name, _ in migrations("postgres")]
    barrier = threading.Barrier(2)
    results: list[list[str]] = []

    def open_it() -> None:
        barrier.wait()
        results.append(migrate(pg_url))

    threads = [threading.Thread(target=open_it) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results, key=len) == [[], names]
    store = PostgresStore(pg_url)
    try:
        assert store.migrate() == []
        with psycopg.connect(pg_url) as conn:
            rows = conn.execute("SELECT number, name FROM schema_migrations ORDER BY number").fetchall()
        assert [name for _, name in rows] == names
    finally:
        store.close()


def test_one_store_serves_two_threads(pg_url):
    store = PostgresStore(pg_url, pool_size=4)
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def work(tenant: str, axis: int) -> None:
        try:
            barrier.wait()
            vector = np.zeros(8, dtype=np.float32)
            vector[axis] = 1.0
            for n in range(15):
                add_document(store, tenant, f"{tenant}-{n}", [f"{tenant}-{n}"])
                # Both threads create the same new model's table on their first call.
                store.put_embeddings("fresh", [f"h{tenant}-{n}"], vector[None, :])
                hits = store.vector_search(Scope(tenant), "fresh", vector, 100)
                assert {h.document.tenant for h in hits} == {tenant} and len(hits) == n + 1
                assert hits[0].score == pytest.approx(1.0)
        except BaseException as exc:  # surfaced in the main thread below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t, i)) for i, t in enumerate(("ta", "tb"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert errors == []
        assert len(store.list_documents("ta")) == len(store.list_documents("tb")) == 15
        assert store.missing_embeddings("fresh", ["hta-0", "htb-14", "nope"]) == ["nope"]
    finally:
        store.close()


def test_pg_settings_reach_the_store(pg_url, tmp_path, monkeypatch):
    from groundwork.config import load_settings
    from groundwork.errors import ConfigError
    from groundwork.store import open_store

    for name, value in (("GROUNDWORK_PG_POOL_SIZE", "3"), ("GROUNDWORK_PG_HNSW_M", "8"),
                        ("GROUNDWORK_PG_HNSW_EF_CONSTRUCTION", "20"), ("GROUNDWORK_PG_EF_SEARCH", "40"),
                        ("GROUNDWORK_PG_ITERATIVE_SCAN", "strict_order"), ("GROUNDWORK_PG_MAX_SCAN_TUPLES", "5000"),
                        ("GROUNDWORK_PG_EXACT_BELOW", "0")):
        monkeypatch.setenv(name, value)
    store = open_store(load_settings(home=tmp_path, database_url=pg_url))
    try:
        add_document(store, "t", "d", range(20))
        store.put_embeddings("m", [f"h{i}" for i in range(20)], np.eye(20, 8, dtype=np.float32) + 0.1)
        explained = store.explain_vector_search(Scope("t"), "m", np.ones(8, dtype=np.float32), 5, analyze=False)
        assert explained["settings"] == {"hnsw.ef_search": "40", "hnsw.iterative_scan": "strict_order",
                                         "hnsw.max_scan_tuples": "5000"}
        assert "cosine_distance" not in explained["plan"]  # exact_below 0: never the forced exact scan
        with psycopg.connect(pg_url) as conn:
            (options,) = conn.execute("SELECT reloptions FROM pg_class "
                                      "WHERE relname LIKE 'embeddings_%_hnsw'").fetchone()
        assert options == ["m=8", "ef_construction=20"]
        assert store._pool.max_size == 3
    finally:
        store.close()
    monkeypatch.setenv("GROUNDWORK_PG_HNSW_EF_CONSTRUCTION", "10")  # pgvector needs at least 2 * m
    with pytest.raises(ConfigError, match="GROUNDWORK_PG_HNSW_EF_CONSTRUCTION"):
        open_store(load_settings(home=tmp_path, database_url=pg_url))
    monkeypatch.setenv("GROUNDWORK_PG_EF_SEARCH", "0")
    with pytest.raises(ConfigError, match="GROUNDWORK_PG_EF_SEARCH"):
        load_settings(home=tmp_path, database_url=pg_url)


def test_a_read_only_connection_can_open_and_search(pg_url):
    """What a process pointed at a read replica does: open (no migration to write) and
    search; writes fail. `default_transaction_read_only` stands in for a hot standby."""
    from groundwork.errors import StoreError

    primary = PostgresStore(pg_url)
    try:
        add_document(primary, "t", "d", range(5))
        primary.put_embeddings("m", [f"h{i}" for i in range(5)], np.eye(5, 8, dtype=np.float32))
    finally:
        primary.close()
    replica = PostgresStore(pg_url + "&options=-c%20default_transaction_read_only%3Don", pool_size=2)
    try:
        assert replica.applied_migrations == []
        hits = replica.vector_search(Scope("t"), "m", np.eye(5, 8, dtype=np.float32)[3], 2)
        assert hits[0].chunk.content_hash == "h3" and hits[0].score == pytest.approx(1.0)
        assert [h.chunk.content_hash for h in replica.text_search(Scope("t"), "row 2", 5)][:1] == ["h2"]
        with pytest.raises(StoreError, match="read-only"):
            replica.create_kb("t", "nope")
    finally:
        replica.close()
