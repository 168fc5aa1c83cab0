"""Assistants, templates and records (`POST/GET/PATCH/DELETE /v1/{kind}s[/{id}]`), and
files added to a record (`POST /v1/records/{id}/documents`, multipart, always `rag`)."""

# No `from __future__ import annotations` here: FastAPI reads the body models of the
# routes built in `_crud` from annotations that must be real classes at runtime.
from fastapi import APIRouter, Body, Request, Response
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from ... import domain, jobs
from ...engine import Engine
from ...pipeline import Source
from ..deps import EngineDep, QueueDep, Tenant, wake_workers
from ..schemas import AssistantIn, RecordIn, TemplateIn, partial
from ..uploads import check_quota, read_files

router = APIRouter(prefix="/v1", tags=["assistants, templates, records"])


def _values(engine: Engine, tenant: str, body: BaseModel, *, unset: bool) -> dict:
    values = body.model_dump(exclude_unset=unset)
    for ref in domain.file_refs(values.get("files")):  # every attached file must be this tenant's
        engine.store.get_document(tenant, ref.document_id)
    for kb in values.get("kb_ids") or ():
        engine.store.get_kb(tenant, kb)
    return values


def _crud(kind: str, model: type[BaseModel]) -> None:
    path, patch = f"/{kind}s", partial(model)

    def create(tenant: Tenant, engine: EngineDep, body: model = Body()) -> dict:
        return domain.to_json(domain.create(engine.store, tenant, kind, **_values(engine, tenant, body, unset=False)))

    def list_(tenant: Tenant, engine: EngineDep) -> dict:
        return {"data": [domain.to_json(o) for o in domain.list_all(engine.store, tenant, kind)]}

    def get(object_id: str, tenant: Tenant, engine: EngineDep) -> dict:
        return domain.to_json(domain.get(engine.store, tenant, kind, object_id))

    def update(object_id: str, tenant: Tenant, engine: EngineDep, body: patch = Body()) -> dict:
        changes = _values(engine, tenant, body, unset=True)
        return domain.to_json(domain.update(engine.store, tenant, kind, object_id, **changes))

    def delete(object_id: str, tenant: Tenant, engine: EngineDep) -> Response:
        domain.delete(engine.store, tenant, kind, object_id)
        return Response(status_code=204)

    router.add_api_route(path, create, methods=["POST"], status_code=201, summary=f"Create a {kind}")
    router.add_api_route(path, list_, methods=["GET"], summary=f"List {kind}s")
    router.add_api_route(path + "/{object_id}", get, methods=["GET"], summary=f"Show a {kind}")
    router.add_api_route(path + "/{object_id}", update, methods=["PATCH"], summary=f"Change a {kind}")
    router.add_api_route(path + "/{object_id}", delete, methods=["DELETE"], status_code=204,
                         summary=f"Delete a {kind}")


_crud("assistant", AssistantIn)
_crud("template", TemplateIn)
_crud("record", RecordIn)


@router.post("/records/{record_id}/documents", status_code=202)
async def add_record_documents(record_id: str, request: Request, tenant: Tenant, engine: EngineDep,
                               queue: QueueDep) -> list[dict]:
    """Multipart field `files`: ingested as the record's files (retrieved, never whole)."""
    await run_in_threadpool(domain.get, engine.store, tenant, "record", record_id)
    uploads = await read_files(request, engine.settings)

    def add_all() -> list[dict]:
        sources = [Source(u.data, u.filename, tenant=tenant, record_id=record_id, content_type=u.content_type)
                   for u in uploads]
        for source in sources:
            jobs.check_original(engine, source)
        check_quota(engine, tenant, sum(len(s.data) for s in sources))
        documents = [jobs.submit(engine, queue, source) for source in sources]
        record = domain.get(engine.store, tenant, "record", record_id)
        have = [f.document_id for f in record.files]
        domain.update(engine.store, tenant, "record", record_id,
                      files=have + [d.id for d in documents if d.id not in have])
        return [{"id": d.id, "status": d.status} for d in documents]

    result = await run_in_threadpool(add_all)
    wake_workers(request)
    return result
