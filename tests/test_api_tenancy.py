"""Tenancy and auth: API keys per tenant, the open local tenant rule, 401s, and tenant B
never seeing tenant A's data through any endpoint."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from api_support import bearer, serve_app, wait_document
from groundwork import access
from groundwork.api.deps import is_loopback
from groundwork.cli import app as cli
from groundwork.types import DEFAULT_TENANT

PHRASE = "zephyr marmalade cathedral"


def test_keys_cli_create_list_revoke(tmp_path):
    runner = CliRunner()
    created = runner.invoke(cli, ["keys", "create", "--tenant", "acme", "--data-dir", str(tmp_path)])
    assert created.exit_code == 0, created.output
    key = created.stdout.strip().splitlines()[-1]
    assert key.startswith("gw_") and len(key) > 40
    listed = runner.invoke(cli, ["keys", "list", "--json", "--data-dir", str(tmp_path)])
    [entry] = [line for line in listed.stdout.splitlines() if line.startswith("{")]
    assert '"tenant": "acme"' in entry and key not in listed.stdout
    key_id = entry.split('"id": "')[1][:16]
    assert runner.invoke(cli, ["keys", "revoke", key_id, "--data-dir", str(tmp_path)]).exit_code == 0
    assert "acme" not in runner.invoke(cli, ["keys", "list", "--data-dir", str(tmp_path)]).stdout


def test_loopback_detection():
    assert all(map(is_loopback, ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost"]))
    assert not any(map(is_loopback, ["0.0.0.0", "192.168.1.4", "::", "example.org"]))


def test_open_local_tenant_only_while_no_key_exists(tmp_path, local_embedder):
    with serve_app(tmp_path, local_embedder, open_access=True, start_workers=False) as (client, engine):
        assert client.post("/v1/kbs", json={"name": "local"}).status_code == 201
        assert client.get("/v1/kbs", headers={"Authorization": "Bearer anything"}).status_code == 200
        assert [kb.name for kb in engine.store.list_kbs(DEFAULT_TENANT)] == ["local"]
        keys = bearer(engine, "team")  # the first key closes the open door
        for headers in ({}, {"Authorization": "Bearer gw_not_a_key"}, {"Authorization": "Basic abc"}):
            response = client.get("/v1/kbs", headers=headers)
            assert response.status_code == 401 and response.json()["error"]["type"] == "unauthenticated"
        assert client.get("/v1/kbs", headers=keys).json() == {"data": []}  # "team" sees its own (none)
        key_id = access.list_api_keys(engine.store)[0]["id"]
        access.revoke_api_key(engine.store, key_id)
        assert client.get("/v1/kbs").status_code == 200


def test_without_open_access_every_request_needs_a_key(tmp_path, local_embedder):
    with serve_app(tmp_path, local_embedder, start_workers=False) as (client, _):
        assert client.get("/healthz").json() == {"status": "ok"}
        for method, path in (("GET", "/v1/kbs"), ("GET", "/v1/models"), ("POST", "/v1/chat"),
                             ("POST", "/v1/attachments"), ("GET", "/v1/documents/doc_x")):
            response = client.request(method, path)
            assert response.status_code == 401, path
            assert response.json()["error"]["type"] == "unauthenticated"


@pytest.fixture(scope="module")
def tenants(tmp_path_factory, local_embedder):
    with serve_app(tmp_path_factory.mktemp("tenancy"), local_embedder) as (client, engine):
        a, b = bearer(engine, "tenant-a"), bearer(engine, "tenant-b")
        ids = {}
        for keys, text in ((a, f"The launch codename is {PHRASE}, known only to tenant A."),
                           (b, "Tenant B stores its quarterly sales figures here.")):
            kb = client.post("/v1/kbs", json={"name": "notes"}, headers=keys).json()
            doc = client.post("/v1/kbs/notes/documents", json={"text": text, "title": "Notes"}, headers=keys).json()
            ids.setdefault("kb", []).append(kb["id"])
            ids.setdefault("doc", []).append(doc["id"])
        att = client.post("/v1/attachments", headers=a, files=[
            ("files", ("secret.txt", f"Attachment: {PHRASE} again.".encode(), "text/plain"))]).json()[0]
        record = client.post("/v1/records", json={"name": "A's case"}, headers=a).json()
        assistant = client.post("/v1/assistants", json={"name": "A bot", "kb_ids": ["notes"]}, headers=a).json()
        conversation = client.post("/v1/chat", json={"message": f"Tell me about {PHRASE}", "kb_ids": ["notes"]},
                                   headers=a).json()
        for doc_id, keys in zip(ids["doc"], (a, b)):
            assert wait_document(client, doc_id, keys)["status"] == "ready"
        wait_document(client, att["document_id"], a)
        yield SimpleNamespace(client=client, engine=engine, a=a, b=b, kb_a=ids["kb"][0], doc_a=ids["doc"][0],
                              att=att, record=record, assistant=assistant, conversation=conversation)


def test_tenant_a_finds_its_own_phrase(tenants):
    t = tenants
    results = t.client.post("/v1/kbs/notes/search", json={"query": PHRASE, "mode": "text"}, headers=t.a).json()
    assert PHRASE in results["results"][0]["text"]
    assert PHRASE in t.conversation["message"]


def test_tenant_b_never_sees_tenant_a(tenants):
    t, c, b = tenants, tenants.client, tenants.b
    # B's own kb of the same name: searched in every mode, asked, chatted with -> nothing of A's.
    for mode in ("hybrid", "vector", "text"):
        found = c.post("/v1/kbs/notes/search", json={"query": PHRASE, "mode": mode}, headers=b).json()["results"]
        assert not any(PHRASE in r["text"] for r in found)
        assert all(r["document_id"] != t.doc_a for r in found)
    answers = [
        c.post("/v1/kbs/notes/ask", json={"question": PHRASE}, headers=b),
        c.post("/v1/chat", json={"message": f"What is {PHRASE}?", "kb_ids": ["notes"]}, headers=b),
        c.post("/v1/chat/completions", headers=b, json={
            "model": "kb:notes", "messages": [{"role": "user", "content": f"What is {PHRASE}?"}]}),
    ]
    for response in answers:
        assert response.status_code == 200 and PHRASE not in response.text

    # A's objects, addressed by id from B: not found (or forbidden for the token check).
    not_found = [
        ("POST", f"/v1/kbs/{t.kb_a}/search", {"query": PHRASE}),
        ("POST", f"/v1/kbs/{t.kb_a}/ask", {"question": PHRASE}),
        ("GET", f"/v1/kbs/{t.kb_a}", None),
        ("GET", f"/v1/kbs/{t.kb_a}/documents", None),
        ("GET", f"/v1/documents/{t.doc_a}", None),
        ("PUT", f"/v1/documents/{t.doc_a}", {"text": "overwritten by B"}),
        ("DELETE", f"/v1/documents/{t.doc_a}", None),
        ("DELETE", f"/v1/kbs/{t.kb_a}", None),
        ("GET", f"/v1/assistants/{t.assistant['id']}", None),
        ("PATCH", f"/v1/assistants/{t.assistant['id']}", {"name": "hijacked"}),
        ("GET", f"/v1/records/{t.record['id']}", None),
        ("GET", f"/v1/models/{t.assistant['id']}", None),
        ("POST", "/v1/chat", {"message": "hi", "kb_ids": [t.kb_a]}),
        ("POST", "/v1/chat", {"message": "hi", "assistant_id": t.assistant["id"]}),
        ("POST", "/v1/chat", {"message": "hi", "record_id": t.record["id"]}),
        ("POST", "/v1/chat", {"message": "hi", "conversation_id": t.conversation["conversation_id"]}),
        ("POST", "/v1/chat/completions", {"model": t.assistant["id"], "messages": [{"role": "user", "content": "hi"}]}),
        ("POST", "/v1/chat/completions", {"model": t.kb_a, "messages": [{"role": "user", "content": "hi"}]}),
        ("POST", "/v1/assistants", {"name": "B bot", "files": [t.att["document_id"]]}),
    ]
    for method, path, body in not_found:
        response = c.request(method, path, json=body, headers=b)
        assert response.status_code == 404, (method, path, response.text)
        assert response.json()["error"]["type"] == "not_found" and PHRASE not in response.text
    stolen = c.post("/v1/chat", headers=b, json={
        "message": "hi", "attachments": [{"id": t.att["id"], "access_token": t.att["access_token"]}]})
    assert stolen.status_code == 403 and PHRASE not in stolen.text
    upload = c.post(f"/v1/records/{t.record['id']}/documents", headers=b,
                    files=[("files", ("x.txt", b"B's file", "text/plain"))])
    assert upload.status_code == 404

    # Listings show only B's own things.
    assert [kb["name"] for kb in c.get("/v1/kbs", headers=b).json()["data"]] == ["notes"]
    assert t.kb_a not in c.get("/v1/kbs", headers=b).text
    assert [m["id"] for m in c.get("/v1/models", headers=b).json()["data"]] == ["kb:notes"]
    for kind in ("assistants", "records", "templates"):
        assert c.get(f"/v1/{kind}", headers=b).json() == {"data": []}
    # ...and A's data is intact after B's attempts.
    assert t.engine.store.get_document("tenant-a", t.doc_a).version == 1
    assert t.client.get(f"/v1/assistants/{t.assistant['id']}", headers=t.a).json()["name"] == "A bot"
