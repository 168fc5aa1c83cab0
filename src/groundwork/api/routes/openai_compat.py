"""OpenAI-compatible endpoints: `POST /v1/chat/completions` (plain and streamed as
`chat.completion.chunk` events ending in `data: [DONE]`) and `GET /v1/models`.

Every assistant (its id) and every knowledge base (`kb:<name>`) is a model. Answers
carry their citations inline (`[n]`); the sources and the conversation id travel in
extension fields (`sources`, `conversation_id`) that OpenAI clients keep but ignore.
Each call is one turn over the messages it carries (clients resend the history), in a
new conversation unless the `conversation_id` extension names one."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from ... import domain, pipeline
from ...engine import Engine
from ...errors import InvalidRequest, NotFound
from ...output import citation_json
from ...requests import ROLES, chat_request
from ..deps import EngineDep, Tenant
from ..schemas import CompletionIn
from .chat import attachment_files, pieces

router = APIRouter(prefix="/v1", tags=["openai-compatible"])
KB_PREFIX = "kb:"


def models(engine: Engine, tenant: str) -> list[dict]:
    assistants = [{"id": a.id, "object": "model", "created": 0, "owned_by": tenant, "name": a.name}
                  for a in domain.list_all(engine.store, tenant, "assistant")]
    kbs = [{"id": KB_PREFIX + kb.name, "object": "model", "created": int(kb.created_at), "owned_by": tenant,
            "name": kb.name} for kb in engine.store.list_kbs(tenant)]
    return assistants + kbs


def model_target(engine: Engine, tenant: str, model: str) -> dict:
    """`assistant_id` or `kb_ids` for a model name (an assistant id, `kb:<name>`, or a
    bare kb name or id)."""
    if not model.startswith(KB_PREFIX):
        try:
            return {"assistant_id": domain.get(engine.store, tenant, "assistant", model).id}
        except NotFound:
            pass
    try:
        return {"kb_ids": [engine.store.get_kb(tenant, model.removeprefix(KB_PREFIX)).id]}
    except NotFound:
        raise NotFound(f"model {model!r} not found: GET /v1/models lists this tenant's assistants "
                       "and knowledge bases") from None


def _messages(items: list[dict]) -> list[dict]:
    out = []
    for i, m in enumerate(items):
        role, content = m.get("role"), m.get("content")
        if isinstance(content, list):  # content parts: keep the text ones
            content = "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
        if role not in ROLES or not isinstance(content, str):
            raise InvalidRequest(f"messages[{i}]: role must be one of {', '.join(ROLES)} with text content")
        if content.strip():
            out.append({"role": role, "content": content})
    if not out:
        raise InvalidRequest("messages: no text to answer")
    return out


@router.get("/models")
def list_models(tenant: Tenant, engine: EngineDep) -> dict:
    return {"object": "list", "data": models(engine, tenant)}


@router.get("/models/{model:path}")
def get_model(model: str, tenant: Tenant, engine: EngineDep) -> dict:
    found = [m for m in models(engine, tenant) if m["id"] == model]
    if not found:
        raise NotFound(f"model {model!r} not found")
    return found[0]


@router.post("/chat/completions")
def completions(body: CompletionIn, tenant: Tenant, engine: EngineDep):
    fields = {**model_target(engine, tenant, body.model), "messages": _messages(body.messages)}
    if body.conversation_id:
        fields["conversation_id"] = body.conversation_id
    files = attachment_files(engine, tenant, body.attachments)
    answer = pipeline.chat(engine, chat_request(engine.store, fields, files=files), tenant=tenant)
    base = {"id": f"chatcmpl-{uuid.uuid4().hex}", "created": int(time.time()), "model": body.model}
    usage = {"prompt_tokens": answer.usage.input_tokens, "completion_tokens": answer.usage.output_tokens,
             "total_tokens": answer.usage.total_tokens}
    extra = {"sources": [citation_json(c) for c in answer.citations], "conversation_id": answer.conversation_id}
    if not body.stream:
        return {**base, "object": "chat.completion", "usage": usage, **extra, "choices": [{
            "index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": answer.text}}]}

    def chunk(delta: dict, finish: str | None = None, **more) -> str:
        event = {**base, "object": "chat.completion.chunk",
                 "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **more}
        return f"data: {json.dumps(event, ensure_ascii=False)}\n\n"

    def events() -> Iterator[str]:
        yield chunk({"role": "assistant", "content": ""})
        for piece in pieces(answer.text):
            yield chunk({"content": piece})
        yield chunk({}, "stop", **extra)
        if (body.stream_options or {}).get("include_usage"):
            yield f"data: {json.dumps({**base, 'object': 'chat.completion.chunk', 'choices': [], 'usage': usage})}\n\n"
        yield "data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
