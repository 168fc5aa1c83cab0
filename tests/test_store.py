"""Runs the Store contract against every backend."""

import pytest

from groundwork.store.sqlite import SQLiteStore
from store_contract import *  # noqa: F401,F403 - the contract's tests


@pytest.fixture(params=["sqlite", "postgres"])
def store(request, tmp_path):
    match request.param:
        case "sqlite":
            backend = SQLiteStore(tmp_path / "store.db")
        case "postgres":
            from groundwork.store.postgres import PostgresStore

            backend = PostgresStore(request.getfixturevalue("pg_url"), pool_size=4)
    yield backend
    backend.close()


def test_sqlite_migrations_are_recorded_once(tmp_path):
    first = SQLiteStore(tmp_path / "m.db")
    rows = first._query("SELECT number, name FROM schema_migrations")
    assert [r[0] for r in rows] == sorted(r[0] for r in rows) and rows
    first.close()
    again = SQLiteStore(tmp_path / "m.db")
    assert again.migrate() == []
    again.close()


def test_the_methods_a_copy_reads_and_writes(store):
    """put_kb / get_source_key / embedding_models / get_embeddings (groundwork.transfer)."""
    import numpy as np

    from groundwork.errors import InvalidRequest, NotFound
    from groundwork.types import KnowledgeBase
    from store_contract import MODEL, make_document, unit

    kb = KnowledgeBase("kb_fixed", "t1", "moved", "from elsewhere", 12.5)
    store.put_kb(kb)
    store.put_kb(kb)  # again: nothing changes
    assert store.list_kbs("t1") == [kb] and store.get_kb("t1", "kb_fixed") == kb
    with pytest.raises(InvalidRequest):
        store.put_kb(KnowledgeBase("kb_other", "t1", "moved"))  # the name is taken by another id
    with pytest.raises(InvalidRequest):
        store.put_kb(KnowledgeBase("kb_fixed", "t2", "moved"))  # the id is taken in another tenant
    assert store.list_kbs("t2") == []

    doc = make_document(store, "t1", kb.id, "d1", texts=("a", "b"), vectors=[unit(1, 0), unit(0, 1)])
    assert store.get_source_key("t1", doc.id) == "key-d1"
    with pytest.raises(NotFound):
        store.get_source_key("t2", doc.id)
    assert store.embedding_models() == {MODEL: 8}
    hashes = [c.content_hash for c in store.get_chunks("t1", doc.id)]
    got = store.get_embeddings(MODEL, [hashes[1], hashes[0], hashes[1]])
    assert got.dtype == np.float32 and got.shape == (3, 8)
    np.testing.assert_allclose(got, np.vstack([unit(0, 1), unit(1, 0), unit(0, 1)]), atol=1e-6)
    assert store.get_embeddings(MODEL, []).shape == (0, 8)
    with pytest.raises(NotFound):
        store.get_embeddings(MODEL, [hashes[0], "no-such-hash"])
    with pytest.raises(NotFound):
        store.get_embeddings("no-such-model", hashes)


def test_sqlite_vector_matrix_survives_unrelated_writes(tmp_path):
    from store_contract import MODEL, make_document, unit

    from groundwork.types import Scope

    store = SQLiteStore(tmp_path / "v.db")
    make_document(store, "t1", None, "d1", texts=("first",), vectors=[unit(1)])
    store.vector_search(Scope("t1"), MODEL, unit(1), 5)
    built = store._indexes[MODEL]
    store.put_object("t1", "conversation", "c1", {"id": "c1"})  # a chat turn
    store.set_status("t1", "d1", "ready")
    other = SQLiteStore(tmp_path / "v.db")  # another process's connection
    other.put_object("t1", "conversation", "c2", {"id": "c2"})
    store.vector_search(Scope("t1"), MODEL, unit(1), 5)
    assert store._indexes[MODEL] is built
    make_document(other, "t1", None, "d2", texts=("second",), vectors=[unit(1, 1)])
    assert {h.document.id for h in store.vector_search(Scope("t1"), MODEL, unit(1), 5)} == {"d1", "d2"}
    assert store._indexes[MODEL] is not built
    other.close()
    store.close()


def test_sqlite_vector_matrix_appends_new_chunks_and_rebuilds_after_deletes(tmp_path):
    from store_contract import MODEL, make_document, unit

    from groundwork.chunk import content_hash
    from groundwork.types import Scope

    store = SQLiteStore(tmp_path / "a.db")
    kb = store.create_kb("t1", "kb")
    make_document(store, "t1", kb.id, "d1", texts=("one", "two"), vectors=[unit(1), unit(0, 1)])
    store.vector_search(Scope("t1"), MODEL, unit(1), 5)
    first = store._indexes[MODEL]
    # as the pipeline does: vectors first, then the chunks that use them
    store.put_embeddings(MODEL, [content_hash("d2:three")], unit(1, 0.1)[None, :])
    make_document(store, "t2", None, "d2", texts=("three",))
    hits = store.vector_search(Scope("t2"), MODEL, unit(1), 5)
    appended = store._indexes[MODEL]
    assert [h.document.id for h in hits] == ["d2"]
    assert appended.rebuild == first.rebuild and len(appended.rowids) == 3
    assert list(appended.rowids[:2]) == list(first.rowids)
    assert [h.document.id for h in store.vector_search(Scope("t1", kb_ids=(kb.id,)), MODEL, unit(1), 5)] == ["d1", "d1"]
    store.delete_document("t1", "d1")
    assert [h.document.id for h in store.vector_search(Scope("t1"), MODEL, unit(1), 5)] == []
    rebuilt = store._indexes[MODEL]
    assert rebuilt.rebuild > appended.rebuild and len(rebuilt.rowids) == 1
    # a vector for a chunk that is already indexed (a re-embedding) also forces a rebuild
    (chunk,) = store.get_chunks("t2", "d2")
    store.put_embeddings(MODEL, [chunk.content_hash], unit(0, 0, 1)[None, :])
    (hit,) = store.vector_search(Scope("t2"), MODEL, unit(0, 0, 1), 5)
    assert hit.score == pytest.approx(1.0, abs=1e-5)
    store.close()
