"""Retrieval quality on BEIR-format datasets: nDCG@10, Recall@10/100, MRR@10.

Documents are ingested through the normal pipeline (title as heading, so it prefixes
every chunk); chunk hits are folded to documents by their best-ranked chunk. Metrics
follow BEIR / trec_eval: linear-gain nDCG, recall over all relevant documents."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from . import retrieve
from .engine import Engine
from .errors import GroundworkError, NotFound
from .pipeline import Source, ingest_many
from .types import DEFAULT_TENANT, Scope

CHUNK_POOL = 300  # chunk hits fetched per query before folding to documents


def load_beir(folder: Path, split: str) -> tuple[list[dict], dict[str, str], dict[str, dict[str, int]]]:
    folder = Path(folder)
    qrels_path = folder / "qrels" / f"{split}.tsv"
    if not qrels_path.exists():
        raise GroundworkError(f"{qrels_path} not found (is {folder} a BEIR dataset with split {split!r}?)")
    qrels: dict[str, dict[str, int]] = {}
    for number, line in enumerate(qrels_path.read_text().splitlines()):
        parts = line.split("\t")
        if number == 0 and not parts[-1].strip().lstrip("-").isdigit():
            continue  # header
        qid, doc_id, score = parts[0], parts[1], int(parts[2])
        qrels.setdefault(qid, {})[doc_id] = score
    queries = {}
    for line in (folder / "queries.jsonl").read_text().splitlines():
        item = json.loads(line)
        if item["_id"] in qrels:
            queries[item["_id"]] = item["text"]
    corpus = [json.loads(line) for line in (folder / "corpus.jsonl").read_text().splitlines() if line.strip()]
    return corpus, queries, qrels


def ndcg_at(ranked: Sequence[str], relevant: dict[str, int], k: int = 10) -> float:
    dcg = sum(relevant.get(doc, 0) / math.log2(i + 2) for i, doc in enumerate(ranked[:k]))
    ideal = sorted((g for g in relevant.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at(ranked: Sequence[str], relevant: dict[str, int], k: int) -> float:
    positives = {d for d, g in relevant.items() if g > 0}
    return len(positives & set(ranked[:k])) / len(positives) if positives else 0.0


def mrr_at(ranked: Sequence[str], relevant: dict[str, int], k: int = 10) -> float:
    for i, doc in enumerate(ranked[:k]):
        if relevant.get(doc, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


def index_corpus(engine: Engine, corpus: Sequence[dict], kb_name: str,
                 log: Callable[[str], None] = print, batch: int = 256) -> str:
    """Ingest the corpus into `kb_name` (idempotent: a re-run embeds nothing)."""
    store = engine.store
    try:
        kb = store.get_kb(DEFAULT_TENANT, kb_name)
    except NotFound:
        kb = store.create_kb(DEFAULT_TENANT, kb_name)
    started, done, embedded = time.perf_counter(), 0, 0
    for start in range(0, len(corpus), batch):
        sources = [Source(f"# {d.get('title') or d['_id']}\n\n{d['text']}".encode(), f"{d['_id']}.md",
                          kb_id=kb.id, source_key=d["_id"], content_type="text/markdown")
                   for d in corpus[start:start + batch]]
        reports = ingest_many(engine, sources)
        failed = [r for r in reports if r.status == "failed"]
        if failed:
            raise GroundworkError(f"{len(failed)} documents failed to ingest, first: {failed[0].error}")
        done += len(reports)
        embedded += sum(r.embedded for r in reports)
        log(f"indexed {done}/{len(corpus)} documents ({embedded} chunks embedded, "
            f"{time.perf_counter() - started:.0f}s)")
    return kb.id


def evaluate_beir(engine: Engine, folder: Path, *, split: str = "test",
                  modes: Sequence[str] = ("vector", "text", "hybrid"), limit: int = 0,
                  log: Callable[[str], None] = print) -> dict[str, dict[str, float]]:
    corpus, queries, qrels = load_beir(folder, split)
    kb_id = index_corpus(engine, corpus, f"beir-{Path(folder).resolve().name}", log)
    scope = Scope(tenant=DEFAULT_TENANT, kb_ids=(kb_id,))
    items = sorted(queries.items())
    if limit:
        items = items[:limit]
    vectors = engine.embedder.embed([text for _, text in items])
    results: dict[str, dict[str, float]] = {}
    for mode in modes:
        if mode not in ("vector", "text", "hybrid"):
            raise GroundworkError(f"unknown mode {mode!r}")
        totals = {"nDCG@10": 0.0, "Recall@10": 0.0, "Recall@100": 0.0, "MRR@10": 0.0}
        started = time.perf_counter()
        for (qid, text), vector in zip(items, vectors):
            hits = retrieve.search(engine.store, engine.embedder, scope, text, top_k=CHUNK_POOL,
                                   mode=mode, candidates=CHUNK_POOL, query_vector=vector)
            ranked = list(dict.fromkeys(Path(h.document.filename).stem for h in hits))
            relevant = qrels[qid]
            totals["nDCG@10"] += ndcg_at(ranked, relevant)
            totals["Recall@10"] += recall_at(ranked, relevant, 10)
            totals["Recall@100"] += recall_at(ranked, relevant, 100)
            totals["MRR@10"] += mrr_at(ranked, relevant)
        results[mode] = {name: value / len(items) for name, value in totals.items()}
        results[mode]["queries"] = len(items)
        results[mode]["ms_per_query"] = 1000 * (time.perf_counter() - started) / len(items)
        log(f"{mode}: nDCG@10 {results[mode]['nDCG@10']:.4f}")
    return results


def format_table(results: dict[str, dict[str, float]]) -> str:
    lines = ["| mode | nDCG@10 | Recall@10 | Recall@100 | MRR@10 | queries | ms/query |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for mode, m in results.items():
        lines.append(f"| {mode} | {m['nDCG@10']:.4f} | {m['Recall@10']:.4f} | {m['Recall@100']:.4f} | "
                     f"{m['MRR@10']:.4f} | {int(m['queries'])} | {m['ms_per_query']:.1f} |")
    return "\n".join(lines)
