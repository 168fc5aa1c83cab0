"""From a conversation and its sources to a budgeted context.

1. Queries: every non-empty user/developer/assistant message is its own query (seed
   000, `multi`), or one `Recent conversation: ...\\nCurrent query: ...` query built from
   the last 5 messages (seed 002, `enhanced`).
2. Retrieval per query and per source group, scoped inside the store; results merged
   per group with dedup on (document id, chunk index) keeping the best score, then at
   most RAG_CHUNK_LIMIT per group.
3. Budget (characters of document text placed in the prompt; headers and instructions
   are not counted): full texts first, by owner priority (template, assistant,
   conversation; `full` before `auto`), then chunks in score order until the budget is
   reached. `auto` files only go in whole if they fit while leaving a reserve for the
   retrieved chunks (a quarter of the budget, or less if fewer chunk characters were
   retrieved); a full/auto file that does not fit falls back to its retrieved chunks.
   Everything left out is logged and reported in the manifest.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

from . import retrieve
from .retrieve import Fusion
from .sources import SourceFile, Sources
from .store import Store
from .types import Context, ContextItem, Hit, Message

log = logging.getLogger(__name__)
QUERY_ROLES = ("user", "developer", "assistant")
ENHANCED_WINDOW = 5


def build_queries(messages: Sequence[Message], strategy: str = "multi") -> list[str]:
    turns = [m for m in messages if m.role in QUERY_ROLES and m.content.strip()]
    if not turns:
        return []
    if strategy == "enhanced":
        window = turns[-ENHANCED_WINDOW:]
        current = next((m for m in reversed(window) if m.role == "user"), window[-1])
        recent = "\n".join(f"{m.role}: {m.content.strip()}" for m in window if m is not current)
        return [f"Recent conversation: {recent}\nCurrent query: {current.content.strip()}"]
    return list(dict.fromkeys(m.content.strip() for m in turns))


def retrieve_groups(store: Store, embedder, sources: Sources, queries: Sequence[str], *,
                    top_k: int, chunk_limit: int, fusion: Fusion = "rrf"
                    ) -> tuple[dict[str, list[Hit]], list[Hit]]:
    """Per group: the merged, deduplicated, limited hits; and the hits cut by the limit."""
    if not queries or not sources.groups:
        return {}, []
    vectors = embedder.embed(list(queries))
    per_group: dict[str, list[Hit]] = {}
    over_limit: list[Hit] = []
    for group in sources.groups:
        found: list[Hit] = []
        for query, vector in zip(queries, vectors):
            hits = retrieve.search(store, embedder, group.scope, query, top_k=top_k, fusion=fusion,
                                   query_vector=vector)
            found.extend(replace(h, group=group.name) for h in hits)
        merged = retrieve.dedup(found)
        per_group[group.name] = merged[:chunk_limit]
        over_limit.extend(merged[chunk_limit:])
    return per_group, over_limit


def assemble(store: Store, tenant: str, sources: Sources, per_group: dict[str, list[Hit]], *,
             budget: int, over_limit: Sequence[Hit] = (), kb_map: str = "", graph: str = "") -> Context:
    """Allocate the budget among full texts and chunks; see the module docstring."""
    included: list[ContextItem] = []
    dropped: list[ContextItem] = [_item(h, "chunk limit (RAG_CHUNK_LIMIT) reached for its group") for h in over_limit]
    dropped += [ContextItem(document_id=doc_id, filename="", kind="full", chars=0, group=group,
                            reason="attached document no longer exists") for doc_id, group in sources.missing]
    pool = sorted((h for hits in per_group.values() for h in hits), key=lambda h: -h.score)
    pool_chars = sum(len(h.chunk.text) for h in pool)
    reserve = min(budget // 4, pool_chars)
    remaining = budget
    full_documents = []
    whole: set[str] = set()
    candidates = sorted((f for f in sources.files if f.mode in ("full", "auto")),
                        key=lambda f: (f.priority, f.mode != "full"))
    for f in candidates:
        text = store.get_text(tenant, f.document.id)
        room = remaining if f.mode == "full" else remaining - reserve
        if len(text) <= room:
            full_documents.append((f.document, text))
            whole.add(f.document.id)
            remaining -= len(text)
            included.append(_full_item(f, len(text), f"mode {f.mode}: whole text fits"))
        else:
            reason = (f"mode {f.mode}: full text ({len(text):,} chars) exceeds the remaining budget "
                      f"({max(room, 0):,} chars); using its retrieved chunks")
            dropped.append(_full_item(f, len(text), reason))
            log.warning("context: %s: %s", f.document.filename, reason)

    chosen: list[Hit] = []
    full_hits: list[Hit] = []
    budget_hit = False
    for hit in pool:
        if hit.document.id in whole:
            full_hits.append(hit)  # already present in full; kept for citation only
            continue
        size = len(hit.chunk.text)
        if not budget_hit and size <= remaining:
            chosen.append(hit)
            remaining -= size
            included.append(_item(hit, "retrieved"))
        else:
            budget_hit = True
            dropped.append(_item(hit, "context budget (RAG_CONTEXT_MAX_CHARS) reached"))
    dropped_chunks = sum(1 for d in dropped if d.kind == "chunk")
    if dropped_chunks:
        log.warning("context: dropped %d chunks over the budget or chunk limit (budget %d chars)",
                    dropped_chunks, budget)
    return Context(hits=tuple(chosen), full_documents=tuple(full_documents), full_hits=tuple(full_hits),
                   kb_map=kb_map, graph=graph, included=tuple(included), dropped=tuple(dropped),
                   budget_chars=budget, files=tuple(f.document.filename for f in sources.files))


def _item(hit: Hit, reason: str) -> ContextItem:
    return ContextItem(document_id=hit.document.id, filename=hit.document.filename, kind="chunk",
                       chars=len(hit.chunk.text), group=hit.group, reason=reason,
                       chunk_index=hit.chunk.index, score=hit.score)


def _full_item(f: SourceFile, chars: int, reason: str) -> ContextItem:
    return ContextItem(document_id=f.document.id, filename=f.document.filename, kind="full",
                       chars=chars, group=f.group, reason=reason)
