"""Bounded HTTP load on loopback: N concurrent clients on search, then on chat, for a
fixed time each; reports requests, errors and p50/p95 latency.

    .venv/bin/python bench/load_api.py --record        # own server, 20 clients, 60 s each
    .venv/bin/python bench/load_api.py --url http://127.0.0.1:8000 --key gw_... --kb docs

Without --url it starts `groundwork serve` on a free loopback port over a temporary data
directory (embedded defaults: SQLite, local model, extractive answers), seeds a kb and
stops the server at the end. Only loopback targets are accepted; clients and duration
are capped, so it always stops by itself. --record appends (or refreshes) the
`## HTTP load` section of bench/RESULTS.md and leaves the other sections alone.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx

RESULTS = Path(__file__).with_name("RESULTS.md")
MAX_CLIENTS, MAX_SECONDS = 64, 300
TOPICS = ["refund policy", "shipping times", "warranty claims", "password reset", "invoice downloads",
          "account deletion", "data export", "two-factor login", "API rate limits", "team invitations"]
QUESTIONS = [f"How does {topic} work?" for topic in TOPICS] + \
            [f"What are the rules for {topic}?" for topic in TOPICS]


def corpus() -> list[tuple[str, str]]:
    docs = []
    for i, topic in enumerate(TOPICS):
        for part in range(4):
            text = (f"# {topic.title()} ({part + 1})\n\n"
                    f"Our {topic} process, part {part + 1}: requests are handled within {i + part + 2} "
                    f"business days. Customers open a ticket, attach the order number, and an agent replies "
                    f"by email. Exceptions for {topic} need approval from a team lead, who records the "
                    f"decision in the customer's file. Step {part + 1} covers eligibility, step {part + 2} "
                    f"covers the timeline, and the final step confirms the outcome in writing.")
            docs.append((f"{topic} {part + 1}", text))
    return docs


def loopback_only(url: str) -> str:
    host = urlsplit(url).hostname or ""
    try:
        import ipaddress
        ok = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        ok = False
    if not ok:
        sys.exit(f"refusing to load {url}: only loopback targets are allowed")
    return url.rstrip("/")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(home: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    groundwork = Path(sys.executable).with_name("groundwork")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    process = subprocess.Popen([str(groundwork), "serve", "--data-dir", str(home), "--port", str(port)],
                               cwd=home, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return process, url
        except httpx.TransportError:
            time.sleep(0.2)
    process.kill()
    sys.exit("the server did not start")


def seed(client: httpx.Client, kb: str) -> int:
    client.post("/v1/kbs", json={"name": kb})
    ids = [client.post(f"/v1/kbs/{kb}/documents", json={"text": text, "title": title}).json()["id"]
           for title, text in corpus()]
    deadline = time.monotonic() + 600
    pending = set(ids)
    while pending and time.monotonic() < deadline:
        pending = {d for d in pending if client.get(f"/v1/documents/{d}").json()["status"] not in ("ready", "failed")}
        time.sleep(0.5)
    if pending:
        sys.exit(f"{len(pending)} documents did not finish ingesting")
    return len(ids)


async def run(url: str, headers: dict, kb: str, scenario: str, clients: int, seconds: float) -> dict:
    latencies: list[float] = []
    errors: dict[str, int] = {}
    deadline = time.monotonic() + seconds

    def request(i: int) -> tuple[str, dict]:
        question = QUESTIONS[i % len(QUESTIONS)]
        if scenario == "search":
            return f"/v1/kbs/{kb}/search", {"query": question, "top_k": 8}
        return "/v1/chat", {"message": question, "kb_ids": [kb]}

    async def one_client(n: int, client: httpx.AsyncClient) -> None:
        i = n
        while time.monotonic() < deadline:
            path, body = request(i)
            i += clients
            started = time.perf_counter()
            try:
                response = await client.post(path, json=body)
                if response.status_code != 200:
                    errors[str(response.status_code)] = errors.get(str(response.status_code), 0) + 1
                    continue
            except httpx.HTTPError as exc:
                errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
                continue
            latencies.append(time.perf_counter() - started)

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120, limits=limits) as client:
        started = time.monotonic()
        await asyncio.gather(*(one_client(n, client) for n in range(clients)))
        elapsed = time.monotonic() - started
    ordered = sorted(latencies)
    pct = (lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000) if ordered else (lambda q: 0.0)
    return {"scenario": scenario, "ok": len(ordered), "errors": sum(errors.values()), "error_kinds": errors,
            "p50_ms": statistics.median(ordered) * 1000 if ordered else 0.0, "p95_ms": pct(0.95),
            "max_ms": ordered[-1] * 1000 if ordered else 0.0, "rps": len(ordered) / elapsed}


def record(rows: list[dict], args, documents: int, started: str) -> None:
    load = os.getloadavg()
    section = "\n".join([
        "## HTTP load",
        "",
        f"### Run {started}",
        f"- Command: `{' '.join(['python', 'bench/load_api.py', *sys.argv[1:]])}`",
        f"- Machine: {platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} cores (nproc), "
        f"load average before the run {args.load_before[0]:.1f}, after {load[0]:.1f} (shared with other work).",
        f"- Server: `groundwork serve` (one uvicorn process, 2 ingestion workers idle), embedded defaults: "
        f"SQLite, all-MiniLM-L6-v2 on CPU, extractive answers (no LLM). Kb of {documents} short documents.",
        f"- Load: {args.clients} concurrent clients (httpx, keep-alive) per scenario, {args.seconds:.0f} s each, "
        "on loopback; search = `POST /v1/kbs/{kb}/search` (hybrid, top_k 8), chat = `POST /v1/chat` with the kb "
        "(retrieval, context, extractive answer, conversation persisted).",
        "",
        "| scenario | requests ok | errors | p50 ms | p95 ms | max ms | req/s |",
        "|---|---:|---:|---:|---:|---:|---:|",
        *[f"| {r['scenario']} | {r['ok']} | {r['errors']}{' ' + str(r['error_kinds']) if r['errors'] else ''} | "
          f"{r['p50_ms']:.0f} | {r['p95_ms']:.0f} | {r['max_ms']:.0f} | {r['rps']:.1f} |" for r in rows],
        "",
    ])
    text = RESULTS.read_text(encoding="utf-8") if RESULTS.exists() else "# Benchmark results\n"
    # Replace only a previous "## HTTP load" section (up to the next "## "), else append.
    text = re.sub(r"\n## HTTP load\n.*?(?=\n## |\Z)", "", text, flags=re.S).rstrip("\n")
    RESULTS.write_text(text + "\n\n" + section, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="a running loopback server (default: start one)")
    parser.add_argument("--key", help="API key for --url (Bearer)")
    parser.add_argument("--kb", default="load")
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--scenarios", default="search,chat")
    parser.add_argument("--record", action="store_true", help="write the section in bench/RESULTS.md")
    args = parser.parse_args()
    args.clients = max(1, min(args.clients, MAX_CLIENTS))
    args.seconds = max(1.0, min(args.seconds, MAX_SECONDS))
    args.load_before = os.getloadavg()
    started = dt.datetime.now().isoformat(timespec="seconds")
    headers = {"Authorization": f"Bearer {args.key}"} if args.key else {}
    process = None
    with tempfile.TemporaryDirectory(prefix="groundwork-load-") as tmp:
        if args.url:
            url = loopback_only(args.url)
        else:
            process, url = start_server(Path(tmp))
        try:
            with httpx.Client(base_url=url, headers=headers, timeout=120) as client:
                documents = seed(client, args.kb) if process else len(client.get(f"/v1/kbs/{args.kb}/documents")
                                                                      .json()["data"])
                for warm in ("search", "chat"):  # load the model and the vector index first
                    asyncio.run(run(url, headers, args.kb, warm, 1, 1))
            rows = []
            for scenario in args.scenarios.split(","):
                row = asyncio.run(run(url, headers, args.kb, scenario, args.clients, args.seconds))
                print(f"{scenario:6} ok={row['ok']} errors={row['errors']} {row['error_kinds'] or ''} "
                      f"p50={row['p50_ms']:.0f}ms p95={row['p95_ms']:.0f}ms max={row['max_ms']:.0f}ms "
                      f"{row['rps']:.1f} req/s", flush=True)
                rows.append(row)
        finally:
            if process is not None:
                process.terminate()
                process.wait(30)
    if args.record:
        record(rows, args, documents, started)


if __name__ == "__main__":
    main()
