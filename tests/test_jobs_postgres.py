"""The PostgreSQL job queue beyond the shared contract (which test_jobs.py runs on both
backends): leases on the database's clock, per-document locking under races, and three
real `groundwork worker` processes sharing one database."""

from __future__ import annotations

import collections
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
import pytest

from groundwork import jobs
from groundwork.api.app import create_app
from groundwork.config import load_settings
from groundwork.engine import Engine
from groundwork.jobs import open_queue
from groundwork.jobs_postgres import PostgresJobQueue
from groundwork.pipeline import Source
from groundwork.store.postgres import PostgresStore
from groundwork.types import DEFAULT_TENANT
from fake_openai import serve_fake_openai


@pytest.fixture
def store(pg_url):
    store = PostgresStore(pg_url)
    yield store
    store.close()


def db_now(store) -> float:
    with store.transaction() as conn:
        return conn.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()[0]


def test_leases_run_on_the_database_clock(store):
    queue = PostgresJobQueue(store)  # no clock given: the server's
    queue.enqueue("t", "doc_kept")
    queue.enqueue("t", "doc_dropped")
    before = db_now(store)
    kept, dropped = queue.claim("w1", 0.6), queue.claim("w2", 0.6)
    assert before <= kept.lease_until - 0.6 <= dropped.lease_until - 0.6 <= db_now(store)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and queue.latest("t", "doc_dropped").state == "running":
        assert queue.heartbeat(kept.id, "w1", 5)  # w1 is alive; w2 went silent
        queue.requeue_stale()
        time.sleep(0.1)
    assert queue.latest("t", "doc_kept").state == "running"
    requeued = queue.latest("t", "doc_dropped")
    assert (requeued.id, requeued.state, requeued.attempts) == (dropped.id, "queued", 1)
    assert "worker stopped" in requeued.last_error
    again = queue.claim("w3", 30)
    assert (again.id, again.attempts) == (dropped.id, 2)
    with store.transaction() as conn:
        assert conn.execute("SELECT claimed_by FROM jobs WHERE id = %s", (dropped.id,)).fetchone()[0] == ["w2", "w3"]


def test_a_dead_pid_does_not_count_only_the_lease_does(store):
    # A worker on another machine (or another container with this host name) can have
    # any pid: on PostgreSQL, recovery waits for the lease.
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                           text=True, check=True)
    now = [1000.0]
    queue = PostgresJobQueue(store, clock=lambda: now[0])
    queue.enqueue("t", "doc_a")
    job = queue.claim(f"{socket.gethostname()}:{int(child.stdout)}:abcd1234", 60)
    assert queue.requeue_stale(jobs._dead_local_owner) == []
    now[0] += 61
    assert [j.id for j in queue.requeue_stale(jobs._dead_local_owner)] == [job.id]


def test_resubmitting_while_a_worker_retries_keeps_one_waiting_job(store):
    """A failed attempt going back to `queued` races with a new submission of the same
    document; the per-document lock keeps the one-waiting-job rule instead of a
    unique-index error, and the retry yields (`superseded`) to the newer job."""
    queue = PostgresJobQueue(store, backoff_s=0.0)
    errors: list[BaseException] = []
    stop = threading.Event()

    def resubmit() -> None:
        try:
            while not stop.is_set():
                queue.enqueue("t", "doc_a", {"title": "again"})
        except BaseException as exc:
            errors.append(exc)

    queue.enqueue("t", "doc_a")
    thread = threading.Thread(target=resubmit)
    thread.start()
    settled = collections.Counter()
    try:
        for _ in range(150):
            job = queue.claim("w", 30)
            if job is not None:
                settled[queue.fail(job.id, "w", "flaky").state] += 1
    finally:
        stop.set()
        thread.join()
    assert errors == []
    assert settled["superseded"] > 0  # the retry found the newer job waiting, and gave way
    with store.transaction() as conn:
        states = dict(conn.execute("SELECT state, count(*) FROM jobs GROUP BY state").fetchall())
    assert states["queued"] == 1 and "running" not in states


def test_the_api_and_workers_open_the_postgres_queue(pg_url, settings):
    engine = Engine.open(settings.model_copy(update={"database_url": pg_url}))
    try:
        assert isinstance(open_queue(engine), PostgresJobQueue)
        app = create_app(engine, start_workers=False)  # an API-only process on PostgreSQL
        assert isinstance(app.state.queue, PostgresJobQueue)
    finally:
        engine.close()


# -- three worker processes, one database -------------------------------------------------
ANIMALS = ("otter", "heron", "badger", "lynx", "marten", "ibis", "vole", "stoat")
COLOURS = ("amber", "slate", "olive", "coral", "ivory")


def note(i: int) -> bytes:
    return f"Field note {i}: the {ANIMALS[i % 8]} seen at site {i * 7} had {COLOURS[i % 5]} markings.".encode()


def wait_until(check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}")


@pytest.fixture
def embeddings_api():
    """An OpenAI-compatible embeddings endpoint in this process that the workers share:
    it records every text it embeds, and spares each worker seconds of model loading."""
    with serve_fake_openai() as server:
        yield server


def test_three_worker_processes_ingest_200_documents_each_exactly_once(pg_url, tmp_path, embeddings_api):
    home = tmp_path / "home"  # the originals directory all three share
    env = {**os.environ, "GROUNDWORK_HOME": str(home), "GROUNDWORK_DATABASE_URL": pg_url,
           "GROUNDWORK_EMBEDDER": "openai", "GROUNDWORK_EMBED_BASE_URL": embeddings_api.base_url,
           "GROUNDWORK_EMBED_MODEL": "fake-embed"}
    groundwork = Path(sys.executable).with_name("groundwork")
    logs = [tmp_path / f"worker{i}.log" for i in range(3)]
    workers = []
    for log in logs:
        with log.open("w") as stderr:
            workers.append(subprocess.Popen([str(groundwork), "worker", "--threads", "2"], cwd=tmp_path, env=env,
                                            stdout=subprocess.DEVNULL, stderr=stderr))
    engine = Engine.open(load_settings(home=home, database_url=pg_url))  # submits only: no model here
    try:
        def ready() -> bool:
            for proc, log in zip(workers, logs):
                assert proc.poll() is None, f"a worker exited: {log.read_text()[-2000:]}"
            return all("Ctrl-C to stop" in log.read_text() for log in logs)

        wait_until(ready, 60, "three workers")
        queue = open_queue(engine)
        submitted = {jobs.submit(engine, queue, Source(note(i), f"note-{i}.txt")).id for i in range(200)}
        assert len(submitted) == 200

        def finished() -> bool:
            with psycopg.connect(pg_url) as conn:
                states = dict(conn.execute("SELECT state, count(*) FROM jobs GROUP BY state").fetchall())
            assert set(states) <= {"queued", "running", "done"}, states
            return states.get("done") == 200

        wait_until(finished, 60, "200 jobs done")
        for proc in workers:
            proc.send_signal(signal.SIGTERM)
        assert [proc.wait(timeout=60) for proc in workers] == [0, 0, 0]
        documents = engine.store.list_documents(DEFAULT_TENANT)
    finally:
        for proc in workers:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        engine.close()

    assert sorted(d.id for d in documents if d.status == "ready") == sorted(submitted)
    with psycopg.connect(pg_url) as conn:
        runs = conn.execute("SELECT document_id, state, attempts, claimed_by FROM jobs").fetchall()
        chunks = conn.execute("SELECT document_id, count(*), count(DISTINCT content_hash) FROM chunks "
                              "GROUP BY document_id").fetchall()
    # Every document queued once, claimed once, by one worker, and done: none twice, none lost.
    assert sorted(r[0] for r in runs) == sorted(submitted)
    assert {(state, attempts, len(claims)) for _, state, attempts, claims in runs} == {("done", 1, 1)}
    assert sorted(chunks) == sorted((doc_id, 1, 1) for doc_id in submitted)  # one chunk each, no duplicates
    # The work was shared: each of the three processes claimed some of it.
    per_worker = collections.Counter(claims[0] for *_, claims in runs)
    print("jobs per worker:", sorted(per_worker.values()))
    pids = {int(owner.split(":")[1]) for owner in per_worker}
    assert pids == {proc.pid for proc in workers} and min(per_worker.values()) >= 1, per_worker
    # ...and no text was embedded twice between them.
    embedded = [text for body in embeddings_api.requests for text in body["input"]]
    assert len(embedded) == 200
    assert all(sum(note(i).decode() in text for text in embedded) == 1 for i in range(200))
