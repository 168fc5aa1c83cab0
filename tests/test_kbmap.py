"""The KB map (summaries and topics) and both seed-002 sections in a real chat: real
model, real SQLite, a local fake of the OpenAI protocol as the LLM."""

from __future__ import annotations

import pytest

from fake_openai import serve_fake_openai
from groundwork import pipeline
from groundwork.config import load_settings
from groundwork.engine import Engine
from groundwork.kbmap import MapEntry, distinctive_topics, format_kb_map, kb_map_entries, summarise
from groundwork.types import DEFAULT_TENANT, ChatRequest, Chunk, KnowledgeBase, Message
from test_graph import DIABETES

ASTHMA = """# Asthma care at Riverside Clinic

Adults with asthma at Riverside Clinic get a written Asthma Action Plan. \
The plan says when to use the reliever inhaler and when to call the clinic. \
Inhaler technique is checked at every asthma review, because poor technique is the commonest cause of \
uncontrolled asthma. Peak flow readings are recorded in the plan.
"""


def test_summary_is_the_most_central_sentences():
    text = ("Opening hours change in December. "
            "The pharmacy refills inhaler prescriptions for asthma patients within two days. "
            "Asthma patients should bring their inhaler to every asthma review at the pharmacy. "
            "Parking is free.")
    summary = summarise([Chunk("d", 0, text)])
    assert summary == ("The pharmacy refills inhaler prescriptions for asthma patients within two days. "
                       "Asthma patients should bring their inhaler to every asthma review at the pharmacy.")
    assert summarise([]) == ""


def test_topics_are_distinctive_within_the_kb():
    diabetes = {"clinic": 9, "metformin": 5, "hba1c": 3, "riverside clinic": 3, "riverside": 3}
    df = {"clinic": 2, "metformin": 1, "hba1c": 1, "riverside clinic": 2, "riverside": 2}
    assert distinctive_topics(diabetes, 2, df, n=2) == ["metformin", "hba1c"]  # "clinic" is everywhere
    alone = {term: 1 for term in diabetes}
    # alone, frequency decides; a pair replaces its words
    assert distinctive_topics(diabetes, 1, alone, n=3) == ["metformin", "riverside clinic", "hba1c"]


def test_format_kb_map_has_the_seed_shape_and_a_bound():
    kb = KnowledgeBase("kb1", DEFAULT_TENANT, "Clinic guidelines")
    entries = [MapEntry(f"d{i}", f"Guide {i}", f"g{i}.md", f"Summary {i}.", ("alpha", "beta")) for i in range(23)]
    text = format_kb_map(kb, entries)
    lines = text.splitlines()
    assert lines[0] == 'KB "Clinic guidelines": 23 documents'
    assert lines[1] == '- "Guide 0" [alpha, beta] -- Summary 0.'
    assert len(lines) == 22 and lines[-1] == "... and 3 more documents"
    assert format_kb_map(kb, entries[:2], total=40).splitlines()[-1] == "... and 38 more documents"
    assert format_kb_map(kb, [MapEntry("d", "", "bare.txt")]) == 'KB "Clinic guidelines": 1 document\n- "bare.txt"'


@pytest.fixture(scope="module")
def llm_server():
    with serve_fake_openai() as server:
        yield server


def test_chat_prompt_has_the_kb_map_and_graph_sections_in_order(tmp_path, embedder, llm_server):
    settings = load_settings(home=tmp_path / "home", llm_base_url=llm_server, llm_model="gpt-4o-mini")
    engine = Engine.open(settings, embedder=embedder)
    try:
        kb = engine.store.create_kb(DEFAULT_TENANT, "Clinic guidelines")
        diabetes = pipeline.ingest_bytes(engine, DIABETES.encode(), "diabetes.md", kb_id=kb.id)
        pipeline.ingest_bytes(engine, ASTHMA.encode(), "asthma.md", kb_id=kb.id)
        total, entries = kb_map_entries(engine.store, DEFAULT_TENANT, kb.id)
        assert total == 2 and [e.title for e in entries] == ["Diabetes care at Riverside Clinic",
                                                             "Asthma care at Riverside Clinic"]
        assert "metformin" in entries[0].topics and "asthma" in entries[1].topics
        assert "Metformin" in entries[0].summary

        pipeline.chat(engine, ChatRequest(messages=(Message("user", "How does Metformin change HbA1c?"),),
                                          kb_ids=(kb.id,)))
        system = llm_server.requests[-1]["messages"][0]["content"]
        kb_map = system.index("---AVAILABLE KNOWLEDGE---")
        chunks = system.index("---KNOWLEDGE BASE CONTEXT---")
        graph = system.index("---KNOWLEDGE GRAPH CONTEXT---")
        assert kb_map < chunks < graph
        section = system[kb_map:chunks]
        assert 'KB "Clinic guidelines": 2 documents' in section
        assert '- "Diabetes care at Riverside Clinic" [' in section
        assert '- "Asthma care at Riverside Clinic" [' in section
        graph_section = system[graph:]
        assert "Related entities: Metformin (name)" in graph_section
        assert "Connections: Metformin --[reduces]--> HbA1c: Metformin lowers HbA1c" in graph_section

        pipeline.delete_document(engine, DEFAULT_TENANT, diabetes.document_id)
        assert [e.title for e in kb_map_entries(engine.store, DEFAULT_TENANT, kb.id)[1]] == [
            "Asthma care at Riverside Clinic"]
        pipeline.chat(engine, ChatRequest(messages=(Message("user", "How does Metformin change HbA1c?"),),
                                          kb_ids=(kb.id,)))
        system = llm_server.requests[-1]["messages"][0]["content"]
        assert 'KB "Clinic guidelines": 1 document\n' in system
        assert "Diabetes care" not in system and "---KNOWLEDGE GRAPH CONTEXT---" not in system
    finally:
        engine.close()
