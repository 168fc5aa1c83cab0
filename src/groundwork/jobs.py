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

`JobQueue` is the narrow contract; `SQLiteJobQueue` keeps every SQL dialect detail (a
second connection to the store's file, WAL, `BEGIN IMMEDIATE` claims). A PostgreSQL
queue would claim with `SELECT ... FOR UPDATE SKIP LOCKED` behind the same methods.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from .engine import Engine
from .errors import (ConfigError, ExtractError, GroundworkError, InvalidRequest, LimitExceeded, NotFound,
                     StoreError, UnsupportedFile)
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


_JOB_COLUMNS = ("id, tenant, document_id, state, attempts, max_attempts, run_after, lease_owner, "
                "lease_until, last_error, payload")


class SQLiteJobQueue:
    """Jobs in the `jobs` table of the embedded store's SQLite file."""

    def __init__(self, path: Path, *, max_attempts: int = 3, backoff_s: float = 5.0,
                 max_backoff_s: float = 300.0, clock: Callable[[], float] = time.time) -> None:
        self.max_attempts, self.backoff_s, self.max_backoff_s = max_attempts, backoff_s, max_backoff_s
        self.clock = clock
        try:
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the job queue in {path}: {exc}") from None
        self._lock = threading.RLock()
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL"):
            self._db.execute(f"PRAGMA {pragma}")

    def _tx(self, work: Callable[[sqlite3.Connection], object]):
        # BEGIN IMMEDIATE takes the write lock up front: two claimers never pick the same row.
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    result = work(self._db)
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
                return result
            except sqlite3.Error as exc:
                raise StoreError(f"job queue: {exc}") from None

    def enqueue(self, tenant: str, document_id: str, payload: dict | None = None) -> Job:
        now, data = self.clock(), json.dumps(payload or {})

        def work(db):
            row = db.execute(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE tenant = ? AND document_id = ? "
                             "AND state = 'queued'", (tenant, document_id)).fetchone()
            if row is not None:  # refresh the waiting job: new content, a fresh set of attempts
                db.execute("UPDATE jobs SET payload = ?, attempts = 0, run_after = ?, last_error = NULL, "
                           "updated_at = ? WHERE id = ?", (data, now, now, row[0]))
                return row[0]
            job_id = new_id("job")
            db.execute("INSERT INTO jobs (id, tenant, document_id, state, payload, attempts, max_attempts, "
                       "run_after, created_at, updated_at) VALUES (?, ?, ?, 'queued', ?, 0, ?, ?, ?, ?)",
                       (job_id, tenant, document_id, data, self.max_attempts, now, now, now))
            return job_id

        return self._get(self._tx(work))

    def claim(self, owner: str, lease_s: float) -> Job | None:
        now = self.clock()

        def work(db):
            # Never two running jobs for one document (a replacement queued mid-run waits).
            row = db.execute(
                "SELECT id FROM jobs j WHERE state = 'queued' AND run_after <= ? AND NOT EXISTS "
                "(SELECT 1 FROM jobs r WHERE r.tenant = j.tenant AND r.document_id = j.document_id "
                "AND r.state = 'running') ORDER BY run_after, created_at LIMIT 1", (now,)).fetchone()
            if row is None:
                return None
            db.execute("UPDATE jobs SET state = 'running', attempts = attempts + 1, lease_owner = ?, "
                       "lease_until = ?, updated_at = ? WHERE id = ?", (owner, now + lease_s, now, row[0]))
            return row[0]

        job_id = self._tx(work)
        return self._get(job_id) if job_id else None

    def heartbeat(self, job_id: str, owner: str, lease_s: float) -> bool:
        now = self.clock()
        return bool(self._tx(lambda db: db.execute(
            "UPDATE jobs SET lease_until = ?, updated_at = ? WHERE id = ? AND lease_owner = ? "
            "AND state = 'running'", (now + lease_s, now, job_id, owner)).rowcount))

    def complete(self, job_id: str, owner: str) -> bool:
        now = self.clock()
        return bool(self._tx(lambda db: db.execute(
            "UPDATE jobs SET state = 'done', lease_owner = NULL, lease_until = NULL, updated_at = ? "
            "WHERE id = ? AND lease_owner = ? AND state = 'running'", (now, job_id, owner)).rowcount))

    def fail(self, job_id: str, owner: str, error: str, *, retry: bool = True) -> Job | None:
        """Back to `queued` after an exponential backoff, or `failed` for good once the
        attempts are used up (or `retry` is False). None if the job was no longer ours."""
        now = self.clock()

        def work(db):
            row = db.execute("SELECT attempts, max_attempts, tenant, document_id FROM jobs WHERE id = ? "
                             "AND lease_owner = ? AND state = 'running'", (job_id, owner)).fetchone()
            if row is None:
                return False
            attempts, max_attempts, tenant, document_id = row
            again = retry and attempts < max_attempts
            self._settle(db, job_id, tenant, document_id, error, now + self._backoff(attempts) if again else None)
            return True

        return self._get(job_id) if self._tx(work) else None

    def requeue_stale(self, is_dead: Callable[[str], bool] = lambda owner: False) -> list[Job]:
        """Running jobs whose lease expired, or whose owner is known to be dead, go back
        to `queued` at once (the crash already counted as an attempt), or to `failed`
        when that was the last attempt."""
        now = self.clock()

        def work(db):
            rows = db.execute("SELECT id, tenant, document_id, attempts, max_attempts, lease_owner, lease_until "
                              "FROM jobs WHERE state = 'running'").fetchall()
            moved = []
            for job_id, tenant, document_id, attempts, max_attempts, owner, until in rows:
                if (until or 0) >= now and not (owner and is_dead(owner)):
                    continue
                error = f"the worker stopped while processing (attempt {attempts} of {max_attempts})"
                self._settle(db, job_id, tenant, document_id, error, now if attempts < max_attempts else None)
                moved.append(job_id)
            return moved

        return [self._get(job_id) for job_id in self._tx(work)]

    def _settle(self, db, job_id: str, tenant: str, document_id: str, error: str,
                run_after: float | None) -> None:
        now = self.clock()
        if run_after is None:
            state = "failed"
        else:
            waiting = db.execute("SELECT 1 FROM jobs WHERE tenant = ? AND document_id = ? AND state = 'queued'",
                                 (tenant, document_id)).fetchone()
            state = "superseded" if waiting else "queued"  # a newer submission takes over
        db.execute("UPDATE jobs SET state = ?, run_after = COALESCE(?, run_after), lease_owner = NULL, "
                   "lease_until = NULL, last_error = ?, updated_at = ? WHERE id = ?",
                   (state, run_after, error, now, job_id))

    def _backoff(self, attempts: int) -> float:
        return min(self.backoff_s * 2 ** max(attempts - 1, 0), self.max_backoff_s)

    def cancel(self, tenant: str, document_id: str) -> int:
        now = self.clock()
        return self._tx(lambda db: db.execute(
            "UPDATE jobs SET state = 'cancelled', lease_owner = NULL, lease_until = NULL, updated_at = ? "
            "WHERE tenant = ? AND document_id = ? AND state IN ('queued', 'running')",
            (now, tenant, document_id)).rowcount)

    def latest(self, tenant: str, document_id: str) -> Job | None:
        with self._lock:
            row = self._db.execute(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE tenant = ? AND document_id = ? "
                                   "ORDER BY created_at DESC, rowid DESC LIMIT 1", (tenant, document_id)).fetchone()
        return _job(row) if row else None

    def _get(self, job_id: str) -> Job:
        with self._lock:
            row = self._db.execute(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None:
            raise NotFound(f"job {job_id!r} not found")
        return _job(row)

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _job(row) -> Job:
    *head, payload = row
    return Job(*head, payload=json.loads(payload or "{}"))


def open_queue(engine: Engine, **options) -> JobQueue:
    """The queue that lives next to the engine's store (the one place it is chosen)."""
    from .store.sqlite import SQLiteStore

    match engine.store:
        case SQLiteStore(path=path):
            return SQLiteJobQueue(path, **options)
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
                return same
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
    # A ready document gets its next version; a queued or failed one keeps the number.
    version = 1 if current is None else current.version + 1 if current.status == "ready" else current.version
    document = Document(
        id=current.id if current else new_id("doc"), tenant=s.tenant, kb_id=s.kb_id,
        filename=s.filename, title=s.title or Path(s.filename).stem, content_type=content_type,
        size=len(s.data), content_hash=digest, source_url=s.source_url, version=version, status="queued",
        importance=s.importance, record_id=s.record_id,
        created_at=current.created_at if current else now, updated_at=now)
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
