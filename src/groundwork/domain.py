"""Assistants, templates, records and conversations, and the files attached to them.

Each is a frozen dataclass stored as a JSON object per tenant (`Store.put_object`).
Files attach with a mode: `full` (whole text in the prompt), `rag` (retrieved chunks
only) or `auto` (whole if it fits its share of the budget, else chunks). Record files
are always `rag`. A plain list of document ids (no modes) means `full`: the legacy
behaviour of seed 000.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Literal

from .errors import InvalidRequest
from .store import Store
from .store.sqlite import new_id
from .types import Message, Mode

OwnerKind = Literal["assistant", "template", "record", "conversation"]
QueryStrategy = Literal["multi", "enhanced"]
MODES = ("full", "rag", "auto")


@dataclass(frozen=True)
class FileRef:
    document_id: str
    mode: Mode = "full"


@dataclass(frozen=True)
class Assistant:
    id: str
    name: str
    system_prompt: str | None = None  # None = the default grounded prompt
    model: str | None = None
    top_k: int | None = None  # None = GROUNDWORK_TOP_K
    kb_ids: tuple[str, ...] = ()
    files: tuple[FileRef, ...] = ()
    query_strategy: QueryStrategy = "multi"
    fusion: Literal["rrf", "weighted"] = "rrf"
    escalation: bool = False  # offer the escalate_to_human tool to LLMs
    refusal: str | None = None  # None = "I don't have that information"


@dataclass(frozen=True)
class Template:
    id: str
    name: str
    body: str = ""
    files: tuple[FileRef, ...] = ()


@dataclass(frozen=True)
class Record:
    """A patient, customer or case. Its files are always retrieved (`rag`)."""

    id: str
    name: str
    files: tuple[FileRef, ...] = ()


@dataclass(frozen=True)
class Conversation:
    id: str
    assistant_id: str | None = None
    record_id: str | None = None
    messages: tuple[Message, ...] = ()
    files: tuple[FileRef, ...] = ()
    created_at: float = field(default_factory=time.time)


KINDS: dict[str, type] = {"assistant": Assistant, "template": Template, "record": Record,
                          "conversation": Conversation}


def file_refs(value: Any, *, default_mode: Mode = "full", force: Mode | None = None) -> tuple[FileRef, ...]:
    """Parse attached files: a list of ids (legacy: each `full`), or of
    `{"document_id"|"id", "mode"}` objects, or FileRefs."""
    if value is None:
        return ()
    refs = []
    for item in value:
        if isinstance(item, FileRef):
            ref = item
        elif isinstance(item, str):
            ref = FileRef(item, default_mode)
        elif isinstance(item, dict):
            doc = item.get("document_id") or item.get("id")
            mode = item.get("mode", default_mode)
            if not doc:
                raise InvalidRequest(f"attached file without a document id: {item!r}")
            if mode not in MODES:
                raise InvalidRequest(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
            ref = FileRef(doc, mode)
        else:
            raise InvalidRequest(f"cannot read attached file {item!r}")
        refs.append(replace(ref, mode=force) if force else ref)
    return tuple(refs)


def _to_data(obj) -> dict:
    return asdict(obj)


def to_json(obj) -> dict:
    """The JSON shape of a domain object (as stored, and as the API and CLI show it)."""
    return _to_data(obj)


def _from_data(kind: str, data: dict):
    cls = KINDS[kind]
    names = {f.name for f in fields(cls)}
    values = {k: v for k, v in data.items() if k in names}
    if "files" in values:
        values["files"] = file_refs(values["files"], force="rag" if kind == "record" else None)
    if "kb_ids" in values:
        values["kb_ids"] = tuple(values["kb_ids"])
    if "messages" in values:
        values["messages"] = tuple(Message(m["role"], m["content"]) for m in values["messages"])
    return cls(**values)


def create(store: Store, tenant: str, kind: str, **values):
    """Create an assistant/template/record/conversation; `files` may be a legacy id list."""
    if kind not in KINDS:
        raise InvalidRequest(f"unknown kind {kind!r}")
    values.setdefault("id", new_id(kind[:4]))
    obj = _from_data(kind, values)
    _validate(obj)
    store.put_object(tenant, kind, obj.id, _to_data(obj))
    return obj


def get(store: Store, tenant: str, kind: str, object_id: str):
    return _from_data(kind, store.get_object(tenant, kind, object_id))


def list_all(store: Store, tenant: str, kind: str) -> list:
    return [_from_data(kind, data) for data in store.list_objects(tenant, kind)]


def update(store: Store, tenant: str, kind: str, object_id: str, **changes):
    """Change some fields of an existing object (PATCH semantics)."""
    current = store.get_object(tenant, kind, object_id)
    current.update({k: v for k, v in changes.items() if k != "id"})
    obj = _from_data(kind, current)
    _validate(obj)
    store.put_object(tenant, kind, obj.id, _to_data(obj))
    return obj


def delete(store: Store, tenant: str, kind: str, object_id: str) -> None:
    store.delete_object(tenant, kind, object_id)


def append_messages(store: Store, tenant: str, conversation: Conversation,
                    messages: list[Message]) -> Conversation:
    updated = replace(conversation, messages=(*conversation.messages, *messages))
    store.put_object(tenant, "conversation", updated.id, _to_data(updated))
    return updated


def _validate(obj) -> None:
    if isinstance(obj, Assistant):
        if obj.top_k is not None and not 1 <= obj.top_k <= 1000:
            raise InvalidRequest(f"top_k must be between 1 and 1000, got {obj.top_k}")
        if obj.query_strategy not in ("multi", "enhanced"):
            raise InvalidRequest(f"query_strategy must be multi or enhanced, got {obj.query_strategy!r}")
        if obj.fusion not in ("rrf", "weighted"):
            raise InvalidRequest(f"fusion must be rrf or weighted, got {obj.fusion!r}")
