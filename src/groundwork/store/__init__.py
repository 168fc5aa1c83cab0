"""The index: documents, chunks, full text, vectors, scoped by tenant.

`Store` is the contract every backend implements (SQLite embedded, PostgreSQL at
scale); `tests/store_contract.py` runs the same suite against each. Scope filters
(tenant, kb, document, record) are applied inside each backend's query, before ranking.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from ..types import Chunk, Document, Hit, KnowledgeBase, Scope


class Store(Protocol):
    # knowledge bases
    def create_kb(self, tenant: str, name: str, description: str = "") -> KnowledgeBase: ...
    def get_kb(self, tenant: str, name_or_id: str) -> KnowledgeBase: ...
    def list_kbs(self, tenant: str) -> list[KnowledgeBase]: ...
    def delete_kb(self, tenant: str, kb_id: str) -> None: ...

    # documents
    def put_document(self, document: Document, source_key: str) -> None: ...
    def get_document(self, tenant: str, document_id: str) -> Document: ...
    def find_document(self, tenant: str, kb_id: str | None, *, source_key: str | None = None,
                      content_hash: str | None = None) -> Document | None: ...
    def list_documents(self, tenant: str, kb_id: str | None = None) -> list[Document]: ...
    def set_status(self, tenant: str, document_id: str, status: str, *,
                   error: str | None = None, progress: dict | None = None) -> None: ...
    def get_progress(self, tenant: str, document_id: str) -> dict: ...
    def delete_document(self, tenant: str, document_id: str) -> None: ...

    # content
    def put_text(self, tenant: str, document_id: str, text: str) -> None: ...
    def get_text(self, tenant: str, document_id: str) -> str: ...
    def replace_chunks(self, tenant: str, document_id: str, chunks: Sequence[Chunk]) -> None: ...
    def get_chunks(self, tenant: str, document_id: str) -> list[Chunk]: ...
    def chunk_counts(self, tenant: str, document_ids: Sequence[str]) -> dict[str, int]: ...

    # embeddings, keyed by (chunk content hash, model id)
    def missing_embeddings(self, model_id: str, hashes: Sequence[str]) -> list[str]: ...
    def put_embeddings(self, model_id: str, hashes: Sequence[str], vectors: np.ndarray) -> None: ...

    # search
    def vector_search(self, scope: Scope, model_id: str, vector: np.ndarray, k: int) -> list[Hit]: ...
    def text_search(self, scope: Scope, query: str, k: int) -> list[Hit]: ...

    def close(self) -> None: ...


def open_store(database_url: str | None, home: Path) -> Store:
    """The one place a store backend is chosen."""
    match database_url:
        case None | "" :
            from .sqlite import SQLiteStore
            return SQLiteStore(Path(home) / "groundwork.db")
        case url if url.startswith("sqlite:///"):
            from .sqlite import SQLiteStore
            return SQLiteStore(Path(url.removeprefix("sqlite:///")))
        case url if url.startswith(("postgresql://", "postgres://")):
            from .postgres import PostgresStore
            return PostgresStore(url)
        case other:
            from ..errors import ConfigError
            raise ConfigError(f"GROUNDWORK_DATABASE_URL: unsupported scheme in {other.split('://')[0]!r} "
                              "(use postgresql://... or leave unset for SQLite)")
