"""A real S3 HTTP endpoint for the storage tests (issue 25): moto's standalone server on a free local port.

The server runs as a process of its own (``python -m moto.server``); the app talks HTTP S3 to it through
django-storages and boto3, as it would to AWS or MinIO: nothing is patched in process. ``s3_media`` gives each
test a bucket of its own, the app's default storage pointed at it, and an empty ``MEDIA_ROOT`` made read-only
whose emptiness is checked after the test (as root the mode bits do not stop a write: the check does).
"""

from __future__ import annotations

import os
import secrets
import socket
import stat
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "fairtone-test", "AWS_SECRET_ACCESS_KEY": "fairtone-test-secret"}
REGION = "us-east-1"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class S3Server:
    endpoint_url: str
    process: subprocess.Popen | None

    def client(self):
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name=REGION,
            aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        )

    def storage_settings(self, bucket: str) -> dict:
        """The ``STORAGES["default"]`` entry of the app's settings for ``bucket`` (config.settings.base's options)."""
        from config.settings.base import s3_storage_options

        options = s3_storage_options(bucket, self.endpoint_url)
        options.update(
            region_name=REGION,
            access_key=CREDENTIALS["AWS_ACCESS_KEY_ID"],
            secret_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        )
        return {"BACKEND": "labeling.services.media_files.MediaS3Storage", "OPTIONS": options}

    def environment(self, bucket: str) -> dict[str, str]:
        """The environment a web server or worker process needs to use ``bucket`` (config.settings.base)."""
        return {
            "FAIRTONE_S3_BUCKET": bucket,
            "FAIRTONE_S3_ENDPOINT_URL": self.endpoint_url,
            "FAIRTONE_S3_REGION": REGION,
            **CREDENTIALS,
        }


def s3_server_start() -> S3Server:
    """Start moto's server on a free port (or use ``FAIRTONE_TEST_S3_ENDPOINT`` if CI started one)."""
    given = os.environ.get("FAIRTONE_TEST_S3_ENDPOINT")
    if given:
        return S3Server(given.rstrip("/"), None)
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=2):
                break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise RuntimeError("moto's S3 server did not start") from None
            time.sleep(0.1)
    return S3Server(endpoint, process)


def s3_server_stop(server: S3Server) -> None:
    if server.process is not None:
        server.process.terminate()
        try:
            server.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.process.kill()


def bucket_names(server: S3Server, bucket: str, prefix: str = "") -> list[str]:
    """Every object name in ``bucket`` (under ``prefix``), read with boto3 straight from the server."""
    client = server.client()
    names: list[str] = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        names += [entry["Key"] for entry in page.get("Contents", ())]
    return sorted(names)


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    server = s3_server_start()
    try:
        yield server
    finally:
        s3_server_stop(server)


@dataclass
class S3Media:
    server: S3Server
    bucket: str
    media_root: Path

    def names(self, prefix: str = "") -> list[str]:
        return bucket_names(self.server, self.bucket, prefix)


@pytest.fixture
def s3_media(s3_server, settings) -> Iterator[S3Media]:
    """A fresh private bucket as the app's default storage, an empty read-only ``MEDIA_ROOT`` left empty."""
    bucket = f"fairtone-test-{secrets.token_hex(6)}"
    s3_server.client().create_bucket(Bucket=bucket)
    media_root = Path(tempfile.mkdtemp(prefix="fairtone-s3-media-root-"))
    media_root.chmod(stat.S_IRUSR | stat.S_IXUSR)
    settings.MEDIA_ROOT = str(media_root)
    settings.STORAGES = {**settings.STORAGES, "default": s3_server.storage_settings(bucket)}
    try:
        yield S3Media(s3_server, bucket, media_root)
        assert files_under(media_root) == [], "something was written under MEDIA_ROOT"
    finally:
        media_root.chmod(stat.S_IRWXU)
        media_root.rmdir() if not any(media_root.iterdir()) else None
