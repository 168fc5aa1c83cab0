"""`POST /v1/chat` (plain and SSE) with attachments, an assistant, a record and a kb, and
the OpenAI-compatible API driven by the official `openai` client against a real uvicorn.
The LLM behind Groundwork is the local fake OpenAI server (tests/fake_openai.py)."""

from __future__ import annotations

import json
import socket
import threading
import time
from types import SimpleNamespace

import openai
import pytest
import uvicorn

from api_support import bearer, serve_app, wait_document
from fake_openai import serve_fake_openai
from groundwork.api.app import create_app
from groundwork.generate.openai_compat import OpenAICompatLLM

T = "clinic"


def upload(api, name: str, text: str) -> dict:
    response = api.client.post("/v1/attachments", headers=api.keys, files=[("files", (name, text.encode(),
                                                                                       "text/plain"))])
    assert response.status_code == 201, response.text
    return response.json()[0]


@pytest.fixture(scope="module")
def api(tmp_path_factory, local_embedder):
    with serve_fake_openai() as llm_server, serve_app(
            tmp_path_factory.mktemp("chat"), local_embedder,
            llm=OpenAICompatLLM(llm_server, "fake-model")) as (client, engine):
        api = SimpleNamespace(client=client, engine=engine, llm=llm_server, keys=bearer(engine, T))
        c, keys = client, api.keys
        c.post("/v1/kbs", json={"name": "handbook"}, headers=keys)
        kb_doc = c.post("/v1/kbs/handbook/documents", headers=keys, json={
            "text": "Refunds are processed within five business days of the return.", "title": "Refunds"}).json()
        persona = upload(api, "persona.txt", "Aria always greets patients by name and speaks calmly.")
        record = c.post("/v1/records", json={"name": "Patient 7"}, headers=keys).json()
        added = c.post(f"/v1/records/{record['id']}/documents", headers=keys, files=[
            ("files", ("allergies.txt", b"Patient 7 is allergic to penicillin since 2019.", "text/plain"))])
        assert added.status_code == 202, added.text
        assistant = c.post("/v1/assistants", headers=keys, json={
            "name": "Aria", "system_prompt": "You are Aria, the clinic assistant. Cite sources like [1].",
            "kb_ids": ["handbook"], "files": [{"document_id": persona["document_id"], "mode": "full"}]})
        assert assistant.status_code == 201, assistant.text
        for doc_id in (kb_doc["id"], added.json()[0]["id"]):
            assert wait_document(c, doc_id, keys)["status"] == "ready"
        api.assistant, api.record, api.record_doc = assistant.json(), record, added.json()[0]
        yield api


def test_assistants_templates_and_records_are_managed_over_http(api):
    c, keys = api.client, api.keys
    record = c.get(f"/v1/records/{api.record['id']}", headers=keys).json()
    assert record["files"] == [{"document_id": api.record_doc["id"], "mode": "rag"}]
    patched = c.patch(f"/v1/assistants/{api.assistant['id']}", json={"top_k": 4}, headers=keys)
    assert patched.status_code == 200 and patched.json()["top_k"] == 4
    assert patched.json()["system_prompt"].startswith("You are Aria")
    assert c.patch(f"/v1/assistants/{api.assistant['id']}", json={"colour": "red"}, headers=keys).status_code == 422
    assert c.post("/v1/assistants", json={"name": "X", "files": ["doc_nope"]}, headers=keys).status_code == 404
    template = c.post("/v1/templates", json={"name": "Progress note", "body": "S/O/A/P"}, headers=keys).json()
    assert [t["id"] for t in c.get("/v1/templates", headers=keys).json()["data"]] == [template["id"]]
    assert c.delete(f"/v1/templates/{template['id']}", headers=keys).status_code == 204
    assert c.get(f"/v1/templates/{template['id']}", headers=keys).status_code == 404


def test_chat_with_attachment_assistant_record_and_kb(api):
    lab = upload(api, "lab.txt", "The lab result shows hemoglobin at 13.5 g/dL, within range.")
    response = api.client.post("/v1/chat", headers=api.keys, json={
        "message": "What is the patient allergic to, what does the lab show, and how fast are refunds?",
        "assistant_id": api.assistant["id"], "record_id": api.record["id"],
        "attachments": [{"id": lab["id"], "access_token": lab["access_token"]}]})
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) >= {"message", "conversation_id", "sources", "documents_referenced", "usage", "context"}
    system = api.llm.requests[-1]["messages"][0]["content"]
    for text in ("You are Aria", "greets patients by name", "allergic to penicillin", "hemoglobin at 13.5",
                 "Refunds are processed"):
        assert text in system
    groups = {item["group"] for item in body["context"]["included"]}
    assert groups >= {"assistant/template", "record", "conversation", "kb:handbook"}
    assert body["sources"] and all(f"[{s['number']}]" in body["message"] for s in body["sources"])
    assert {"number", "source", "document_id", "chunk_index", "page", "relevance_score", "text", "url"} <= \
        set(body["sources"][0])
    assert {"allergies.txt", "lab.txt", "persona.txt"} <= set(body["documents_referenced"])
    assert body["usage"]["total_tokens"] == body["usage"]["input_tokens"] + body["usage"]["output_tokens"] > 0

    follow = api.client.post("/v1/chat", headers=api.keys, json={
        "conversation_id": body["conversation_id"], "messages": [{"role": "user", "content": "And the lab?"}]})
    assert follow.status_code == 200 and follow.json()["conversation_id"] == body["conversation_id"]
    sent = api.llm.requests[-1]["messages"]
    assert "hemoglobin at 13.5" in sent[0]["content"]  # the attachment stays with the conversation
    assert [m["role"] for m in sent[1:]] == ["user", "assistant", "user"]
    assert sent[2]["content"] == body["message"]


def test_chat_streams_server_sent_events(api):
    with api.client.stream("POST", "/v1/chat", headers=api.keys, json={
            "message": "How fast are refunds?", "kb_ids": ["handbook"], "stream": True}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        raw = "".join(response.iter_text())
    events = [block.split("\n", 1) for block in raw.strip().split("\n\n")]
    names = [e[0].removeprefix("event: ") for e in events]
    payloads = [json.loads(e[1].removeprefix("data: ")) for e in events]
    assert names[-1] == "done" and set(names[:-1]) == {"delta"}
    assert "".join(p["content"] for p in payloads[:-1]) == payloads[-1]["message"]
    assert payloads[-1]["sources"] and payloads[-1]["conversation_id"]


def test_chat_errors_have_one_shape(api):
    c = api.client
    both = c.post("/v1/chat", headers=api.keys, json={"message": "x", "messages": [{"role": "user", "content": "y"}]})
    unknown_kb = c.post("/v1/chat", headers=api.keys, json={"message": "x", "kb_ids": ["nope"]})
    files = c.post("/v1/chat", headers=api.keys, json={"message": "x", "files": [api.record_doc["id"]]})
    assert (both.status_code, unknown_kb.status_code, files.status_code) == (400, 404, 422)
    for r in (both, unknown_kb, files):
        assert set(r.json()) == {"error"} and set(r.json()["error"]) == {"type", "message"}


@pytest.fixture(scope="module")
def live(api):
    """A real uvicorn on a free loopback port over the same engine (workers off: the
    TestClient's app already runs them)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(api.engine, start_workers=False), host="127.0.0.1",
                                           port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/v1"
    server.should_exit = True
    thread.join(10)


def test_the_openai_client_works_unchanged(api, live):
    key = api.keys["Authorization"].removeprefix("Bearer ")
    client = openai.OpenAI(base_url=live, api_key=key, max_retries=0)
    ids = [m.id for m in client.models.list()]
    assert api.assistant["id"] in ids and "kb:handbook" in ids
    assert client.models.retrieve("kb:handbook").id == "kb:handbook"

    question = [{"role": "user", "content": "How many business days do refunds take?"}]
    completion = client.chat.completions.create(model="kb:handbook", messages=question)
    content = completion.choices[0].message.content
    sources = completion.model_extra["sources"]
    assert completion.object == "chat.completion" and completion.choices[0].finish_reason == "stop"
    assert "[1]" in content and sources[0]["number"] == 1 and "Refunds are processed" in sources[0]["text"]
    assert completion.usage.total_tokens > 0 and completion.model_extra["conversation_id"]

    chunks = list(client.chat.completions.create(model=api.assistant["id"], messages=question, stream=True,
                                                 stream_options={"include_usage": True}))
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    finals = [ch for ch in chunks if ch.choices and ch.choices[0].finish_reason == "stop"]
    assert chunks[0].object == "chat.completion.chunk" and chunks[0].choices[0].delta.role == "assistant"
    assert "[1]" in text and len(finals) == 1 and finals[0].model_extra["sources"]
    assert chunks[-1].usage.total_tokens > 0

    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="no-such-model", messages=question)
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=live, api_key="gw_wrong", max_retries=0).models.list()
