"""Search (and one-shot ask) inside one knowledge base of the caller's tenant."""

from __future__ import annotations

from fastapi import APIRouter

from ... import pipeline
from ...engine import Engine
from ...output import answer_json, hit_json
from ...types import Scope
from ..deps import EngineDep, Tenant
from ..schemas import AskIn, SearchIn

router = APIRouter(prefix="/v1/kbs", tags=["search"])


def kb_scope(engine: Engine, tenant: str, kb: str) -> Scope:
    return Scope(tenant=tenant, kb_ids=(engine.store.get_kb(tenant, kb).id,))


@router.post("/{kb}/search")
def search(kb: str, body: SearchIn, tenant: Tenant, engine: EngineDep) -> dict:
    """`{query, top_k, mode: hybrid|vector|text}` -> `{results}`."""
    hits = pipeline.search(engine, body.query, scope=kb_scope(engine, tenant, kb), top_k=body.top_k,
                           mode=body.mode)
    return {"results": [hit_json(h) for h in hits]}


@router.post("/{kb}/ask")
def ask(kb: str, body: AskIn, tenant: Tenant, engine: EngineDep) -> dict:
    return answer_json(pipeline.ask(engine, body.question, scope=kb_scope(engine, tenant, kb),
                                    top_k=body.top_k))
