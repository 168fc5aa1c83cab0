"""Parsing chat requests (the HTTP body shape, also used by `groundwork chat`)."""

from __future__ import annotations

from .domain import file_refs
from .errors import InvalidRequest
from .store import Store
from .types import ChatRequest, Message

ROLES = ("system", "developer", "user", "assistant")


def messages_from(body: dict) -> tuple[Message, ...]:
    """`message` (one user message) or `messages` ([{role, content}]), not both."""
    if ("message" in body) == ("messages" in body):
        raise InvalidRequest("give exactly one of \"message\" or \"messages\"")
    if "message" in body:
        if not isinstance(body["message"], str) or not body["message"].strip():
            raise InvalidRequest("\"message\" must be a non-empty string")
        return (Message("user", body["message"]),)
    items = body["messages"]
    if not isinstance(items, list) or not items:
        raise InvalidRequest("\"messages\" must be a non-empty list")
    parsed = []
    for i, m in enumerate(items):
        if not isinstance(m, dict) or m.get("role") not in ROLES or not isinstance(m.get("content"), str):
            raise InvalidRequest(f"messages[{i}] needs a role ({', '.join(ROLES)}) and string content")
        parsed.append(Message(m["role"], m["content"]))
    return tuple(parsed)


def chat_request(store: Store, body: dict, *, files=None) -> ChatRequest:
    """Build a ChatRequest from a JSON body. `files` overrides the body's attachments
    (the API passes only attachments whose access tokens were verified); the CLI, run by
    the data's owner, reads `files` ([ids] or [{document_id, mode}]) directly."""
    if not isinstance(body, dict):
        raise InvalidRequest("the request must be a JSON object")
    kb_ids = body.get("kb_ids") or []
    if not isinstance(kb_ids, list) or not all(isinstance(k, str) for k in kb_ids):
        raise InvalidRequest("\"kb_ids\" must be a list of knowledge base ids or names")
    return ChatRequest(
        messages=messages_from(body), assistant_id=body.get("assistant_id"),
        conversation_id=body.get("conversation_id"), template_id=body.get("template_id"),
        record_id=body.get("record_id"), kb_ids=tuple(kb_ids), model=body.get("model"),
        files=files if files is not None else file_refs(body.get("files"), default_mode="rag"))
