"""The Engine: settings plus the backends they select, built once and passed around.

Backend choice is one `match` per concern, importing inside each branch so the base
import stays fast and the model loads only when first needed."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from .config import Settings, get_settings
from .errors import ConfigError
from .storage import FileStorage, open_storage
from .store import Store, open_store


def make_embedder(settings: Settings):
    match settings.embedder:
        case "local":
            from .embed.local import LocalEmbedder
            return LocalEmbedder(threads=settings.threads)
        case "openai":
            from .embed.openai_api import OpenAIEmbedder
            return OpenAIEmbedder(model=settings.embed_model, base_url=settings.embed_base_url,
                                  api_key=settings.embed_api_key or settings.llm_api_key,
                                  dimensions=settings.embed_dimensions)
        case other:  # pragma: no cover - pydantic already rejects it
            raise ConfigError(f"GROUNDWORK_EMBEDDER: unknown embedder {other!r}")


def make_llm(settings: Settings):
    """An OpenAI-compatible chat client, or None for the extractive answerer."""
    match settings.llm_configured:
        case True:
            from .generate.openai_compat import OpenAICompatLLM
            return OpenAICompatLLM(base_url=settings.llm_base_url, model=settings.llm_model,
                                   api_key=settings.llm_api_key)
        case False:
            return None


@dataclass
class Engine:
    settings: Settings
    store: Store
    storage: FileStorage
    _embedder: object = None
    _llm: object = None
    _llm_built: bool = False
    _llms: dict = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def open(cls, settings: Settings | None = None, *, embedder=None, llm=None) -> "Engine":
        settings = settings or get_settings()
        home = Path(settings.home)
        home.mkdir(parents=True, exist_ok=True)
        engine = cls(settings=settings, store=open_store(settings),
                     storage=open_storage(settings, home), _embedder=embedder)
        if llm is not None:
            engine._llm, engine._llm_built = llm, True
        return engine

    @property
    def embedder(self):
        with self._lock:
            if self._embedder is None:
                self._embedder = make_embedder(self.settings)
            return self._embedder

    @property
    def llm(self):
        with self._lock:
            if not self._llm_built:
                self._llm, self._llm_built = make_llm(self.settings), True
            return self._llm

    def llm_for(self, model: str | None):
        """The configured LLM, or a client for another model on the same endpoint (an
        assistant's own model)."""
        base = self.llm
        if base is None or not model or model == getattr(base, "model", None):
            return base
        with self._lock:
            if model not in self._llms:
                from .generate.openai_compat import OpenAICompatLLM
                self._llms[model] = OpenAICompatLLM(base_url=self.settings.llm_base_url, model=model,
                                                    api_key=self.settings.llm_api_key)
            return self._llms[model]

    def close(self) -> None:
        self.store.close()
