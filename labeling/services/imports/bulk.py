"""Importing many plain photos (a zip archive without a manifest, browser uploads) in chunks.

Each file is checked on its own (``images.image_hash`` and ``images.image_check``, the one rule every import
uses) and gets its own item: imported, duplicate or rejected with its reason. What costs per photo in the
one-by-one path (about a dozen queries, and one upload waited for before the next file is read) is done per
chunk of files instead:

* the files of a chunk are read and hashed; one query finds those already in the project (duplicates) and
  one the image ids already taken;
* each new file is decoded (the full check) and its original handed to a bounded pool of upload threads at
  once, so the uploads run while the next files are decoded;
* when the chunk's uploads are all done, its rows (images, the job's count, the items) are written in one
  transaction with a handful of bulk queries.

Nothing is half-imported: when an upload or the chunk's transaction fails, every upload of the chunk is
waited for and the objects no row refers to are deleted before the error goes on (the earlier chunks stay
imported, as the earlier files did one by one). A chunk holds at most ``CHUNK_FILES`` files and
``CHUNK_BYTES`` bytes in memory. A database conflict (another request imported the same photo or id
meanwhile) redoes the chunk's files one by one, which names each conflict.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.db.models import F

from ...models import Image, ImportItem, Job, Project
from .. import queue
from ..images import (
    CheckedImage,
    ImageRejected,
    default_external_id,
    id_taken,
    image_check,
    image_hash,
    image_row,
)
from ..media_files import storage_saver
from .report import ImportReport, import_limits, import_one

logger = logging.getLogger(__name__)

#: Files and bytes of one chunk (held in memory until its rows are written).
CHUNK_FILES = 200
CHUNK_BYTES = 64 * 1024 * 1024
#: Originals uploaded at once (FAIRTONE["IMPORT_UPLOAD_THREADS"] overrides it; 1 uploads in the import's thread).
UPLOAD_THREADS = 8


def upload_threads() -> int:
    return max(1, int(import_limits().get("IMPORT_UPLOAD_THREADS", UPLOAD_THREADS)))


@dataclass
class _File:
    filename: str
    data: bytes
    original_filename: str = ""
    sha256: str = ""
    checked: CheckedImage | None = None
    image: Image | None = None
    upload: Future | None = None
    # What became of it when it is not imported: (outcome, reason, the existing image of a duplicate).
    outcome: tuple[str, str, Image | None] | None = None
    read: bool = True  # False: refused before it was read (its extension, its size)


class ChunkedImport:
    """Feed files with :meth:`add`; :meth:`close` imports what is left. Use as a context manager."""

    def __init__(self, report: ImportReport, project: Project) -> None:
        self.report = report
        self.project = project
        self.storage = Image._meta.get_field("original").storage
        self.put = storage_saver(self.storage)
        threads = upload_threads()
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="import-upload") if threads > 1 else None
        self.files: list[_File] = []
        self.bytes = 0

    def __enter__(self) -> ChunkedImport:
        return self

    def __exit__(self, kind, value, traceback) -> None:  # type: ignore[no-untyped-def]
        try:
            if kind is None:
                self.flush()
        finally:
            if self.pool is not None:
                self.pool.shutdown(wait=True, cancel_futures=True)

    def add(self, filename: str, data: bytes) -> None:
        self.files.append(_File(filename, data))
        self.bytes += len(data)
        if len(self.files) >= CHUNK_FILES or self.bytes >= CHUNK_BYTES:
            self.flush()

    def reject(self, filename: str, reason: str) -> None:
        """A file refused before it was read (its extension, its size): an item in its place in the order."""
        self.files.append(_File(filename, b"", outcome=(ImportItem.Outcome.REJECTED, reason, None), read=False))

    def flush(self) -> None:
        files, self.files, self.bytes = self.files, [], 0
        if not files:
            return
        mark = self.report.mark()
        try:
            self._check(files)
            self._uploads_wait(files)
            with transaction.atomic():
                self._write(files)
        except IntegrityError:
            self.report.rewind(mark)
            # Another request imported one of these photos or ids meanwhile: one by one, each conflict named.
            self._remove_uploads(files)
            self._one_by_one(files)
        except BaseException:
            self.report.rewind(mark)
            self._remove_uploads(files)
            raise

    # --- the steps of a chunk ---------------------------------------------------------------------------------

    def _check(self, files: list[_File]) -> None:
        """Each file in order, as one by one: a duplicate (of the project or of an earlier file of the chunk),
        else the full check, else an image id already taken, else imported (its upload starts at once)."""
        for file in files:
            if file.outcome is None:
                try:
                    file.original_filename, file.sha256 = image_hash(file.filename, file.data)
                except ImageRejected as exc:
                    file.outcome = (ImportItem.Outcome.REJECTED, exc.reason, None)
        new = [f for f in files if f.outcome is None]
        existing: dict[str, Image] = {}
        for image in Image.objects.filter(project=self.project, sha256__in={f.sha256 for f in new}).order_by("id"):
            existing.setdefault(image.sha256, image)
        ids = {default_external_id(f.original_filename) for f in new}
        taken = set(
            Image.objects.filter(project=self.project, external_id__in=ids).values_list("external_id", flat=True)
        )
        brought: set[str] = set()  # the contents of the files of this chunk imported so far
        for file in new:
            same = existing.get(file.sha256)
            if same is not None:
                file.outcome = (ImportItem.Outcome.DUPLICATE, _same_content(same), same)
                continue
            if file.sha256 in brought:
                file.outcome = (ImportItem.Outcome.DUPLICATE, "", None)  # of that file, once its row exists
                continue
            try:
                file.checked = image_check(file.original_filename, file.data, file.sha256)
            except ImageRejected as exc:
                file.outcome = (ImportItem.Outcome.REJECTED, exc.reason, None)
                continue
            if file.checked.external_id in taken:
                file.outcome = (ImportItem.Outcome.REJECTED, id_taken(file.checked.external_id), None)
                continue
            taken.add(file.checked.external_id)
            brought.add(file.sha256)
            file.image = image_row(file.checked, project=self.project, batch=self.report.batch)
            name = file.image.original.field.generate_filename(file.image, file.original_filename)
            file.upload = self._upload(name, file.data)

    def _upload(self, name: str, data: bytes) -> Future:
        if self.pool is not None:
            return self.pool.submit(self.put, name, data)
        done: Future = Future()
        try:
            done.set_result(self.put(name, data))
        except BaseException as exc:  # noqa: BLE001 - raised by _uploads_wait, after the chunk's cleanup
            done.set_exception(exc)
        return done

    def _uploads_wait(self, files: list[_File]) -> None:
        uploads = [f for f in files if f.upload is not None]
        wait([f.upload for f in uploads])  # type: ignore[misc]
        for file in uploads:
            file.image.original.name = file.upload.result()  # type: ignore[union-attr]  # a failed upload raises

    def _write(self, files: list[_File]) -> None:
        images = [f.image for f in files if f.image is not None and f.outcome is None]
        if images:
            Image.objects.bulk_create(images)
            job = self.report.job
            if job is not None:
                Job.objects.filter(pk=job.pk).update(total=F("total") + len(images))
            for image in images:
                args = (image.id, job.pk) if job is not None else (image.id,)
                queue.enqueue_on_commit(queue.IMAGE_MAKE_DERIVATIVES, *args)
        brought = {f.sha256: f.image for f in files if f.outcome is None}
        for file in files:
            if file.outcome is None:
                self.report.add(ImportItem.Outcome.IMPORTED, filename=file.filename, image=file.image)
                continue
            outcome, reason, existing = file.outcome
            if outcome == ImportItem.Outcome.DUPLICATE and existing is None:
                existing = brought[file.sha256]
                assert existing is not None  # brought: the rows this chunk made, by content
                reason = _same_content(existing)
            self.report.add(outcome, filename=file.filename, reason=reason, image=existing)
        self.report.flush()

    def _remove_uploads(self, files: list[_File]) -> None:
        """Wait for every upload of the chunk, then delete the objects no row refers to."""
        uploads = [f.upload for f in files if f.upload is not None]
        wait(uploads)
        names = {u.result() for u in uploads if not u.cancelled() and u.exception() is None}
        if not names:
            return
        used = set(Image.objects.filter(original__in=names).values_list("original", flat=True))
        for name in sorted(names - used):
            try:
                self.storage.delete(name)
            except Exception:  # noqa: BLE001 - a leftover object, not a wrong row
                logger.exception("could not remove %s after a failed import", name)
        for file in files:
            file.upload = None

    def _one_by_one(self, files: list[_File]) -> None:
        for file in files:
            if not file.read:
                assert file.outcome is not None  # a file not read carries why
                self.report.add(file.outcome[0], filename=file.filename, reason=file.outcome[1])
                continue
            import_one(self.report, project=self.project, filename=file.filename, data=file.data)
        self.report.flush()


def _same_content(existing: Image) -> str:
    return f"same content as image '{existing.external_id}' already in the project"
