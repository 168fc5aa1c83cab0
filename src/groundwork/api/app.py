"""FastAPI application factory. Errors from the GroundworkError tree are mapped to
`{error: {type, message}}` with their status code in one handler.

    app = create_app(engine)                      # workers start with the app (lifespan)
    app = create_app(engine, open_access=True)    # no keys + loopback: one local tenant

Routers live in `api/routes/` (one per resource); the auth rule is in `api/deps.py`."""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from importlib import resources

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..engine import Engine
from ..errors import GroundworkError
from ..jobs import JobQueue, WorkerPool, open_queue
from .routes import assistants, attachments, chat, documents, kbs, openai_compat, search

log = logging.getLogger(__name__)


def error_body(kind: str, message: str) -> dict:
    return {"error": {"type": kind, "message": message}}


def create_app(engine: Engine, *, start_workers: bool = True, open_access: bool = False,
               workers: int = 2, queue: JobQueue | None = None, lease_s: float = 30.0) -> FastAPI:
    """The HTTP API over `engine`. `start_workers`: run the ingestion workers in this
    process while the app is up (off for an API-only process next to `groundwork
    worker`, and for tests that step jobs by hand through `app.state.pool`).
    `open_access`: see `api.deps` (set by `groundwork serve` on loopback)."""
    queue = queue or open_queue(engine)
    pool = WorkerPool(engine, queue, workers=workers, lease_s=lease_s)

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        if start_workers:
            pool.start()
        try:
            yield
        finally:
            if start_workers:
                pool.stop()

    app = FastAPI(title="Groundwork", version="0.1.0", lifespan=lifespan,
                  description="Attachment-aware retrieval-augmented generation.")
    app.state.engine, app.state.queue, app.state.pool = engine, queue, pool
    app.state.open_access = open_access

    @app.exception_handler(GroundworkError)
    async def groundwork_error(_: Request, exc: GroundworkError) -> JSONResponse:
        return JSONResponse(error_body(exc.type, exc.message), status_code=exc.status_code)

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        return JSONResponse(error_body("invalid_request", problems), status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = "not_found" if exc.status_code == 404 else "http_error"
        return JSONResponse(error_body(kind, str(exc.detail)), status_code=exc.status_code)

    @app.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error")
        return JSONResponse(error_body("internal_error", "internal error"), status_code=500)

    @app.get("/healthz")
    def health() -> dict:
        return {"status": "ok"}

    for module in (attachments, kbs, documents, search, assistants, chat, openai_compat):
        app.include_router(module.router)

    web = resources.files("groundwork") / "web"
    app.mount("/ui", StaticFiles(directory=str(web)), name="ui")

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(str(web / "index.html"))

    return app
