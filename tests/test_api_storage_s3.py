"""Originals in S3-compatible storage (GROUNDWORK_STORAGE=s3), against a local S3 server
(moto's, a real HTTP server in a subprocess on a free loopback port)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from api_support import bearer, serve_app, wait_document
from groundwork.errors import NotFound
from groundwork.storage import S3Storage

CREDENTIALS = {"s3_access_key_id": "test", "s3_secret_access_key": "test", "s3_region": "us-east-1"}


@pytest.fixture(scope="module")
def s3_endpoint():
    server_bin = Path(sys.executable).with_name("moto_server")
    if not server_bin.exists():
        pytest.skip("moto[server] is not installed (pip install -e '.[test]')")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    process = subprocess.Popen([str(server_bin), "-H", "127.0.0.1", "-p", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}"
    process.terminate()
    process.wait(10)


def make_bucket(endpoint: str, name: str) -> S3Storage:
    import boto3

    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="test",
                 aws_secret_access_key="test").create_bucket(Bucket=name)
    return S3Storage(name, endpoint_url=endpoint, region="us-east-1", access_key_id="test",
                     secret_access_key="test")


def test_s3_storage_put_get_delete(s3_endpoint):
    storage = make_bucket(s3_endpoint, "unit")
    storage.put("acme", "doc_1", b"original bytes")
    assert storage.get("acme", "doc_1") == b"original bytes"
    storage.put("acme", "doc_1", b"replaced")
    assert storage.get("acme", "doc_1") == b"replaced"
    storage.delete("acme", "doc_1")
    with pytest.raises(NotFound):
        storage.get("acme", "doc_1")
    with pytest.raises(NotFound):
        storage.get("../etc", "passwd")


def test_the_api_keeps_and_forgets_originals_in_s3(s3_endpoint, tmp_path, local_embedder):
    bucket = make_bucket(s3_endpoint, "originals")
    with serve_app(tmp_path, local_embedder, storage="s3", s3_bucket="originals", s3_endpoint_url=s3_endpoint,
                   **CREDENTIALS) as (client, engine):
        assert isinstance(engine.storage, S3Storage)
        keys = bearer(engine, "acme")
        client.post("/v1/kbs", json={"name": "docs"}, headers=keys)
        doc = client.post("/v1/kbs/docs/documents", json={"text": "Kept in a bucket, not on disk."},
                          headers=keys).json()
        assert wait_document(client, doc["id"], keys)["status"] == "ready"
        assert bucket.get("acme", doc["id"]) == b"Kept in a bucket, not on disk."
        assert not (tmp_path / "originals").exists()
        assert client.delete(f"/v1/documents/{doc['id']}", headers=keys).status_code == 204
        with pytest.raises(NotFound):
            bucket.get("acme", doc["id"])
