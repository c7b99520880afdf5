"""A project's end of life: archive (hidden, read-only), unarchive, and delete with nothing left behind.

Labels are protected from side-effect deletion (``Label.labeler`` is PROTECT: deleting a membership or an
account never deletes labels), and a release protects its project. Deleting a project is therefore never a
cascade from ``Project.delete()`` alone: ``project_delete`` removes, inside one transaction and in an order the
protections allow, the evaluation runs, the releases, the labels with their revisions, then the project with
everything that cascades from it; its stored files (local disk or bucket) go after the transaction commits (a rolled
back delete leaves every file in place).
"""

from __future__ import annotations

import logging

from django.core.exceptions import ValidationError
from django.core.files.storage import default_storage
from django.db import transaction
from django.utils import timezone

from ..models import (
    Assignment,
    EvaluationRun,
    Image,
    ImageBaseline,
    Label,
    LabelRevision,
    Phase,
    Project,
    Release,
)
from .audit import audit
from .media_files import storage_delete_tree

logger = logging.getLogger(__name__)

ARCHIVED_MESSAGE = (
    "This project is archived, so it is read-only: a lead can unarchive it on its settings page to {doing}."
)


def project_refuse_if_archived(project_id: int, doing: str = "change it again") -> None:
    """Raise ``ValidationError`` (code ``archived``) if the project is archived: nothing about it changes.

    Every service that writes a project's data calls this first (labels, corrections, relabel requests, reviews,
    imports, phases, calibration, members, examples, settings, data manager actions, baselines, releases,
    evaluations, gates), so the pages and the API refuse alike. ``doing`` ends the message in plain words
    ("This project is archived ...: a lead can unarchive it ... to make a release."). Reading, downloading
    published releases and their files, unarchiving and deleting stay possible.
    """
    if Project.objects.filter(pk=project_id, archived_at__isnull=False).exists():
        raise ValidationError(ARCHIVED_MESSAGE.format(doing=doing), code="archived")


def project_archive(*, project: Project, user) -> Project:
    """Archive the project (idempotent: an archived project keeps its first date)."""
    if project.archived_at is None:
        project.archived_at = timezone.now()
        project.archived_by = user if getattr(user, "is_authenticated", False) else None
        project.save(update_fields=["archived_at", "archived_by"])
        audit(project, "project.archive", project, user=user)
    return project


def project_unarchive(*, project: Project, user) -> Project:
    """Make the project writable and listed again (idempotent)."""
    if project.archived_at is not None:
        project.archived_at = None
        project.archived_by = None
        project.save(update_fields=["archived_at", "archived_by"])
        audit(project, "project.unarchive", project, user=user)
    return project


def project_delete_counts(project: Project) -> dict[str, int]:
    """What deleting the project removes, for the confirmation."""
    return {
        "images": project.images.count(),
        "labels": Label.objects.filter(phase__project=project).count(),
        "releases": project.releases.count(),
        "evaluations": project.evaluations.count(),
        "members": project.memberships.count(),
    }


def _media_paths(project: Project) -> tuple[list[str], list[str]]:
    """The project's stored files and folders (storage names: the local disk or the bucket)."""
    names: set[str] = set()
    for row in Image.objects.filter(project=project).values_list("original", "mask", "display", "thumbnail"):
        names.update(n for n in row if n)
    names.update(n for n in ImageBaseline.objects.filter(image__project=project).values_list("overlay", flat=True) if n)
    names.update(n for n in project.evaluations.values_list("predictions", flat=True) if n)
    # The folders every kind of file of the project lives in (images, releases, evaluation results and figures).
    folders = [f"{kind}/{int(project.pk)}" for kind in ("projects", "releases", "evaluations", "baselines")]
    return sorted(names), folders


def _remove_files(names: list[str], folders: list[str]) -> None:
    """Remove stored files and every file under the stored folders. A file already gone is no error."""
    for name in names:
        try:
            default_storage.delete(name)
        except Exception:  # a file that cannot be removed must not stop the others
            logger.exception("Could not remove a deleted project's file")
    for folder in folders:
        try:
            storage_delete_tree(folder)
        except Exception:  # a folder that cannot be listed must not stop the others
            logger.exception("Could not remove a deleted project's folder")


def project_delete(*, project: Project, user, confirm: bool = False) -> dict[str, int]:
    """Delete the project and everything of it: rows in one transaction, then its stored files.

    Refused (``ValidationError``) while the project has releases unless ``confirm`` is true (a published release
    may have been handed to others: its deletion must be asked for explicitly), and while a release or an
    evaluation is being computed (its worker would write files after the delete). Returns what was deleted.
    """
    counts = project_delete_counts(project)
    if counts["releases"] and not confirm:
        raise ValidationError(
            {
                "confirm": f"This project has {counts['releases']} dataset release(s); deleting it deletes them and "
                "their files too. Confirm to delete anyway."
            },
            code="releases",
        )
    if (
        project.releases.filter(status__in=Release.ACTIVE).exists()
        or project.evaluations.filter(status__in=[EvaluationRun.Status.QUEUED, EvaluationRun.Status.RUNNING]).exists()
    ):
        raise ValidationError(
            "A release or an evaluation of this project is being computed: cancel it or wait until it ends.",
            code="busy",
        )
    with transaction.atomic():
        audit(project, "project.delete", project, user=user, **counts)
        names, folders = _media_paths(project)
        # Evaluation runs protect their release; releases protect the project.
        EvaluationRun.objects.filter(project=project).delete()
        Release.objects.filter(project=project).delete()
        # Labels are protected from every side effect: removed explicitly, revisions first. A raw delete skips
        # the per-label post_delete signal (a consensus cache bump per label of phases that are going too).
        phases = Phase.objects.filter(project=project)
        LabelRevision.objects.filter(label__phase__in=phases).delete()
        # Relabel requests point at labels (possibly of this project's earlier phases).
        project_labels = Label.objects.filter(phase__in=phases)
        Assignment.objects.filter(relabel_of__in=project_labels).delete()
        project_labels._raw_delete(project_labels.db)
        Project.objects.filter(pk=project.pk).delete()
        transaction.on_commit(lambda: _remove_files(names, folders))
    logger.info("Project %s deleted by user %s: %s", project.pk, getattr(user, "pk", None), counts)
    return counts
