"""Request dependencies: the engine, the job queue, and the caller's tenant.

Auth rule (ARCHITECTURE §4):
- A request with `Authorization: Bearer <key>` is served as the key's tenant; an
  unknown key is a 401, always.
- A request without a key is served as the single local tenant (`default`) only while
  the app runs with `open_access=True` AND no API key exists at all (checked on every
  request, so creating the first key closes the open door without a restart). Then any
  bearer value is accepted too, so clients that insist on sending some key (the
  `openai` SDK) still work locally.
- Otherwise: 401.
`groundwork serve` sets `open_access` when it binds a loopback address (127.0.0.0/8,
::1, localhost); any other bind address requires keys (`groundwork keys create`).
"""

from __future__ import annotations

import ipaddress
from typing import Annotated

from fastapi import Depends, Request

from .. import access
from ..engine import Engine
from ..errors import Unauthenticated
from ..jobs import JobQueue
from ..types import DEFAULT_TENANT


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def get_engine(request: Request) -> Engine:
    return request.app.state.engine


def get_queue(request: Request) -> JobQueue:
    return request.app.state.queue


def current_tenant(request: Request) -> str:
    store = request.app.state.engine.store
    scheme, _, key = request.headers.get("authorization", "").partition(" ")
    key = key.strip()
    if request.app.state.open_access and not access.any_api_keys(store):
        return DEFAULT_TENANT
    if scheme.lower() != "bearer" or not key:
        raise Unauthenticated("missing API key: send Authorization: Bearer <key> "
                              "(create one with `groundwork keys create --tenant NAME`)")
    return access.tenant_for_key(store, key)


def wake_workers(request: Request) -> None:
    """New jobs were queued: let an idle worker pick them up now, not at its next poll."""
    request.app.state.pool.wake()


EngineDep = Annotated[Engine, Depends(get_engine)]
QueueDep = Annotated[JobQueue, Depends(get_queue)]
Tenant = Annotated[str, Depends(current_tenant)]
