"""End-to-end ingest, search and ask with the real model and real files, on each store
backend: a SQLite file, and a fresh database on the session's embedded PostgreSQL."""

from pathlib import Path

import pytest

import filegen
from groundwork import pipeline
from groundwork.config import load_settings
from groundwork.errors import ExtractError, LimitExceeded, NotFound, UnsupportedFile
from groundwork.types import DEFAULT_TENANT, Scope

REFUNDS = """# Refund policy

We offer a 30-day refund window from the date of delivery. Refunds are processed to the
original payment method within 5 business days.

## Damaged items

Damaged-on-arrival claims must be filed within 48 hours of delivery, with a photo of the
damage.
"""

SHIPPING = """# Shipping

We ship to 40 countries. Standard delivery takes 3 to 7 business days; express delivery
takes 1 to 2 business days. Tracking numbers are emailed when the parcel leaves our warehouse.
"""


def long_doc(sections: int) -> str:
    parts = []
    for s in range(sections):
        parts.append(f"## Topic {s}\n")
        parts.append(" ".join(f"Paragraph {s}.{i} records fact {s * 100 + i} about subject {s}."
                              for i in range(25)))
    return "# Manual\n\n" + "\n\n".join(parts)


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request):
    """GROUNDWORK_DATABASE_URL for each backend (None: the embedded SQLite file)."""
    return request.getfixturevalue("pg_url") if request.param == "postgres" else None


@pytest.fixture
def settings(tmp_path, database_url):
    """Overrides conftest's: the shared `engine` fixture then opens each backend."""
    return load_settings(home=tmp_path / "home", database_url=database_url)


@pytest.fixture
def kb(engine):
    return engine.store.create_kb(DEFAULT_TENANT, "support")


@pytest.fixture
def scope(kb):
    return Scope(tenant=DEFAULT_TENANT, kb_ids=(kb.id,))


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / "docs" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_each_run_uses_its_backend(engine, database_url):
    assert type(engine.store).__name__ == ("SQLiteStore" if database_url is None else "PostgresStore")


def test_reingesting_unchanged_files_does_no_embedding(engine, kb, tmp_path):
    paths = [write(tmp_path, "refunds.md", REFUNDS), write(tmp_path, "shipping.md", SHIPPING)]
    first = pipeline.ingest_paths(engine, paths, kb_id=kb.id)
    assert [r.status for r in first] == ["ready", "ready"]
    assert engine.embedder.texts == sum(r.chunks for r in first) > 0
    calls, texts = engine.embedder.calls, engine.embedder.texts
    second = pipeline.ingest_paths(engine, paths, kb_id=kb.id)
    assert [r.status for r in second] == ["unchanged", "unchanged"]
    assert (engine.embedder.calls, engine.embedder.texts) == (calls, texts)
    assert [r.document_id for r in second] == [r.document_id for r in first]
    assert len(engine.store.list_documents(DEFAULT_TENANT, kb.id)) == 2


def test_changed_file_reembeds_only_changed_chunks(engine, kb, tmp_path):
    path = write(tmp_path, "manual.md", long_doc(6))
    first = pipeline.ingest_paths(engine, [path], kb_id=kb.id)[0]
    assert first.chunks >= 6
    before = {c.index: c.content_hash for c in engine.store.get_chunks(DEFAULT_TENANT, first.document_id)}
    path.write_text(long_doc(6).replace("fact 301 about", "fact 301 (revised) about"), encoding="utf-8")
    engine.embedder.texts = 0
    second = pipeline.ingest_paths(engine, [path], kb_id=kb.id)[0]
    after = {c.index: c.content_hash for c in engine.store.get_chunks(DEFAULT_TENANT, first.document_id)}
    changed = [i for i in after if before.get(i) != after[i]]
    assert second.status == "updated" and second.document_id == first.document_id
    assert 1 <= len(changed) <= 2 < len(after)
    assert engine.embedder.texts == second.embedded == len(changed)
    assert engine.store.get_document(DEFAULT_TENANT, first.document_id).version == 2


def test_delete_forgets_document(engine, kb, scope, tmp_path):
    report = pipeline.ingest_paths(engine, [write(tmp_path, "refunds.md", REFUNDS)], kb_id=kb.id)[0]
    assert pipeline.search(engine, "refund window", scope=scope)
    pipeline.delete_document(engine, DEFAULT_TENANT, report.document_id)
    for mode in ("hybrid", "vector", "text"):
        assert pipeline.search(engine, "refund window", scope=scope, mode=mode) == []
    with pytest.raises(NotFound):
        engine.storage.get(DEFAULT_TENANT, report.document_id)
    with pytest.raises(NotFound):
        engine.store.get_text(DEFAULT_TENANT, report.document_id)


def test_hybrid_ranks_answer_first_and_each_mode_works(engine, kb, scope, tmp_path):
    paths = [write(tmp_path, "refunds.md", REFUNDS), write(tmp_path, "shipping.md", SHIPPING),
             write(tmp_path, "hours.txt", "Our office hours are 9 to 6 IST, Monday to Friday.")]
    pipeline.ingest_paths(engine, paths, kb_id=kb.id)
    hybrid = pipeline.search(engine, "how long is the refund window?", scope=scope, top_k=3)
    assert hybrid[0].document.filename == "refunds.md" and hybrid[0].chunk.index == 0
    assert hybrid[0].vector_score is not None and hybrid[0].text_score is not None
    assert 0 < hybrid[-1].score <= hybrid[0].score <= 1.0
    # paraphrase with no shared keyword: only the vector side can find it
    vector = pipeline.search(engine, "when can I phone your team", scope=scope, mode="vector", top_k=1)
    assert vector[0].document.filename == "hours.txt"
    text = pipeline.search(engine, "tracking numbers", scope=scope, mode="text", top_k=1)
    assert text[0].document.filename == "shipping.md"
    assert pipeline.search(engine, "tracking numbers", scope=scope, top_k=1)[0].document.filename == "shipping.md"
    weighted = pipeline.search(engine, "damaged parcel photo", scope=scope, fusion="weighted", top_k=2)
    assert weighted[0].chunk.heading_path == ("Refund policy", "Damaged items")


def test_a_bad_file_fails_alone(engine, kb, tmp_path):
    good = write(tmp_path, "refunds.md", REFUNDS)
    corrupt = tmp_path / "docs" / "broken.pdf"
    corrupt.write_bytes(b"%PDF-1.7\n1 0 obj <<>> garbage")
    binary = tmp_path / "docs" / "blob.bin"
    binary.write_bytes(bytes(range(256)) * 4)
    reports = pipeline.ingest_paths(engine, [corrupt, good, binary], kb_id=kb.id)
    assert [r.status for r in reports] == ["failed", "ready", "failed"]
    assert "broken.pdf" in reports[0].error and "blob.bin" in reports[2].error
    assert [d.filename for d in engine.store.list_documents(DEFAULT_TENANT, kb.id)] == ["refunds.md"]
    with pytest.raises(ExtractError):
        pipeline.ingest_bytes(engine, corrupt.read_bytes(), "broken.pdf", kb_id=kb.id)
    with pytest.raises(UnsupportedFile):
        pipeline.ingest_bytes(engine, binary.read_bytes(), "blob.bin", kb_id=kb.id)


def test_size_limit_stores_nothing(engine, kb):
    small = engine.settings.model_copy(update={"max_upload_bytes": 100})
    engine.settings = small
    with pytest.raises(LimitExceeded):
        pipeline.ingest_bytes(engine, b"x" * 101, "big.txt", kb_id=kb.id)
    assert engine.store.list_documents(DEFAULT_TENANT, kb.id) == []


def test_every_format_ingests_with_pages(engine, kb, scope, tmp_path):
    folder = tmp_path / "formats"
    folder.mkdir()
    filegen.make_pdf(folder / "guide.pdf", [["The warranty lasts two years."], ["Batteries are covered for one year."]])
    filegen.make_docx(folder / "memo.docx")
    filegen.make_html(folder / "page.html")
    filegen.make_markdown(folder / "notes.md")
    filegen.make_text(folder / "plain.txt", "Plain text about the cafeteria menu.", "utf-8")
    filegen.make_png(folder / "scan.png")
    reports = pipeline.ingest_paths(engine, pipeline.iter_files([folder]), kb_id=kb.id)
    assert all(r.status == "ready" for r in reports), [(r.filename, r.error) for r in reports]
    hits = pipeline.search(engine, "how long are batteries covered", scope=scope, top_k=1)
    assert hits[0].document.filename == "guide.pdf" and hits[0].chunk.pages == (1, 2)
    scanned = next(r for r in reports if r.filename == "scan.png")
    assert engine.store.get_progress(DEFAULT_TENANT, scanned.document_id)["ocr_pages"] == [1]


def test_ask_through_an_openai_compatible_server(tmp_path, embedder, database_url):
    from fake_openai import serve_fake_openai
    from groundwork.engine import Engine

    def reply(body):
        return "Refunds take up to 5 business days [1]. Shipping is worldwide [7]."

    with serve_fake_openai(reply) as server:
        engine = Engine.open(load_settings(home=tmp_path / "h", database_url=database_url, llm_base_url=server,
                                           llm_model="gpt-4o-mini", llm_api_key="sk-local"), embedder=embedder)
        try:
            kb = engine.store.create_kb(DEFAULT_TENANT, "support")
            pipeline.ingest_paths(engine, [write(tmp_path, "refunds.md", REFUNDS)], kb_id=kb.id)
            answer = pipeline.ask(engine, "How fast are refunds?", scope=Scope(kb_ids=(kb.id,)), top_k=2)
        finally:
            engine.close()
        sent = server.requests[-1]
    assert sent["model"] == "gpt-4o-mini"
    assert sent["messages"][0]["role"] == "system" and "---KNOWLEDGE BASE CONTEXT---" in sent["messages"][0]["content"]
    assert sent["messages"][-1] == {"role": "user", "content": "How fast are refunds?"}
    assert answer.usage.total_tokens > 0 and answer.usage.input_tokens > 0
    assert answer.dropped_markers == (7,) and "[7]" not in answer.text
    (citation,) = answer.citations
    assert (citation.number, citation.filename, citation.chunk_index) == (1, "refunds.md", answer.context.hits[0].chunk.index)
    assert citation.verified and answer.documents_referenced == ("refunds.md",)
