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


class S3Storage:
    """Originals in an S3-compatible bucket (AWS S3, MinIO, Ceph, R2...), one object per
    document: `<prefix><tenant>/<document_id>`. boto3 is imported here, when chosen."""

    def __init__(self, bucket: str, *, prefix: str = "originals/", endpoint_url: str | None = None,
                 region: str | None = None, access_key_id: str | None = None,
                 secret_access_key: str | None = None) -> None:
        from .errors import ConfigError

        try:
            import boto3
            from botocore.exceptions import BotoCoreError, ClientError
        except ImportError:  # pragma: no cover - boto3 is a core dependency
            raise ConfigError("GROUNDWORK_STORAGE=s3 needs boto3: pip install boto3") from None
        self.bucket, self.prefix = bucket, prefix
        self._errors = (BotoCoreError, ClientError)
        self._client = boto3.client("s3", endpoint_url=endpoint_url, region_name=region,
                                    aws_access_key_id=access_key_id, aws_secret_access_key=secret_access_key)

    def _key(self, tenant: str, document_id: str) -> str:
        for part in (tenant, document_id):  # the same name rules as on disk
            if not part or not all(ch.isalnum() or ch in "-_" for ch in part):
                raise NotFound(f"original {tenant}/{document_id} not found")
        return f"{self.prefix}{tenant}/{document_id}"

    def _call(self, what: str, key: str, fn, **kwargs):
        from .errors import StoreError

        try:
            return fn(Bucket=self.bucket, Key=key, **kwargs)
        except self._errors as exc:
            code = getattr(exc, "response", {}).get("Error", {}).get("Code")
            if code in ("NoSuchKey", "404"):
                raise NotFound(f"original {key} not found") from None
            raise StoreError(f"S3 {what} s3://{self.bucket}/{key} failed: {exc}") from None

    def put(self, tenant: str, document_id: str, data: bytes) -> None:
        self._call("put", self._key(tenant, document_id), self._client.put_object, Body=data)

    def get(self, tenant: str, document_id: str) -> bytes:
        response = self._call("get", self._key(tenant, document_id), self._client.get_object)
        return response["Body"].read()

    def delete(self, tenant: str, document_id: str) -> None:
        self._call("delete", self._key(tenant, document_id), self._client.delete_object)


def open_storage(settings, home: Path) -> FileStorage:
    """The one place the originals backend is chosen (GROUNDWORK_STORAGE)."""
    from .errors import ConfigError

    match settings.storage:
        case "local":
            return LocalStorage(Path(home) / "originals")
        case "s3":
            if not settings.s3_bucket:
                raise ConfigError("GROUNDWORK_S3_BUCKET must be set when GROUNDWORK_STORAGE=s3")
            return S3Storage(settings.s3_bucket, prefix=settings.s3_prefix, endpoint_url=settings.s3_endpoint_url,
                             region=settings.s3_region, access_key_id=settings.s3_access_key_id,
                             secret_access_key=settings.s3_secret_access_key)
        case other:  # pragma: no cover - pydantic already rejects it
            raise ConfigError(f"GROUNDWORK_STORAGE: unknown storage {other!r}")
