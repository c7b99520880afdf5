"""Storing the result of one image: its ``ImageBaseline`` row and overlay, counted once on a run."""

from __future__ import annotations

import hashlib
from typing import Any

from django.core.files.base import ContentFile
from django.db import IntegrityError, transaction

from ...models import Image, ImageBaseline, Job
from .. import queue
from .measure import image_mask_kind, image_measure
from .parameters import BASELINE_CODE_VERSION, baseline_parameters_hash
from .progress import job_count


def baseline_compute(
    *,
    image: Image,
    parameters: dict[str, Any],
    job: Job | None = None,
    final_attempt: bool = True,
) -> ImageBaseline:
    """Measure ``image`` and store its result; safe to run twice.

    One row per (image, parameter hash, code version): a second run updates it
    (``update_or_create``; a concurrent duplicate insert is caught as an
    ``IntegrityError`` and becomes an update). A decode error, a mask of the wrong
    size or a missing file is stored as a failed result with its reason; other
    ``OSError`` (storage hiccups) propagate so the task is retried, unless
    ``final_attempt``. With ``job``, its progress counts the image once even if
    the image is processed again by a retried task.

    Parameters
    ----------
    image : Image
        The image.
    parameters : dict
        Full parameter set (:func:`baseline_parameters_effective`).
    job : Job, optional
        The run this is part of.
    final_attempt : bool
        Record transient storage errors as failures instead of raising them.

    Returns
    -------
    ImageBaseline
        The stored row (status ok or failed).

    Examples
    --------
    >>> from labeling.services.baselines.parameters import baseline_parameters_effective
    >>> row = baseline_compute(image=image, parameters=baseline_parameters_effective(project))
    >>> str(row.status), row.ita_class
    ('ok', 'brown')
    """
    parameters_hash = baseline_parameters_hash(parameters)
    mask_kind = image_mask_kind(image)
    stats, overlay, error = image_measure(image, parameters, mask_kind, final_attempt=final_attempt)
    defaults = _result_defaults(stats, error, {**parameters, "mask_kind": mask_kind or "none"})
    defaults["job"] = job
    defaults["overlay"] = _overlay_save(image, parameters_hash, overlay)

    key = {"image": image, "parameters_hash": parameters_hash, "code_version": BASELINE_CODE_VERSION}
    try:
        row, stale = _row_write(key, defaults, job, image)
    except IntegrityError:
        # Another worker inserted the same key between our read and our insert.
        row, stale = _row_write(key, defaults, job, image)
    if stale and stale != defaults["overlay"]:
        ImageBaseline._meta.get_field("overlay").storage.delete(stale)
    return row


def failed_defaults(error: str) -> dict[str, Any]:
    """The fields of a failed result row, with its reason."""
    return {
        "status": ImageBaseline.Status.FAILED,
        "error": error[:2000],
        "stats": {},
        "ita_median": None,
        "lightness_median": None,
        "b_median": None,
        "skin_fraction": None,
        "albedo": None,
        "albedo_normalized": None,
        "ita_class": "",
        "flags": [],
        "overlay": "",
    }


def _result_defaults(stats: dict[str, Any] | None, error: str, stored_parameters: dict[str, Any]) -> dict[str, Any]:
    """The fields of the result row from :func:`.measure.image_measure`'s statistics or error."""
    if stats is None:
        defaults = failed_defaults(error)
    else:
        stored_parameters["skin_detector"] = stats["parameters"]["skin_detector"]
        defaults = {
            "status": ImageBaseline.Status.OK,
            "error": "",
            "stats": {k: v for k, v in stats.items() if k != "parameters"},
            "ita_median": stats["ita_median"],
            "lightness_median": stats["lightness_median"],
            "b_median": stats["b_median"],
            "skin_fraction": stats["skin_fraction"],
            "albedo": stats["albedo"],
            "albedo_normalized": stats["albedo_normalized"],
            "ita_class": stats["ita_class"] or "",
            "flags": list(stats["flags"]),
        }
    defaults["parameters"] = stored_parameters
    return defaults


def _overlay_save(image: Image, parameters_hash: str, overlay: bytes) -> str:
    """Store the overlay PNG under a name fixed by image, parameters and code version ("" for none)."""
    if not overlay:
        return ""
    stem = hashlib.sha256(f"{parameters_hash}/{BASELINE_CODE_VERSION}".encode()).hexdigest()[:16]
    field = ImageBaseline._meta.get_field("overlay")
    target = field.generate_filename(None, f"{image.project_id}/{image.id}-{stem}.png")
    if field.storage.exists(target):
        field.storage.delete(target)
    return field.storage.save(target, ContentFile(overlay))


def _row_write(
    key: dict[str, Any], defaults: dict[str, Any], job: Job | None, image: Image
) -> tuple[ImageBaseline, str]:
    """Insert or update the row (counting it on ``job`` unless it already was); the replaced overlay's name."""
    with transaction.atomic():
        previous = ImageBaseline.objects.select_for_update().filter(**key).values("job_id", "overlay").first()
        row, _created = ImageBaseline.objects.update_or_create(**key, defaults=defaults)
        if job is not None and (previous is None or previous["job_id"] != job.id):
            job_count(job, image, row)
        # The lead's comparison of labels and baselines is recomputed in the background.
        queue.precompute_schedule_on_commit(image.project_id)
    return row, previous["overlay"] if previous else ""
