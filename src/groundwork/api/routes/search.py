"""Search (and one-shot ask) inside one knowledge base of the caller's tenant."""

from __future__ import annotations

from fastapi import APIRouter

from ... import pipeline
from ...engine import Engine
from ...output import answer_json, hit_json
from ...types import Scope
from ..deps import EngineDep, Tenant
from ..schemas import AskIn, GraphSearchIn, SearchIn

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


@router.get("/{kb}/map")
def kb_map(kb: str, tenant: Tenant, engine: EngineDep) -> dict:
    """The KB map: every document's title, summary and topics."""
    from ... import kbmap

    found = engine.store.get_kb(tenant, kb)
    total, entries = kbmap.kb_map_entries(engine.store, tenant, found.id)
    return {"kb": found.name, "documents": total,
            "entries": [{"document_id": e.document_id, "title": e.title, "filename": e.filename,
                         "summary": e.summary, "topics": list(e.topics)} for e in entries],
            "text": kbmap.format_kb_map(found, entries, total=total)}


@router.post("/{kb}/graph/search")
def graph_search(kb: str, body: GraphSearchIn, tenant: Tenant, engine: EngineDep) -> dict:
    """Entities named in the query and their 1-2 hop neighbourhood in this kb."""
    from ... import graph

    result = graph.graph_search(engine.store, kb_scope(engine, tenant, kb), body.query, hops=body.hops)
    return {"matched": list(result.matched),
            "entities": [{"name": e.name, "type": e.type, "description": e.description, "depth": e.depth,
                          "sources": [{"document_id": d, "chunk_index": i} for d, i in e.refs]}
                         for e in result.entities],
            "relations": [{"source": r.source, "target": r.target, "type": r.type, "weight": r.weight,
                           "description": r.description} for r in result.relations],
            "text": graph.format_graph(result)}
