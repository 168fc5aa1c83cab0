"""`kill -9` of a real `groundwork serve` process while a large document is embedding;
after a restart on the same data the job resumes (embeddings already saved are kept),
the document ends `ready`, with exactly the chunks a fresh ingest makes, none twice."""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from groundwork.chunk import chunk_document
from groundwork.config import load_settings
from groundwork.extract import extract

CHUNKING = {"GROUNDWORK_CHUNK_SIZE": "64", "GROUNDWORK_CHUNK_OVERLAP": "8"}


def survey() -> str:
    paragraphs = [f"Station {i} on ridge {i % 7} logged gusts of {20 + i} knots, {i % 5} hours of sleet, "
                  f"a pressure of {990 + i} hectopascals and {i * 3} migrating cranes before noon; "
                  f"observer number {100 + i} filed report {i * 17} the same evening."
                  for i in range(16)]
    return "# Weather survey\n\n" + "\n\n".join(paragraphs)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(home: Path, port: int) -> subprocess.Popen:
    groundwork = Path(sys.executable).with_name("groundwork")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "GROUNDWORK_EMBED_BATCH_SIZE": "4", **CHUNKING}
    return subprocess.Popen([str(groundwork), "serve", "--data-dir", str(home), "--port", str(port),
                             "--workers", "1"], cwd=home.parent, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def wait_until(check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what}")


def get(client: httpx.Client, path: str):
    try:
        return client.get(path).json()
    except httpx.TransportError:
        return None


def test_kill_9_mid_embedding_then_restart_resumes(tmp_path, local_embedder):
    home, port = tmp_path / "home", free_port()
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10)
    first = start(home, port)
    try:
        wait_until(lambda: get(client, "/healthz"), 60, "the first server")
        assert client.post("/v1/kbs", json={"name": "weather"}).status_code == 201
        doc_id = client.post("/v1/kbs/weather/documents", json={"text": survey(), "title": "Survey"}).json()["id"]

        def mid_embedding():
            body = get(client, f"/v1/documents/{doc_id}")
            embedding = body["progress"].get("stages", {}).get("embedding", {}) if body else {}
            assert body is None or body["status"] != "ready", "finished before it could be killed"
            return body["status"] == "embedding" and embedding.get("embedded", 0) >= 4 and embedding

        progress = wait_until(mid_embedding, 90, "embedding to start")
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert progress["embedded"] < progress["to_embed"]
    db = home / "groundwork.db"
    with sqlite3.connect(db) as conn:
        [(state, owner)] = conn.execute("SELECT state, lease_owner FROM jobs").fetchall()
    assert state == "running" and f":{first.pid}:" in owner  # the dead process still holds the lease

    second = start(home, port)
    try:
        wait_until(lambda: get(client, "/healthz"), 60, "the second server")
        final = wait_until(lambda: (b := get(client, f"/v1/documents/{doc_id}")) and
                           b["status"] in ("ready", "failed") and b, 90, "the resumed job")
    finally:
        second.terminate()
        second.wait(30)
    assert final["status"] == "ready", final
    assert final["job"]["attempts"] == 2 and final["job"]["state"] == "done"
    total = final["progress"]["chunks"]
    assert final["progress"]["embedded"] <= total - progress["embedded"]  # saved embeddings were kept

    settings = load_settings(home=home, chunk_size=64, chunk_overlap=8)
    unit, size, overlap = settings.effective_chunking(local_embedder.max_tokens)
    extracted = extract(survey().encode(), "survey.md", "text/markdown")
    fresh = chunk_document(extracted, doc_id, count_tokens=local_embedder.count_tokens,
                           max_tokens=local_embedder.max_tokens, unit=unit, size=size, overlap=overlap)
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT idx, content_hash FROM chunks WHERE document_id = ? ORDER BY idx",
                            (doc_id,)).fetchall()
        duplicates = conn.execute("SELECT document_id, idx FROM chunks GROUP BY document_id, idx "
                                  "HAVING COUNT(*) > 1").fetchall()
        vectors = conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0]
    assert len(rows) == len(fresh) == total > 8
    assert rows == [(c.index, c.content_hash) for c in fresh]
    assert duplicates == [] and vectors == len({c.content_hash for c in fresh})
