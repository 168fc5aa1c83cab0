"""`POST /v1/attachments`: files for one chat, each with a one-time access token."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from ... import access, jobs
from ...pipeline import Source
from ..deps import EngineDep, QueueDep, Tenant, wake_workers
from ..uploads import check_quota, read_files

router = APIRouter(prefix="/v1", tags=["attachments"])


@router.post("/attachments", status_code=201)
async def upload_attachments(request: Request, tenant: Tenant, engine: EngineDep, queue: QueueDep) -> list[dict]:
    """Multipart field `files` (at most GROUNDWORK_MAX_UPLOAD_FILES, each at most
    GROUNDWORK_MAX_UPLOAD_BYTES). Everything is checked before anything is stored.
    Returns `[{id, access_token, filename, content_type, size, document_id, status}]`;
    the token is shown only here."""
    uploads = await read_files(request, engine.settings)

    def store_all() -> list[dict]:
        sources = [Source(u.data, u.filename, tenant=tenant, content_type=u.content_type) for u in uploads]
        for source in sources:
            jobs.check_original(engine, source)
        check_quota(engine, tenant, sum(len(u.data) for u in uploads))
        out = []
        for source in sources:
            document = jobs.submit(engine, queue, source)
            record, token = access.issue_attachment(engine.store, tenant, document.id, filename=source.filename,
                                                    content_type=document.content_type, size=len(source.data))
            out.append({**record, "access_token": token, "status": document.status})
        return out

    result = await run_in_threadpool(store_all)
    wake_workers(request)
    return result
