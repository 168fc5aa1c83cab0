"""Originals: every ingested file is kept, content-addressed, so it can be re-extracted,
served back, and forgotten on delete."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Protocol

from .errors import NotFound


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class FileStorage(Protocol):
    def put(self, tenant: str, document_id: str, data: bytes) -> None: ...
    def get(self, tenant: str, document_id: str) -> bytes: ...
    def delete(self, tenant: str, document_id: str) -> None: ...


class LocalStorage:
    """Originals under a directory, one file per document: `<root>/<tenant>/<document_id>`.
    Writes go to a temporary file first and are renamed into place, so a crash never
    leaves half a file, and a replaced document's original is overwritten atomically."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _path(self, tenant: str, document_id: str) -> Path:
        for part in (tenant, document_id):
            if not part or not all(ch.isalnum() or ch in "-_" for ch in part):
                raise NotFound(f"original {tenant}/{document_id} not found")
        return self.root / tenant / document_id

    def put(self, tenant: str, document_id: str, data: bytes) -> None:
        path = self._path(tenant, document_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)

    def get(self, tenant: str, document_id: str) -> bytes:
        path = self._path(tenant, document_id)
        if not path.exists():
            raise NotFound(f"original of document {document_id!r} not found")
        return path.read_bytes()

    def delete(self, tenant: str, document_id: str) -> None:
        self._path(tenant, document_id).unlink(missing_ok=True)
