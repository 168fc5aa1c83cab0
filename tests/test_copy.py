"""Moving data between stores without re-embedding (`groundwork.transfer`, `groundwork
copy`), and `groundwork migrate`: a real SQLite home ingested with the real model, copied
to a real PostgreSQL database and to another SQLite home."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from groundwork import access, domain, kbmap, pipeline
from groundwork.cli import app
from groundwork.config import load_settings
from groundwork.engine import Engine
from groundwork.store.sqlite import migrations
from groundwork.transfer import copy_data
from groundwork.types import DEFAULT_TENANT, Scope

DOCS = {
    "refunds.md": "# Refund policy\n\nWe offer a 30-day refund window from the date of delivery. Refunds are "
                  "processed to the original payment method within 5 business days.\n\n## Damaged items\n\n"
                  "Damaged-on-arrival claims must be filed within 48 hours of delivery, with a photo.",
    "shipping.md": "# Shipping\n\nWe ship to 40 countries. Standard delivery takes 3 to 7 business days; "
                   "tracking numbers are emailed when the parcel leaves our warehouse.",
    "hours.txt": "Our office hours are 9 to 6 IST, Monday to Friday.",
}
QUERIES = ["how long is the refund window?", "when can I phone your team", "tracking numbers for parcels",
           "damaged item photo"]
OTHER_MODEL = "test/other-model-8d"  # a second model's vectors must travel too


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text, encoding="utf-8")
    return folder / name


@pytest.fixture
def source(tmp_path, embedder):
    """A SQLite home: kb "support" (3 files), kb "archive" (1), a record's file outside
    any kb, an assistant, an attachment, a second tenant with its API key, and a second
    embedding model's vectors."""
    engine = Engine.open(load_settings(home=tmp_path / "sqlite-home"), embedder=embedder)
    store = engine.store
    support = store.create_kb(DEFAULT_TENANT, "support", "customer policies")
    archive = store.create_kb(DEFAULT_TENANT, "archive")
    paths = [write(tmp_path / "docs", name, text) for name, text in DOCS.items()]
    assert {r.status for r in pipeline.ingest_paths(engine, paths, kb_id=support.id)} == {"ready"}
    pipeline.ingest_bytes(engine, b"Old catalogue: the 2019 price list.", "catalogue.txt", kb_id=archive.id)
    record = domain.create(store, DEFAULT_TENANT, "record", name="Customer 42")
    note = pipeline.ingest_bytes(engine, b"Customer 42 prefers email.", "note.txt", record_id=record.id)
    domain.create(store, DEFAULT_TENANT, "assistant", name="Support bot", kb_ids=[support.id])
    access.issue_attachment(store, DEFAULT_TENANT, note.document_id, filename="note.txt",
                            content_type="text/plain", size=26)
    access.create_api_key(store, "acme")
    acme = store.create_kb("acme", "acme-docs")
    pipeline.ingest_bytes(engine, b"Acme widgets ship on Tuesdays.", "acme.txt", kb_id=acme.id, tenant="acme")
    hashes = [c.content_hash for c in store.get_chunks(DEFAULT_TENANT, note.document_id)]
    store.put_embeddings(OTHER_MODEL, hashes, np.random.default_rng(1).standard_normal((len(hashes), 8)))
    assert kbmap.reindex(store, DEFAULT_TENANT) == 5  # graph facts, and summaries of the kb documents
    yield engine
    engine.close()


def snapshot(engine: Engine, tenant: str = DEFAULT_TENANT) -> dict:
    """Everything a copy must reproduce, read through the Store protocol."""
    store = engine.store
    documents = store.list_documents(tenant)
    hashes = sorted({c.content_hash for d in documents for c in store.get_chunks(tenant, d.id)})
    return {
        "kbs": store.list_kbs(tenant),
        "documents": documents,
        "source_keys": [store.get_source_key(tenant, d.id) for d in documents],
        "texts": [store.get_text(tenant, d.id) for d in documents],
        "chunks": [store.get_chunks(tenant, d.id) for d in documents],
        "progress": [store.get_progress(tenant, d.id) for d in documents],
        "graphs": [store.get_graph(tenant, d.id) for d in documents],
        "maps": [store.kb_map(tenant, kb.id) for kb in store.list_kbs(tenant)],
        "keywords": store.document_keywords(tenant, [d.id for d in documents]),
        "originals": [engine.storage.get(tenant, d.id) for d in documents],
        "objects": {kind: store.list_objects(tenant, kind) for kind in (*domain.KINDS, access.ATTACHMENT)},
        "models": store.embedding_models(),
        "vectors": store.get_embeddings(engine.embedder.model_id, hashes),
    }


def ranked(hits) -> list[tuple[str, int, float]]:
    return [(h.document.id, h.chunk.index, round(h.score, 4)) for h in hits]


def test_copy_to_postgres_needs_no_embedding_and_searches_the_same(source, tmp_path, embedder, pg_url):
    target = Engine.open(load_settings(home=tmp_path / "pg-home", database_url=pg_url), embedder=embedder)
    try:
        calls, texts = embedder.calls, embedder.texts
        report = copy_data(source, target)
        assert (embedder.calls, embedder.texts) == (calls, texts)  # not one text embedded by the copy
        assert report.tenants == [DEFAULT_TENANT, "acme"]
        assert (report.kbs, report.documents, report.originals, report.missing_originals) == (3, 6, 6, [])
        assert report.unfinished == []
        assert report.embeddings[OTHER_MODEL] == 1 and report.embeddings[embedder.model_id] == report.chunks

        before = snapshot(source)
        assert any(entities for entities, _ in before["graphs"]) and before["keywords"]
        assert any(entry.summary and entry.topics for entries in before["maps"] for entry in entries)
        after = snapshot(target)
        np.testing.assert_allclose(after.pop("vectors"), before.pop("vectors"), atol=1e-6)
        assert after == before  # same ids, rows, timestamps, texts, chunks, objects, originals
        assert snapshot(target, "acme")["documents"] == source.store.list_documents("acme")
        assert access.list_api_keys(target.store) == access.list_api_keys(source.store)
        note = next(d for d in before["documents"] if d.filename == "note.txt")
        chunk_hash = target.store.get_chunks(DEFAULT_TENANT, note.id)[0].content_hash
        np.testing.assert_allclose(target.store.get_embeddings(OTHER_MODEL, [chunk_hash]),
                                   source.store.get_embeddings(OTHER_MODEL, [chunk_hash]), atol=1e-6)

        scope = Scope(kb_ids=(target.store.get_kb(DEFAULT_TENANT, "support").id,))
        model = embedder.model_id
        for query, vector in zip(QUERIES, embedder.embed(QUERIES)):
            on_postgres = ranked(target.store.vector_search(scope, model, vector, 3))
            assert on_postgres == ranked(source.store.vector_search(scope, model, vector, 3)) and on_postgres
        phone = ranked(pipeline.search(target, "when can I phone your team", scope=scope, top_k=3))
        assert phone[0][0] == next(d.id for d in before["documents"] if d.filename == "hours.txt")
        for query in QUERIES[:2]:  # hybrid: the full-text rankers differ (bm25 vs ts_rank_cd); the top agrees
            assert (ranked(pipeline.search(target, query, scope=scope, top_k=3))[0][:2]
                    == ranked(pipeline.search(source, query, scope=scope, top_k=3))[0][:2])

        # Run again: nothing left to write; re-ingesting a copied file finds it unchanged.
        again = copy_data(source, target)
        assert set(again.embeddings.values()) == {0} and snapshot(target)["documents"] == before["documents"]
        calls = embedder.calls
        reingest = pipeline.ingest_paths(target, [tmp_path / "docs" / "refunds.md"], kb_id=scope.kb_ids[0])
        assert reingest[0].status == "unchanged" and embedder.calls == calls
    finally:
        target.close()


def test_cli_copy_of_one_kb_into_a_home_folder(source, tmp_path):
    home = tmp_path / "copy-home"
    result = CliRunner().invoke(app, ["copy", "--from", str(source.settings.home), "--to", str(home),
                                      "--kb", "support"])
    assert result.exit_code == 0, result.output
    assert "copied 1 knowledge bases, 3 documents" in result.output
    copied = Engine.open(load_settings(home=home))
    try:
        assert [kb.name for kb in copied.store.list_kbs(DEFAULT_TENANT)] == ["support"]
        support = source.store.get_kb(DEFAULT_TENANT, "support")
        assert copied.store.list_documents(DEFAULT_TENANT) == source.store.list_documents(DEFAULT_TENANT, support.id)
        assert copied.store.list_objects(DEFAULT_TENANT, "assistant") == []  # objects: whole-tenant copies only
        assert copied.store.list_kbs("acme") == []
        doc = copied.store.list_documents(DEFAULT_TENANT)[0]
        assert copied.storage.get(DEFAULT_TENANT, doc.id) == source.storage.get(DEFAULT_TENANT, doc.id)
    finally:
        copied.close()
    missing = CliRunner().invoke(app, ["copy", "--from", str(tmp_path / "nowhere"), "--to", str(home)])
    assert missing.exit_code != 0 and "no Groundwork data" in str(missing.exception)


def test_migrate_applies_pending_migrations_once(tmp_path, pg_url):
    runner = CliRunner()
    for url, dialect in (("", "sqlite"), (pg_url, "postgres")):
        env = {"GROUNDWORK_DATABASE_URL": url}
        first = runner.invoke(app, ["migrate", "--data-dir", str(tmp_path / dialect)], env=env)
        assert first.exit_code == 0, first.output
        names = [name for _, name, _ in migrations(dialect)]
        assert [line.removeprefix("applied ") for line in first.output.splitlines()[:-1]] == names
        second = runner.invoke(app, ["migrate", "--data-dir", str(tmp_path / dialect)], env=env)
        assert second.exit_code == 0 and second.output.strip().endswith("up to date")
