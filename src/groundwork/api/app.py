"""FastAPI application factory. Errors from the GroundworkError tree are mapped to
`{error: {type, message}}` with their status code in one handler."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from .. import pipeline
from ..engine import Engine
from ..errors import GroundworkError
from ..output import answer_json, hit_json
from ..types import DEFAULT_TENANT, Scope

log = logging.getLogger(__name__)


class SearchRequest(BaseModel):
    query: str = Field(min_length=1)
    top_k: int | None = Field(None, ge=1, le=1000)
    mode: str = Field("hybrid", pattern="^(hybrid|vector|text)$")


class AskRequest(BaseModel):
    question: str = Field(min_length=1)
    top_k: int | None = Field(None, ge=1, le=1000)


def error_body(kind: str, message: str) -> dict:
    return {"error": {"type": kind, "message": message}}


def create_app(engine: Engine) -> FastAPI:
    app = FastAPI(title="Groundwork", version="0.1.0",
                  description="Attachment-aware retrieval-augmented generation.")
    app.state.engine = engine

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

    def kb_scope(kb: str) -> Scope:
        found = engine.store.get_kb(DEFAULT_TENANT, kb)
        return Scope(tenant=DEFAULT_TENANT, kb_ids=(found.id,))

    @app.post("/v1/kbs/{kb}/search")
    def search(kb: str, body: SearchRequest) -> dict:
        hits = pipeline.search(engine, body.query, scope=kb_scope(kb), top_k=body.top_k, mode=body.mode)
        return {"results": [hit_json(h) for h in hits]}

    @app.post("/v1/kbs/{kb}/ask")
    def ask(kb: str, body: AskRequest) -> dict:
        return answer_json(pipeline.ask(engine, body.question, scope=kb_scope(kb), top_k=body.top_k))

    return app
