"""Erasure on request: a lead deletes one subject (a person) from a project, and the app records that it happened.

What goes (one transaction, then the files once it commits): the subject's images with their original, mask,
display and thumbnail files (an original another image still uses stays: the boxes of a group photo share it;
the other people's boxes and labels stay), their baselines and overlay files, the labels of those images with every revision
(and relabel requests pointing at them), their exclusions, review decisions, phase memberships and queue
entries, tone examples, the import reports' file names of those images, and the subject row with its attributes.

What stays: a :class:`~labeling.models.SubjectErasure` record (when, by whom, the subject's external id, counts,
which published releases contained the subject and which evaluation runs were made on them) and an audit entry.
Releases are immutable files and are not rewritten: the record lists them, and their pages and API say that the
subject was erased after they were made (:func:`release_erasures`), and so do their downloads: the data cards with
a notice block at the top, the zip with an ``ERASURE_NOTICE.md`` (``services.erasure_notice``; ``?original=1``
gives the published bytes). Their ``ReleaseImage`` rows stay too (part of
the published release), with the image link emptied.

Refused on an archived project, and while a release, an evaluation or a baseline/derivatives job of the project
is being computed (its worker could write the subject's rows or files again after the erasure).
"""

from __future__ import annotations

import hashlib
import logging

import pyarrow.parquet as pq
from django.core.exceptions import ValidationError
from django.core.files.storage import default_storage
from django.db import transaction

from ..models import (
    Assignment,
    EvaluationRun,
    Image,
    ImageBaseline,
    ImageExclusion,
    ImportItem,
    Job,
    Label,
    LabelRevision,
    PhaseImage,
    Project,
    Release,
    ReleaseImage,
    ReviewDecision,
    Subject,
    SubjectErasure,
)
from . import queue
from .audit import audit
from .cache_purge import project_caches_purge
from .media_files import storage_reader
from .project_lifecycle import project_refuse_if_archived
from .releases.storage import release_file_name

logger = logging.getLogger(__name__)

REASON_MAX = 2000


def _subject(project: Project, external_id: str) -> Subject:
    subject = Subject.objects.filter(project=project, external_id=external_id).first()
    if subject is None:
        raise ValidationError({"subject": f"No subject “{external_id}” in this project."}, code="not_found")
    return subject


def _releases_with(project: Project, subject: Subject, image_ids: list[int]) -> list[dict]:
    """The published releases whose images table holds the subject (``subject_id``), oldest first; a release
    whose table cannot be read is checked on its ``ReleaseImage`` rows instead."""
    found = []
    for release in project.releases.filter(status=Release.Status.PUBLISHED).order_by("version"):
        path = release_file_name(release, "images.parquet")
        rows = 0
        if path is not None:
            try:
                with storage_reader(path) as handle:  # the column alone, read by ranges from a bucket
                    column = pq.read_table(handle, columns=["subject_id"]).column("subject_id").to_pylist()
                rows = sum(1 for value in column if value == subject.external_id)
            except Exception:  # an unreadable table: fall back on the database's copy of the release's rows
                logger.warning("Release %s: images table unreadable during an erasure", release.pk)
                path = None
        if path is None:
            rows = ReleaseImage.objects.filter(release=release, image_id__in=image_ids).count()
        if rows:
            found.append(
                {
                    "version": release.version,
                    "rows": rows,
                    "with_images": bool((release.rule or {}).get("with_images")),
                    "published_at": release.published_at.isoformat() if release.published_at else None,
                }
            )
    return found


def subject_erase_preview(*, project: Project, external_id: str) -> dict:
    """What erasing the subject removes and which releases contain them, for the confirmation."""
    subject = _subject(project, external_id)
    images = Image.objects.filter(project=project, subject=subject)
    image_ids = list(images.values_list("id", flat=True))
    releases = _releases_with(project, subject, image_ids)
    return {
        "subject": subject.external_id,
        "images": len(image_ids),
        "labels": Label.objects.filter(image_id__in=image_ids).count(),
        "baselines": ImageBaseline.objects.filter(image_id__in=image_ids).count(),
        "releases": releases,
        "shared_photos": shared_photos(project, image_ids),
    }


def shared_photos(project: Project, image_ids: list[int]) -> list[dict]:
    """The photos of ``image_ids`` that other people's boxes still show after the erasure: per photo, the
    erased image's id and the images that stay (the person is still in their pixels: the erasure removes
    their boxes, labels and baselines, not the photo those rows keep)."""
    mine = dict(Image.objects.filter(id__in=image_ids).values_list("sha256", "external_id"))
    others: dict[str, list[str]] = {}
    for sha256, external_id in (
        Image.objects.filter(project=project, sha256__in=list(mine))
        .exclude(id__in=image_ids)
        .order_by("external_id")
        .values_list("sha256", "external_id")
    ):
        others.setdefault(sha256, []).append(external_id)
    return [{"image": mine[sha], "kept_by": kept} for sha, kept in sorted(others.items(), key=lambda kv: mine[kv[0]])]


def _refuse_if_busy(project: Project) -> None:
    busy_jobs = Job.objects.filter(
        project=project,
        kind__in=[Job.Kind.BASELINE, Job.Kind.DERIVATIVES],
        status__in=[Job.Status.QUEUED, Job.Status.RUNNING],
    )
    if (
        project.releases.filter(status__in=Release.ACTIVE).exists()
        or project.evaluations.filter(status__in=[EvaluationRun.Status.QUEUED, EvaluationRun.Status.RUNNING]).exists()
        or busy_jobs.exists()
    ):
        raise ValidationError(
            "A release, an evaluation or a baseline job of this project is being computed: wait until it ends "
            "(or cancel it), then erase the subject.",
            code="busy",
        )


def subject_erase(*, project: Project, external_id: str, user, confirm: str, reason: str = "") -> SubjectErasure:
    """Erase the subject ``external_id`` of ``project`` and everything of them; returns the erasure's record.

    ``confirm`` must repeat the subject's external id. Raises ``ValidationError``: no such subject, no or a wrong
    confirmation, the project archived (code ``archived``), a release, evaluation or baseline job being computed
    (code ``busy``).
    """
    project_refuse_if_archived(project.pk, "erase a subject")
    reason = (reason or "").strip()
    if len(reason) > REASON_MAX:
        raise ValidationError({"reason": f"Keep the reason under {REASON_MAX} characters."})
    subject = _subject(project, external_id)
    if (confirm or "").strip() != subject.external_id:
        raise ValidationError({"confirm": "Type the subject's id to confirm: the erasure cannot be undone."})
    _refuse_if_busy(project)
    with transaction.atomic():
        Project.objects.select_for_update().filter(pk=project.pk).first()
        _refuse_if_busy(project)
        images = Image.objects.filter(project=project, subject=subject)
        image_ids = list(images.values_list("id", flat=True))
        names = sorted(
            {n for row in images.values_list("original", "mask", "display", "thumbnail") for n in row if n}
            | {n for n in ImageBaseline.objects.filter(image_id__in=image_ids).values_list("overlay", flat=True) if n}
        )
        # The boxes of one photo share its original file: a file another image still uses stays (the erased
        # box's own derivatives, its crop and display, go).
        names = sorted(set(names) - _used_by_others(project, names, image_ids))
        releases = _releases_with(project, subject, image_ids)
        versions = [r["version"] for r in releases]
        evaluations = [
            {"id": run.pk, "name": run.name, "release": run.release.version}
            for run in project.evaluations.filter(release__version__in=versions).select_related("release")
        ]
        labels = Label.objects.filter(image_id__in=image_ids)
        counts = {
            "images": len(image_ids),
            "labels": labels.count(),
            "revisions": LabelRevision.objects.filter(label__in=labels).count(),
            "baselines": ImageBaseline.objects.filter(image_id__in=image_ids).count(),
            "exclusions": ImageExclusion.objects.filter(image_id__in=image_ids).count(),
            "review_decisions": ReviewDecision.objects.filter(image_id__in=image_ids).count(),
            "phase_images": PhaseImage.objects.filter(image_id__in=image_ids).count(),
            "files": len(names),
        }
        kept = shared_photos(project, image_ids)
        if kept:  # photos other people's boxes keep (the person is still in their pixels)
            counts["photos_kept_for_other_boxes"] = len(kept)
        # Labels are removed explicitly (revisions first, then relabel requests pointing at them); the images'
        # delete then takes their assignments, phase memberships, baselines, exclusions, decisions and examples.
        LabelRevision.objects.filter(label__in=labels).delete()
        Assignment.objects.filter(relabel_of__in=labels).delete()
        labels.delete()
        ImportItem.objects.filter(image_id__in=image_ids).update(filename="(erased)", image=None)
        images.delete()
        subject.delete()
        record = SubjectErasure.objects.create(
            project=project,
            subject_external_id=external_id,
            subject_sha256=hashlib.sha256(external_id.encode("utf-8")).hexdigest(),
            erased_by=user if getattr(user, "is_authenticated", False) else None,
            erased_by_username=user.get_username() if getattr(user, "is_authenticated", False) else "",
            reason=reason,
            counts=counts,
            releases=releases,
            evaluations=evaluations,
        )
        audit(project, "subject.erase", record, user=user, subject=external_id, releases=versions, **counts)
        queue.precompute_schedule_on_commit(project.pk)
        transaction.on_commit(lambda: _remove_files(names))
        # The lead's cached pages held this subject's rows: gone now, not when they expire (issue 26).
        transaction.on_commit(project_caches_purge)
    logger.info("Subject erased from project %s by user %s: %s", project.pk, getattr(user, "pk", None), counts)
    return record


def _used_by_others(project: Project, names: list[str], image_ids: list[int]) -> set[str]:
    """The file names among ``names`` that an image of the project other than ``image_ids`` refers to."""
    from django.db.models import Q

    fields = ("original", "mask", "display", "thumbnail")
    query = Q()
    for name in fields:
        query |= Q(**{f"{name}__in": names})
    used = Image.objects.filter(project=project).exclude(id__in=image_ids).filter(query).values_list(*fields)
    return {n for row in used for n in row if n in names}


def _remove_files(names: list[str]) -> None:
    for name in names:
        try:
            default_storage.delete(name)
        except Exception:  # one file that cannot be removed must not keep the others
            logger.exception("Could not remove an erased subject's file")


def release_erasures(release: Release) -> list[SubjectErasure]:
    """The erasures made after ``release`` was published of subjects it contains: what its page, its API answer
    and its card's notice say ("subject X erased on DATE after this release was made")."""
    if release.status != Release.Status.PUBLISHED:
        return []
    erasures = SubjectErasure.objects.filter(project_id=release.project_id).order_by("erased_at", "id")
    return [e for e in erasures if release.version in e.release_versions]


def erasure_notice(erasure: SubjectErasure, release: Release) -> str:
    """The notice a release made before an erasure carries, in plain words."""
    entry = next((r for r in erasure.releases if int(r["version"]) == release.version), {})
    rows = entry.get("rows", 0)
    photos = " and its photos" if entry.get("with_images") else ""
    return (
        f"Subject {erasure.subject_external_id} was erased on {erasure.erased_at:%Y-%m-%d} after this release was "
        f"made. The release's files are never changed, so its {rows} row(s) of that subject{photos} are still in "
        "them: remove them from every copy of this release."
    )


def release_erasure_notices(release: Release) -> list[dict]:
    """``release_erasures`` as ``{"subject", "erased_at", "notice"}`` (the release page and the API)."""
    return [
        {"subject": e.subject_external_id, "erased_at": e.erased_at, "notice": erasure_notice(e, release)}
        for e in release_erasures(release)
    ]
