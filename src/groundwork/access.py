"""Secrets: attachment access tokens and tenant API keys.

Both are random, shown once, and stored only as their SHA-256 (hex) through
`Store.put_object`. A leaked database therefore leaks no usable token.

- attachment: kind `attachment` in the uploader's tenant, id `att_...`, data
  `{document_id, token_sha256, filename, content_type, size, created_at}`. A token has
  64 URL-safe characters (48 random bytes); checks compare digests in constant time and
  answer the same way for "no such attachment" and "wrong token".
- API key: `gw_` + 43 URL-safe characters (32 random bytes), under the reserved tenant
  `_system`, kind `api_key`, id = the key's SHA-256, data `{digest, tenant, created_at}`. Lookup
  is by that hash; a key's public id is the first 16 hex digits of it.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time

from .errors import InvalidRequest, NotFound, PermissionDenied, Unauthenticated
from .store import Store
from .store.sqlite import new_id

SYSTEM_TENANT = "_system"
ATTACHMENT = "attachment"
API_KEY = "api_key"
KEY_PREFIX = "gw_"
KEY_ID_CHARS = 16
_TENANT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


# -- attachments ----------------------------------------------------------------------
def issue_attachment(store: Store, tenant: str, document_id: str, *, filename: str, content_type: str,
                     size: int) -> tuple[dict, str]:
    """Record an attachment of `document_id`; returns (its record, the token). The
    token is returned here once and never again."""
    token = secrets.token_urlsafe(48)
    record = {"id": new_id("att"), "document_id": document_id, "filename": filename,
              "content_type": content_type, "size": size, "created_at": time.time()}
    store.put_object(tenant, ATTACHMENT, record["id"], {**record, "token_sha256": _digest(token)})
    return record, token


def verify_attachment(store: Store, tenant: str, attachment_id: str, token: str) -> str:
    """The document id behind an attachment, if `token` is its access token in this
    tenant; PermissionDenied otherwise (the same answer whether the attachment is
    missing, in another tenant, or the token is wrong)."""
    try:
        data = store.get_object(tenant, ATTACHMENT, attachment_id)
    except NotFound:
        data = None
    expected = data["token_sha256"] if data else _digest("")
    matches = hmac.compare_digest(_digest(token or ""), expected)
    if data is None or not matches or not token:
        raise PermissionDenied(f"attachment {attachment_id!r}: unknown attachment or wrong access token")
    return data["document_id"]


def forget_attachments(store: Store, tenant: str, document_id: str) -> int:
    """Delete the attachment records of a document being forgotten; returns how many."""
    found = [d["id"] for d in store.list_objects(tenant, ATTACHMENT) if d["document_id"] == document_id]
    for attachment_id in found:
        store.delete_object(tenant, ATTACHMENT, attachment_id)
    return len(found)


# -- API keys -------------------------------------------------------------------------
def check_tenant_name(tenant: str) -> str:
    if not _TENANT.match(tenant or ""):
        raise InvalidRequest(f"tenant {tenant!r}: use 1-64 letters, digits, '-' or '_', "
                             "starting with a letter or digit")
    return tenant


def create_api_key(store: Store, tenant: str) -> tuple[str, str]:
    """A new key for `tenant`: (public key id, the key). The key is shown once."""
    check_tenant_name(tenant)
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    digest = _digest(key)
    store.put_object(SYSTEM_TENANT, API_KEY, digest,
                     {"digest": digest, "tenant": tenant, "created_at": time.time()})
    return digest[:KEY_ID_CHARS], key


def tenant_for_key(store: Store, key: str) -> str:
    try:
        return store.get_object(SYSTEM_TENANT, API_KEY, _digest(key))["tenant"]
    except NotFound:
        raise Unauthenticated("invalid API key") from None


def list_api_keys(store: Store) -> list[dict]:
    """[{id, tenant, created_at}] (never the keys themselves)."""
    return [{"id": d["_id"][:KEY_ID_CHARS], "tenant": d["tenant"], "created_at": d["created_at"]}
            for d in _keys(store)]


def any_api_keys(store: Store) -> bool:
    return bool(store.list_objects(SYSTEM_TENANT, API_KEY))


def revoke_api_key(store: Store, key_id: str) -> str:
    """Delete the key whose public id (or a prefix of at least 8 of it) is `key_id`;
    returns the tenant it belonged to."""
    if len(key_id) < 8:
        raise InvalidRequest("give at least 8 characters of the key id")
    found = [d for d in _keys(store) if d["_id"].startswith(key_id.lower())]
    if len(found) != 1:
        raise NotFound(f"no single API key with id {key_id!r}" if not found else
                       f"{len(found)} keys start with {key_id!r}: give more characters")
    store.delete_object(SYSTEM_TENANT, API_KEY, found[0]["_id"])
    return found[0]["tenant"]


def _keys(store: Store) -> list[dict]:
    # list_objects returns the data only, so the hash (the object id) is kept in it too.
    return [{**d, "_id": d["digest"]} for d in store.list_objects(SYSTEM_TENANT, API_KEY)]
