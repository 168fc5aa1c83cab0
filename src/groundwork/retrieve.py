"""Search one scope: vector, full-text, or both fused.

Fusion options (ARCHITECTURE §3.3):
- `rrf` (default): reciprocal rank fusion, score = sum over lists of 1 / (k + rank), rank
  starting at 1, k = 60. Reported relevance divides by the best possible score (a chunk
  ranked first in every list), so 1.0 = "top of every list".
- `weighted` (seed 002): 0.60 * vector + 0.25 * text + 0.15 * importance, where vector is
  the cosine similarity clipped to [0, 1], text is the BM25 score divided by the best BM25
  score of that query's candidates (so 1.0 = best keyword match), and importance is the
  document's weight (default 1, clipped to [0, 1]). All three are on a 0..1 scale, so the
  weights mean what they say.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Literal

import numpy as np

from .store import Store
from .types import Hit, Scope, SearchMode

Fusion = Literal["rrf", "weighted"]
RRF_K = 60
WEIGHTS = (0.60, 0.25, 0.15)


def search(store: Store, embedder, scope: Scope, query: str, *, top_k: int = 8,
           mode: SearchMode = "hybrid", fusion: Fusion = "rrf", candidates: int | None = None,
           query_vector: np.ndarray | None = None) -> list[Hit]:
    """The best `top_k` chunks in `scope` for `query`."""
    pool = candidates or max(top_k * 4, 50)
    vector_hits: list[Hit] = []
    text_hits: list[Hit] = []
    if mode in ("hybrid", "vector"):
        if query_vector is None:
            query_vector = embedder.embed([query])[0]
        vector_hits = store.vector_search(scope, embedder.model_id, query_vector, pool if mode == "hybrid" else top_k)
    if mode in ("hybrid", "text"):
        text_hits = store.text_search(scope, query, pool if mode == "hybrid" else top_k)
    if mode == "vector":
        return [replace(h, score=max(0.0, h.score)) for h in vector_hits[:top_k]]
    if mode == "text":
        best = text_hits[0].score if text_hits else 1.0
        return [replace(h, score=h.score / best if best > 0 else 0.0) for h in text_hits[:top_k]]
    fused = rrf(vector_hits, text_hits) if fusion == "rrf" else weighted(vector_hits, text_hits)
    return fused[:top_k]


def rrf(*ranked_lists: Sequence[Hit], k: int = RRF_K) -> list[Hit]:
    scores: dict[tuple[str, int], float] = {}
    first: dict[tuple[str, int], Hit] = {}
    vector: dict[tuple[str, int], float] = {}
    text: dict[tuple[str, int], float] = {}
    for hits in ranked_lists:
        for rank, hit in enumerate(hits, start=1):
            scores[hit.key] = scores.get(hit.key, 0.0) + 1.0 / (k + rank)
            first.setdefault(hit.key, hit)
            if hit.vector_score is not None:
                vector[hit.key] = hit.vector_score
            if hit.text_score is not None:
                text[hit.key] = hit.text_score
    best = len(ranked_lists) / (k + 1)
    fused = [replace(first[key], score=score / best, vector_score=vector.get(key),
                     text_score=text.get(key)) for key, score in scores.items()]
    return sorted(fused, key=lambda h: -h.score)


def weighted(vector_hits: Sequence[Hit], text_hits: Sequence[Hit],
             weights: tuple[float, float, float] = WEIGHTS) -> list[Hit]:
    w_vec, w_text, w_imp = weights
    best_text = max((h.text_score or 0.0 for h in text_hits), default=0.0) or 1.0
    merged: dict[tuple[str, int], Hit] = {}
    vec: dict[tuple[str, int], float] = {}
    txt: dict[tuple[str, int], float] = {}
    for hit in vector_hits:
        merged.setdefault(hit.key, hit)
        vec[hit.key] = min(1.0, max(0.0, hit.vector_score or 0.0))
    for hit in text_hits:
        merged.setdefault(hit.key, hit)
        txt[hit.key] = (hit.text_score or 0.0) / best_text
    fused = []
    for key, hit in merged.items():
        importance = min(1.0, max(0.0, hit.document.importance))
        score = w_vec * vec.get(key, 0.0) + w_text * txt.get(key, 0.0) + w_imp * importance
        fused.append(replace(hit, score=score, vector_score=vec.get(key), text_score=txt.get(key)))
    return sorted(fused, key=lambda h: -h.score)


def dedup(hits: Sequence[Hit]) -> list[Hit]:
    """One hit per (document id, chunk index), keeping the best score, best first."""
    best: dict[tuple[str, int], Hit] = {}
    for hit in hits:
        if hit.key not in best or hit.score > best[hit.key].score:
            best[hit.key] = hit
    return sorted(best.values(), key=lambda h: -h.score)
