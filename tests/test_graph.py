"""The knowledge graph: extraction from a realistic text (no model), then search over
what ingest stored, with the real embedding model and a real SQLite file."""

from __future__ import annotations

from groundwork import pipeline
from groundwork.graph import (Entity, GraphResult, Relation, extract_graph, format_graph, graph_search,
                              query_keys)
from groundwork.types import Chunk, Scope

DIABETES = """# Diabetes care at Riverside Clinic

The Riverside Clinic follows the ADA Standards of Care for adults with Type 2 Diabetes. \
Clinicians at Riverside Clinic usually start treatment with Metformin. \
Metformin lowers HbA1c by about one percentage point in the first year. \
HbA1c is measured every three months by the Northgate Laboratory.

However, patients with reduced kidney function need an eGFR check before starting Metformin. \
The clinic's "Sick Day Rules" leaflet explains when to pause Metformin.

Dr. Jane Smith leads the diabetes team, and the FDA label for Metformin lists lactic acidosis as a rare risk.
"""


def _by_key(entities):
    return {e.key: e for e in entities}


def test_extracts_named_entities_and_typed_relations():
    chunks = [Chunk("d", 0, DIABETES.split("\n\n", 2)[1]), Chunk("d", 1, DIABETES.split("\n\n", 2)[2])]
    entities, relations = extract_graph(chunks)
    found = _by_key(entities)
    assert {k: (e.name, e.type) for k, e in found.items()} == {
        "riverside clinic": ("Riverside Clinic", "name"),
        "ada standards of care": ("ADA Standards of Care", "name"),
        "type 2 diabetes": ("Type 2 Diabetes", "term"),
        "metformin": ("Metformin", "name"),
        "hba1c": ("HbA1c", "term"),
        "northgate laboratory": ("Northgate Laboratory", "name"),
        "egfr": ("eGFR", "term"),
        "sick day rules": ("Sick Day Rules", "term"),
        "jane smith": ("Jane Smith", "name"),
        "fda": ("FDA", "acronym"),
    }  # not "However", "Clinicians", "The", "Dr"
    assert found["metformin"].mentions == 5 and found["metformin"].chunks == (0, 1)
    assert found["hba1c"].description == "Metformin lowers HbA1c by about one percentage point in the first year."
    edges = {(r.source, r.type, r.target): r for r in relations}
    assert ("metformin", "reduces", "hba1c") in edges  # "Metformin lowers HbA1c"
    assert ("northgate laboratory", "measures", "hba1c") in edges  # passive: "is measured ... by"
    assert ("metformin", "related_to", "riverside clinic") in edges  # co-occurrence, one row per pair
    assert edges[("metformin", "reduces", "hba1c")].chunks == (0,)
    assert all(r.source != r.target for r in relations)


def test_overlapping_chunks_count_a_sentence_once():
    sentence = "Acme Corp acquired Globex in Berlin."
    entities, relations = extract_graph([Chunk("d", 0, sentence), Chunk("d", 1, sentence + " Globex grew.")])
    found = _by_key(entities)
    assert found["acme corp"].mentions == 1 and found["acme corp"].chunks == (0, 1)
    assert found["globex"].mentions == 2
    assert {(r.source, r.type, r.target, r.weight) for r in relations} >= {("acme corp", "owns", "globex", 1)}


def test_query_keys_are_normalised_word_ngrams():
    keys = query_keys("What does Metformin do to the HbA1c of Type 2 Diabetes patients?")
    assert {"metformin", "hba1c", "type 2 diabetes", "diabetes patient"} <= set(keys)
    assert "the" not in keys and "what" not in keys and "2" not in keys


def test_format_graph_has_the_seed_shape():
    result = GraphResult(
        matched=("metformin",),
        entities=(Entity("metformin", "Metformin", "name", "Metformin is first-line."),
                  Entity("hba1c", "HbA1c", "term", "HbA1c; measured quarterly.", depth=1)),
        relations=(Relation("metformin", "hba1c", "reduces", 2, "Metformin lowers HbA1c."),))
    assert format_graph(result) == (
        "Related entities: Metformin (name) -- Metformin is first-line; HbA1c (term) -- HbA1c, measured quarterly\n"
        "Connections: Metformin --[reduces]--> HbA1c: Metformin lowers HbA1c.")
    assert format_graph(GraphResult()) == ""


def test_graph_search_over_ingested_documents_is_scoped_replaced_and_forgotten(engine):
    store = engine.store
    kb_a = store.create_kb("clinic-a", "guidelines")
    kb_b = store.create_kb("clinic-b", "guidelines")
    doc = pipeline.ingest_bytes(engine, DIABETES.encode(), "diabetes.md", tenant="clinic-a", kb_id=kb_a.id)
    pipeline.ingest_bytes(engine, b"Acme Pharma ships Metformin to the Eastside Clinic.", "b.txt",
                          tenant="clinic-b", kb_id=kb_b.id)
    scope_a = Scope("clinic-a", kb_ids=(kb_a.id,))

    one_hop = graph_search(store, scope_a, "How does metformin work?", hops=1)
    two_hops = graph_search(store, scope_a, "How does metformin work?", hops=2)
    assert one_hop.matched == ("metformin",)
    assert "Northgate Laboratory" not in {e.name for e in one_hop.entities}
    northgate = next(e for e in two_hops.entities if e.name == "Northgate Laboratory")
    assert northgate.depth == 2 and northgate.refs[0][0] == doc.document_id  # via HbA1c
    assert "Connections: Metformin --[reduces]--> HbA1c" in format_graph(two_hops)

    # tenant B has its own Metformin, never A's neighbours (and A never sees B's)
    b_names = {e.name for e in graph_search(store, Scope("clinic-b"), "metformin", hops=2).entities}
    assert b_names == {"Metformin", "Acme Pharma", "Eastside Clinic"}
    assert "Eastside Clinic" not in {e.name for e in two_hops.entities}
    assert graph_search(store, Scope("clinic-b", kb_ids=(kb_a.id,)), "metformin").entities == ()

    # re-ingesting the same file replaces its facts; deleting it forgets them
    changed = DIABETES.replace("Northgate Laboratory", "Southbank Laboratory")
    pipeline.ingest_bytes(engine, changed.encode(), "diabetes.md", tenant="clinic-a", kb_id=kb_a.id)
    names = {e.name for e in graph_search(store, scope_a, "metformin", hops=2).entities}
    assert "Southbank Laboratory" in names and "Northgate Laboratory" not in names
    pipeline.delete_document(engine, "clinic-a", doc.document_id)
    assert graph_search(store, scope_a, "metformin", hops=2) == GraphResult()
