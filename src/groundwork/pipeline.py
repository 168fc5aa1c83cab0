"""The recipe: ingest (store -> extract -> chunk -> embed -> index) and answer
(retrieve -> assemble -> generate -> cite). The API, CLI and web UI call these."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from . import retrieve
from .chunk import chunk_document
from .embed import embed_batched
from .engine import Engine
from .errors import GroundworkError, LimitExceeded
from .graph import graph_context, index_graph
from .kbmap import index_summary, kb_map_context
from .storage import sha256
from .store.sqlite import new_id
from .types import (DEFAULT_TENANT, Answer, ChatRequest, Chunk, Context, ContextItem, Document, Extracted, Hit,
                    IngestReport, Message, Scope, SearchMode)

log = logging.getLogger(__name__)
StageCallback = Callable[[str, dict], None]


def _noop(stage: str, progress: dict) -> None:
    pass


# -- ingest ---------------------------------------------------------------------------
@dataclass
class Source:
    """One original to ingest, with where it goes."""

    data: bytes
    filename: str
    tenant: str = DEFAULT_TENANT
    kb_id: str | None = None
    record_id: str | None = None
    source_key: str | None = None
    source_url: str | None = None
    content_type: str | None = None
    title: str | None = None
    importance: float = 1.0
    document_id: str | None = None  # replace this document (PUT)
    mode: str | None = None  # how the kb's chats use it (rag | full | auto); None keeps it / rag


@dataclass
class _Prepared:
    source: Source
    report: IngestReport
    previous: Document | None = None
    content_type: str = ""
    digest: str = ""
    extracted: Extracted | None = None
    chunks: list[Chunk] = field(default_factory=list)


def ingest_bytes(engine: Engine, data: bytes, filename: str, *, on_stage: StageCallback = _noop,
                 **fields) -> IngestReport:
    """Ingest one original; raises a GroundworkError if it cannot be ingested."""
    report = ingest_many(engine, [Source(data, filename, **fields)], on_stage=on_stage)[0]
    if report.status == "failed":
        raise report.exception
    return report


def ingest_many(engine: Engine, sources: Sequence[Source], *, on_stage: StageCallback = _noop,
                on_embedded: Callable[[int], None] | None = None) -> list[IngestReport]:
    """Ingest several originals, embedding all their new chunks in shared batches.

    Idempotent: the same bytes in the same kb (and record) do no work. A changed file
    under the same source key keeps its id, bumps its version, and only its changed
    chunks are embedded. Nothing of a document is written until it has been extracted,
    chunked and embedded, so a failure leaves nothing half-stored; one bad file fails
    alone and the rest of the batch goes on."""
    prepared = [_prepare(engine, source, on_stage) for source in sources]
    live = [p for p in prepared if p.report.status == "pending"]
    if not live:
        return [p.report for p in prepared]
    embedder, store = engine.embedder, engine.store
    wanted = list(dict.fromkeys(c.content_hash for p in live for c in p.chunks))
    missing = store.missing_embeddings(embedder.model_id, wanted)
    texts = {c.content_hash: c.embed_text for p in live for c in p.chunks}
    on_stage("embedding", {"to_embed": len(missing), "embedded": 0})
    if missing:
        try:
            vectors = embed_batched(embedder, [texts[h] for h in missing],
                                    engine.settings.embed_batch_size, on_embedded)
        except GroundworkError as exc:
            for p in live:
                _fail(p.report, exc)
            return [p.report for p in prepared]
        store.put_embeddings(embedder.model_id, missing, vectors)
    fresh = set(missing)
    for p in live:
        on_stage("indexing", {"chunks": len(p.chunks)})
        try:
            _write(engine, p)
        except GroundworkError as exc:
            _fail(p.report, exc)
            continue
        p.report.embedded = sum(1 for h in {c.content_hash for c in p.chunks} if h in fresh)
    return [p.report for p in prepared]


def _fail(report: IngestReport, exc: GroundworkError) -> None:
    report.status, report.error, report.exception = "failed", exc.message, exc


def _prepare(engine: Engine, source: Source, on_stage: StageCallback) -> _Prepared:
    from .errors import ExtractError
    from .extract import ensure_matches, extract

    settings, store, s = engine.settings, engine.store, source
    p = _Prepared(source, IngestReport(filename=s.filename, status="pending"))
    try:
        if len(s.data) > settings.max_upload_bytes:
            raise LimitExceeded(f"{s.filename}: {len(s.data):,} bytes exceeds the limit of "
                                f"{settings.max_upload_bytes:,} bytes")
        p.digest = sha256(s.data)
        same = store.find_document(s.tenant, s.kb_id, content_hash=p.digest)
        if (same is not None and same.status == "ready" and same.record_id == s.record_id
                and s.document_id in (None, same.id)):
            p.report.document_id, p.report.status = same.id, "unchanged"
            change_mode(store, same, s.mode)
            p.report.chunks = store.chunk_counts(s.tenant, [same.id]).get(same.id, 0)
            return p
        key = s.source_key or s.source_url or s.filename
        p.previous = (store.get_document(s.tenant, s.document_id) if s.document_id
                      else store.find_document(s.tenant, s.kb_id, source_key=key))
        if s.mode not in (None, "rag", "full", "auto"):
            from .errors import InvalidRequest
            raise InvalidRequest(f"mode must be rag, full or auto, got {s.mode!r}")
        p.content_type = ensure_matches(s.filename, s.content_type, s.data)
        on_stage("extracting", {})
        p.extracted = extract(s.data, s.filename, p.content_type)
        if not p.extracted.text.strip():
            raise ExtractError(f"{s.filename}: no text could be extracted")
        on_stage("chunking", {})
        embedder = engine.embedder
        unit, size, overlap = settings.effective_chunking(embedder.max_tokens)
        doc_id = p.previous.id if p.previous else new_id("doc")
        p.chunks = chunk_document(p.extracted, doc_id, count_tokens=embedder.count_tokens,
                                  max_tokens=embedder.max_tokens, unit=unit, size=size, overlap=overlap)
        p.report.document_id, p.report.chunks = doc_id, len(p.chunks)
    except GroundworkError as exc:
        _fail(p.report, exc)
    return p


def _write(engine: Engine, p: _Prepared) -> None:
    s, store, extracted = p.source, engine.store, p.extracted
    assert extracted is not None and p.report.document_id
    doc_id, previous, now = p.report.document_id, p.previous, time.time()
    document = Document(
        id=doc_id, tenant=s.tenant, kb_id=s.kb_id, filename=s.filename,
        title=s.title or extracted.title or Path(s.filename).stem, content_type=p.content_type,
        size=len(s.data), content_hash=p.digest, source_url=s.source_url,
        version=next_version(previous), status="indexing",
        importance=s.importance, record_id=s.record_id,
        mode=s.mode or (previous.mode if previous else "rag"),
        created_at=previous.created_at if previous else now, updated_at=now)
    engine.storage.put(s.tenant, doc_id, s.data)
    store.put_document(document, s.source_key or s.source_url or s.filename)
    store.put_text(s.tenant, doc_id, extracted.text)
    store.replace_chunks(s.tenant, doc_id, p.chunks)
    # graph facts and the kb map entry, from the chunk texts (no embedding); both replace the old ones
    index_graph(store, document, p.chunks)
    index_summary(store, document, p.chunks)
    # Merged into what the stages recorded (a job's per-stage progress stays visible).
    progress = {**store.get_progress(s.tenant, doc_id), "chunks": len(p.chunks),
                "pages": extracted.page_count, "ocr_pages": list(extracted.ocr_pages)}
    store.set_status(s.tenant, doc_id, "ready", progress=progress)
    p.report.status = "updated" if previous else "ready"


def next_version(previous: Document | None) -> int:
    """A ready previous version is superseded (+1); a queued or failed one (a job's
    placeholder) already carries the number its content will have."""
    if previous is None:
        return 1
    return previous.version + 1 if previous.status == "ready" else max(previous.version, 1)


def change_mode(store, document: Document, mode: str | None) -> Document:
    """Same bytes submitted with another mode: only the mode changes (no extraction,
    no embedding)."""
    if not mode or mode == document.mode:
        return document
    changed = replace(document, mode=mode)
    store.put_document(changed, store.get_source_key(document.tenant, document.id))
    return changed


def ingest_paths(engine: Engine, paths: Sequence[Path], *, batch: int = 16,
                 on_file: Callable[[IngestReport], None] | None = None,
                 on_embedded: Callable[[int], None] | None = None, **fields) -> list[IngestReport]:
    """Ingest files in groups of `batch` (shared embedding batches); unreadable or
    unsupported files become failed reports and the rest goes on."""
    reports: list[IngestReport] = []
    for start in range(0, len(paths), batch):
        group: list[Source] = []
        for path in map(Path, paths[start:start + batch]):
            try:
                group.append(Source(path.read_bytes(), path.name, source_key=str(path.resolve()), **fields))
            except OSError as exc:
                report = IngestReport(filename=path.name, status="failed", error=f"{path}: {exc.strerror}")
                reports.append(report)
                if on_file:
                    on_file(report)
        for report in ingest_many(engine, group, on_embedded=on_embedded):
            reports.append(report)
            if on_file:
                on_file(report)
    return reports


def fetch_url(url: str, *, max_bytes: int, timeout: float = 20.0) -> tuple[bytes, str, str | None]:
    """(body, filename, content type) of a URL, fetched server-side with a size cap."""
    import httpx

    from .errors import ExtractError

    try:
        with httpx.Client(follow_redirects=True, timeout=timeout,
                          headers={"User-Agent": "groundwork/0.1"}) as client:
            with client.stream("GET", url) as response:
                response.raise_for_status()
                body = bytearray()
                for part in response.iter_bytes():
                    body.extend(part)
                    if len(body) > max_bytes:
                        raise LimitExceeded(f"{url}: larger than {max_bytes:,} bytes")
                content_type = response.headers.get("content-type", "").split(";")[0].strip() or None
    except httpx.HTTPStatusError as exc:
        raise ExtractError(f"{url}: server answered {exc.response.status_code}") from None
    except httpx.HTTPError as exc:
        raise ExtractError(f"{url}: could not fetch ({exc.__class__.__name__}: {exc})") from None
    name = url.split("?")[0].rstrip("/").rsplit("/", 1)[-1] or "index"
    if "." not in name and content_type in ("text/html", None):
        name += ".html"
    return bytes(body), name, content_type


def ingest_url(engine: Engine, url: str, **fields) -> IngestReport:
    """Fetch a page (or file) and ingest it with its URL as source and citation link."""
    try:
        data, filename, content_type = fetch_url(url, max_bytes=engine.settings.max_upload_bytes)
    except GroundworkError as exc:
        return IngestReport(filename=url, status="failed", error=exc.message, exception=exc)
    return ingest_many(engine, [Source(data, filename, source_url=url, content_type=content_type,
                                       **fields)])[0]


def iter_files(paths: Sequence[Path]) -> list[Path]:
    """Files named directly, and every file under named directories (sorted, hidden
    files skipped)."""
    found: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            found.extend(p for p in sorted(path.rglob("*"))
                         if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts))
        else:
            found.append(path)
    return found


def delete_document(engine: Engine, tenant: str, document_id: str) -> None:
    """Forget a document everywhere: index rows, vectors, text cache and original."""
    engine.store.delete_document(tenant, document_id)
    engine.storage.delete(tenant, document_id)


# -- answer ---------------------------------------------------------------------------
def search(engine: Engine, query: str, *, scope: Scope, top_k: int | None = None,
           mode: SearchMode = "hybrid", fusion: retrieve.Fusion = "rrf") -> list[Hit]:
    return retrieve.search(engine.store, engine.embedder, scope, query,
                           top_k=top_k or engine.settings.top_k, mode=mode, fusion=fusion)


def ask(engine: Engine, question: str, *, scope: Scope, top_k: int | None = None,
        mode: SearchMode = "hybrid", history: Sequence[Message] = (),
        system_prompt: str | None = None) -> Answer:
    """Answer one question from one scope (a kb): retrieve, number, generate, cite."""
    hits = search(engine, question, scope=scope, top_k=top_k, mode=mode)
    included = tuple(ContextItem(document_id=h.document.id, filename=h.document.filename, kind="chunk",
                                 chars=len(h.chunk.text), group="kb", reason="retrieved",
                                 chunk_index=h.chunk.index, score=h.score) for h in hits)
    context = Context(hits=tuple(hits), included=included,
                      budget_chars=engine.settings.context_max_chars(engine.settings.llm_model))
    conversation = [*history, Message("user", question)]
    return generate_answer(engine, question, context, conversation, system_prompt=system_prompt)


def generate_answer(engine: Engine, question: str, context: Context,
                    conversation: Sequence[Message], *, system_prompt: str | None = None,
                    tools: list[dict] | None = None, model: str | None = None) -> Answer:
    """Generate from an assembled context (LLM if configured, else extractive) and
    resolve the [n] markers into citations."""
    from .cite import resolve_citations

    llm = engine.llm_for(model)
    citable = list(context.hits)
    tenant = next((h.document.tenant for h in (*context.hits, *context.full_hits)), DEFAULT_TENANT)
    kb_names = {kb.id: kb.name for kb in engine.store.list_kbs(tenant)}
    if llm is None:
        from .generate.extractive import extractive_answer
        citable += context.full_hits  # full texts are quoted through their chunks
        generation = extractive_answer(question, citable, engine.embedder)
    else:
        from .prompt import build_messages
        counts = engine.store.chunk_counts(tenant, list({h.document.id for h in context.hits}))
        messages = build_messages(context, conversation, system_prompt=system_prompt,
                                  chunk_counts=counts, kb_names=kb_names)
        generation = llm.complete(messages, tools=tools)
    text, citations, dropped, referenced = resolve_citations(generation.text, citable, kb_names=kb_names)
    if dropped:
        log.warning("dropped citation markers with no matching source: %s", dropped)
    used = list(referenced) + [doc.filename for doc, _ in context.full_documents]
    return Answer(text=text, citations=citations, documents_referenced=tuple(dict.fromkeys(used)),
                  usage=generation.usage, abstained=generation.abstained,
                  escalate=generation.escalate, dropped_markers=dropped, context=context)


def chat(engine: Engine, request: ChatRequest, *, tenant: str = DEFAULT_TENANT) -> Answer:
    """One grounded chat turn over assistants, templates, records, conversations, kbs
    and attached files (ARCHITECTURE §3), persisted to the conversation."""
    from . import domain
    from .context import assemble, build_queries, retrieve_groups
    from .errors import InvalidRequest
    from .sources import load_owner, resolve

    store, settings = engine.store, engine.settings
    if not request.messages:
        raise InvalidRequest("a chat request needs a message or messages")
    conversation = load_owner(store, tenant, "conversation", request.conversation_id)
    assistant_id = request.assistant_id or (conversation.assistant_id if conversation else None)
    record_id = request.record_id or (conversation.record_id if conversation else None)
    if conversation and request.record_id and conversation.record_id not in (None, request.record_id):
        raise InvalidRequest("this conversation belongs to another record")
    assistant = load_owner(store, tenant, "assistant", assistant_id)
    template = load_owner(store, tenant, "template", request.template_id)
    record = load_owner(store, tenant, "record", record_id)
    if conversation is None:
        conversation = domain.create(store, tenant, "conversation", assistant_id=assistant_id,
                                     record_id=record_id)
    new_files = domain.file_refs(request.files, default_mode="rag")
    for ref in new_files:  # a file named now must exist in this tenant (NotFound otherwise)
        store.get_document(tenant, ref.document_id)
    files = (*conversation.files, *new_files)
    if len(files) != len(conversation.files):
        conversation = domain.update(store, tenant, "conversation", conversation.id,
                                     files=[{"document_id": f.document_id, "mode": f.mode} for f in files])
    messages = [*conversation.messages, *request.messages]

    sources = resolve(store, tenant, assistant=assistant, template=template, record=record,
                      conversation_files=conversation.files, kb_ids=request.kb_ids)
    queries = build_queries(messages, assistant.query_strategy if assistant else "multi")
    top_k = (assistant.top_k if assistant and assistant.top_k else settings.top_k)
    per_group, over_limit = retrieve_groups(store, engine.embedder, sources, queries, top_k=top_k,
                                            chunk_limit=settings.rag_chunk_limit,
                                            fusion=assistant.fusion if assistant else "rrf")
    model = request.model or (assistant.model if assistant else None) or settings.llm_model
    context = assemble(store, tenant, sources, per_group, budget=settings.context_max_chars(model),
                       over_limit=over_limit, kb_map=kb_map_context(store, tenant, sources.kbs, queries),
                       graph=graph_context(store, tenant, sources.kbs, queries))
    question = next((m.content for m in reversed(messages) if m.role == "user"), messages[-1].content)
    tools = None
    if assistant and assistant.escalation:
        from .generate import ESCALATE_TOOL
        tools = [ESCALATE_TOOL]
    answer = generate_answer(engine, question, context, messages,
                             system_prompt=assistant.system_prompt if assistant else None,
                             tools=tools, model=model)
    domain.append_messages(store, tenant, conversation, [*request.messages, Message("assistant", answer.text)])
    return replace(answer, conversation_id=conversation.id)


# -- jobs -----------------------------------------------------------------------------
def process_document(engine: Engine, tenant: str, document_id: str, *, on_stage: StageCallback = _noop,
                     title: str | None = None) -> IngestReport:
    """Ingest a document that `jobs.submit` stored and queued (its original is in
    `engine.storage`, its row says `queued`). Safe to run again after a crash at any
    point: embeddings are saved batch by batch, so a rerun embeds only what is still
    missing, and chunks are replaced whole, never duplicated. Raises the GroundworkError
    of a failed stage; `title` is the uploader's, else the extracted one is used."""
    store, embedder = engine.store, engine.embedder
    document = store.get_document(tenant, document_id)
    source = Source(engine.storage.get(tenant, document_id), document.filename, tenant=tenant,
                    kb_id=document.kb_id, record_id=document.record_id, source_url=document.source_url,
                    content_type=document.content_type, title=title, importance=document.importance,
                    mode=document.mode,
                    document_id=document_id)
    p = _prepare(engine, source, on_stage)
    if p.report.status == "failed":
        raise p.report.exception
    if p.report.status == "unchanged":  # a previous run finished; only its job record did not
        return p.report
    hashes = list(dict.fromkeys(c.content_hash for c in p.chunks))
    missing = store.missing_embeddings(embedder.model_id, hashes)
    texts = {c.content_hash: c.embed_text for c in p.chunks}
    counts = {"chunks": len(hashes), "to_embed": len(missing), "reused": len(hashes) - len(missing)}
    on_stage("embedding", {**counts, "embedded": 0})
    step = engine.settings.embed_batch_size
    for start in range(0, len(missing), step):
        part = missing[start:start + step]
        vectors = embed_batched(embedder, [texts[h] for h in part], step)
        store.put_embeddings(embedder.model_id, part, vectors)
        on_stage("embedding", {**counts, "embedded": start + len(part)})
    on_stage("indexing", {"chunks": len(p.chunks)})
    _write(engine, p)
    p.report.embedded = len(missing)
    return p.report
