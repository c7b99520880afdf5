"""Media through Django's storage API only (issue 25): the local disk for the demo, an S3 bucket beyond one machine.

No service, task or view opens a path under ``MEDIA_ROOT``: they read and write storage names through
``default_storage`` (or a field's storage). Where a library needs a real file (the colorimetric decoder,
pyarrow, zipfile), :func:`local_copy` gives one: the stored file itself on the local disk, else a copy in a
temporary file of this process (bounded by the file's size, removed on exit). Large files written here (a
release's tables and zip) are written to a local temporary file first and uploaded by :func:`upload_file`,
which the S3 backend sends as a multipart upload, one part in memory at a time.
"""

from __future__ import annotations

import functools
import io
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from django.core.files import File
from django.core.files.base import ContentFile
from django.core.files.storage import Storage, default_storage

try:  # what the S3 backend raises when the bucket cannot be reached or refuses (beside OSError)
    from botocore.exceptions import BotoCoreError, ClientError  # type: ignore[import-untyped]

    STORAGE_ERRORS: tuple[type[BaseException], ...] = (BotoCoreError, ClientError)
except ImportError:  # pragma: no cover - the local disk only
    STORAGE_ERRORS = ()
#: Every error a failing store raises: the disk's and the bucket's.
STORAGE_FAILURES: tuple[type[BaseException], ...] = (OSError, *STORAGE_ERRORS)

#: Bytes copied at a time between storage and a local file.
CHUNK = 1024 * 1024


def storage_local_path(name: str, storage: Storage | None = None) -> Path | None:
    """The local path of ``name`` when ``storage`` is on this machine's disk, else None (S3 and the like)."""
    storage = storage or default_storage
    try:
        return Path(storage.path(name))
    except NotImplementedError:
        return None


def storage_is_local(storage: Storage | None = None) -> bool:
    return storage_local_path("", storage) is not None


@contextmanager
def local_copy(name: str | None, storage: Storage | None = None, *, suffix: str = "") -> Iterator[Path]:
    """A local file with the content of the stored ``name`` while the block runs.

    On the local disk the stored file itself (nothing copied; do not write to it); otherwise a temporary copy,
    streamed a megabyte at a time and removed afterwards. A missing name raises ``FileNotFoundError``.
    """
    storage = storage or default_storage
    if not name:
        raise FileNotFoundError("no file")
    local = storage_local_path(name, storage)
    if local is not None:
        if not local.is_file():
            raise FileNotFoundError(name)
        yield local
        return
    handle, tmp = tempfile.mkstemp(prefix="fairtone-media-", suffix=suffix or Path(name).suffix)
    try:
        with os.fdopen(handle, "wb") as out:
            try:
                source = storage.open(name, "rb")
            except FileNotFoundError:
                raise
            except OSError as exc:  # the S3 backend's "not found" is an OSError of its own
                raise FileNotFoundError(name) from exc
            with source:
                shutil.copyfileobj(source, out, CHUNK)
        yield Path(tmp)
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def upload_file(path: Path | str, name: str, storage: Storage | None = None, *, replace: bool = True) -> str:
    """Store the local file ``path`` as ``name`` (replacing what was there if ``replace``); the name stored.

    Streamed: the S3 backend uploads it in parts (``max_memory_size`` each), the file system copies it.
    """
    storage = storage or default_storage
    if replace and storage.exists(name):
        storage.delete(name)
    if hasattr(storage, "bucket") and hasattr(storage, "_get_write_parameters"):
        return _s3_upload_file(storage, Path(path), name)
    with open(path, "rb") as handle:
        return storage.save(name, File(handle, name=os.path.basename(name)))


#: A large file's upload to S3: parts of 8 MiB, at most 4 at once (the memory of an upload: about 4 parts).
UPLOAD_PART_BYTES = 8 * 1024 * 1024
UPLOAD_CONCURRENCY = 4


def _s3_upload_file(storage: Storage, path: Path, name: str) -> str:
    """Upload a local file by its path: s3transfer reads each part from the file when it sends it (through
    ``storage.save`` it would read an unseekable wrapper, buffering parts in memory)."""
    from boto3.s3.transfer import TransferConfig  # type: ignore[import-untyped]
    from storages.utils import clean_name  # type: ignore[import-untyped]

    cleaned = clean_name(name)
    key = storage._normalize_name(cleaned)  # type: ignore[attr-defined]
    params = storage._get_write_parameters(key)  # type: ignore[attr-defined]
    config = TransferConfig(
        multipart_threshold=UPLOAD_PART_BYTES,
        multipart_chunksize=UPLOAD_PART_BYTES,
        max_concurrency=UPLOAD_CONCURRENCY,
    )
    storage.bucket.Object(key).upload_file(str(path), ExtraArgs=params, Config=config)  # type: ignore[attr-defined]
    return str(cleaned)


def upload_tree(root: Path | str, prefix: str, storage: Storage | None = None) -> list[str]:
    """Store every file under the local folder ``root`` as ``prefix/<its relative path>``; the names stored."""
    root = Path(root)
    names = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        names.append(upload_file(path, f"{prefix.rstrip('/')}/{path.relative_to(root).as_posix()}", storage))
    return names


def storage_walk(prefix: str, storage: Storage | None = None) -> Iterator[str]:
    """Every stored name under the folder ``prefix`` (recursively). A missing folder has none."""
    storage = storage or default_storage
    prefix = prefix.rstrip("/")
    try:
        directories, files = storage.listdir(prefix)
    except (FileNotFoundError, NotADirectoryError):
        return
    for file_name in files:
        yield f"{prefix}/{file_name}"
    for directory in directories:
        yield from storage_walk(f"{prefix}/{directory}", storage)


def storage_delete_tree(prefix: str, storage: Storage | None = None) -> int:
    """Delete every stored name under the folder ``prefix`` (and, on the local disk, the emptied folders).

    Returns how many files were deleted; a missing folder is no error.
    """
    storage = storage or default_storage
    count = 0
    for name in list(storage_walk(prefix, storage)):
        try:
            storage.delete(name)
            count += 1
        except FileNotFoundError:
            pass
    local = storage_local_path(prefix.rstrip("/"), storage)
    if local is not None and local.is_dir() and not local.is_symlink():
        shutil.rmtree(local, ignore_errors=True)
    return count


def storage_delete_quietly(name: str, storage: Storage | None = None) -> None:
    """Delete ``name``; a missing one or a failing store is not an error (what is left is only storage)."""
    storage = storage or default_storage
    try:
        storage.delete(name)
    except OSError:
        pass


def storage_saver(storage: Storage | None = None) -> Callable[[str, bytes], str]:
    """A function storing ``data`` under a name (the name stored, as ``storage.save`` returns it) that several
    threads may call at once (an import's uploads).

    On S3 the small files go through one boto3 client shared by the threads (a client is thread-safe), in one
    ``PutObject`` each: through ``storage.save`` each thread would make a boto3 session and resource of its own
    (django-storages keeps one per thread), at a cost of its own. Larger files, other names and other storages:
    ``storage.save``.
    """
    storage = storage or default_storage
    if not (hasattr(storage, "bucket") and hasattr(storage, "_get_write_parameters")):
        return lambda name, data: storage.save(name, ContentFile(data))
    from storages.utils import clean_name  # type: ignore[import-untyped]

    client = storage.connection.meta.client  # type: ignore[attr-defined]  # made now, in the caller's thread
    bucket = storage.bucket_name  # type: ignore[attr-defined]
    threshold = storage.transfer_config.multipart_threshold  # type: ignore[attr-defined]

    def put(name: str, data: bytes) -> str:
        if len(data) >= threshold or getattr(storage, "gzip", False):
            return storage.save(name, ContentFile(data))
        cleaned = clean_name(storage.get_available_name(name))
        key = storage._normalize_name(cleaned)  # type: ignore[attr-defined]
        params = storage._get_write_parameters(key, ContentFile(data))  # type: ignore[attr-defined]
        client.put_object(Bucket=bucket, Key=key, Body=data, **params)
        return str(cleaned)

    return put


class _S3Range(io.RawIOBase):
    """A stored S3 object read by byte ranges: seekable, nothing held but the caller's buffer (zipfile, pyarrow)."""

    def __init__(self, storage: Storage, name: str) -> None:
        super().__init__()
        from storages.utils import clean_name  # type: ignore[import-untyped]

        self._object = storage.bucket.Object(storage._normalize_name(clean_name(name)))  # type: ignore[attr-defined]
        try:
            self._size = int(self._object.content_length)
        except Exception as exc:  # botocore's ClientError: 404 when the object is gone
            raise FileNotFoundError(name) from exc
        self._position = 0
        self.name = name

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._size}[whence]
        self._position = max(0, base + offset)
        return self._position

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
        want = min(len(buffer), self._size - self._position)
        if want <= 0:
            return 0
        end = self._position + want - 1
        body = self._object.get(Range=f"bytes={self._position}-{end}")["Body"]
        data = body.read()
        buffer[: len(data)] = data
        self._position += len(data)
        return len(data)

    @property
    def size(self) -> int:
        return self._size


def storage_reader(name: str, storage: Storage | None = None, *, buffer_size: int = CHUNK) -> io.BufferedReader:
    """A seekable binary reader of the stored ``name`` that never holds the whole file.

    The file itself on the local disk; on S3 the object read by ranges of ``buffer_size`` bytes (zipfile reads
    an archive's directory, pyarrow a Parquet footer and row groups, a download streams, without a full copy).
    """
    storage = storage or default_storage
    local = storage_local_path(name, storage)
    if local is not None:
        return open(local, "rb")
    if hasattr(storage, "bucket"):
        return io.BufferedReader(_S3Range(storage, name), buffer_size=buffer_size)
    return storage.open(name, "rb")  # type: ignore[return-value]


@functools.cache
def _s3_storage_class() -> type:
    from storages.backends.s3 import S3Storage  # type: ignore[import-untyped]
    from storages.utils import clean_name  # type: ignore[import-untyped]

    class MediaS3Storage(S3Storage):
        """django-storages' S3 backend with two shortcuts for the many small files of an import.

        A photo's original is stored under its SHA-256 (``models.images.original_path``): the same name holds the
        same bytes, so no existence check (a HEAD request per file) is needed to choose a free name. A file
        smaller than the multipart threshold is sent in one ``PutObject`` rather than through s3transfer's
        manager (a thread pool made per upload); larger ones still go in parts, one part in memory at a time.
        """

        def get_available_name(self, name, max_length=None):  # type: ignore[no-untyped-def]
            name = clean_name(name)
            parts = name.split("/")
            if len(parts) == 5 and parts[0] == "projects" and parts[2] == "originals" and len(parts[4]) == 64:
                return name
            return super().get_available_name(name, max_length)

        def _save(self, name, content):  # type: ignore[no-untyped-def]
            size = getattr(content, "size", None)
            if self.gzip or size is None or size >= self.transfer_config.multipart_threshold:
                return super()._save(name, content)
            cleaned = clean_name(name)
            key = self._normalize_name(cleaned)
            params = self._get_write_parameters(key, content)
            if hasattr(content, "seek"):
                content.seek(0)
            data = content.read()
            if isinstance(data, str):
                data = data.encode("utf-8")
            self.bucket.Object(key).put(Body=data, **params)
            return cleaned

    return MediaS3Storage


def __getattr__(name: str):  # the S3 class only when asked for: django-storages is needed for S3 only
    if name == "MediaS3Storage":
        return _s3_storage_class()
    raise AttributeError(name)
