"""`POST /v1/chat` (ARCHITECTURE §4), with `"stream": true` for server-sent events."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence

from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from ... import access, jobs, pipeline
from ...domain import FileRef
from ...engine import Engine
from ...output import answer_json
from ...requests import chat_request
from ...types import Answer
from ..deps import EngineDep, Tenant
from ..schemas import AttachmentRef, ChatIn

router = APIRouter(prefix="/v1", tags=["chat"])
ATTACHMENT_WAIT_S = 120.0


def attachment_files(engine: Engine, tenant: str, refs: Sequence[AttachmentRef]) -> tuple[FileRef, ...]:
    """Conversation files from attachments: every token is checked first (nothing is
    written for a request with one wrong token), then files still being ingested are
    waited for."""
    files = tuple(FileRef(access.verify_attachment(engine.store, tenant, r.id, r.access_token), r.mode)
                  for r in refs)
    jobs.wait_processed(engine.store, tenant, [f.document_id for f in files], timeout=ATTACHMENT_WAIT_S)
    return files


def chat_json(answer: Answer) -> dict:
    data = answer_json(answer)
    return {"message": data.pop("answer"), "conversation_id": answer.conversation_id, **data}


def pieces(text: str) -> list[str]:
    """Word-sized deltas for streaming (whitespace kept, so they join back exactly)."""
    return re.findall(r"\S+\s*|\s+", text)


def sse(event: str, data: dict) -> str:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


@router.post("/chat")
def chat(body: ChatIn, tenant: Tenant, engine: EngineDep):
    """One grounded turn. Attachments need `{id, access_token}`; the conversation is
    created (or continued with `conversation_id`) and persisted. With `stream`, events
    `delta` (`{content}`) then one `done` carrying the whole response."""
    files = attachment_files(engine, tenant, body.attachments)
    fields = body.model_dump(exclude_none=True, exclude={"attachments", "stream"})
    answer = pipeline.chat(engine, chat_request(engine.store, fields, files=files), tenant=tenant)
    if not body.stream:
        return chat_json(answer)

    def events() -> Iterator[str]:
        for piece in pieces(answer.text):
            yield sse("delta", {"content": piece})
        yield sse("done", chat_json(answer))

    return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
