"""Requesting and cancelling a release (the build itself runs in a background task: ``build``)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from ...models import Job, Project, Release
from .. import queue
from ..audit import audit
from ..project_lifecycle import project_refuse_if_archived
from .build import code_version
from .finalise import project_has_labels
from .rules import card_text_clean, rule_clean

BUSY = "A release of this project is already being made (v{version}): wait for it, or cancel it."


def release_request(
    *, project: Project, user, rule: dict[str, Any] | None, card_text: dict[str, Any] | None, with_images: bool = False
) -> Release:
    """Ask for the project's next release; it is built in the background once the transaction commits.

    The project's row is locked while the version is chosen, and at most one release of a project is
    queued or running (a partial unique constraint too): a release requested twice at once gives one.

    Raises
    ------
    django.core.exceptions.ValidationError
        Per field: the rule (:func:`rule_clean`, every category included or excluded explicitly), a
        missing card text; "No labels to release yet"; another release still queued or running; the
        project is archived.
    """
    project_refuse_if_archived(project.pk, "make a release")
    rule = rule_clean({**(rule or {}), "with_images": with_images}, explicit=True)
    card_text = card_text_clean(card_text)
    if not project_has_labels(project):
        raise ValidationError("No labels to release yet.")
    try:
        with transaction.atomic():
            Project.objects.select_for_update().filter(pk=project.pk).first()
            busy = project.releases.filter(status__in=Release.ACTIVE).order_by("version").first()
            if busy is not None:
                raise ValidationError(BUSY.format(version=busy.version))
            version = (project.releases.aggregate(m=Max("version"))["m"] or 0) + 1
            previous = project.releases.filter(status=Release.Status.PUBLISHED).order_by("-version").first()
            created_by = user if user is not None and user.is_authenticated else None
            job = Job.objects.create(
                project=project,
                kind=Job.Kind.EXPORT,
                parameters={"version": version, "rule": rule},
                total=project.images.count(),
                created_by=created_by,
            )
            release = Release.objects.create(
                project=project,
                version=version,
                rule=rule,
                card_text=card_text,
                code_version=code_version(),
                job=job,
                previous=previous,
                created_by=created_by,
            )
            job.parameters["release_id"] = release.pk
            job.save(update_fields=["parameters"])
            queue.enqueue_on_commit(queue.RELEASE_BUILD, release.pk)
            audit(project, "release.request", release, user=user, version=version, rule=rule)
    except IntegrityError:
        # The other request committed first (the constraint, where row locks are not available).
        busy = project.releases.filter(status__in=Release.ACTIVE).order_by("version").first()
        raise ValidationError(BUSY.format(version=busy.version if busy else "?")) from None
    return release


def release_cancel(release: Release, *, user=None) -> Release:
    """Cancel a queued or running release; the build stops at its next chunk and removes what it wrote.

    Raises
    ------
    django.core.exceptions.ValidationError
        The release is not queued or running (a published release is never withdrawn here).
    """
    now = timezone.now()
    who = f" by {user.get_username()}" if user is not None and user.is_authenticated else ""
    with transaction.atomic():
        changed = Release.objects.filter(pk=release.pk, status__in=Release.ACTIVE).update(
            status=Release.Status.CANCELLED, error=f"Cancelled{who}."
        )
        if not changed:
            raise ValidationError("Only a queued or running release can be cancelled.")
        if release.job_id:
            Job.objects.filter(pk=release.job_id).update(
                status=Job.Status.CANCELLED, message="Cancelled.", finished_at=now
            )
        audit(release.project_id, "release.cancel", release, user=user, version=release.version)
    release.refresh_from_db()
    return release
