"""Any OpenAI-compatible embeddings API (OpenAI, Azure, vLLM, Ollama, ...)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import ConfigError, EmbedError
from . import normalize


class OpenAIEmbedder:
    """Embeddings over HTTP. Token counts are estimated (4 characters a token), which is
    only used to size chunks; the API enforces its own limit."""

    def __init__(self, model: str, base_url: str | None = None, api_key: str | None = None,
                 dimensions: int | None = None, max_tokens: int = 8000, timeout: float = 60.0,
                 http_client=None) -> None:
        try:
            import openai
        except ImportError:  # pragma: no cover
            raise ConfigError("GROUNDWORK_EMBEDDER=openai needs the openai package") from None
        self._openai = openai
        self._secret = api_key or ""
        self._client = openai.OpenAI(base_url=base_url, api_key=api_key or "not-needed",
                                     timeout=timeout, max_retries=2, http_client=http_client)
        self.model = model
        self.base_url = base_url or "https://api.openai.com/v1"
        self.dimensions = dimensions
        self.max_tokens = max_tokens
        self.model_id = f"openai:{model}" + (f"@{dimensions}" if dimensions else "")
        self.dim = dimensions or 0  # learned from the first response when not configured

    def count_tokens(self, text: str) -> int:
        return max(1, len(text) // 4)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        kwargs = {"dimensions": self.dimensions} if self.dimensions else {}
        try:
            response = self._client.embeddings.create(model=self.model, input=list(texts), **kwargs)
        except self._openai.OpenAIError as exc:
            # Servers may echo the key back in their error text: never repeat it.
            detail = str(exc).replace(self._secret, "***") if self._secret else str(exc)
            raise EmbedError(f"embeddings API at {self.base_url} (model {self.model}) failed: "
                             f"{exc.__class__.__name__}: {detail}") from None
        rows = sorted(response.data, key=lambda item: item.index)
        vectors = normalize(np.asarray([row.embedding for row in rows], dtype=np.float32))
        self.dim = vectors.shape[1]
        return vectors
