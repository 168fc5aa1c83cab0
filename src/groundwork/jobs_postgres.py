"""The job queue on PostgreSQL: workers in any number of processes, on any number of
machines, share the `jobs` table (migration 0003) through the store's connection pool;
API servers only enqueue, so they keep no state of their own.

- Claim: one statement takes the oldest due `queued` job whose document has no running
  job, `FOR UPDATE SKIP LOCKED`: concurrent claimers skip a row another one is taking
  instead of waiting for it, so no job is handed out twice. Claiming sets the lease,
  counts the attempt and appends the worker (`host:pid:id`) to `claimed_by`.
- Leases: `heartbeat` extends `lease_until`. A running job whose lease ran out goes back
  to `queued` (or to `failed` once its attempts are used up) in `requeue_stale`, which
  every worker pool runs now and then. The `is_dead` pid check of the SQLite queue is
  ignored here: a pid means nothing on another machine, or in another container that
  shares the host name, so only the lease decides.
- Time: epoch seconds on the database's clock, the one clock all workers share (a
  `clock` may be given instead, for tests).
- A document's jobs change (enqueue, settle, cancel) under a transaction-scoped advisory
  lock on that document, so "one waiting job per document" and "a requeued job yields to
  a newer submission" hold without locking the table.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager

from psycopg.types.json import Jsonb

from .jobs import JOB_COLUMNS, Job, retry_delay, stale_error
from .store.sqlite import new_id

_DOCUMENT_LOCK = 0x6A6F6273  # "jobs": the first key of (key, hashtext(document)) advisory locks


class PostgresJobQueue:
    """Jobs in the `jobs` table of a PostgresStore's database, over its pool (closing the
    queue leaves the pool to the store)."""

    def __init__(self, store, *, max_attempts: int = 3, backoff_s: float = 5.0, max_backoff_s: float = 300.0,
                 clock: Callable[[], float] | None = None) -> None:
        self.store = store  # a PostgresStore: `transaction()` yields a connection in a transaction
        self.max_attempts, self.backoff_s, self.max_backoff_s = max_attempts, backoff_s, max_backoff_s
        self.clock = clock

    @contextmanager
    def _tx(self):
        """A transaction and its `now`; psycopg errors become StoreError in the store."""
        with self.store.transaction() as conn:
            if self.clock is not None:
                now = self.clock()
            else:
                now = conn.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()[0]
            yield conn, now

    @staticmethod
    def _lock_document(conn, tenant: str, document_id: str) -> None:
        # Released at commit. Two documents sharing a hash only wait for each other.
        conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_DOCUMENT_LOCK, f"{tenant}/{document_id}"))

    def enqueue(self, tenant: str, document_id: str, payload: dict | None = None) -> Job:
        with self._tx() as (conn, now):
            self._lock_document(conn, tenant, document_id)
            # A waiting job is refreshed (new content, a fresh set of attempts). If a worker
            # is claiming it right now, ON CONFLICT waits for that and then inserts a new one.
            row = conn.execute(
                "INSERT INTO jobs (id, tenant, document_id, state, payload, attempts, max_attempts, run_after, "
                "created_at, updated_at) VALUES (%s, %s, %s, 'queued', %s, 0, %s, %s, %s, %s) "
                "ON CONFLICT (tenant, document_id) WHERE state = 'queued' DO UPDATE SET "
                "payload = excluded.payload, attempts = 0, run_after = excluded.run_after, last_error = NULL, "
                f"updated_at = excluded.updated_at RETURNING {JOB_COLUMNS}",
                (new_id("job"), tenant, document_id, Jsonb(payload or {}), self.max_attempts, now, now, now),
            ).fetchone()
        return _job(row)

    def claim(self, owner: str, lease_s: float) -> Job | None:
        with self._tx() as (conn, now):
            # Never two running jobs for one document (a replacement queued mid-run waits).
            row = conn.execute(
                "UPDATE jobs SET state = 'running', attempts = attempts + 1, lease_owner = %(owner)s, "
                "lease_until = %(until)s, claimed_by = array_append(claimed_by, %(owner)s), updated_at = %(now)s "
                "WHERE state = 'queued' AND id = (SELECT id FROM jobs j WHERE state = 'queued' "
                "AND run_after <= %(now)s AND NOT EXISTS (SELECT 1 FROM jobs r WHERE r.tenant = j.tenant "
                "AND r.document_id = j.document_id AND r.state = 'running') "
                "ORDER BY run_after, seq LIMIT 1 FOR UPDATE SKIP LOCKED) "
                f"RETURNING {JOB_COLUMNS}",
                {"owner": owner, "until": now + lease_s, "now": now}).fetchone()
        return _job(row) if row else None

    def heartbeat(self, job_id: str, owner: str, lease_s: float) -> bool:
        with self._tx() as (conn, now):
            return bool(conn.execute(
                "UPDATE jobs SET lease_until = %s, updated_at = %s WHERE id = %s AND lease_owner = %s "
                "AND state = 'running'", (now + lease_s, now, job_id, owner)).rowcount)

    def complete(self, job_id: str, owner: str) -> bool:
        with self._tx() as (conn, now):
            return bool(conn.execute(
                "UPDATE jobs SET state = 'done', lease_owner = NULL, lease_until = NULL, updated_at = %s "
                "WHERE id = %s AND lease_owner = %s AND state = 'running'", (now, job_id, owner)).rowcount)

    def fail(self, job_id: str, owner: str, error: str, *, retry: bool = True) -> Job | None:
        """Back to `queued` after an exponential backoff, or `failed` for good once the
        attempts are used up (or `retry` is False). None if the job was no longer ours."""
        with self._tx() as (conn, now):
            found = conn.execute("SELECT tenant, document_id FROM jobs WHERE id = %s", (job_id,)).fetchone()
            if found is None:
                return None
            self._lock_document(conn, *found)
            row = conn.execute("SELECT attempts, max_attempts FROM jobs WHERE id = %s AND lease_owner = %s "
                               "AND state = 'running' FOR UPDATE", (job_id, owner)).fetchone()
            if row is None:
                return None
            attempts, max_attempts = row
            again = retry and attempts < max_attempts
            run_after = now + retry_delay(attempts, self.backoff_s, self.max_backoff_s) if again else None
            return self._settle(conn, now, job_id, *found, error, run_after)

    def requeue_stale(self, is_dead: Callable[[str], bool] = lambda owner: False) -> list[Job]:
        """Running jobs whose lease expired go back to `queued` at once (the crash already
        counted as an attempt), or to `failed` when that was the last attempt. `is_dead`
        is ignored: see the module docstring."""
        with self._tx() as (conn, now):
            expired = conn.execute("SELECT id, tenant, document_id FROM jobs WHERE state = 'running' "
                                   "AND lease_until < %s ORDER BY lease_until", (now,)).fetchall()
        moved = []
        for job_id, tenant, document_id in expired:  # one transaction each: one document lock at a time
            with self._tx() as (conn, now):
                self._lock_document(conn, tenant, document_id)
                # Checked again under the lock: renewed, finished, or already recovered by another worker.
                row = conn.execute("SELECT attempts, max_attempts FROM jobs WHERE id = %s AND state = 'running' "
                                   "AND lease_until < %s FOR UPDATE SKIP LOCKED", (job_id, now)).fetchone()
                if row is None:
                    continue
                attempts, max_attempts = row
                moved.append(self._settle(conn, now, job_id, tenant, document_id, stale_error(attempts, max_attempts),
                                          now if attempts < max_attempts else None))
        return moved

    @staticmethod
    def _settle(conn, now: float, job_id: str, tenant: str, document_id: str, error: str,
                run_after: float | None) -> Job:
        """Called with the document locked and the job's row locked."""
        if run_after is None:
            state = "failed"
        else:
            waiting = conn.execute("SELECT 1 FROM jobs WHERE tenant = %s AND document_id = %s AND state = 'queued'",
                                   (tenant, document_id)).fetchone()
            state = "superseded" if waiting else "queued"  # a newer submission takes over
        return _job(conn.execute(
            "UPDATE jobs SET state = %s, run_after = COALESCE(%s::float8, run_after), lease_owner = NULL, "
            f"lease_until = NULL, last_error = %s, updated_at = %s WHERE id = %s RETURNING {JOB_COLUMNS}",
            (state, run_after, error, now, job_id)).fetchone())

    def cancel(self, tenant: str, document_id: str) -> int:
        with self._tx() as (conn, now):
            self._lock_document(conn, tenant, document_id)
            return conn.execute(
                "UPDATE jobs SET state = 'cancelled', lease_owner = NULL, lease_until = NULL, updated_at = %s "
                "WHERE tenant = %s AND document_id = %s AND state IN ('queued', 'running')",
                (now, tenant, document_id)).rowcount

    def latest(self, tenant: str, document_id: str) -> Job | None:
        with self.store.transaction() as conn:
            row = conn.execute(f"SELECT {JOB_COLUMNS} FROM jobs WHERE tenant = %s AND document_id = %s "
                               "ORDER BY created_at DESC, seq DESC LIMIT 1", (tenant, document_id)).fetchone()
        return _job(row) if row else None

    def close(self) -> None:
        """Nothing of its own to release: the connections belong to the store."""


def _job(row) -> Job:
    return Job(*row)  # JSONB `payload` arrives as a dict, in Job's last field
