"""Multipart uploads with limits enforced while the body streams in: the request is
refused as soon as one file passes the size limit or one file too many begins, without
reading the rest. File parts spool to a temporary file past 1 MB (starlette's
`SpooledTemporaryFile`), closed on any error, so nothing is kept."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser

from ..engine import Engine
from ..errors import InvalidRequest, LimitExceeded

_OVERHEAD = 64 * 1024  # headers and boundaries allowed per file on top of its bytes


@dataclass(frozen=True)
class Upload:
    filename: str
    content_type: str | None
    data: bytes


class _LimitedParser(MultiPartParser):
    def __init__(self, *args, max_files: int, max_file_bytes: int, **kwargs) -> None:
        super().__init__(*args, max_files=float("inf"), **kwargs)
        self.limit_files, self.limit_bytes = max_files, max_file_bytes
        self._files_seen = 0
        self._file_bytes = 0

    def on_headers_finished(self) -> None:
        super().on_headers_finished()
        part = self._current_part
        if part.file is not None:
            self._files_seen += 1
            self._file_bytes = 0
            if self._files_seen > self.limit_files:
                raise LimitExceeded(f"too many files: at most {self.limit_files} per request")

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        part = self._current_part
        if part.file is not None:
            self._file_bytes += end - start
            if self._file_bytes > self.limit_bytes:
                raise LimitExceeded(f"{part.file.filename}: larger than the limit of {self.limit_bytes:,} bytes")
        super().on_part_data(data, start, end)


async def read_uploads(request: Request, *, max_files: int, max_bytes: int) -> tuple[list[Upload], dict[str, str]]:
    """(files, other form fields) of a multipart/form-data request, within the limits."""
    content_type = request.headers.get("content-type", "")
    if not content_type.startswith("multipart/form-data"):
        raise InvalidRequest("send the files as multipart/form-data")
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > max_files * (max_bytes + _OVERHEAD):
        raise LimitExceeded(f"request of {int(length):,} bytes exceeds {max_files} files of "
                            f"{max_bytes:,} bytes each")
    parser = _LimitedParser(request.headers, request.stream(), max_files=max_files, max_file_bytes=max_bytes)
    try:
        form = await parser.parse()
    except MultiPartException as exc:
        raise InvalidRequest(f"malformed multipart body: {exc.message}") from None
    try:
        files = [Upload(value.filename or "upload", value.content_type, await value.read())
                 for _, value in form.multi_items() if isinstance(value, UploadFile)]
        fields = {key: value for key, value in form.multi_items() if isinstance(value, str)}
    finally:
        await form.close()
    return files, fields


def check_quota(engine: Engine, tenant: str, incoming: int) -> None:
    """Refuse uploads that would take the tenant's originals past its quota."""
    quota = engine.settings.tenant_quota_bytes
    used = sum(d.size for d in engine.store.list_documents(tenant))
    if used + incoming > quota:
        raise LimitExceeded(f"storage quota exceeded: {used:,} of {quota:,} bytes used, "
                            f"{incoming:,} more requested")


async def read_files(request: Request, settings) -> list[Upload]:
    """The files of a multipart request sent in the field `files`, within the upload
    limits; at least one."""
    uploads, _ = await read_uploads(request, max_files=settings.max_upload_files,
                                    max_bytes=settings.max_upload_bytes)
    if not uploads:
        raise InvalidRequest("no files: send them in the multipart field \"files\"")
    return uploads
