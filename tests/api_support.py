"""Helpers shared by the API tests: an app over a real engine (real model, real SQLite
file), API keys per tenant, and polling a document until its job settles."""

from __future__ import annotations

import time
from contextlib import contextmanager
from pathlib import Path

from fastapi.testclient import TestClient

from conftest import CountingEmbedder
from groundwork.access import create_api_key
from groundwork.api.app import create_app
from groundwork.config import load_settings
from groundwork.engine import Engine


@contextmanager
def serve_app(home: Path, embedder, *, llm=None, open_access: bool = False, start_workers: bool = True,
              **overrides):
    """(client, engine) over a fresh engine in `home`; the app's workers run while the
    client is open. The engine's embedder counts the texts it embeds."""
    engine = Engine.open(load_settings(home=home, **overrides), embedder=CountingEmbedder(embedder), llm=llm)
    app = create_app(engine, open_access=open_access, start_workers=start_workers)
    try:
        with TestClient(app, raise_server_exceptions=False) as client:
            yield client, engine
    finally:
        engine.close()


def bearer(engine: Engine, tenant: str) -> dict:
    return {"Authorization": f"Bearer {create_api_key(engine.store, tenant)[1]}"}


def wait_document(client: TestClient, document_id: str, headers: dict | None = None, *,
                  until=("ready", "failed"), timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        body = client.get(f"/v1/documents/{document_id}", headers=headers).json()
        if body.get("status") in until or time.monotonic() > deadline:
            return body
        time.sleep(0.05)
