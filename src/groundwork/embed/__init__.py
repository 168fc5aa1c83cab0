"""Embedders: text -> L2-normalised float32 vectors.

One narrow protocol; batching and over-long inputs are handled by shared free functions
so each backend only implements `embed`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np


class Embedder(Protocol):
    model_id: str  # recorded by the store next to every vector
    dim: int
    max_tokens: int  # longest input (in the embedder's own tokens) seen without truncation

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return a (len(texts), dim) float32 array of unit vectors."""
        ...

    def count_tokens(self, text: str) -> int:
        """Tokens this embedder would see for `text`, special tokens excluded."""
        ...


def embed_batched(embedder: Embedder, texts: Sequence[str], batch_size: int = 32,
                  on_batch: Callable[[int], None] | None = None) -> np.ndarray:
    """Embed in batches (bounded memory, progress callbacks). A text longer than the
    embedder's window is split into windows whose unit vectors are averaged, so no text
    is silently lost to truncation."""
    if not texts:
        return np.zeros((0, embedder.dim), dtype=np.float32)
    pieces: list[str] = []
    owners: list[int] = []
    for i, text in enumerate(texts):
        for piece in split_to_fit(embedder, text):
            pieces.append(piece)
            owners.append(i)
    parts = []
    for start in range(0, len(pieces), batch_size):
        batch = pieces[start:start + batch_size]
        parts.append(np.asarray(embedder.embed(batch), dtype=np.float32))
        if on_batch:
            on_batch(len(set(owners[start:start + batch_size])))
    vectors = np.vstack(parts)
    if len(pieces) == len(texts):
        return vectors
    pooled = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
    np.add.at(pooled, np.asarray(owners), vectors)
    return normalize(pooled)


def split_to_fit(embedder: Embedder, text: str) -> list[str]:
    """`text` itself when it fits the embedder's window, else word windows that do.
    Word token counts add up to (at most a little over) the joined count, so summing
    them is a safe, linear-time bound."""
    limit = embedder.max_tokens
    if embedder.count_tokens(text) <= limit:
        return [text]
    windows: list[str] = []
    current: list[str] = []
    used = 0
    for word in text.split():
        cost = max(1, embedder.count_tokens(word))
        if current and used + cost > limit:
            windows.append(" ".join(current))
            current, used = [], 0
        current.append(word)
        used += cost
    if current:
        windows.append(" ".join(current))
    return windows


def normalize(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)
