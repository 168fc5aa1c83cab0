"""Documents: add (to a kb, or a record), show status and progress, replace, forget.

A document arrives as a multipart file (field `file`), or JSON `{"url"}` (fetched
server-side) or `{"text", "title"}`. Adding returns `{id, status}` at once (202); the
in-process workers do the rest (see `groundwork.jobs`)."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from fastapi import APIRouter, Request, Response
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from ... import access, jobs, pipeline
from ...engine import Engine
from ...errors import InvalidRequest
from ...pipeline import Source
from ..deps import EngineDep, QueueDep, Tenant, wake_workers
from ..schemas import DocumentIn, document_json
from ..uploads import check_quota, read_uploads

router = APIRouter(prefix="/v1", tags=["documents"])


async def source_from_request(request: Request, engine: Engine, tenant: str, **fields) -> Source:
    """One original from a multipart file, a URL or pasted text, checked (not stored)."""
    settings = engine.settings
    if request.headers.get("content-type", "").startswith("multipart/form-data"):
        uploads, form = await read_uploads(request, max_files=1, max_bytes=settings.max_upload_bytes)
        if not uploads:
            raise InvalidRequest("no file: send it in the multipart field \"file\"")
        u = uploads[0]
        mode = form.get("mode") or None
        if mode not in (None, "rag", "full", "auto"):
            raise InvalidRequest(f"mode must be rag, full or auto, got {mode!r}")
        source = Source(u.data, u.filename, tenant=tenant, content_type=u.content_type,
                        title=form.get("title") or None, mode=mode, **fields)
    else:
        try:
            body = DocumentIn.model_validate_json(await request.body())
        except ValidationError as exc:
            raise InvalidRequest("a document is a multipart \"file\", or JSON {\"url\"} or {\"text\", \"title\"}: "
                                 + "; ".join(e["msg"] for e in exc.errors())) from None
        source = await run_in_threadpool(_json_source, engine, tenant, body, fields)
    await run_in_threadpool(jobs.check_original, engine, source)
    return source


def _json_source(engine: Engine, tenant: str, body: DocumentIn, fields: dict) -> Source:
    if (body.url is None) == (body.text is None):
        raise InvalidRequest("give exactly one of \"url\" or \"text\"")
    if body.url is not None:
        parts = urlsplit(body.url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise InvalidRequest(f"only http(s) URLs can be fetched, got {body.url!r}")
        data, filename, content_type = pipeline.fetch_url(body.url, max_bytes=engine.settings.max_upload_bytes)
        return Source(data, filename, tenant=tenant, source_url=body.url, content_type=content_type,
                      title=body.title, mode=body.mode, **fields)
    if not body.text.strip():
        raise InvalidRequest("\"text\" is empty")
    slug = re.sub(r"[^A-Za-z0-9]+", "-", body.title or "").strip("-").lower()[:60] or "text"
    return Source(body.text.encode("utf-8"), f"{slug}.md", tenant=tenant, content_type="text/markdown",
                  title=body.title, mode=body.mode, **fields)


def enqueue_source(request: Request, engine: Engine, queue, source: Source) -> dict:
    check_quota(engine, source.tenant, len(source.data))
    document = jobs.submit(engine, queue, source)
    wake_workers(request)
    return {"id": document.id, "status": document.status}


@router.get("/documents/{document_id}")
def get_document(document_id: str, tenant: Tenant, engine: EngineDep, queue: QueueDep) -> dict:
    """Status (queued, extracting, chunking, embedding, indexing, ready, failed), per-stage
    progress, the error if any, and the job's attempts."""
    document = engine.store.get_document(tenant, document_id)
    return document_json(document, engine.store.get_progress(tenant, document_id),
                         queue.latest(tenant, document_id))


@router.put("/documents/{document_id}", status_code=202)
async def replace_document(document_id: str, request: Request, tenant: Tenant, engine: EngineDep,
                           queue: QueueDep) -> dict:
    """New content for a document (same id, next version); only changed chunks are
    embedded again. Identical content is no work."""
    current = await run_in_threadpool(engine.store.get_document, tenant, document_id)
    source = await source_from_request(request, engine, tenant, kb_id=current.kb_id,
                                       record_id=current.record_id, document_id=document_id)
    return await run_in_threadpool(enqueue_source, request, engine, queue, source)


@router.delete("/documents/{document_id}", status_code=204)
def delete_document(document_id: str, tenant: Tenant, engine: EngineDep, queue: QueueDep) -> Response:
    """Forget a document: original, text, chunks, vectors, attachment records; its
    pending job is cancelled."""
    engine.store.get_document(tenant, document_id)
    queue.cancel(tenant, document_id)
    pipeline.delete_document(engine, tenant, document_id)
    access.forget_attachments(engine.store, tenant, document_id)
    return Response(status_code=204)
