"""`POST /v1/attachments` (seed 002): limits answered with their status code and nothing
stored; access tokens of 64+ characters, stored hashed, required (and checked) in chat."""

from __future__ import annotations

import hashlib
import io
import zipfile
from types import SimpleNamespace

import pytest

import filegen
from api_support import bearer, serve_app
from groundwork.access import ATTACHMENT

MB = 1024 * 1024


@pytest.fixture(scope="module")
def api(tmp_path_factory, local_embedder):
    with serve_app(tmp_path_factory.mktemp("attachments"), local_embedder) as (client, engine):
        yield SimpleNamespace(client=client, engine=engine, home=engine.settings.home,
                              a=bearer(engine, "tenant-a"), b=bearer(engine, "tenant-b"),
                              empty=bearer(engine, "tenant-empty"))


def nothing_stored(api, tenant: str) -> None:
    store = api.engine.store
    assert store.list_documents(tenant) == []
    assert store.list_objects(tenant, ATTACHMENT) == []
    folder = api.home / "originals" / tenant
    assert not folder.exists() or not any(folder.iterdir())


def text_file(name: str, text: str) -> tuple:
    return ("files", (name, text.encode(), "text/plain"))


def fake_pdf_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("payload.txt", "not a pdf at all")
    return buffer.getvalue()


def test_upload_returns_each_token_once_and_stores_only_its_hash(api, tmp_path):
    pdf = filegen.make_pdf(tmp_path / "memo.pdf", [["The lighthouse keeper logs the fog at noon."]])
    files = [("files", ("memo.pdf", pdf.read_bytes(), "application/pdf")),
             text_file("note.txt", "Pelicans migrate south in the autumn.")]
    response = api.client.post("/v1/attachments", files=files, headers=api.a)
    assert response.status_code == 201
    items = response.json()
    assert [i["filename"] for i in items] == ["memo.pdf", "note.txt"]
    assert [i["content_type"] for i in items] == ["application/pdf", "text/plain"]
    assert items[0]["size"] == len(pdf.read_bytes())
    tokens = [i["access_token"] for i in items]
    assert all(len(t) >= 64 for t in tokens) and len(set(tokens)) == 2
    stored = api.engine.store.get_object("tenant-a", ATTACHMENT, items[0]["id"])
    assert stored["token_sha256"] == hashlib.sha256(tokens[0].encode()).hexdigest()
    assert tokens[0] not in str(stored)
    database = b"".join(p.read_bytes() for p in api.home.glob("groundwork.db*"))
    assert not any(t.encode() in database for t in tokens)


@pytest.mark.parametrize("case", ["six files", "51 MB", "pdf that is a zip", "one bad among good"])
def test_upload_limits_are_refused_and_nothing_is_stored(api, case):
    match case:
        case "six files":
            files, status, kind = [text_file(f"f{i}.txt", f"file {i}") for i in range(6)], 413, "limit_exceeded"
        case "51 MB":
            files, status, kind = [("files", ("big.txt", b"a" * (51 * MB), "text/plain"))], 413, "limit_exceeded"
        case "pdf that is a zip":
            files, status, kind = [("files", ("report.pdf", fake_pdf_zip(), "application/pdf"))], 415, \
                "unsupported_file"
        case "one bad among good":
            files, status, kind = [text_file("good.txt", "Good file."),
                                   ("files", ("report.pdf", fake_pdf_zip(), "application/pdf"))], 415, \
                "unsupported_file"
    response = api.client.post("/v1/attachments", files=files, headers=api.empty)
    assert response.status_code == status
    assert response.json()["error"]["type"] == kind and response.json()["error"]["message"]
    nothing_stored(api, "tenant-empty")


def test_the_tenant_storage_quota_is_checked_before_storing(tmp_path, local_embedder):
    with serve_app(tmp_path, local_embedder, tenant_quota_bytes=100, start_workers=False) as (client, engine):
        keys = bearer(engine, "small")
        ok = client.post("/v1/attachments", files=[text_file("a.txt", "x" * 60)], headers=keys)
        assert ok.status_code == 201
        over = client.post("/v1/attachments", files=[text_file("b.txt", "y" * 60)], headers=keys)
        assert over.status_code == 413 and "quota" in over.json()["error"]["message"]
        assert [d.filename for d in engine.store.list_documents("small")] == ["a.txt"]


def test_chat_needs_the_attachments_own_token(api):
    store = api.engine.store
    mine = api.client.post("/v1/attachments", headers=api.a,
                           files=[text_file("walrus.txt", "The walrus colony rests on the ice floe near Svalbard.")])
    theirs = api.client.post("/v1/attachments", headers=api.b,
                             files=[text_file("b.txt", "Tenant B keeps notes about kelp.")])
    att, other = mine.json()[0], theirs.json()[0]
    conversations = {t: len(store.list_objects(t, "conversation")) for t in ("tenant-a", "tenant-b")}

    def chat(headers, attachment_id, token):
        return api.client.post("/v1/chat", headers=headers, json={
            "message": "Where does the walrus colony rest?",
            "attachments": [{"id": attachment_id, "access_token": token}]})

    wrong = chat(api.a, att["id"], att["access_token"][:-1] + ("A" if att["access_token"][-1] != "A" else "B"))
    cross = chat(api.b, att["id"], att["access_token"])  # tenant B holding tenant A's token
    swapped = chat(api.a, att["id"], other["access_token"])  # another attachment's token
    missing = chat(api.a, att["id"], "")
    for response in (wrong, cross, swapped, missing):
        assert response.status_code == 403
        assert response.json()["error"]["type"] == "permission_denied"
    assert {t: len(store.list_objects(t, "conversation")) for t in conversations} == conversations

    good = chat(api.a, att["id"], att["access_token"])
    assert good.status_code == 200
    body = good.json()
    assert "Svalbard" in body["message"] and body["documents_referenced"] == ["walrus.txt"]
    assert body["context"]["included"][0]["document_id"] == att["document_id"]

    deleted = api.client.delete(f"/v1/documents/{att['document_id']}", headers=api.a)
    assert deleted.status_code == 204
    assert att["id"] not in [d["id"] for d in store.list_objects("tenant-a", ATTACHMENT)]
    assert chat(api.a, att["id"], att["access_token"]).status_code == 403
