"""One import batch: its report (an item per file or row), the atomic creation of each image, limits."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import IO, Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from ...models import Image, ImportBatch, ImportItem, Job, Project, Subject
from ..audit import audit
from ..image_jobs import image_job_import_finished, image_job_start
from ..images import IMAGE_EXTENSIONS, DuplicateImage, ImageRejected, image_create_from_bytes


class ImportRefused(Exception):
    """The whole import is refused; nothing was created."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ImportTooLarge(ImportRefused):
    """Refused for its size (columns, line length, time to check): the batch fails, the request answers 400."""


def import_limits() -> dict[str, Any]:
    return settings.FAIRTONE


#: Items written at once (an import's report is written in chunks of this many items).
FLUSH_ITEMS = 500


@dataclass
class ImportReport:
    batch: ImportBatch
    # Counts the background work (display images, baselines) of the images this import creates.
    job: Job | None = None
    items: list[ImportItem] = field(default_factory=list)
    # Items not written yet: written together (``flush``), at the latest when the batch finishes or fails.
    pending: list[ImportItem] = field(default_factory=list)

    def add(
        self,
        outcome: str,
        *,
        filename: str,
        reason: str = "",
        image: Image | None = None,
        row: int | None = None,
    ) -> None:
        item = ImportItem(
            batch=self.batch,
            row=row,
            filename=filename[:500],
            outcome=outcome,
            reason=reason,
            image=image,
        )
        self.items.append(item)
        self.pending.append(item)
        if len(self.pending) >= FLUSH_ITEMS:
            self.flush()
        if outcome == ImportItem.Outcome.IMPORTED:
            self.batch.n_imported += 1
        elif outcome == ImportItem.Outcome.DUPLICATE:
            self.batch.n_duplicate += 1
        else:
            self.batch.n_rejected += 1

    def mark(self) -> tuple[int, int, int, int, int]:
        """Where the report stands, to :meth:`rewind` to when a transaction that added items rolls back."""
        batch = self.batch
        return (len(self.items), len(self.pending), batch.n_imported, batch.n_duplicate, batch.n_rejected)

    def rewind(self, mark: tuple[int, int, int, int, int]) -> None:
        items, pending, *counts = mark
        del self.items[items:]
        del self.pending[pending:]
        self.batch.n_imported, self.batch.n_duplicate, self.batch.n_rejected = counts

    def flush(self) -> None:
        """Write the items added since the last flush (one query)."""
        pending, self.pending = self.pending, []
        if pending:
            ImportItem.objects.bulk_create(pending)

    def finish(self) -> ImportBatch:
        self.flush()
        self.batch.status = ImportBatch.Status.DONE
        self.batch.finished_at = timezone.now()
        self.batch.save()
        self._job_finish()
        return self.batch

    def _job_finish(self) -> None:
        if self.job is not None:
            image_job_import_finished(self.job)

    def refuse(self, reason: str) -> ImportBatch:
        self.flush()
        self.batch.status = ImportBatch.Status.FAILED
        self.batch.error = reason
        self.batch.finished_at = timezone.now()
        self.batch.save()
        self._job_finish()
        return self.batch


def report_start(project: Project, kind: str, source_name: str, user) -> ImportReport:
    batch = ImportBatch.objects.create(
        project=project,
        kind=kind,
        source_name=str(source_name)[:300],
        created_by=user if getattr(user, "is_authenticated", False) else None,
    )
    return ImportReport(batch, job=image_job_start(batch=batch, user=user))


@dataclass
class Outcome:
    """What became of one file or row (``create_one``): an ``ImportItem`` to record."""

    outcome: str
    filename: str
    reason: str = ""
    image: Image | None = None


def create_one(
    report: ImportReport,
    *,
    project: Project,
    filename: str,
    data: bytes,
    row: int | None = None,
    prefix: str = "",
    warnings: list[str] | None = None,
    subject_id: str = "",
    subject_attributes: dict[str, Any] | None = None,
    **kwargs: Any,
) -> Outcome:
    """Create one image (and update its subject) atomically; its outcome, not yet recorded in the report.

    A rejected or duplicate file leaves nothing behind, not even its subject's attributes.
    """
    try:
        with transaction.atomic():
            subject = None
            if subject_id:
                subject = _subject_upsert(project, subject_id, subject_attributes or {})
            image = image_create_from_bytes(
                project=project,
                filename=filename,
                data=data,
                batch=report.batch,
                job=report.job,
                subject=subject,
                **kwargs,
            )
    except DuplicateImage as duplicate:
        existing = duplicate.existing
        same = (
            "the same box of the same photo as" if existing.box is not None and kwargs.get("box") else "same content as"
        )
        return Outcome(
            ImportItem.Outcome.DUPLICATE,
            filename,
            f"{prefix}{same} image '{existing.external_id}' already in the project",
            existing,
        )
    except ImageRejected as rejected:
        return Outcome(ImportItem.Outcome.REJECTED, filename, prefix + rejected.reason)
    notes = list(warnings or [])
    if image.box is not None:
        whole = (
            Image.objects.filter(project=project, sha256=image.sha256, box_x__isnull=True)
            .values_list("external_id", flat=True)
            .first()
        )
        if whole is not None:
            notes.append(
                f"the whole photo is also in the project as image '{whole}' (imported without a box); exclude it "
                "in the data manager if its boxes replace it"
            )
    reason = "; ".join(notes)
    return Outcome(ImportItem.Outcome.IMPORTED, filename, f"{prefix}{reason}" if reason else "", image)


def import_one(report: ImportReport, *, filename: str, row: int | None = None, **kwargs: Any) -> Image | None:
    """Create one image (and update its subject) atomically; record the outcome.

    Returns the image if it was imported. A rejected or duplicate file leaves
    nothing behind, not even its subject's attributes.
    """
    outcome = create_one(report, filename=filename, row=row, **kwargs)
    report.add(outcome.outcome, filename=outcome.filename, row=row, image=outcome.image, reason=outcome.reason)
    return outcome.image if outcome.outcome == ImportItem.Outcome.IMPORTED else None


def remove_unreferenced_files(images: list[Image]) -> None:
    """Remove the stored files of ``images`` (created, then rolled back) that no image row refers to."""
    names = {name for image in images for name in (image.original.name, image.mask.name) if name}
    if not names:
        return
    from django.db.models import Q

    kept = set(
        Image.objects.filter(Q(original__in=names) | Q(mask__in=names)).values_list("original", "mask").distinct()
    )
    used = {name for pair in kept for name in pair}
    storage = Image._meta.get_field("original").storage
    for name in sorted(names - used):
        try:
            storage.delete(name)
        except OSError:  # pragma: no cover - a leftover file, not a wrong row
            pass


def _subject_upsert(project: Project, subject_id: str, attributes: dict[str, Any]) -> Subject:
    if len(subject_id) > 200:
        raise ImageRejected("the subject id is longer than 200 characters")
    subject, _created = Subject.objects.select_for_update().get_or_create(project=project, external_id=subject_id)
    # Later imports update what earlier ones said about the subject.
    merged = {**(subject.attributes or {}), **attributes}
    if merged != subject.attributes:
        subject.attributes = merged
        subject.save(update_fields=["attributes"])
    return subject


def audit_import(batch: ImportBatch) -> ImportBatch:
    """Record the import in the audit log (its outcome and counts) and return it."""
    audit(
        batch.project_id,
        "import.images",
        batch,
        user=batch.created_by,
        kind=batch.kind,
        status=batch.status,
        imported=batch.n_imported,
        duplicate=batch.n_duplicate,
        rejected=batch.n_rejected,
    )
    return batch


def run_import(report: ImportReport, work) -> ImportBatch:
    """Run ``work``; a refusal fails the batch, an unexpected error too (then re-raised)."""
    try:
        work()
    except ImportTooLarge as refused:
        audit_import(report.refuse(refused.reason))
        raise
    except ImportRefused as refused:
        return audit_import(report.refuse(refused.reason))
    except Exception as exc:
        report.refuse(
            f"the import stopped unexpectedly after {len(report.items)} files "
            f"({type(exc).__name__}); the files listed were processed"
        )
        raise
    return audit_import(report.finish())


def read_capped(handle: IO[bytes], limit: int) -> bytes:
    """Read at most ``limit + 1`` bytes: one more than allowed shows the file is too big."""
    chunks: list[bytes] = []
    remaining = limit + 1
    while remaining > 0:
        chunk = handle.read(min(remaining, 1024 * 1024))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def too_big(limit: int) -> str:
    return f"the file is over the size limit of {limit:,} bytes"


def extension_reason(name: str) -> str | None:
    suffix = PurePosixPath(name).suffix.lower()
    if suffix in IMAGE_EXTENSIONS:
        return None
    allowed = ", ".join(sorted(e.lstrip(".") for e in IMAGE_EXTENSIONS))
    what = f"'{suffix}' files are" if suffix else "files without an extension are"
    return f"not imported: {what} not images this app reads (supported: {allowed})"
