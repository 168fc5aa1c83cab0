"""The job queue on the embedded SQLite store: a second connection to the store's file
(WAL), every change in a `BEGIN IMMEDIATE` transaction, so two claimers never pick the
same row. The contract, the backoff rule and the workers are in `groundwork.jobs`."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

from .errors import NotFound, StoreError
from .jobs import JOB_COLUMNS, Job, retry_delay, stale_error
from .store.sqlite import new_id


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
            row = db.execute(f"SELECT {JOB_COLUMNS} FROM jobs WHERE tenant = ? AND document_id = ? "
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
            delay = retry_delay(attempts, self.backoff_s, self.max_backoff_s)
            again = retry and attempts < max_attempts
            self._settle(db, job_id, tenant, document_id, error, now + delay if again else None)
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
                error = stale_error(attempts, max_attempts)
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

    def cancel(self, tenant: str, document_id: str) -> int:
        now = self.clock()
        return self._tx(lambda db: db.execute(
            "UPDATE jobs SET state = 'cancelled', lease_owner = NULL, lease_until = NULL, updated_at = ? "
            "WHERE tenant = ? AND document_id = ? AND state IN ('queued', 'running')",
            (now, tenant, document_id)).rowcount)

    def latest(self, tenant: str, document_id: str) -> Job | None:
        with self._lock:
            row = self._db.execute(f"SELECT {JOB_COLUMNS} FROM jobs WHERE tenant = ? AND document_id = ? "
                                   "ORDER BY created_at DESC, rowid DESC LIMIT 1", (tenant, document_id)).fetchone()
        return _job(row) if row else None

    def _get(self, job_id: str) -> Job:
        with self._lock:
            row = self._db.execute(f"SELECT {JOB_COLUMNS} FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None:
            raise NotFound(f"job {job_id!r} not found")
        return _job(row)

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _job(row) -> Job:
    *head, payload = row
    return Job(*head, payload=json.loads(payload or "{}"))
