"""Ingestion jobs: submit (store the original, queue it), claim with a lease, process,
retry with backoff, resume after a crash.

    submit(engine, queue, source)   -> Document (status "queued", or the existing one
                                       when the same content is already there: no work)
    WorkerPool(engine, queue)       -> threads that claim jobs and run
                                       `pipeline.process_document`, updating the
                                       document's status at every stage

Document status: queued -> extracting -> chunking -> embedding -> indexing -> ready, or
failed (with the reason). A failed attempt goes back to `queued` with exponential
backoff until `max_attempts`; a worker that dies mid-job (kill -9, a parser taking the
process down) stops renewing its lease, and the job is requeued by whoever notices,
counting that attempt too, so a file that keeps crashing ends `failed`, never loops.

`JobQueue` is the narrow contract; each queue keeps its SQL dialect to itself:
`jobs_sqlite.SQLiteJobQueue` (a second connection to the store's file, WAL, `BEGIN
IMMEDIATE` claims) and `jobs_postgres.PostgresJobQueue` (`FOR UPDATE SKIP LOCKED` claims,
workers on any number of machines, leases on the database's clock). `open_queue` picks
the one next to the engine's store.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from .engine import Engine
from .errors import (ConfigError, ExtractError, GroundworkError, InvalidRequest, LimitExceeded, NotFound,
                     UnsupportedFile)
from . import pipeline
from .pipeline import Source
from .storage import sha256
from .store.sqlite import new_id
from .types import Document

log = logging.getLogger(__name__)

STAGES = ("queued", "extracting", "chunking", "embedding", "indexing", "ready", "failed")
# Errors that another attempt cannot fix; everything else (a parser crash, the
# embedding backend, the database) is retried with backoff.
PERMANENT = (UnsupportedFile, LimitExceeded, InvalidRequest, NotFound)


@dataclass(frozen=True)
class Job:
    id: str
    tenant: str
    document_id: str
    state: str  # queued | running | done | failed | cancelled | superseded
    attempts: int
    max_attempts: int
    run_after: float
    lease_owner: str | None = None
    lease_until: float | None = None
    last_error: str | None = None
    payload: dict = field(default_factory=dict)


class JobQueue(Protocol):
    def enqueue(self, tenant: str, document_id: str, payload: dict | None = None) -> Job: ...
    def claim(self, owner: str, lease_s: float) -> Job | None: ...
    def heartbeat(self, job_id: str, owner: str, lease_s: float) -> bool: ...
    def complete(self, job_id: str, owner: str) -> bool: ...
    def fail(self, job_id: str, owner: str, error: str, *, retry: bool = True) -> Job | None: ...
    def requeue_stale(self, is_dead: Callable[[str], bool] = ...) -> list[Job]: ...
    def cancel(self, tenant: str, document_id: str) -> int: ...
    def latest(self, tenant: str, document_id: str) -> Job | None: ...
    def close(self) -> None: ...


JOB_COLUMNS = ("id, tenant, document_id, state, attempts, max_attempts, run_after, lease_owner, "
               "lease_until, last_error, payload")  # a Job's fields, in order, for every queue's SELECTs


def retry_delay(attempts: int, backoff_s: float, max_backoff_s: float) -> float:
    """Seconds before a failed job runs again: backoff_s, doubled per attempt, capped."""
    return min(backoff_s * 2 ** max(attempts - 1, 0), max_backoff_s)


def stale_error(attempts: int, max_attempts: int) -> str:
    """The reason recorded on a job whose worker stopped renewing its lease."""
    return f"the worker stopped while processing (attempt {attempts} of {max_attempts})"


def __getattr__(name: str):
    # The queues live in jobs_sqlite / jobs_postgres (imported when chosen, after Job
    # exists); this keeps `from groundwork.jobs import SQLiteJobQueue` working.
    if name == "SQLiteJobQueue":
        from .jobs_sqlite import SQLiteJobQueue
        return SQLiteJobQueue
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def open_queue(engine: Engine, **options) -> JobQueue:
    """The queue that lives next to the engine's store (the one place it is chosen)."""
    from .store.sqlite import SQLiteStore

    match engine.store:
        case SQLiteStore(path=path):
            from .jobs_sqlite import SQLiteJobQueue
            return SQLiteJobQueue(path, **options)
        case store if (engine.settings.database_url or "").startswith(("postgresql://", "postgres://")):
            from .jobs_postgres import PostgresJobQueue
            return PostgresJobQueue(store, **options)  # its `jobs` table, over the store's pool
        case other:
            raise ConfigError(f"no job queue for {type(other).__name__} yet "
                              "(GROUNDWORK_DATABASE_URL selects the store)")


# -- submit ---------------------------------------------------------------------------
def check_original(engine: Engine, source: Source) -> str:
    """The sniffed content type of an original, after the checks that come before
    anything is stored: size, declared type against content, supported type."""
    from .extract import SUPPORTED_TYPES, ensure_matches

    s, limit = source, engine.settings.max_upload_bytes
    if len(s.data) > limit:
        raise LimitExceeded(f"{s.filename}: {len(s.data):,} bytes exceeds the limit of {limit:,} bytes")
    content_type = ensure_matches(s.filename, s.content_type, s.data)
    if content_type not in SUPPORTED_TYPES:
        raise UnsupportedFile(f"{s.filename}: {content_type} is not a supported type")
    return content_type


def submit(engine: Engine, queue: JobQueue, source: Source) -> Document:
    """Check an original (`check_original`), store it, record the document as `queued`
    and queue its ingestion. The same content in the same place (or a replacement
    identical to the current version) is no new work: the existing document comes
    back. `source.document_id` set means replace that document (PUT)."""
    s, store = source, engine.store
    content_type = check_original(engine, s)
    digest = sha256(s.data)
    current = store.get_document(s.tenant, s.document_id) if s.document_id else None
    if current is None:
        same = store.find_document(s.tenant, s.kb_id, content_hash=digest)
        if same is not None and same.record_id == s.record_id:
            if same.status != "failed":
                return pipeline.change_mode(store, same, s.mode)
            current = same  # the same content failed before: try it again under its id
    elif current.content_hash == digest and current.status != "failed":
        return current
    else:
        running = queue.latest(s.tenant, current.id)
        if running is not None and running.state == "running":
            # Its run would write the old original and row back over the new version.
            raise InvalidRequest(f"document {current.id!r} is being processed ({current.status}); "
                                 "replace it once it is ready or failed")
    now = time.time()
    version = pipeline.next_version(current)
    document = Document(
        id=current.id if current else new_id("doc"), tenant=s.tenant, kb_id=s.kb_id,
        filename=s.filename, title=s.title or Path(s.filename).stem, content_type=content_type,
        size=len(s.data), content_hash=digest, source_url=s.source_url, version=version, status="queued",
        importance=s.importance, record_id=s.record_id,
        created_at=current.created_at if current else now, updated_at=now,
        mode=s.mode or (current.mode if current else "rag"))
    engine.storage.put(s.tenant, document.id, s.data)
    store.put_document(document, s.source_key or s.source_url or s.filename)
    store.set_status(s.tenant, document.id, "queued", progress={"stage": "queued", "stages": {}})
    queue.enqueue(s.tenant, document.id, {"title": s.title})
    return document


def wait_processed(store, tenant: str, document_ids, *, timeout: float = 120.0,
                   poll_s: float = 0.2) -> list[Document]:
    """Wait until each document is `ready` (a chat about a file just uploaded); raises
    ExtractError naming a file that failed, InvalidRequest if time runs out."""
    deadline = time.monotonic() + timeout
    while True:
        documents = [store.get_document(tenant, d) for d in document_ids]
        failed = [d for d in documents if d.status == "failed"]
        if failed:
            raise ExtractError(f"{failed[0].filename} could not be processed: {failed[0].error}")
        pending = [d for d in documents if d.status != "ready"]
        if not pending:
            return documents
        if time.monotonic() >= deadline:
            raise InvalidRequest(f"{pending[0].filename} is still being processed ({pending[0].status}); "
                                 "try again shortly")
        time.sleep(poll_s)


# -- workers --------------------------------------------------------------------------
class _Cancelled(Exception):
    """The job was cancelled (its document deleted) or its lease lost mid-run."""


def _owner_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _dead_local_owner(owner: str) -> bool:
    """True for a job owner that was a process on this machine which no longer exists:
    after `kill -9` and a restart, its jobs resume at once instead of after the lease."""
    host, _, rest = owner.partition(":")
    pid_text = rest.split(":", 1)[0]
    if host != socket.gethostname() or not pid_text.isdigit() or int(pid_text) == os.getpid():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class WorkerPool:
    """In-process worker threads over a JobQueue, plus one thread that renews the
    leases of running jobs and requeues jobs of dead workers."""

    def __init__(self, engine: Engine, queue: JobQueue, *, workers: int = 2, lease_s: float = 30.0,
                 poll_s: float = 1.0) -> None:
        self.engine, self.queue = engine, queue
        self.workers, self.lease_s, self.poll_s = workers, lease_s, poll_s
        self.owner = _owner_id()
        self._stop = threading.Event()
        self._wake = threading.Condition()
        self._running: dict[str, Job] = {}
        self._threads: list[threading.Thread] = []

    # lifecycle
    def start(self) -> None:
        self.recover()
        self._stop.clear()
        self._threads = [threading.Thread(target=self._loop, name=f"groundwork-worker-{i}", daemon=True)
                         for i in range(self.workers)]
        self._threads.append(threading.Thread(target=self._keepalive, name="groundwork-leases", daemon=True))
        for thread in self._threads:
            thread.start()

    def stop(self, timeout: float = 60.0) -> None:
        """Stop claiming; wait for the jobs in hand to finish (up to `timeout`)."""
        self._stop.set()
        self.wake()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._threads = []

    def wake(self) -> None:
        with self._wake:
            self._wake.notify_all()

    def recover(self) -> list[Job]:
        """Requeue (or fail) jobs whose worker died, and say so on their documents."""
        moved = self.queue.requeue_stale(_dead_local_owner)
        for job in moved:
            self._show_settled(job)
        return moved

    # work
    def run_once(self) -> bool:
        """Claim and process one due job; False if none was due."""
        job = self.queue.claim(self.owner, self.lease_s)
        if job is None:
            return False
        self._running[job.id] = job
        try:
            self._process(job)
        finally:
            self._running.pop(job.id, None)
        return True

    def drain(self, timeout: float = 60.0) -> None:
        """Process due jobs until none is left (tests and `groundwork worker --once`)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.run_once():
            pass

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                if self.run_once():
                    continue
            except Exception:  # keep the worker alive whatever one job did
                log.exception("worker loop error")
            with self._wake:
                self._wake.wait(self.poll_s)

    def _keepalive(self) -> None:
        while not self._stop.wait(min(self.lease_s / 3, 10.0)):
            try:
                for job_id in list(self._running):
                    self.queue.heartbeat(job_id, self.owner, self.lease_s)
                if self.recover():
                    self.wake()
            except Exception:
                log.exception("lease keeper error")

    def _process(self, job: Job) -> None:
        from .pipeline import process_document

        store, tenant, doc_id = self.engine.store, job.tenant, job.document_id
        stages: dict[str, dict] = {}

        def on_stage(stage: str, details: dict) -> None:
            if not self.queue.heartbeat(job.id, self.owner, self.lease_s):
                raise _Cancelled()
            stages[stage] = {**stages.get(stage, {}), **details,
                             "started_at": stages.get(stage, {}).get("started_at", time.time())}
            store.set_status(tenant, doc_id, stage, progress=self._progress(job, stage, stages))

        try:
            report = process_document(self.engine, tenant, doc_id, on_stage=on_stage,
                                      title=job.payload.get("title"))
        except _Cancelled:
            self._discard_if_cancelled(job)
            return
        except GroundworkError as exc:
            self._failed(job, exc.message, retry=not isinstance(exc, PERMANENT))
            return
        except Exception as exc:  # a parser or library crash: retried, then failed with the reason
            log.exception("job %s (%s) crashed", job.id, doc_id)
            self._failed(job, f"{doc_id}: processing crashed ({type(exc).__name__}: {exc})", retry=True)
            return
        if not self.queue.complete(job.id, self.owner):
            self._discard_if_cancelled(job)
            return
        try:
            progress = {**store.get_progress(tenant, doc_id), **self._progress(job, "ready", stages),
                        "embedded": report.embedded}
            store.set_status(tenant, doc_id, "ready", progress=progress)
        except NotFound:
            pass

    @staticmethod
    def _progress(job: Job, stage: str, stages: dict) -> dict:
        return {"stage": stage, "attempt": job.attempts, "max_attempts": job.max_attempts,
                "stages": dict(stages)}

    def _failed(self, job: Job, error: str, *, retry: bool) -> None:
        settled = self.queue.fail(job.id, self.owner, error, retry=retry)
        if settled is None:
            self._discard_if_cancelled(job)
        else:
            self._show_settled(settled)

    def _show_settled(self, job: Job) -> None:
        store, error = self.engine.store, job.last_error or "unknown error"
        try:
            if job.state == "queued":
                store.set_status(job.tenant, job.document_id, "queued", error=error,
                                 progress={"stage": "queued", "attempt": job.attempts,
                                           "max_attempts": job.max_attempts, "retry_at": job.run_after})
            elif job.state == "failed":
                store.set_status(job.tenant, job.document_id, "failed",
                                 error=f"{error} (gave up after {job.attempts} attempt"
                                       f"{'s' if job.attempts != 1 else ''})",
                                 progress={"stage": "failed", "attempt": job.attempts,
                                           "max_attempts": job.max_attempts})
        except NotFound:
            pass

    def _discard_if_cancelled(self, job: Job) -> None:
        """A job cancelled mid-run belonged to a deleted document: make sure nothing the
        run wrote brings it back."""
        latest = self.queue.latest(job.tenant, job.document_id)
        if latest is not None and latest.id == job.id and latest.state == "cancelled":
            from .pipeline import delete_document
            try:
                delete_document(self.engine, job.tenant, job.document_id)
            except NotFound:
                self.engine.storage.delete(job.tenant, job.document_id)
