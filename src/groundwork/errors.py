"""Groundwork's error tree. Third-party exceptions are translated once, at the backend
boundary; the API maps this tree to status codes in one handler, the CLI to one line.

    GroundworkError                 base; `message` is safe to show to a user
    +-- ConfigError                 bad or missing setting (names the variable)
    +-- UnsupportedFile             type we cannot read, or declared type != content
    +-- ExtractError                a supported file that is corrupt or unreadable
    +-- EmbedError                  the embedding backend failed
    +-- StoreError                  the index/database failed
    +-- LLMError                    the chat backend failed
    +-- NotFound                    no such kb/document/assistant/... in this tenant
    +-- PermissionDenied            wrong token, wrong tenant, missing API key
    +-- LimitExceeded               too many files, file too large, quota
    +-- InvalidRequest              a request that cannot be served as written
"""

from __future__ import annotations


class GroundworkError(Exception):
    """Base of every error Groundwork raises on purpose."""

    status_code = 500
    type = "internal_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ConfigError(GroundworkError):
    status_code = 500
    type = "config_error"


class UnsupportedFile(GroundworkError):
    status_code = 415
    type = "unsupported_file"


class ExtractError(GroundworkError):
    status_code = 422
    type = "extract_error"


class EmbedError(GroundworkError):
    status_code = 502
    type = "embed_error"


class StoreError(GroundworkError):
    status_code = 500
    type = "store_error"


class LLMError(GroundworkError):
    status_code = 502
    type = "llm_error"


class NotFound(GroundworkError):
    status_code = 404
    type = "not_found"


class PermissionDenied(GroundworkError):
    status_code = 403
    type = "permission_denied"


class Unauthenticated(PermissionDenied):
    status_code = 401
    type = "unauthenticated"


class LimitExceeded(GroundworkError):
    status_code = 413
    type = "limit_exceeded"


class InvalidRequest(GroundworkError):
    status_code = 400
    type = "invalid_request"
