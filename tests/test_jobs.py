"""The ingestion job queue and the worker pool, with the real model, on both backends: a
real SQLite file and a real PostgreSQL database (the same contract tests run on each).
Time is a fake clock where backoff and leases are asserted."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading

import pytest

from groundwork import jobs
from groundwork.engine import Engine
from groundwork.jobs import SQLiteJobQueue, WorkerPool, open_queue
from groundwork.pipeline import Source
from groundwork.store.sqlite import SQLiteStore
from groundwork.types import DEFAULT_TENANT

BACKENDS = ["sqlite", "postgres"]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=BACKENDS)
def new_queue(request, tmp_path):
    """Makes queues over one fresh database (opening the store applies the migrations,
    0003_jobs included); each SQLite queue has its own connection, PostgreSQL queues
    share the store's pool."""
    if request.param == "sqlite":
        store = SQLiteStore(tmp_path / "q.db")

        def make(**options):
            return SQLiteJobQueue(store.path, **options)
    else:
        from groundwork.jobs_postgres import PostgresJobQueue
        from groundwork.store.postgres import PostgresStore

        store = PostgresStore(request.getfixturevalue("pg_url"))

        def make(**options):
            return PostgresJobQueue(store, **options)
    made = []

    def new(**options):
        made.append(make(**options))
        return made[-1]

    yield new
    for q in made:
        q.close()
    store.close()


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def queue(new_queue, clock):
    return new_queue(backoff_s=10, clock=clock)


def test_claims_are_exclusive_across_connections(new_queue):
    queues = [new_queue() for _ in range(6)]
    for i in range(30):
        queues[0].enqueue("t", f"doc_{i}")
    claimed: list[str] = []
    lock = threading.Lock()

    def worker(q, name: str) -> None:
        while (job := q.claim(name, 60)) is not None:
            with lock:
                claimed.append(job.document_id)

    threads = [threading.Thread(target=worker, args=(q, f"w{i}")) for i, q in enumerate(queues)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(claimed) == sorted(f"doc_{i}" for i in range(30))  # each once, none lost


def test_failures_back_off_exponentially_then_fail_for_good(queue, clock):
    queue.enqueue("t", "doc_a")
    job = queue.claim("w", 30)
    assert (job.state, job.attempts) == ("running", 1)
    again = queue.fail(job.id, "w", "parser exploded")
    assert (again.state, again.run_after) == ("queued", clock.now + 10)
    assert queue.claim("w", 30) is None  # not due yet
    clock.now += 10
    job = queue.claim("w", 30)
    assert job.attempts == 2
    assert queue.fail(job.id, "w", "parser exploded").run_after == clock.now + 20
    clock.now += 20
    job = queue.claim("w", 30)
    final = queue.fail(job.id, "w", "parser exploded")
    assert (final.state, final.attempts, final.last_error) == ("failed", 3, "parser exploded")
    clock.now += 10_000
    assert queue.claim("w", 30) is None


def test_permanent_errors_are_not_retried(queue):
    queue.enqueue("t", "doc_a")
    job = queue.claim("w", 30)
    assert queue.fail(job.id, "w", "unsupported", retry=False).state == "failed"


def test_expired_lease_is_requeued_and_a_job_that_keeps_dying_ends_failed(queue, clock):
    queue.enqueue("t", "doc_a")
    for attempt in (1, 2, 3):
        job = queue.claim(f"w{attempt}", 30)
        assert job.attempts == attempt
        assert queue.requeue_stale() == []  # lease still valid
        assert queue.heartbeat(job.id, f"w{attempt}", 30)
        clock.now += 31
        [moved] = queue.requeue_stale()
    assert moved.state == "failed" and "worker stopped" in moved.last_error
    assert queue.claim("w", 30) is None
    assert not queue.heartbeat(job.id, "w3", 30)  # the dead worker's lease is gone


def test_jobs_of_a_dead_local_process_resume_at_once(tmp_path):
    # SQLite only: the store is one file on one machine, so a pid says whether its
    # worker lives. (PostgreSQL workers span machines: only leases count there.)
    store = SQLiteStore(tmp_path / "q.db")
    queue = SQLiteJobQueue(store.path)
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                           text=True, check=True)
    dead = f"{socket.gethostname()}:{int(child.stdout)}:abcd1234"
    alive = f"{socket.gethostname()}:{os.getpid()}:ffff0000"
    queue.enqueue("t", "doc_dead")
    queue.enqueue("t", "doc_alive")
    first = queue.claim(dead, 3600)
    second = queue.claim(alive, 3600)
    moved = queue.requeue_stale(jobs._dead_local_owner)
    assert [j.id for j in moved] == [first.id] and moved[0].state == "queued"
    assert queue.latest("t", second.document_id).state == "running"
    queue.close()
    store.close()


def test_one_document_never_runs_twice_at_once(queue):
    queue.enqueue("t", "doc_a", {"title": "v1"})
    running = queue.claim("w1", 30)
    queue.enqueue("t", "doc_a", {"title": "v2"})  # replaced while running
    queue.enqueue("t", "doc_a", {"title": "v3"})  # ...and again: still one waiting job
    assert queue.claim("w2", 30) is None
    assert queue.complete(running.id, "w1")
    nxt = queue.claim("w2", 30)
    assert nxt.payload == {"title": "v3"} and nxt.id != running.id
    assert queue.claim("w3", 30) is None


def test_cancel_stops_a_running_job_from_completing(queue):
    queue.enqueue("t", "doc_a")
    job = queue.claim("w", 30)
    assert queue.cancel("t", "doc_a") == 1
    assert not queue.heartbeat(job.id, "w", 30)
    assert not queue.complete(job.id, "w")
    assert queue.latest("t", "doc_a").state == "cancelled"


# -- the worker pool over a real engine -------------------------------------------------
class RecordingStore:
    """The real store, recording every status it is given (a fake of the interface, by
    delegation)."""

    def __init__(self, inner) -> None:
        self._inner, self.statuses = inner, []

    def set_status(self, tenant, document_id, status, **kwargs):
        self.statuses.append(status)
        return self._inner.set_status(tenant, document_id, status, **kwargs)

    def __getattr__(self, name):
        return getattr(self._inner, name)


@pytest.fixture(params=BACKENDS)
def any_engine(request, settings, embedder):
    """The conftest engine (SQLite), or the same over a fresh PostgreSQL database."""
    if request.param == "sqlite":
        yield request.getfixturevalue("engine")
        return
    pg = Engine.open(settings.model_copy(update={"database_url": request.getfixturevalue("pg_url")}),
                     embedder=embedder)
    yield pg
    pg.close()


@pytest.fixture
def recorded(any_engine):
    store = RecordingStore(any_engine.store)
    return Engine(settings=any_engine.settings, store=store, storage=any_engine.storage,
                  _embedder=any_engine.embedder)


def test_document_goes_through_every_stage(any_engine, recorded):
    queue = open_queue(any_engine)
    pool = WorkerPool(recorded, queue)
    text = "# Beekeeping\n\nHives need a queen, workers and drones. Smoke calms the colony."
    doc = jobs.submit(recorded, queue, Source(text.encode(), "bees.md", title="Bees"))
    assert doc.status == "queued" and recorded.store.get_document(DEFAULT_TENANT, doc.id).status == "queued"
    assert pool.run_once() and not pool.run_once()
    seen = [s for i, s in enumerate(recorded.store.statuses) if i == 0 or recorded.store.statuses[i - 1] != s]
    assert seen == ["queued", "extracting", "chunking", "embedding", "indexing", "ready"]
    final = recorded.store.get_document(DEFAULT_TENANT, doc.id)
    progress = recorded.store.get_progress(DEFAULT_TENANT, doc.id)
    assert (final.status, final.version, final.title) == ("ready", 1, "Bees")
    stages = progress["stages"]  # in start order (PostgreSQL's jsonb does not keep key order)
    assert sorted(stages, key=lambda s: stages[s]["started_at"]) == ["extracting", "chunking", "embedding",
                                                                       "indexing"]
    assert progress["stages"]["embedding"]["embedded"] == progress["chunks"] == 1
    assert queue.latest(DEFAULT_TENANT, doc.id).state == "done"


def test_same_content_twice_is_no_new_work(any_engine):
    engine = any_engine
    queue = open_queue(engine)
    pool = WorkerPool(engine, queue)
    source = Source(b"Otters hold hands while they sleep so they do not drift apart.", "otters.txt")
    first = jobs.submit(engine, queue, source)
    again = jobs.submit(engine, queue, source)  # still queued: the same document, one job
    assert again.id == first.id
    pool.drain()
    texts = engine.embedder.texts
    third = jobs.submit(engine, queue, source)
    assert (third.id, third.status) == (first.id, "ready")
    assert not pool.run_once() and engine.embedder.texts == texts
    assert len(engine.store.list_documents(DEFAULT_TENANT)) == 1


def test_replacing_a_document_while_its_job_runs_is_refused(any_engine):
    from groundwork.errors import InvalidRequest

    engine = any_engine
    queue = open_queue(engine)
    doc = jobs.submit(engine, queue, Source(b"First version of the note.", "note.txt"))
    queue.claim("elsewhere", 30)  # a worker has it
    with pytest.raises(InvalidRequest, match="being processed"):
        jobs.submit(engine, queue, Source(b"Second version.", "note.txt", document_id=doc.id))
    assert engine.storage.get(DEFAULT_TENANT, doc.id) == b"First version of the note."


def test_a_file_that_keeps_failing_ends_failed_with_the_reason(any_engine):
    engine = any_engine
    queue = open_queue(engine, backoff_s=0.0)
    pool = WorkerPool(engine, queue)
    broken = b"%PDF-1.4\n" + b"\x00garbage that no reader can parse\n" * 40
    doc = jobs.submit(engine, queue, Source(broken, "broken.pdf", content_type="application/pdf"))
    pool.drain(timeout=30)
    assert not pool.run_once()  # nothing left: no endless loop
    final = engine.store.get_document(DEFAULT_TENANT, doc.id)
    job = queue.latest(DEFAULT_TENANT, doc.id)
    assert final.status == "failed" and "broken.pdf" in final.error and "3 attempts" in final.error
    assert (job.state, job.attempts) == ("failed", 3)
    assert engine.store.get_chunks(DEFAULT_TENANT, doc.id) == []
