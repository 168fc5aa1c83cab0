"""Knowledge bases and documents over HTTP: add by file, URL (a local server) and pasted
text; asynchronous, idempotent ingestion; PUT re-embeds only changed chunks; DELETE
forgets everything, so the text cannot be found through any endpoint."""

from __future__ import annotations

import functools
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest

import filegen
from api_support import bearer, serve_app, wait_document

T = "acme"


def manual(revised: bool = False) -> str:
    sections = []
    for s in range(5):
        facts = " ".join(f"Step {s}.{i} of the pump manual checks valve {s * 10 + i}." for i in range(12))
        if revised and s == 3:
            facts = facts.replace("checks valve 35", "inspects and greases valve 35")
        sections.append(f"## Part {s}\n\n{facts}")
    return "# Pump manual\n\n" + "\n\n".join(sections)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("site")
    filegen.make_html(root / "tomatoes.html")
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a: None
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def api(tmp_path_factory, local_embedder):
    with serve_app(tmp_path_factory.mktemp("kbs"), local_embedder) as (client, engine):
        keys = bearer(engine, T)
        assert client.post("/v1/kbs", json={"name": "support"}, headers=keys).status_code == 201
        yield SimpleNamespace(client=client, engine=engine, keys=keys)


def add(api, body=None, files=None, kb="support") -> dict:
    response = api.client.post(f"/v1/kbs/{kb}/documents", json=body, files=files, headers=api.keys)
    assert response.status_code == 202, response.text
    return response.json()


def search(api, query: str, mode: str = "hybrid", kb: str = "support") -> list[dict]:
    response = api.client.post(f"/v1/kbs/{kb}/search", json={"query": query, "mode": mode, "top_k": 5},
                               headers=api.keys)
    assert response.status_code == 200, response.text
    return response.json()["results"]


def test_kb_create_list_get_delete(api):
    c = api.client
    created = c.post("/v1/kbs", json={"name": "scratch", "description": "temp"}, headers=api.keys)
    assert created.status_code == 201 and created.json()["name"] == "scratch"
    duplicate = c.post("/v1/kbs", json={"name": "scratch"}, headers=api.keys)
    assert duplicate.status_code == 400 and duplicate.json()["error"]["type"] == "invalid_request"
    assert "scratch" in [kb["name"] for kb in c.get("/v1/kbs", headers=api.keys).json()["data"]]
    assert c.get(f"/v1/kbs/{created.json()['id']}", headers=api.keys).json()["description"] == "temp"
    assert c.delete("/v1/kbs/scratch", headers=api.keys).status_code == 204
    gone = c.get("/v1/kbs/scratch", headers=api.keys)
    assert gone.status_code == 404 and gone.json() == {
        "error": {"type": "not_found", "message": "knowledge base 'scratch' not found"}}


def test_add_by_file_url_and_text_returns_at_once_then_ready(api, site, tmp_path):
    docx = filegen.make_docx(tmp_path / "garden.docx")
    added = [
        add(api, files={"file": ("garden.docx", docx.read_bytes(), "application/octet-stream")}),
        add(api, {"url": f"{site}/tomatoes.html"}),
        add(api, {"text": "Office hours are nine to six, Monday to Friday.", "title": "Office hours"}),
    ]
    assert all(a["status"] == "queued" and a["id"].startswith("doc_") for a in added)
    finished = [wait_document(api.client, a["id"], api.keys) for a in added]
    assert [f["status"] for f in finished] == ["ready"] * 3, finished
    assert finished[1]["source_url"] == f"{site}/tomatoes.html" and finished[2]["title"] == "Office hours"
    assert finished[0]["job"] == {"state": "done", "attempts": 1, "max_attempts": 3, "next_attempt_at": None,
                                  "last_error": None}
    assert search(api, "committee approved the annual plan")[0]["filename"] == "garden.docx"
    assert search(api, "hours of direct sunlight for tomatoes")[0]["document_id"] == added[1]["id"]
    page = api.engine.store.get_text(T, added[1]["id"])
    assert filegen.HTML_PARAGRAPHS[0] in page
    assert not any(phrase in page for phrase in filegen.HTML_BOILERPLATE)


def test_bad_urls_are_refused(api, site):
    for url, status in (("file:///etc/passwd", 400), ("ftp://example.org/x", 400),
                        (f"{site}/missing.html", 422)):
        response = api.client.post("/v1/kbs/support/documents", json={"url": url}, headers=api.keys)
        assert response.status_code == status, (url, response.text)
    both = api.client.post("/v1/kbs/support/documents", json={"url": site, "text": "x"}, headers=api.keys)
    assert both.status_code == 400


def test_the_same_content_twice_is_no_new_work(api):
    body = {"text": "Parcels over 30 kg ship by freight with a two-day delay.", "title": "Freight"}
    first = add(api, body)
    wait_document(api.client, first["id"], api.keys)
    embedded = api.engine.embedder.texts
    again = add(api, body)
    assert again == {"id": first["id"], "status": "ready"}
    assert api.engine.embedder.texts == embedded
    ids = [d["id"] for d in api.client.get("/v1/kbs/support/documents", headers=api.keys).json()["data"]]
    assert ids.count(first["id"]) == 1


def test_put_replaces_and_reembeds_only_changed_chunks(api):
    doc = add(api, {"text": manual(), "title": "Pump manual"})
    ready = wait_document(api.client, doc["id"], api.keys)
    total = ready["progress"]["chunks"]
    assert total >= 5
    before = api.engine.embedder.texts
    put = api.client.put(f"/v1/documents/{doc['id']}", json={"text": manual(revised=True), "title": "Pump manual"},
                         headers=api.keys)
    assert put.status_code == 202 and put.json() == {"id": doc["id"], "status": "queued"}
    updated = wait_document(api.client, doc["id"], api.keys)
    assert (updated["status"], updated["version"]) == ("ready", 2)
    assert 1 <= api.engine.embedder.texts - before <= 2 < total
    assert updated["progress"]["stages"]["embedding"]["reused"] >= total - 2
    assert "greases valve 35" in search(api, "inspects and greases valve 35", mode="text")[0]["text"]
    same = api.client.put(f"/v1/documents/{doc['id']}", json={"text": manual(revised=True)}, headers=api.keys)
    assert same.json() == {"id": doc["id"], "status": "ready"}


def test_delete_forgets_the_text_everywhere(api):
    phrase = "quixotic heliotrope vanguard"
    doc = add(api, {"text": f"The secret codename is {phrase}, used only for the spring launch.",
                    "title": "Codename"})
    wait_document(api.client, doc["id"], api.keys)
    assert phrase in search(api, phrase, mode="text")[0]["text"]
    store = api.engine.store
    hashes = [c.content_hash for c in store.get_chunks(T, doc["id"])]
    original = api.engine.settings.home / "originals" / T / doc["id"]
    assert original.exists()

    assert api.client.delete(f"/v1/documents/{doc['id']}", headers=api.keys).status_code == 204

    c = api.client
    assert c.get(f"/v1/documents/{doc['id']}", headers=api.keys).status_code == 404
    assert c.delete(f"/v1/documents/{doc['id']}", headers=api.keys).status_code == 404
    for mode in ("hybrid", "vector", "text"):
        assert not any(phrase in r["text"] for r in search(api, phrase, mode=mode))
    chat = c.post("/v1/chat", json={"message": f"What is the codename {phrase}?", "kb_ids": ["support"]},
                  headers=api.keys).json()
    assert phrase not in str(chat)
    completion = c.post("/v1/chat/completions", headers=api.keys, json={
        "model": "kb:support", "messages": [{"role": "user", "content": f"codename {phrase}?"}]}).json()
    assert completion["choices"][0]["message"]["content"] and phrase not in str(completion)
    listed = c.get("/v1/kbs/support/documents", headers=api.keys).json()["data"]
    assert doc["id"] not in [d["id"] for d in listed]
    assert not original.exists()
    assert store.get_chunks(T, doc["id"]) == []
    assert store.missing_embeddings(api.engine.embedder.model_id, hashes) == hashes


def test_kb_map_and_graph_search_endpoints_follow_the_documents(api):
    text = ("# Pump Station Nordwind\n\nThe Nordwind Station feeds the Kessel Reservoir. "
            "The Kessel Reservoir supplies Altstadt District with drinking water.")
    doc = add(api, {"text": text, "title": "Nordwind"})
    wait_document(api.client, doc["id"], api.keys)
    kb_map = api.client.get("/v1/kbs/support/map", headers=api.keys).json()
    entry = next(e for e in kb_map["entries"] if e["document_id"] == doc["id"])
    assert entry["title"] == "Nordwind" and "Kessel Reservoir" in entry["summary"]
    assert 'KB "support"' in kb_map["text"]
    found = api.client.post("/v1/kbs/support/graph/search", json={"query": "What does Nordwind Station feed?"},
                            headers=api.keys).json()
    names = {e["name"] for e in found["entities"]}
    assert "Nordwind Station" in names and "Kessel Reservoir" in names
    assert "Altstadt District" in names, "two hops away, through the reservoir"
    assert "Connections:" in found["text"]
    other = api.client.post("/v1/kbs", json={"name": "elsewhere"}, headers=api.keys)
    assert other.status_code == 201
    assert api.client.post("/v1/kbs/elsewhere/graph/search", json={"query": "Nordwind Station"},
                           headers=api.keys).json()["entities"] == []
    assert api.client.delete(f"/v1/documents/{doc['id']}", headers=api.keys).status_code == 204
    after = api.client.get("/v1/kbs/support/map", headers=api.keys).json()
    assert doc["id"] not in {e["document_id"] for e in after["entries"]}
    assert api.client.post("/v1/kbs/support/graph/search", json={"query": "Nordwind Station"},
                           headers=api.keys).json()["entities"] == []


def test_a_document_can_be_added_with_a_mode(api):
    doc = add(api, {"text": "Visitors must wear the yellow badge at all times.", "title": "Badge rule",
                    "mode": "full"})
    ready = wait_document(api.client, doc["id"], api.keys)
    assert ready["mode"] == "full"
    chat = api.client.post("/v1/chat", json={"message": "What must visitors wear?", "kb_ids": ["support"]},
                           headers=api.keys).json()
    assert {"filename": "badge-rule.md", "kind": "full"}.items() <= next(
        i for i in chat["context"]["included"] if i["document_id"] == doc["id"]).items()
    same = add(api, {"text": "Visitors must wear the yellow badge at all times.", "title": "Badge rule",
                     "mode": "rag"})
    assert same["id"] == doc["id"]
    assert api.client.get(f"/v1/documents/{doc['id']}", headers=api.keys).json()["mode"] == "rag"
    bad = api.client.post("/v1/kbs/support/documents", json={"text": "x", "mode": "sometimes"}, headers=api.keys)
    assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_request"
    assert api.client.delete(f"/v1/documents/{doc['id']}", headers=api.keys).status_code == 204
