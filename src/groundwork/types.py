"""Plain typed values that cross every stage boundary. Frozen where possible: stages
return new objects instead of mutating their inputs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

BlockKind = Literal["heading", "paragraph", "table", "list", "code"]
Mode = Literal["full", "rag", "auto"]
SearchMode = Literal["hybrid", "vector", "text"]
DEFAULT_TENANT = "default"


@dataclass(frozen=True)
class Block:
    """One structural unit of an extracted document."""

    kind: BlockKind
    text: str
    page: int | None = None
    level: int = 0  # heading level (1 = top); 0 for non-headings


@dataclass(frozen=True)
class Extracted:
    """What an extractor returns: the text of one file with its structure kept."""

    title: str
    blocks: tuple[Block, ...]
    content_type: str
    page_count: int | None = None
    ocr_pages: tuple[int, ...] = ()  # pages whose text came from OCR

    @property
    def text(self) -> str:
        """The full text; chunk character offsets point into this string."""
        return BLOCK_SEPARATOR.join(b.text for b in self.blocks)


BLOCK_SEPARATOR = "\n\n"


@dataclass(frozen=True)
class KnowledgeBase:
    id: str
    tenant: str
    name: str
    description: str = ""
    created_at: float = 0.0


@dataclass(frozen=True)
class Document:
    """One stored original (file, URL snapshot or pasted text) and its state."""

    id: str
    tenant: str
    kb_id: str | None
    filename: str
    title: str
    content_type: str
    size: int
    content_hash: str
    source_url: str | None = None
    version: int = 1
    status: str = "ready"
    importance: float = 1.0
    record_id: str | None = None
    error: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    mode: str = "rag"  # how its kb's chats use it: rag | full | auto (`ingest --mode`)


@dataclass(frozen=True)
class Chunk:
    """A retrievable span of a document. `embed_text` (heading path + text) is what the
    embedder sees and what `content_hash` is computed over."""

    document_id: str
    index: int
    text: str
    heading_path: tuple[str, ...] = ()
    pages: tuple[int, ...] = ()
    char_start: int = 0
    char_end: int = 0
    token_count: int = 0
    content_hash: str = ""

    @property
    def embed_text(self) -> str:
        if not self.heading_path:
            return self.text
        return " > ".join(self.heading_path) + "\n" + self.text

    @property
    def page(self) -> int | None:
        return self.pages[0] if self.pages else None


@dataclass(frozen=True)
class Scope:
    """What a search may see. Applied inside the store query, never afterwards.
    `None` means "no restriction on this axis"; an empty tuple means "nothing"."""

    tenant: str = DEFAULT_TENANT
    kb_ids: tuple[str, ...] | None = None
    document_ids: tuple[str, ...] | None = None
    record_ids: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Hit:
    """A chunk found by a search, with the document it belongs to."""

    chunk: Chunk
    document: Document
    score: float
    vector_score: float | None = None
    text_score: float | None = None
    group: str = "kb"

    @property
    def key(self) -> tuple[str, int]:
        return (self.chunk.document_id, self.chunk.index)


@dataclass(frozen=True)
class Message:
    role: Literal["system", "developer", "user", "assistant"]
    content: str


@dataclass(frozen=True)
class ChatRequest:
    """One chat turn: the new message(s) and everything that scopes them. `files` are
    conversation attachments the caller is already allowed to use (the API checks
    access tokens before building this)."""

    messages: tuple[Message, ...]
    assistant_id: str | None = None
    conversation_id: str | None = None
    template_id: str | None = None
    record_id: str | None = None
    kb_ids: tuple[str, ...] = ()
    files: tuple = ()  # domain.FileRef
    model: str | None = None


@dataclass(frozen=True)
class ContextItem:
    """One entry of the context manifest: something included in, or dropped from, the
    prompt, and why."""

    document_id: str
    filename: str
    kind: Literal["full", "chunk"]
    chars: int
    group: str
    reason: str
    chunk_index: int | None = None
    score: float | None = None


@dataclass(frozen=True)
class Context:
    """The assembled, numbered material handed to the generator."""

    hits: tuple[Hit, ...]  # numbered [1..n] in this order
    full_documents: tuple[tuple[Document, str], ...] = ()
    # retrieved chunks of documents that are in the prompt whole: not rendered again,
    # but citable by the extractive answerer (numbered after `hits`)
    full_hits: tuple[Hit, ...] = ()
    files: tuple[str, ...] = ()  # file names of every attached source, for the file list
    kb_map: str = ""
    graph: str = ""
    included: tuple[ContextItem, ...] = ()
    dropped: tuple[ContextItem, ...] = ()
    budget_chars: int = 0


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class Generation:
    """Raw output of a generator, before citations are resolved."""

    text: str
    usage: Usage = Usage()
    abstained: bool = False
    escalate: bool = False


@dataclass(frozen=True)
class Citation:
    number: int
    document_id: str
    filename: str
    chunk_index: int
    page: int | None
    score: float
    text: str
    source: str = ""
    url: str | None = None
    verified: bool = True


@dataclass(frozen=True)
class Answer:
    text: str
    citations: tuple[Citation, ...]
    documents_referenced: tuple[str, ...]
    usage: Usage
    abstained: bool = False
    escalate: bool = False
    dropped_markers: tuple[int, ...] = ()
    context: Context | None = None
    conversation_id: str | None = None


@dataclass
class IngestReport:
    """What one ingest call did; mutable because it is filled in as work progresses."""

    document_id: str | None = None
    filename: str = ""
    status: str = "ready"  # pending | ready | updated | unchanged | failed
    chunks: int = 0
    embedded: int = 0  # chunks that needed a new embedding
    error: str | None = None
    warnings: list[str] = field(default_factory=list)
    exception: Exception | None = field(default=None, repr=False, compare=False)
