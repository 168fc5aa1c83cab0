"""Request bodies of the HTTP API (pydantic), so `/docs` shows them and bad input gets
a 422 before any work. Responses are plain dicts built by `groundwork.output` and the
`*_json` helpers below."""

from __future__ import annotations

from dataclasses import asdict
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..types import Document, KnowledgeBase

Mode = Literal["full", "rag", "auto"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class KbIn(Strict):
    name: str = Field(min_length=1, max_length=200)
    description: str = ""


class DocumentIn(Strict):
    """A document given as JSON: a URL to fetch, or pasted text."""

    url: str | None = Field(None, description="http(s) URL, fetched server-side")
    text: str | None = Field(None, description="pasted text")
    title: str | None = None
    mode: Literal["rag", "full", "auto"] | None = Field(
        None, description="how chats over the kb use it: rag (default), full or auto")


class SearchIn(Strict):
    query: str = Field(min_length=1)
    top_k: int | None = Field(None, ge=1, le=1000)
    mode: Literal["hybrid", "vector", "text"] = "hybrid"


class GraphSearchIn(Strict):
    query: str = Field(min_length=1)
    hops: int = Field(2, ge=1, le=2)


class AskIn(Strict):
    question: str = Field(min_length=1)
    top_k: int | None = Field(None, ge=1, le=1000)


class FileIn(Strict):
    document_id: str
    mode: Mode = "full"


class AssistantIn(Strict):
    name: str = Field(min_length=1)
    system_prompt: str | None = None
    model: str | None = None
    top_k: int | None = Field(None, ge=1, le=1000)
    kb_ids: list[str] = []
    files: list[FileIn | str] = []
    query_strategy: Literal["multi", "enhanced"] = "multi"
    fusion: Literal["rrf", "weighted"] = "rrf"
    escalation: bool = False
    refusal: str | None = None


class TemplateIn(Strict):
    name: str = Field(min_length=1)
    body: str = ""
    files: list[FileIn | str] = []


class RecordIn(Strict):
    name: str = Field(min_length=1)
    files: list[FileIn | str] = []


def partial(model: type[BaseModel]) -> type[BaseModel]:
    """The PATCH variant of a create model: every field optional, unknown ones refused."""
    fields = {name: (info.annotation | None, None) for name, info in model.model_fields.items()}
    from pydantic import create_model
    return create_model(f"{model.__name__}Patch", __base__=Strict, **fields)


class MessageIn(Strict):
    role: Literal["system", "developer", "user", "assistant"]
    content: str


class AttachmentRef(Strict):
    id: str
    access_token: str
    mode: Mode = "auto"


class ChatIn(Strict):
    """ARCHITECTURE §4. `message` or `messages`; attachments need their access tokens."""

    message: str | None = None
    messages: list[MessageIn] | None = None
    conversation_id: str | None = None
    assistant_id: str | None = None
    template_id: str | None = None
    record_id: str | None = None
    kb_ids: list[str] = []
    attachments: list[AttachmentRef] = []
    model: str | None = None
    stream: bool = False


class CompletionIn(BaseModel):
    """OpenAI's chat completion request; fields Groundwork does not use (temperature,
    max_tokens...) are accepted and ignored. Extensions: `conversation_id`,
    `attachments`."""

    model_config = ConfigDict(extra="allow")
    model: str
    messages: list[dict] = Field(min_length=1)
    stream: bool = False
    stream_options: dict | None = None
    conversation_id: str | None = None
    attachments: list[AttachmentRef] = []


def kb_json(kb: KnowledgeBase, documents: int | None = None) -> dict:
    data = asdict(kb)
    if documents is not None:
        data["documents"] = documents
    return data


def document_json(document: Document, progress: dict | None = None, job=None) -> dict:
    data = asdict(document)
    if progress is not None:
        data["progress"] = progress
    if job is not None:
        data["job"] = {"state": job.state, "attempts": job.attempts, "max_attempts": job.max_attempts,
                       "next_attempt_at": job.run_after if job.state == "queued" else None,
                       "last_error": job.last_error}
    return data
