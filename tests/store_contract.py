"""The Store contract: every backend must pass these. A backend's test module defines a
`store` fixture and imports this module's tests (`from store_contract import *`)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from groundwork.chunk import content_hash
from groundwork.errors import InvalidRequest, NotFound, StoreError
from groundwork.types import Chunk, Document, Scope

MODEL = "test-model"
DIM = 8


def unit(*values: float) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float32)
    v[: len(values)] = values
    return v / np.linalg.norm(v)


def make_document(store, tenant: str, kb_id: str | None, doc_id: str, *, record_id: str | None = None,
                  texts=("alpha text",), vectors=None, filename: str | None = None) -> Document:
    now = time.time()
    document = Document(id=doc_id, tenant=tenant, kb_id=kb_id, filename=filename or f"{doc_id}.txt",
                        title=doc_id, content_type="text/plain", size=10, content_hash="h-" + doc_id,
                        status="ready", record_id=record_id, created_at=now, updated_at=now)
    store.put_document(document, source_key=f"key-{doc_id}")
    chunks = [Chunk(document_id=doc_id, index=i, text=t, char_start=0, char_end=len(t),
                    token_count=len(t.split()), content_hash=content_hash(f"{doc_id}:{t}"))
              for i, t in enumerate(texts)]
    store.replace_chunks(tenant, doc_id, chunks)
    if vectors is not None:
        store.put_embeddings(MODEL, [c.content_hash for c in chunks], np.vstack(vectors))
    return document


def test_knowledge_bases_are_per_tenant(store):
    kb = store.create_kb("t1", "docs", "help pages")
    assert store.get_kb("t1", "docs") == kb
    assert store.get_kb("t1", kb.id) == kb
    with pytest.raises(NotFound):
        store.get_kb("t2", "docs")
    with pytest.raises(InvalidRequest):
        store.create_kb("t1", "docs")
    other = store.create_kb("t2", "docs")
    assert [k.id for k in store.list_kbs("t1")] == [kb.id]
    store.delete_kb("t1", kb.id)
    assert store.list_kbs("t1") == []
    assert store.get_kb("t2", "docs") == other


def test_documents_round_trip_and_lookup(store):
    kb = store.create_kb("t1", "kb")
    doc = make_document(store, "t1", kb.id, "d1", texts=("one", "two", "three"))
    assert store.get_document("t1", "d1") == doc
    with pytest.raises(NotFound):
        store.get_document("t2", "d1")
    assert store.find_document("t1", kb.id, source_key="key-d1") == doc
    assert store.find_document("t1", kb.id, content_hash="h-d1") == doc
    assert store.find_document("t1", kb.id, content_hash="nope") is None
    assert store.find_document("t2", kb.id, source_key="key-d1") is None
    assert [d.id for d in store.list_documents("t1", kb.id)] == ["d1"]
    assert [c.text for c in store.get_chunks("t1", "d1")] == ["one", "two", "three"]
    assert store.chunk_counts("t1", ["d1", "missing"]) == {"d1": 3}
    store.put_text("t1", "d1", "one two three")
    assert store.get_text("t1", "d1") == "one two three"
    with pytest.raises(NotFound):
        store.get_text("t2", "d1")


def test_status_and_progress(store):
    make_document(store, "t1", None, "d1")
    store.set_status("t1", "d1", "embedding", progress={"embedded": 3, "to_embed": 9})
    assert store.get_document("t1", "d1").status == "embedding"
    assert store.get_progress("t1", "d1") == {"embedded": 3, "to_embed": 9}
    store.set_status("t1", "d1", "failed", error="bad file")
    failed = store.get_document("t1", "d1")
    assert (failed.status, failed.error) == ("failed", "bad file")
    with pytest.raises(NotFound):
        store.set_status("t2", "d1", "ready")


def test_embeddings_are_keyed_by_hash_and_model(store):
    vectors = np.vstack([unit(1), unit(0, 1)])
    store.put_embeddings(MODEL, ["a", "b"], vectors)
    assert store.missing_embeddings(MODEL, ["a", "b", "c", "a"]) == ["c"]
    assert store.missing_embeddings("other-model", ["a"]) == ["a"]
    with pytest.raises(StoreError):
        store.put_embeddings(MODEL, ["z"], np.ones((1, DIM + 1), dtype=np.float32))


def test_vector_search_ranks_and_scopes(store):
    kb1, kb2 = store.create_kb("t1", "one"), store.create_kb("t1", "two")
    make_document(store, "t1", kb1.id, "near", texts=("near",), vectors=[unit(1, 0.1)])
    make_document(store, "t1", kb1.id, "far", texts=("far",), vectors=[unit(0, 1)])
    make_document(store, "t1", kb2.id, "other-kb", texts=("x",), vectors=[unit(1)])
    make_document(store, "t2", None, "other-tenant", texts=("y",), vectors=[unit(1)])
    make_document(store, "t1", None, "rec", record_id="patient-1", texts=("z",), vectors=[unit(1, 0.2)])
    query = unit(1)

    hits = store.vector_search(Scope("t1", kb_ids=(kb1.id,)), MODEL, query, 10)
    assert [h.document.id for h in hits] == ["near", "far"]
    assert hits[0].score == pytest.approx(float(unit(1, 0.1) @ query), abs=1e-5)
    assert hits[0].score > hits[1].score

    everything = {h.document.id for h in store.vector_search(Scope("t1"), MODEL, query, 10)}
    assert everything == {"near", "far", "other-kb", "rec"}
    assert [h.document.id for h in store.vector_search(Scope("t2"), MODEL, query, 10)] == ["other-tenant"]
    assert [h.document.id for h in store.vector_search(Scope("t1", document_ids=("far",)), MODEL, query, 10)] == ["far"]
    assert [h.document.id for h in store.vector_search(Scope("t1", record_ids=("patient-1",)), MODEL, query, 10)] == ["rec"]
    assert store.vector_search(Scope("t1", record_ids=("patient-2",)), MODEL, query, 10) == []
    assert store.vector_search(Scope("t1", kb_ids=()), MODEL, query, 10) == []
    assert len(store.vector_search(Scope("t1"), MODEL, query, 2)) == 2
    assert store.vector_search(Scope("nobody"), MODEL, query, 10) == []


def test_text_search_ranks_scopes_and_is_injection_safe(store):
    kb = store.create_kb("t1", "kb")
    make_document(store, "t1", kb.id, "refund", texts=("Refunds are issued within 30 days of delivery.",))
    make_document(store, "t1", kb.id, "ship", texts=("We ship worldwide; delivery takes a week.",))
    make_document(store, "t2", None, "secret", texts=("Refunds for tenant two only.",))
    hits = store.text_search(Scope("t1"), "how do refunds work", 10)
    assert [h.document.id for h in hits] == ["refund"]
    both = store.text_search(Scope("t1", kb_ids=(kb.id,)), "refund delivery", 10)
    assert [h.document.id for h in both][0] == "refund" and len(both) == 2
    assert both[0].score >= both[1].score
    assert [h.document.id for h in store.text_search(Scope("t2"), "refunds", 10)] == ["secret"]
    for hostile in ('"unbalanced', "refund*) OR (", "NEAR(a b)", "col:refund", "AND OR NOT", "'; DROP TABLE chunks; --"):
        store.text_search(Scope("t1"), hostile, 5)  # must not raise
    assert store.text_search(Scope("t1"), "the of and", 5) == []


def test_replacing_chunks_keeps_shared_vectors_and_drops_orphans(store):
    make_document(store, "t1", None, "d1", texts=("keep", "drop"), vectors=[unit(1), unit(0, 1)])
    keep, drop = [c.content_hash for c in store.get_chunks("t1", "d1")]
    new = Chunk(document_id="d1", index=1, text="new", content_hash="new-hash")
    store.replace_chunks("t1", "d1", [store.get_chunks("t1", "d1")[0], new])
    assert store.missing_embeddings(MODEL, [keep, drop, "new-hash"]) == [drop, "new-hash"]
    assert [c.text for c in store.get_chunks("t1", "d1")] == ["keep", "new"]
    assert [h.chunk.text for h in store.text_search(Scope("t1"), "drop", 5)] == []


def test_delete_document_forgets_everything(store):
    kb = store.create_kb("t1", "kb")
    make_document(store, "t1", kb.id, "d1", texts=("unique zebra phrase",), vectors=[unit(1)])
    store.put_text("t1", "d1", "unique zebra phrase")
    hashes = [c.content_hash for c in store.get_chunks("t1", "d1")]
    with pytest.raises(NotFound):
        store.delete_document("t2", "d1")
    store.delete_document("t1", "d1")
    with pytest.raises(NotFound):
        store.get_document("t1", "d1")
    assert store.get_chunks("t1", "d1") == []
    assert store.text_search(Scope("t1"), "zebra", 5) == []
    assert store.vector_search(Scope("t1"), MODEL, unit(1), 5) == []
    assert store.missing_embeddings(MODEL, hashes) == hashes
    with pytest.raises(NotFound):
        store.get_text("t1", "d1")


def test_search_sees_writes_immediately(store):
    make_document(store, "t1", None, "d1", texts=("first",), vectors=[unit(1)])
    assert len(store.vector_search(Scope("t1"), MODEL, unit(1), 5)) == 1
    make_document(store, "t1", None, "d2", texts=("second",), vectors=[unit(1, 0.5)])
    assert {h.document.id for h in store.vector_search(Scope("t1"), MODEL, unit(1), 5)} == {"d1", "d2"}


def test_objects_are_per_tenant_and_kind(store):
    store.put_object("t1", "assistant", "a1", {"id": "a1", "name": "Aria", "files": [{"document_id": "d", "mode": "rag"}]})
    store.put_object("t1", "assistant", "a2", {"id": "a2", "name": "Bo"})
    store.put_object("t1", "template", "a1", {"id": "a1", "name": "SOAP"})
    assert store.get_object("t1", "assistant", "a1")["files"] == [{"document_id": "d", "mode": "rag"}]
    assert [o["name"] for o in store.list_objects("t1", "assistant")] == ["Aria", "Bo"]
    with pytest.raises(NotFound):
        store.get_object("t2", "assistant", "a1")
    assert store.list_objects("t2", "assistant") == []
    store.put_object("t1", "assistant", "a1", {"id": "a1", "name": "Aria 2"})
    assert store.get_object("t1", "assistant", "a1")["name"] == "Aria 2"
    store.delete_object("t1", "assistant", "a1")
    with pytest.raises(NotFound):
        store.delete_object("t1", "assistant", "a1")
    assert store.get_object("t1", "template", "a1")["name"] == "SOAP"


# -- knowledge graph and kb map ------------------------------------------------------------
def _graph(*edges):
    """Entities and relations from (source name, type, target name) triples."""
    from groundwork.graph import Entity, Relation, normalise

    names = list(dict.fromkeys(n for s, _, t in edges for n in (s, t)))
    entities = [Entity(key=normalise(n), name=n, type="name", description=f"{n} is here.", chunks=(0,))
                for n in names]
    relations = [Relation(normalise(s), normalise(t), kind, 1, f"{s} {kind} {t}.", (0,)) for s, kind, t in edges]
    return entities, relations


def _names(result):
    return {e.name for e in result.entities}


def test_graph_replaces_per_document_and_walks_two_hops_in_scope(store):
    kb = store.create_kb("t1", "kb")
    other_kb = store.create_kb("t1", "other")
    make_document(store, "t1", kb.id, "d1")
    make_document(store, "t1", kb.id, "d2")
    make_document(store, "t1", other_kb.id, "d3")
    store.put_graph("t1", "d1", *_graph(("Acme", "owns", "Widget Works")))
    store.put_graph("t1", "d2", *_graph(("Widget Works", "related_to", "Berlin")))
    store.put_graph("t1", "d3", *_graph(("Berlin", "related_to", "Paris")))
    entities, relations = store.get_graph("t1", "d1")
    assert {e.key for e in entities} == {"acme", "widget works"} and entities[0].chunks == (0,)
    assert [(r.source, r.type, r.target) for r in relations] == [("acme", "owns", "widget works")]

    scope = Scope("t1", kb_ids=(kb.id,))
    near = store.graph_neighbourhood(scope, ["acme", "nothing"], hops=1)
    assert near.matched == ("acme",) and _names(near) == {"Acme", "Widget Works"}
    far = store.graph_neighbourhood(scope, ["acme"], hops=2)
    assert _names(far) == {"Acme", "Widget Works", "Berlin"}  # Paris is in another kb
    assert [e.depth for e in far.entities] == [0, 1, 2]
    assert {(r.source, r.type, r.target) for r in far.relations} == {
        ("acme", "owns", "widget works"), ("widget works", "related_to", "berlin")}
    assert ("d2", 0) in far.entities[1].refs
    assert _names(store.graph_neighbourhood(Scope("t1"), ["berlin"], hops=1)) == {"Berlin", "Widget Works", "Paris"}
    assert store.graph_neighbourhood(Scope("t1", kb_ids=()), ["acme"]).entities == ()

    store.put_graph("t1", "d1", *_graph(("Acme", "related_to", "Globex")))  # re-ingest replaces
    assert _names(store.graph_neighbourhood(scope, ["acme"], hops=2)) == {"Acme", "Globex"}
    with pytest.raises(NotFound):
        store.put_graph("t2", "d1", [], [])


def test_graph_is_per_tenant(store):
    make_document(store, "t1", None, "d1")
    store.put_graph("t1", "d1", *_graph(("Acme", "owns", "Widget Works")))
    assert store.graph_neighbourhood(Scope("t2"), ["acme", "widget works"], hops=2).entities == ()
    assert store.get_graph("t2", "d1") == ([], [])
    assert _names(store.graph_neighbourhood(Scope("t1"), ["acme"])) == {"Acme", "Widget Works"}


def test_summaries_make_the_kb_map_per_tenant(store):
    kb = store.create_kb("t1", "kb")
    make_document(store, "t1", kb.id, "d1")
    make_document(store, "t1", kb.id, "d2")
    store.put_summary("t1", "d1", "About zebras.", ["zebra", "stripes"], {"zebra": 5, "stripes": 2, "hay": 2})
    store.put_summary("t1", "d2", "About hay.", ["hay"], {"hay": 7, "barn owl": 2})
    entries = store.kb_map("t1", kb.id)
    assert [(e.document_id, e.title, e.summary, e.topics) for e in entries] == [
        ("d1", "d1", "About zebras.", ("zebra", "stripes")), ("d2", "d2", "About hay.", ("hay",))]
    assert store.document_keywords("t1", ["d1", "nope"]) == {"d1": {"zebra": 5, "hay": 2, "stripes": 2}}
    assert list(store.document_keywords("t1", ["d1"])["d1"]) == ["zebra", "hay", "stripes"]  # most frequent first
    assert store.term_counts("t1", kb.id, ["hay", "zebra", "barn owl", "nope"]) == (
        2, {"hay": 2, "zebra": 1, "barn owl": 1})
    store.put_summary("t1", "d1", "Zebras, again.", ["zebra"])  # keywords kept
    assert store.kb_map("t1", kb.id)[0].summary == "Zebras, again."
    assert store.term_counts("t1", kb.id, ["zebra"]) == (2, {"zebra": 1})
    store.put_summary("t1", "d1", "Zebras, again.", ["zebra"], {"stripes": 1})  # keywords replaced
    assert store.term_counts("t1", kb.id, ["zebra", "stripes"]) == (2, {"stripes": 1})
    assert store.kb_map("t2", kb.id) == [] and store.document_keywords("t2", ["d1"]) == {}
    assert store.term_counts("t2", kb.id, ["hay"]) == (0, {})
    with pytest.raises(NotFound):
        store.put_summary("t2", "d1", "stolen", [])


def test_deleting_a_document_or_kb_forgets_its_graph_and_summary(store):
    kb = store.create_kb("t1", "kb")
    make_document(store, "t1", kb.id, "d1")
    make_document(store, "t1", kb.id, "d2")
    store.put_graph("t1", "d1", *_graph(("Acme", "owns", "Widget Works")))
    store.put_graph("t1", "d2", *_graph(("Globex", "related_to", "Berlin")))
    store.put_summary("t1", "d1", "Acme.", ["acme"], {"acme": 3})
    store.put_summary("t1", "d2", "Globex.", ["globex"], {"acme": 1})
    store.delete_document("t1", "d1")
    assert store.get_graph("t1", "d1") == ([], [])
    assert store.graph_neighbourhood(Scope("t1"), ["acme", "widget works"]).entities == ()
    assert [e.document_id for e in store.kb_map("t1", kb.id)] == ["d2"]
    assert store.term_counts("t1", kb.id, ["acme"]) == (1, {"acme": 1})
    assert store.document_keywords("t1", ["d1"]) == {}
    store.delete_kb("t1", kb.id)
    assert store.term_counts("t1", kb.id, ["acme"]) == (0, {})
    assert store.graph_neighbourhood(Scope("t1"), ["globex"]).entities == ()
    assert store.get_graph("t1", "d2") == ([], [])


def test_list_documents_filters_by_mode(store):
    from dataclasses import replace

    kb = store.create_kb("t1", "kb")
    full = make_document(store, "t1", kb.id, "full-doc")
    store.put_document(replace(full, mode="full"), source_key="key-full-doc")
    make_document(store, "t1", kb.id, "rag-doc")
    assert [d.id for d in store.list_documents("t1", kb.id, modes=("full", "auto"))] == ["full-doc"]
    assert store.get_document("t1", "full-doc").mode == "full"
    assert {d.id for d in store.list_documents("t1", kb.id)} == {"full-doc", "rag-doc"}
    assert store.list_documents("t1", kb.id, modes=()) == []
    assert store.list_documents("t2", kb.id, modes=("full",)) == []
