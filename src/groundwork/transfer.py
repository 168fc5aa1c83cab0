"""Moving data between stores without re-embedding (`groundwork copy`), e.g. from the
embedded SQLite store to PostgreSQL.

Copied under the same ids: knowledge bases; documents (row, source key, status,
progress), their extracted texts, chunks, graph facts and kb-map summaries; the vectors
of every embedding model the source holds (`Store.get_embeddings`: the embedder is never
called); domain objects (`domain.KINDS`, attachments, and the tenant's API keys); and
the originals, from the source engine's `storage` to the target's. Vectors are written
before the chunks that use them, so a copied document is searchable as soon as its
chunks land. The source is only read; running the copy again finishes or refreshes an
earlier one (rows are upserted, chunks replaced whole, only missing vectors written).

`--kb` narrows the copy to those knowledge bases and their documents; domain objects
belong to the tenant, not to a kb, so they are copied only by a whole-tenant copy.
Ingestion jobs are not copied: copy once the source's queue is drained (a document
still queued or in progress is copied as it is, and reported in `unfinished`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .access import API_KEY, ATTACHMENT, SYSTEM_TENANT
from .config import Settings
from .domain import KINDS
from .engine import Engine
from .errors import ConfigError, NotFound
from .types import DEFAULT_TENANT, Document


@dataclass
class CopyReport:
    tenants: list[str] = field(default_factory=list)
    kbs: int = 0
    documents: int = 0
    chunks: int = 0
    embeddings: dict[str, int] = field(default_factory=dict)  # model id -> vectors written
    objects: int = 0
    originals: int = 0
    missing_originals: list[str] = field(default_factory=list)  # document ids
    unfinished: list[str] = field(default_factory=list)  # ids of documents still being ingested


def side_settings(base: Settings, spec: str) -> Settings:
    """The settings of one side of a copy. A URL (`postgresql://...`, `sqlite:///FILE`)
    selects the database and keeps the configured home and originals storage; a folder
    is a GROUNDWORK_HOME of the embedded kind (its SQLite file and local originals)."""
    if "://" in spec:
        return base.model_copy(update={"database_url": spec})
    return base.model_copy(update={"home": Path(spec), "database_url": None, "storage": "local"})


def open_side(base: Settings, spec: str, *, must_exist: bool = False) -> Engine:
    settings = side_settings(base, spec)
    if must_exist and settings.database_url is None and not (Path(spec) / "groundwork.db").is_file():
        raise ConfigError(f"{spec}: no Groundwork data here (expected {Path(spec) / 'groundwork.db'})")
    return Engine.open(settings)


def copy_data(source: Engine, target: Engine, *, tenants: Sequence[str] | None = None,
              kb_names: Sequence[str] = (), batch: int = 100_000,
              log: Callable[[str], None] = lambda line: None) -> CopyReport:
    """Copy from `source` to `target` (see the module docstring). `tenants`: default the
    default tenant plus, for a whole copy, every tenant holding an API key in the source.
    `batch`: vectors per read and write (PostgreSQL bulk-builds a model's index after the
    first batch of a new model and inserts later ones one by one, so batches are large)."""
    if tenants is None:
        tenants = [DEFAULT_TENANT]
        if not kb_names:
            keyed = {data.get("tenant") for data in source.store.list_objects(SYSTEM_TENANT, API_KEY)}
            tenants += sorted(t for t in keyed if t and t != DEFAULT_TENANT)
    report = CopyReport(tenants=list(tenants))
    for tenant in tenants:
        _copy_tenant(source, target, tenant, kb_names, batch, log, report)
    return report


def _copy_tenant(source: Engine, target: Engine, tenant: str, kb_names: Sequence[str], batch: int,
                 log: Callable[[str], None], report: CopyReport) -> None:
    src, dst = source.store, target.store
    kbs = [src.get_kb(tenant, name) for name in kb_names] if kb_names else src.list_kbs(tenant)
    for kb in kbs:
        dst.put_kb(kb)
    report.kbs += len(kbs)
    documents = ([d for kb in kbs for d in src.list_documents(tenant, kb.id)] if kb_names
                 else src.list_documents(tenant))  # a whole copy includes files outside any kb
    log(f"tenant {tenant}: {len(kbs)} knowledge bases, {len(documents)} documents")

    hashes = list(dict.fromkeys(c.content_hash for d in documents for c in src.get_chunks(tenant, d.id)))
    _copy_embeddings(src, dst, hashes, batch, log, report)

    same_originals = _same_local_root(source.storage, target.storage)
    summaries = {entry.document_id: entry for kb in kbs for entry in src.kb_map(tenant, kb.id)}
    for document in documents:
        _copy_document(source, target, tenant, document, same_originals, report)
        _copy_derived(src, dst, tenant, document.id, summaries.get(document.id))
    if not kb_names:
        _copy_objects(src, dst, tenant, report)


def _copy_embeddings(src, dst, hashes: list[str], batch: int, log, report: CopyReport) -> None:
    for model_id in src.embedding_models():
        missing_at_source = set(src.missing_embeddings(model_id, hashes))
        wanted = dst.missing_embeddings(model_id, [h for h in hashes if h not in missing_at_source])
        for start in range(0, len(wanted), batch):
            part = wanted[start:start + batch]
            dst.put_embeddings(model_id, part, src.get_embeddings(model_id, part))
        report.embeddings[model_id] = report.embeddings.get(model_id, 0) + len(wanted)
        if wanted:
            log(f"  {model_id}: {len(wanted)} vectors")


def _copy_document(source: Engine, target: Engine, tenant: str, document: Document, same_originals: bool,
                   report: CopyReport) -> None:
    src, dst = source.store, target.store
    if not same_originals:
        try:
            target.storage.put(tenant, document.id, source.storage.get(tenant, document.id))
            report.originals += 1
        except NotFound:
            report.missing_originals.append(document.id)
    source_key = src.get_source_key(tenant, document.id)
    dst.put_document(document, source_key)
    try:
        dst.put_text(tenant, document.id, src.get_text(tenant, document.id))
    except NotFound:
        pass  # a failed or queued document has no text yet
    chunks = src.get_chunks(tenant, document.id)
    dst.replace_chunks(tenant, document.id, chunks)
    dst.set_status(tenant, document.id, document.status, error=document.error,
                   progress=src.get_progress(tenant, document.id))
    dst.put_document(document, source_key)  # set_status stamped updated_at: keep the source's
    report.documents += 1
    report.chunks += len(chunks)
    if document.status not in ("ready", "failed"):
        report.unfinished.append(document.id)


def _copy_derived(src, dst, tenant: str, document_id: str, entry) -> None:
    """Graph facts and the kb-map summary (with keyword counts): derived at ingest from
    the chunks, copied so that nothing has to be recomputed."""
    entities, relations = src.get_graph(tenant, document_id)
    if entities or relations:
        dst.put_graph(tenant, document_id, entities, relations)
    keywords = src.document_keywords(tenant, [document_id]).get(document_id)
    if keywords or (entry is not None and (entry.summary or entry.topics)):
        dst.put_summary(tenant, document_id, entry.summary if entry else "", entry.topics if entry else (),
                        keywords or {})


def _copy_objects(src, dst, tenant: str, report: CopyReport) -> None:
    for kind in (*KINDS, ATTACHMENT):
        for data in src.list_objects(tenant, kind):
            dst.put_object(tenant, kind, data["id"], data)
            report.objects += 1
    for data in src.list_objects(SYSTEM_TENANT, API_KEY):
        if data.get("tenant") == tenant:
            dst.put_object(SYSTEM_TENANT, API_KEY, data["digest"], data)
            report.objects += 1


def _same_local_root(a, b) -> bool:
    """Both sides keep originals in the same local folder: nothing to copy."""
    root_a, root_b = getattr(a, "root", None), getattr(b, "root", None)
    return root_a is not None and root_b is not None and Path(root_a).resolve() == Path(root_b).resolve()
