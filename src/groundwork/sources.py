"""Who is attached to what, in which mode: turn a chat request into source groups.

Groups (each gets its own chunk limit): `assistant/template` files, `record` files,
`conversation` files, and one `kb:<name>` group per knowledge base. Owner priority for
full texts: template (0), assistant (1), conversation (2)."""

from __future__ import annotations

from dataclasses import dataclass

from . import domain
from .domain import Assistant, FileRef, Record, Template
from .errors import NotFound, PermissionDenied
from .store import Store
from .types import Document, KnowledgeBase, Mode, Scope

PRIORITY = {"template": 0, "assistant": 1, "conversation": 2, "kb": 3, "record": 4}


@dataclass(frozen=True)
class SourceFile:
    document: Document
    mode: Mode
    owner: str  # template | assistant | conversation | record
    group: str

    @property
    def priority(self) -> int:
        return PRIORITY[self.owner]


@dataclass(frozen=True)
class SourceGroup:
    name: str
    scope: Scope
    kb: KnowledgeBase | None = None


@dataclass(frozen=True)
class Sources:
    files: tuple[SourceFile, ...]
    groups: tuple[SourceGroup, ...]
    kbs: tuple[KnowledgeBase, ...]
    missing: tuple[tuple[str, str], ...] = ()  # (document id, group) attached but deleted


def resolve(store: Store, tenant: str, *, assistant: Assistant | None = None,
            template: Template | None = None, record: Record | None = None,
            conversation_files: tuple[FileRef, ...] = (), kb_ids: tuple[str, ...] = ()) -> Sources:
    """Look every attached document and kb up inside `tenant` (NotFound otherwise), and
    build the scoped groups retrieval will search."""
    files: list[SourceFile] = []
    seen: set[str] = set()

    missing: list[tuple[str, str]] = []

    def add(refs, owner: str, group: str, force: Mode | None = None) -> None:
        for ref in refs:
            if ref.document_id in seen:
                continue
            seen.add(ref.document_id)
            try:
                document = store.get_document(tenant, ref.document_id)
            except NotFound:
                # Deleted since it was attached: the turn goes on without it, and the
                # manifest says so.
                missing.append((ref.document_id, group))
                continue
            files.append(SourceFile(document, force or ref.mode, owner, group))

    if template:
        add(template.files, "template", "assistant/template")
    if assistant:
        add(assistant.files, "assistant", "assistant/template")
    add(conversation_files, "conversation", "conversation")
    if record:
        add(record.files, "record", "record", force="rag")

    granted = set(assistant.kb_ids) if assistant else None
    wanted = list(dict.fromkeys([*(assistant.kb_ids if assistant else ()), *kb_ids]))
    kbs = []
    for kb_id in wanted:
        kb = store.get_kb(tenant, kb_id)
        if granted is not None and kb.id not in granted and kb.name not in granted:
            raise PermissionDenied(f"assistant {assistant.name!r} has no access to knowledge base {kb.name!r}")
        if kb not in kbs:
            kbs.append(kb)
            # kb documents ingested with --mode full|auto are whole-text candidates too
            for document in store.list_documents(tenant, kb.id, modes=("full", "auto")):
                if document.status == "ready" and document.id not in seen:
                    seen.add(document.id)
                    files.append(SourceFile(document, document.mode, "kb", f"kb:{kb.name}"))

    groups = []
    for name in ("assistant/template", "conversation", "record"):
        ids = tuple(f.document.id for f in files if f.group == name)
        if ids:
            scope = Scope(tenant=tenant, document_ids=ids,
                          record_ids=(record.id,) if name == "record" and record else None)
            groups.append(SourceGroup(name, scope))
    for kb in kbs:
        groups.append(SourceGroup(f"kb:{kb.name}", Scope(tenant=tenant, kb_ids=(kb.id,)), kb))
    return Sources(tuple(files), tuple(groups), tuple(kbs), tuple(missing))


def load_owner(store: Store, tenant: str, kind: str, object_id: str | None):
    return domain.get(store, tenant, kind, object_id) if object_id else None
