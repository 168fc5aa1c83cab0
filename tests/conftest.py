"""Shared fixtures: the real embedding model (loaded once per session), and engines over
a real SQLite file in a temporary directory."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest

from groundwork.config import load_settings
from groundwork.engine import Engine
from pg_fixtures import pg_server, pg_url  # noqa: F401 - one PostgreSQL per session, a database per test


class CountingEmbedder:
    """The real embedder, counting the texts it is asked to embed."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.model_id, self.dim, self.max_tokens = inner.model_id, inner.dim, inner.max_tokens
        self.calls = 0
        self.texts = 0

    def embed(self, texts):
        self.calls += 1
        self.texts += len(texts)
        return self.inner.embed(texts)

    def count_tokens(self, text):
        return self.inner.count_tokens(text)


@pytest.fixture(scope="session")
def local_embedder():
    from groundwork.embed.local import LocalEmbedder

    return LocalEmbedder()


@pytest.fixture
def embedder(local_embedder):
    return CountingEmbedder(local_embedder)


@pytest.fixture
def settings(tmp_path):
    return load_settings(home=tmp_path / "home")


@pytest.fixture
def engine(settings, embedder):
    engine = Engine.open(settings, embedder=embedder)
    yield engine
    engine.close()
