"""Knowledge bases and the documents in them."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from starlette.concurrency import run_in_threadpool

from ... import pipeline
from ..deps import EngineDep, QueueDep, Tenant
from ..schemas import KbIn, document_json, kb_json
from .documents import enqueue_source, source_from_request

router = APIRouter(prefix="/v1/kbs", tags=["knowledge bases"])


@router.post("", status_code=201)
def create_kb(body: KbIn, tenant: Tenant, engine: EngineDep) -> dict:
    return kb_json(engine.store.create_kb(tenant, body.name, body.description), 0)


@router.get("")
def list_kbs(tenant: Tenant, engine: EngineDep) -> dict:
    store = engine.store
    return {"data": [kb_json(kb, len(store.list_documents(tenant, kb.id))) for kb in store.list_kbs(tenant)]}


@router.get("/{kb}")
def get_kb(kb: str, tenant: Tenant, engine: EngineDep) -> dict:
    found = engine.store.get_kb(tenant, kb)
    return kb_json(found, len(engine.store.list_documents(tenant, found.id)))


@router.delete("/{kb}", status_code=204)
def delete_kb(kb: str, tenant: Tenant, engine: EngineDep, queue: QueueDep) -> Response:
    """Delete a kb and forget every document in it."""
    found = engine.store.get_kb(tenant, kb)
    for document in engine.store.list_documents(tenant, found.id):
        queue.cancel(tenant, document.id)
        pipeline.delete_document(engine, tenant, document.id)
    engine.store.delete_kb(tenant, found.id)
    return Response(status_code=204)


@router.get("/{kb}/documents")
def list_documents(kb: str, tenant: Tenant, engine: EngineDep) -> dict:
    found = engine.store.get_kb(tenant, kb)
    return {"data": [document_json(d) for d in engine.store.list_documents(tenant, found.id)]}


@router.post("/{kb}/documents", status_code=202)
async def add_document(kb: str, request: Request, tenant: Tenant, engine: EngineDep, queue: QueueDep) -> dict:
    """A multipart `file` (+ optional `title`), or JSON `{"url"}` or `{"text", "title"}`
    -> `{id, status}`. The same content twice returns the existing document."""
    found = await run_in_threadpool(engine.store.get_kb, tenant, kb)
    source = await source_from_request(request, engine, tenant, kb_id=found.id)
    return await run_in_threadpool(enqueue_source, request, engine, queue, source)
