"""Plain photos imported in chunks (labeling.services.imports.bulk): the same items as one by one, a bounded
number of queries whatever the number of photos, concurrent uploads, and nothing half-imported when a chunk
fails (no rows, no stored originals of that chunk)."""

from __future__ import annotations

import io
import threading
import zipfile
from pathlib import Path

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from PIL import Image as PILImage

from labeling.models import Image, ImportBatch, ImportItem
from labeling.services import queue
from labeling.services.images import ImageRejected, _decode
from labeling.services.imports import bulk, import_files, import_zip
from tests.s3 import s3_media, s3_server  # noqa: F401  (fixtures)

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def media_root(settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path / "media")
    return Path(settings.MEDIA_ROOT)


@pytest.fixture
def sent(monkeypatch):
    """The tasks the import sends (no worker runs them)."""
    names: list = []
    monkeypatch.setattr(queue, "_send", lambda name, args, countdown=None: names.append((name, list(args))))
    return names


def jpeg(i: int, size=(40, 30)) -> bytes:
    pixels = np.random.default_rng(i).integers(0, 255, (size[1], size[0], 3), dtype=np.uint8)  # distinct per i
    buffer = io.BytesIO()
    PILImage.fromarray(pixels).save(buffer, format="JPEG", quality=95)
    return buffer.getvalue()


def archive(members) -> io.BytesIO:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, data in members:
            zf.writestr(name, data)
    buffer.seek(0)
    return buffer


def originals(root: Path) -> list[str]:
    folder = root / "projects"
    return sorted(str(p.relative_to(root)) for p in folder.rglob("*") if p.is_file() and "originals" in p.parts)


def items(batch: ImportBatch) -> list[tuple[str, str, str, str | None]]:
    return [
        (item.filename, item.outcome, item.reason, item.image.external_id if item.image else None)
        for item in batch.items.order_by("id").select_related("image")
    ]


def test_the_items_are_those_of_one_by_one(project, lead, media_root, sent, django_capture_on_commit_callbacks):
    """Duplicates of the project and of the same archive, an id taken, a damaged file and its repeat,
    a file refused before it is read: each item as the one-by-one import said it, in the archive's order."""
    first = import_zip(project=project, fileobj=archive([("old.jpg", jpeg(0))]), user=lead)
    assert first.n_imported == 1
    damaged = jpeg(5)[:200]
    sent.clear()
    with django_capture_on_commit_callbacks(execute=True):
        batch = import_zip(
            project=project,
            fileobj=archive(
                [
                    ("a.jpg", jpeg(1)),
                    ("again.jpg", jpeg(0)),  # already in the project as 'old'
                    ("notes.txt", b"text"),
                    ("b.jpg", jpeg(2)),
                    ("b-copy.jpg", jpeg(2)),  # the same bytes as b.jpg, earlier in this archive
                    ("old.png", jpeg(3)),  # another content, the id 'old' taken (and a JPEG named .png)
                    ("sub/old.jpg", jpeg(4)),  # the id 'old' taken
                    ("cut.jpg", damaged),
                    ("cut-again.jpg", damaged),  # its repeat: rejected for the same reason, not a duplicate
                    ("empty.jpg", b""),
                ]
            ),
            user=lead,
        )
    assert batch.status == ImportBatch.Status.DONE
    got = items(batch)
    assert [(f, o) for f, o, _r, _i in got] == [
        ("a.jpg", "imported"),
        ("again.jpg", "duplicate"),
        ("notes.txt", "rejected"),
        ("b.jpg", "imported"),
        ("b-copy.jpg", "duplicate"),
        ("old.png", "rejected"),
        ("sub/old.jpg", "rejected"),
        ("cut.jpg", "rejected"),
        ("cut-again.jpg", "rejected"),
        ("empty.jpg", "rejected"),
    ]
    reasons = {f: (r, i) for f, _o, r, i in got}
    assert reasons["again.jpg"] == ("same content as image 'old' already in the project", "old")
    assert reasons["b-copy.jpg"] == ("same content as image 'b' already in the project", "b")
    assert "named .png but its content is JPEG" in reasons["old.png"][0]
    assert reasons["sub/old.jpg"][0] == "image id 'old' is already used by another image in this project"
    assert "truncated JPEG" in reasons["cut.jpg"][0] or "damaged JPEG" in reasons["cut.jpg"][0]
    assert reasons["cut-again.jpg"][0] == reasons["cut.jpg"][0]
    assert reasons["empty.jpg"][0] == "the file is empty"
    assert (batch.n_imported, batch.n_duplicate, batch.n_rejected) == (2, 2, 6)
    assert sorted(Image.objects.filter(project=project).values_list("external_id", flat=True)) == ["a", "b", "old"]
    assert len(originals(media_root)) == 3
    image = Image.objects.get(project=project, external_id="a")
    assert (image.width, image.height, image.format, image.source_mode, image.file_size) == (
        40,
        30,
        "JPEG",
        "RGB",
        len(jpeg(1)),
    )
    assert image.original.read() == jpeg(1)
    # One display task per imported image, counted on the import's job.
    assert sorted(args[0] for name, args in sent if name == queue.IMAGE_MAKE_DERIVATIVES) == sorted(
        Image.objects.filter(import_batch=batch).values_list("id", flat=True)
    )
    assert batch.images.count() == 2


def _queries(n: int, project, lead) -> int:
    """Queries of an import of ``n`` photos, less the one check per task sent that ``queue.enqueue`` makes."""
    with CaptureQueriesContext(connection) as captured:
        batch = import_zip(
            project=project, fileobj=archive([(f"n{n}-{i}.jpg", jpeg(1000 * n + i)) for i in range(n)]), user=lead
        )
    assert batch.n_imported == n
    return sum("pendingtask" not in q["sql"].lower() for q in captured.captured_queries)


def test_the_queries_of_an_import_do_not_grow_with_its_photos(project, lead, sent):
    _queries(2, project, lead)  # the project's first import asks a little more (its first job, ...)
    few = _queries(3, project, lead)
    many = _queries(60, project, lead)
    # The same queries (SQLite splits a bulk insert of many rows at its limit of bound parameters: one more).
    assert few <= many <= few + 2, (few, many)
    assert few <= 40


def _saver_noting(monkeypatch, fail_on: bytes | None = None) -> set[str]:
    """The import's store, noting the threads it runs in; with ``fail_on``, the upload of those bytes fails
    (a store refusing the file) once the others are under way."""
    threads: set[str] = set()
    started = threading.Event()
    real = bulk.storage_saver

    def saver(storage):
        put = real(storage)

        def noting(name, data):
            threads.add(threading.current_thread().name)
            if data == fail_on:
                started.wait(5)
                raise OSError("the store refused the file")
            started.set()
            return put(name, data)

        return noting

    monkeypatch.setattr(bulk, "storage_saver", saver)
    return threads


def test_uploads_run_in_several_threads(project, lead, media_root, sent, monkeypatch):
    threads = _saver_noting(monkeypatch)
    batch = import_zip(project=project, fileobj=archive([(f"p{i}.jpg", jpeg(i)) for i in range(30)]), user=lead)
    assert batch.n_imported == 30
    assert threads and threading.current_thread().name not in threads
    assert all(name.startswith("import-upload") for name in threads)


def test_a_failing_chunk_leaves_no_rows_and_no_objects(project, lead, media_root, sent, monkeypatch):
    monkeypatch.setattr(bulk, "CHUNK_FILES", 10)
    photos = [(f"p{i:02d}.jpg", jpeg(i)) for i in range(25)]
    _saver_noting(monkeypatch, fail_on=photos[14][1])  # in the second chunk
    with pytest.raises(OSError):
        import_zip(project=project, fileobj=archive(photos), user=lead)
    batch = ImportBatch.objects.get(project=project)
    assert batch.status == ImportBatch.Status.FAILED
    assert "stopped unexpectedly after 10 files" in batch.error
    # The first chunk is imported (with its items and its originals); nothing of the second is left.
    kept = sorted(Image.objects.filter(project=project).values_list("external_id", flat=True))
    assert kept == [f"p{i:02d}" for i in range(10)]
    assert [item.filename for item in batch.items.order_by("id")] == [f"p{i:02d}.jpg" for i in range(10)]
    assert len(originals(media_root)) == 10
    assert set(originals(media_root)) == {Image.objects.get(external_id=k).original.name for k in kept}


def test_uploaded_files_too_are_imported_in_chunks(project, lead, media_root, sent):
    from django.core.files.uploadedfile import SimpleUploadedFile

    files = [(f"u{i}.jpg", SimpleUploadedFile(f"u{i}.jpg", jpeg(i))) for i in range(5)]
    files.append(("u0-copy.jpg", SimpleUploadedFile("u0-copy.jpg", jpeg(0))))
    batch = import_files(project=project, files=files, user=lead)
    assert (batch.n_imported, batch.n_duplicate, batch.n_rejected) == (5, 1, 0)
    assert ImportItem.objects.filter(batch=batch).count() == 6
    assert len(originals(media_root)) == 5


@pytest.mark.parametrize("progressive", [False, True])
def test_the_quick_check_of_a_jpeg_rejects_what_the_full_decode_rejects(progressive):
    """The import decodes a JPEG at 1/8 scale (every entropy-coded block still read): a file cut anywhere is
    rejected exactly when the full decode rejects it."""
    rng = np.random.default_rng(3)
    pixels = rng.integers(0, 255, (96, 128, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    PILImage.fromarray(pixels).save(buffer, format="JPEG", quality=90, progressive=progressive)
    data = buffer.getvalue()
    for cut in range(200, len(data), max(1, len(data) // 40)):
        outcomes = []
        for check_only in (False, True):
            try:
                _decode(data[:cut], check_only=check_only)
                outcomes.append("ok")
            except ImageRejected as exc:
                outcomes.append(exc.reason)
        assert outcomes[0] == outcomes[1], (cut, outcomes)
    image, decoded = _decode(data, check_only=True)
    assert (decoded.width, decoded.height, decoded.mode) == (128, 96, "RGB")


@pytest.mark.slow  # starts a moto S3 server (tests/s3.py): CI runs it, bin/test --fast skips it
def test_in_the_bucket_a_failing_chunk_leaves_no_objects(s3_media, project, lead, sent, monkeypatch):  # noqa: F811
    """The same through moto's S3 server (tests/s3.py): the uploads run in threads through one shared client;
    when one fails, the chunk's other objects are deleted once their uploads are over."""
    monkeypatch.setattr(bulk, "CHUNK_FILES", 8)
    photos = [(f"p{i:02d}.jpg", jpeg(100 + i)) for i in range(20)]
    threads = _saver_noting(monkeypatch, fail_on=photos[19][1])  # the last of the third chunk
    with pytest.raises(OSError):
        import_zip(project=project, fileobj=archive(photos), user=lead)
    assert len(threads) > 1
    kept = Image.objects.filter(project=project)
    assert sorted(kept.values_list("external_id", flat=True)) == [f"p{i:02d}" for i in range(16)]
    assert s3_media.names(f"projects/{project.pk}/originals/") == sorted(image.original.name for image in kept)
    assert Image.objects.get(external_id="p03").original.read() == photos[3][1]
