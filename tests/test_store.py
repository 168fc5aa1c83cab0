"""Runs the Store contract against every backend."""

import pytest

from groundwork.store.sqlite import SQLiteStore
from pg_fixtures import pg_server, pg_url  # noqa: F401 - the postgres param's server
from store_contract import *  # noqa: F401,F403 - the contract's tests


@pytest.fixture(params=["sqlite", "postgres"])
def store(request, tmp_path):
    match request.param:
        case "sqlite":
            backend = SQLiteStore(tmp_path / "store.db")
        case "postgres":
            from groundwork.store.postgres import PostgresStore

            backend = PostgresStore(request.getfixturevalue("pg_url"), pool_size=4)
    yield backend
    backend.close()


def test_sqlite_migrations_are_recorded_once(tmp_path):
    first = SQLiteStore(tmp_path / "m.db")
    rows = first._query("SELECT number, name FROM schema_migrations")
    assert [r[0] for r in rows] == sorted(r[0] for r in rows) and rows
    first.close()
    again = SQLiteStore(tmp_path / "m.db")
    assert again.migrate() == []
    again.close()
