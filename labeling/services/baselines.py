"""Colorimetric baselines of images (ITA, apparent albedo) and their comparison with human labels.

The numbers come from :mod:`labeling.colorimetry` (pure NumPy/Pillow); this module
stores them (one :class:`~labeling.models.ImageBaseline` per image, parameter set
and code version), runs them as jobs with progress, draws the small skin overlay
a lead checks them with, and compares them with the labels (Spearman's rho with a
seeded bootstrap interval over images, ITA per consensus tone, the images where
humans and ITA disagree most).

Skin pixels: with a *skin* mask exactly its pixels are measured; with a
*silhouette* mask (or a mask of unknown kind) the rule-based detector is applied
inside the silhouette (DOMAIN.md section 5); without a mask the detector runs on
the whole image.
"""

from __future__ import annotations

import hashlib
import inspect
import io
import json
import logging
import math
import os
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from django.core.exceptions import ValidationError
from django.core.files.base import ContentFile
from django.db import IntegrityError, transaction
from django.db.models import F, QuerySet
from django.utils import timezone
from PIL import Image as PILImage

from metrics.correlation import spearman_bootstrap
from metrics.rounding import round_half_up

from .. import colorimetry
from ..colorimetry import (
    ALGORITHM_VERSION,
    FITZPATRICK_ITA_CHARDON_CLASSES,
    FITZPATRICK_ITA_KINYANJUI_2020,
    ITA_CLASSES,
    ImageDecodeError,
    MaskSizeError,
    detect_skin,
    measure_image,
    skin_tone_stats,
)
from ..models import Image, ImageBaseline, Job, Label, Phase, Project

logger = logging.getLogger(__name__)

#: Stored with every result: the colorimetry version plus this module's own
#: (bump the suffix when the Django side changes a number, e.g. the silhouette
#: handling or the decode used for it).
BASELINE_CODE_VERSION = f"{ALGORITHM_VERSION}+django.1"

#: Images per batch task. Measured with baseline_compute on this project's shared
#: 2-CPU machine (load average about 6): 0.10 s per image for the demo's 480 x 640
#: JPEGs (measurement 45 ms, overlay 26-47 ms, the rest storage and two small
#: transactions) and 0.22 s for a 12 MP (4000 x 3000) JPEG. A batch of 50 is then
#: about 11 s of 12 MP work: far below the 540 s soft time limit even on a slow
#: disk, little to repeat when a batch is retried, and a 10 000-image run is 200
#: tasks rather than 10 000.
BASELINE_BATCH_SIZE = 50
BASELINE_TASK_SOFT_TIME_LIMIT = 540
BASELINE_TASK_TIME_LIMIT = 600

#: Longest side of the stored overlay PNG (a 2-colour palette image: a few kB).
OVERLAY_MAX_SIDE = 640
#: At most this many failures are listed on a job row (all are on the result rows).
MAX_JOB_FAILURES = 200
#: Bootstrap of Spearman's rho: resamples and seed (recorded with every comparison).
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20_250_601
BOOTSTRAP_CONFIDENCE = 0.95
#: Images listed where the human ranking and the ITA ranking disagree most.
DISAGREEMENT_LIMIT = 20

FITZPATRICK_MAPPINGS = {
    mapping.name: mapping for mapping in (FITZPATRICK_ITA_KINYANJUI_2020, FITZPATRICK_ITA_CHARDON_CLASSES)
}
ITA_CLASS_NAMES = [name for _bound, name in ITA_CLASSES]


def _class_ranges() -> dict[str, str]:
    ranges = {}
    upper = None
    for bound, name in ITA_CLASSES:
        if upper is None:
            ranges[name] = f"> {bound:g}°"
        elif math.isinf(bound):
            ranges[name] = f"≤ {upper:g}°"
        else:
            ranges[name] = f"{bound:g}° to {upper:g}°"
        upper = bound
    return ranges


#: "(lower, upper]" of each ITA class, for people.
ITA_CLASS_RANGES = _class_ranges()
FLAG_NAMES = {
    "too_little_skin": "too little skin",
    "clipped_highlights": "clipped highlights",
    "underexposed": "underexposed",
    "color_cast": "strong colour cast",
    "b_near_zero": "b* near 0",
}

# name -> (type, minimum, maximum, what it is). Defaults come from the signature
# of colorimetry.skin_tone_stats so the two can never drift apart.
PARAMETER_SPECS: dict[str, tuple[type, float, float, str]] = {
    "min_skin_fraction": (float, 0.0, 1.0, "flag 'too little skin' below this skin fraction"),
    "clip_level": (int, 128, 255, "a channel at or above this counts as clipped"),
    "max_clipped_fraction": (float, 0.0, 1.0, "flag clipped/crushed when more skin pixels are"),
    "min_white_luminance": (float, 0.0, 1.0, "flag 'underexposed' when the image white Y is below"),
    "max_cast_ratio": (float, 1.0, 100.0, "flag 'colour cast' above this grey-world channel ratio"),
    "min_abs_b": (float, 0.0, 50.0, "flag 'b* near 0' when |median b*| is below"),
    "white_percentile": (float, 50.0, 100.0, "percentile of Y taken as the image white"),
    "max_pixels": (int, 10_000, 50_000_000, "pixels analysed per image (decoded at reduced size)"),
}
_STATS_DEFAULTS = {
    name: parameter.default
    for name, parameter in inspect.signature(skin_tone_stats).parameters.items()
    if parameter.kind is inspect.Parameter.KEYWORD_ONLY and not name.startswith("_")
}
DEFAULT_PARAMETERS: dict[str, Any] = {
    **{name: _STATS_DEFAULTS[name] for name in PARAMETER_SPECS if name != "max_pixels"},
    "max_pixels": colorimetry.DEFAULT_MAX_PIXELS,
    "fitzpatrick_mapping": _STATS_DEFAULTS["fitzpatrick_mapping"].name,
}


# --- parameters -------------------------------------------------------------------


def baseline_parameters_validate(raw: Any) -> dict[str, Any]:
    """Check baseline parameter overrides and return them normalised.

    Parameters
    ----------
    raw : dict or None
        Overrides of :data:`DEFAULT_PARAMETERS` (names as in
        :func:`labeling.colorimetry.skin_tone_stats`, plus ``max_pixels`` and
        ``fitzpatrick_mapping``, a name from :data:`FITZPATRICK_MAPPINGS`).

    Returns
    -------
    dict
        The overrides with numbers as float or int.

    Raises
    ------
    django.core.exceptions.ValidationError
        With one message per bad key (unknown name, wrong type, out of range).

    Examples
    --------
    >>> baseline_parameters_validate({"min_skin_fraction": "0.05"})
    {'min_skin_fraction': 0.05}
    """
    if raw in (None, ""):
        return {}
    if not isinstance(raw, dict):
        raise ValidationError({"parameters": "Send the parameters as a JSON object."})
    errors: dict[str, str] = {}
    clean: dict[str, Any] = {}
    for key, value in raw.items():
        if key == "fitzpatrick_mapping":
            if value not in FITZPATRICK_MAPPINGS:
                errors[key] = f"Choose one of: {', '.join(FITZPATRICK_MAPPINGS)}."
            else:
                clean[key] = value
            continue
        spec = PARAMETER_SPECS.get(key)
        if spec is None:
            known = ", ".join([*PARAMETER_SPECS, "fitzpatrick_mapping"])
            errors[str(key)[:60]] = f"Unknown parameter. Known: {known}."
            continue
        kind, low, high, _help = spec
        try:
            if isinstance(value, bool):
                raise ValueError
            number = float(value)
            if not math.isfinite(number):
                raise ValueError
            if kind is int:
                if number != int(number):
                    raise ValueError
                number = int(number)
        except (TypeError, ValueError):
            errors[key] = f"Expected {'a whole number' if kind is int else 'a number'}."
            continue
        if not low <= number <= high:
            errors[key] = f"Must be between {low:g} and {high:g}."
            continue
        clean[key] = number
    if errors:
        raise ValidationError(errors)
    return clean


def baseline_parameters_effective(project: Project, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The full parameter set for ``project``: defaults, project settings, then overrides.

    Parameters
    ----------
    project : Project
        Its ``baseline_parameters`` override the defaults.
    overrides : dict, optional
        Already validated overrides applied last.

    Returns
    -------
    dict
        Every key of :data:`DEFAULT_PARAMETERS`.

    Examples
    --------
    >>> baseline_parameters_effective(project)["fitzpatrick_mapping"]  # doctest: +SKIP
    'kinyanjui2020'
    """
    stored = baseline_parameters_validate(project.baseline_parameters or {})
    return {**DEFAULT_PARAMETERS, **stored, **(overrides or {})}


def baseline_parameters_hash(parameters: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of ``parameters`` (the results' key).

    Examples
    --------
    >>> baseline_parameters_hash({"b": 1, "a": 2}) == baseline_parameters_hash({"a": 2, "b": 1})
    True
    """
    canonical = json.dumps(parameters, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def baselines_current(project: Project) -> QuerySet[ImageBaseline]:
    """The results for the project's current parameters and this code version."""
    parameters_hash = baseline_parameters_hash(baseline_parameters_effective(project))
    return ImageBaseline.objects.filter(
        image__project=project,
        parameters_hash=parameters_hash,
        code_version=BASELINE_CODE_VERSION,
    )


# --- computing one image ---------------------------------------------------------


def _stats_options(parameters: dict[str, Any]) -> dict[str, Any]:
    options = {k: v for k, v in parameters.items() if k in _STATS_DEFAULTS}
    options["fitzpatrick_mapping"] = FITZPATRICK_MAPPINGS[parameters["fitzpatrick_mapping"]]
    return options


def _mask_kind(image: Image) -> str:
    if not image.mask:
        return ""
    return "skin" if image.mask_kind == "skin" else "silhouette"


def _load_mask(image: Image, size: tuple[int, int]) -> np.ndarray:
    """The stored mask (oriented image size) as booleans resized (nearest) to ``size``."""
    with image.mask.open("rb") as handle:
        try:
            mask = PILImage.open(handle)
            mask.load()
        except (OSError, SyntaxError, ValueError) as exc:
            if isinstance(exc, FileNotFoundError):
                raise
            raise ImageDecodeError(f"cannot decode the mask: {exc}") from exc
    if mask.size != (image.width, image.height):
        raise MaskSizeError(
            f"mask is {mask.size[0]}x{mask.size[1]} pixels but the image is "
            f"{image.width}x{image.height} (after EXIF orientation); the mask must match the image"
        )
    grey = mask.convert("L")
    if grey.size != size:
        grey = grey.resize(size, PILImage.Resampling.NEAREST)
    return np.asarray(grey) != 0


def _open_rgb(image: Image, *, max_pixels: int) -> np.ndarray:
    """Oriented sRGB pixels (as labelers see them) box-reduced to at most ``max_pixels``."""
    from .images import image_open_oriented_rgb

    short_side = min(image.width, image.height)
    hint = max(1, int(short_side * math.sqrt(min(1.0, max_pixels / (image.width * image.height)))))
    try:
        rgb = image_open_oriented_rgb(image, max_side=hint)
    except FileNotFoundError:
        raise
    except (OSError, SyntaxError, ValueError, EOFError, IndexError) as exc:
        raise ImageDecodeError(f"cannot decode the image: {exc}") from exc
    width, height = rgb.size
    factor = max(1, math.ceil(math.sqrt(width * height / max_pixels)))
    while math.ceil(width / factor) * math.ceil(height / factor) > max_pixels:
        factor += 1
    if factor > 1:
        rgb = rgb.reduce(factor)
    return np.asarray(rgb)


def _overlay_png(image: Image, mask_kind: str) -> bytes:
    """A palette PNG to lay over the display image: non-skin dimmed, skin outlined.

    Skin pixels are found again at overlay size (the detector is a per-pixel rule,
    so this is the analysed region up to resampling).
    """
    rgb = _open_rgb(image, max_pixels=OVERLAY_MAX_SIDE * OVERLAY_MAX_SIDE)
    height, width = rgb.shape[:2]
    if max(width, height) > OVERLAY_MAX_SIDE:
        scale = OVERLAY_MAX_SIDE / max(width, height)
        size = (max(1, round(width * scale)), max(1, round(height * scale)))
        rgb = np.asarray(PILImage.fromarray(rgb).resize(size, PILImage.Resampling.BOX))
        height, width = rgb.shape[:2]
    if mask_kind == "skin":
        skin = _load_mask(image, (width, height))
    else:
        skin = detect_skin(rgb)
        if mask_kind == "silhouette":
            skin &= _load_mask(image, (width, height))
    # Outline: skin pixels with a non-skin 4-neighbour (the frame edge is not an outline).
    padded = np.pad(skin, 1, mode="edge")
    interior = padded[:-2, 1:-1] & padded[2:, 1:-1] & padded[1:-1, :-2] & padded[1:-1, 2:]
    indices = np.where(skin, np.where(interior, 0, 2), 1).astype(np.uint8)
    overlay = PILImage.fromarray(indices, "P")
    # 0 skin: transparent; 1 not skin: dark, mostly opaque; 2 skin edge: cyan.
    overlay.putpalette([0, 0, 0, 16, 16, 20, 0, 210, 255])
    buffer = io.BytesIO()
    overlay.save(buffer, format="PNG", transparency=bytes([0, 185, 255]))
    return buffer.getvalue()


def _measure(image: Image, parameters: dict[str, Any], mask_kind: str) -> dict[str, Any]:
    options = _stats_options(parameters)
    max_pixels = parameters["max_pixels"]
    if mask_kind == "silhouette":
        rgb = _open_rgb(image, max_pixels=max_pixels)
        silhouette = _load_mask(image, (rgb.shape[1], rgb.shape[0]))
        stats = skin_tone_stats(rgb, detect_skin(rgb) & silhouette, **options)
        stats["parameters"]["skin_detector"] = "chai_ngan_ycbcr+kovac_rgb within silhouette mask"
        stats.update(width=image.width, height=image.height, analysed_width=rgb.shape[1], analysed_height=rgb.shape[0])
        return stats
    original = image.original.path
    mask_path = image.mask.path if mask_kind == "skin" else None
    try:
        return measure_image(original, mask_path, max_pixels=max_pixels, **options)
    except (ImageDecodeError, MaskSizeError) as exc:
        # Say "image"/"mask" rather than disclose server paths to the lead.
        message = str(exc).replace(repr(os.fspath(original)), repr(image.original_filename))
        if mask_path is not None:
            message = message.replace(repr(os.fspath(mask_path)), "'mask'")
        raise type(exc)(message) from exc


def _failure_reason(exc: BaseException) -> str:
    if isinstance(exc, MaskSizeError):
        return f"mask size mismatch: {exc}"
    if isinstance(exc, ImageDecodeError):
        return f"corrupt or unreadable file: {exc}"
    if isinstance(exc, FileNotFoundError):
        return "file missing from storage"
    if isinstance(exc, PILImage.DecompressionBombError):
        return f"image too large to decode safely: {exc}"
    if isinstance(exc, OSError):
        return f"storage error after retries: {exc}"
    return f"{type(exc).__name__}: {exc}"


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
    >>> row = baseline_compute(image=image, parameters=baseline_parameters_effective(project))  # doctest: +SKIP
    >>> row.status, row.ita_class  # doctest: +SKIP
    ('ok', 'tan')
    """
    parameters_hash = baseline_parameters_hash(parameters)
    mask_kind = _mask_kind(image)
    overlay = b""
    try:
        stats = _measure(image, parameters, mask_kind)
        overlay = _overlay_png(image, mask_kind)
    except (ImageDecodeError, MaskSizeError, FileNotFoundError, PILImage.DecompressionBombError) as exc:
        stats, error = None, _failure_reason(exc)
    except OSError as exc:
        if not final_attempt:
            raise
        stats, error = None, _failure_reason(exc)
    except ValueError as exc:  # e.g. a degenerate image the statistics refuse
        stats, error = None, _failure_reason(exc)

    stored_parameters = {**parameters, "mask_kind": mask_kind or "none"}
    if stats is None:
        defaults: dict[str, Any] = _failed_defaults(error)
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
    defaults.update(parameters=stored_parameters, job=job)

    key = {"image": image, "parameters_hash": parameters_hash, "code_version": BASELINE_CODE_VERSION}
    overlay_name = ""
    if overlay:
        stem = hashlib.sha256(f"{parameters_hash}/{BASELINE_CODE_VERSION}".encode()).hexdigest()[:16]
        field = ImageBaseline._meta.get_field("overlay")
        target = field.generate_filename(None, f"{image.project_id}/{image.id}-{stem}.png")
        if field.storage.exists(target):
            field.storage.delete(target)
        overlay_name = field.storage.save(target, ContentFile(overlay))
    defaults["overlay"] = overlay_name

    stale = ""
    for attempt in range(2):
        try:
            with transaction.atomic():
                previous = ImageBaseline.objects.select_for_update().filter(**key).values("job_id", "overlay").first()
                row, _created = ImageBaseline.objects.update_or_create(**key, defaults=defaults)
                if job is not None and (previous is None or previous["job_id"] != job.id):
                    _job_count(job, image, row)
                stale = previous["overlay"] if previous else ""
            break
        except IntegrityError:
            # Another worker inserted the same key between our read and our insert.
            if attempt:
                raise
    if stale and stale != overlay_name:
        ImageBaseline._meta.get_field("overlay").storage.delete(stale)
    return row


def _failed_defaults(error: str) -> dict[str, Any]:
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


def _job_count(job: Job, image: Image, row: ImageBaseline) -> None:
    """Count one image on the job (inside the caller's transaction)."""
    if row.status == ImageBaseline.Status.OK:
        Job.objects.filter(pk=job.pk).update(done=F("done") + 1)
    else:
        locked = Job.objects.select_for_update().only("failures").get(pk=job.pk)
        failures = list(locked.failures or [])
        if len(failures) < MAX_JOB_FAILURES:
            failures.append({"image_id": image.id, "external_id": image.external_id, "reason": row.error})
        Job.objects.filter(pk=job.pk).update(failed=F("failed") + 1, failures=failures)
    _job_finish_if_complete(job.pk)


def _job_finish_if_complete(job_id: int) -> None:
    Job.objects.filter(
        pk=job_id,
        status__in=[Job.Status.QUEUED, Job.Status.RUNNING],
        total__lte=F("done") + F("failed"),
    ).update(status=Job.Status.DONE, finished_at=timezone.now())


# --- runs -------------------------------------------------------------------------


def baseline_run_start(
    *,
    project: Project,
    parameters: dict[str, Any] | None = None,
    image_ids: Sequence[int] | None = None,
    user=None,
    retry_of: Job | None = None,
) -> Job:
    """Start a baseline run over the project's images (or some of them).

    Parameters given here become the project's baseline parameters (what the
    pages show); the job records the full set, its hash and the code version.
    The run is enqueued when the transaction commits.

    Parameters
    ----------
    project : Project
        The project.
    parameters : dict, optional
        Overrides (validated with :func:`baseline_parameters_validate`).
    image_ids : sequence of int, optional
        Only these images (they must belong to the project).
    user : User, optional
        Who started it.
    retry_of : Job, optional
        The run whose failed images this one retries (its parameters are reused).

    Returns
    -------
    Job
        Queued, with ``total`` set.

    Raises
    ------
    django.core.exceptions.ValidationError
        Bad parameters or image ids.

    Examples
    --------
    >>> job = baseline_run_start(project=project, parameters={"min_skin_fraction": 0.05})  # doctest: +SKIP
    >>> job.kind, job.total  # doctest: +SKIP
    ('baseline', 40)
    """
    from . import queue

    overrides = baseline_parameters_validate(parameters)
    with transaction.atomic():
        if retry_of is not None:
            effective = dict(retry_of.parameters["options"])
        else:
            effective = baseline_parameters_effective(project, overrides)
            if overrides:
                project.baseline_parameters = {k: v for k, v in effective.items() if DEFAULT_PARAMETERS.get(k) != v}
                project.save(update_fields=["baseline_parameters"])
        images = project.images.all()
        if image_ids is not None:
            ids = sorted({int(i) for i in image_ids})
            found = set(images.filter(id__in=ids).values_list("id", flat=True))
            if missing := [i for i in ids if i not in found]:
                raise ValidationError({"image_ids": f"Not images of this project: {missing[:10]}."})
            images = images.filter(id__in=ids)
        job_parameters: dict[str, Any] = {
            "options": effective,
            "parameters_hash": baseline_parameters_hash(effective),
            "code_version": BASELINE_CODE_VERSION,
            "batch_size": BASELINE_BATCH_SIZE,
        }
        if image_ids is not None:
            job_parameters["image_ids"] = ids
        if retry_of is not None:
            job_parameters["retry_of"] = retry_of.id
        job = Job.objects.create(
            project=project,
            kind=Job.Kind.BASELINE,
            parameters=job_parameters,
            total=images.count(),
            created_by=user if user is not None and user.is_authenticated else None,
        )
        queue.enqueue_on_commit(queue.BASELINE_RUN, job.id)
    return job


def baseline_retry_failed(*, job: Job, user=None) -> Job:
    """A new run over the images that failed in ``job``, with the same parameters.

    Raises
    ------
    django.core.exceptions.ValidationError
        Nothing failed in that run.
    """
    ids = list(
        ImageBaseline.objects.filter(
            job=job, status=ImageBaseline.Status.FAILED, image__project=job.project
        ).values_list("image_id", flat=True)
    )
    if not ids:
        raise ValidationError("No failed images to retry in this run.")
    return baseline_run_start(project=job.project, image_ids=ids, user=user, retry_of=job)


def baseline_run_prepare(*, job: Job) -> list[list[int]]:
    """Mark the run as running and split its images into batches.

    Returns
    -------
    list of list of int
        Image ids, :data:`BASELINE_BATCH_SIZE` per batch. Empty (and the job done)
        when the run has no images.
    """
    images = job.project.images.order_by("id")
    if "image_ids" in job.parameters:
        images = images.filter(id__in=job.parameters["image_ids"])
    ids = list(images.values_list("id", flat=True))
    Job.objects.filter(pk=job.pk, status=Job.Status.QUEUED).update(
        status=Job.Status.RUNNING, started_at=timezone.now(), total=len(ids)
    )
    _job_finish_if_complete(job.pk)
    return [ids[i : i + BASELINE_BATCH_SIZE] for i in range(0, len(ids), BASELINE_BATCH_SIZE)]


def baseline_run_batch(*, job: Job, image_ids: Iterable[int], final_attempt: bool = True) -> None:
    """Compute one batch of a run (see :func:`baseline_compute`); safe to run twice."""
    parameters = job.parameters["options"]
    images = {i.id: i for i in Image.objects.filter(id__in=list(image_ids), project=job.project)}
    for image_id in image_ids:
        image = images.get(image_id)
        if image is None:  # deleted since the run started: count it, or the run never ends
            _job_fail_missing(job, image_id, "image deleted during the run")
            continue
        baseline_compute(image=image, parameters=parameters, job=job, final_attempt=final_attempt)


def baseline_run_batch_abandon(*, job: Job, image_ids: Iterable[int], reason: str) -> None:
    """Record the images of a batch that got no result in ``job`` as failed (e.g. a time limit)."""
    parameters_hash = job.parameters["parameters_hash"]
    for image_id in image_ids:
        image = Image.objects.filter(id=image_id, project=job.project).first()
        if image is None:
            _job_fail_missing(job, image_id, "image deleted during the run")
            continue
        done = ImageBaseline.objects.filter(
            image=image,
            parameters_hash=parameters_hash,
            code_version=BASELINE_CODE_VERSION,
            job=job,
        ).exists()
        if not done:
            with transaction.atomic():
                row, _ = ImageBaseline.objects.update_or_create(
                    image=image,
                    parameters_hash=parameters_hash,
                    code_version=BASELINE_CODE_VERSION,
                    defaults={**_failed_defaults(reason), "job": job, "parameters": job.parameters["options"]},
                )
                _job_count(job, image, row)


def _job_fail_missing(job: Job, image_id: int, reason: str) -> None:
    with transaction.atomic():
        locked = Job.objects.select_for_update().only("failures").get(pk=job.pk)
        failures = list(locked.failures or [])
        if any(f.get("image_id") == image_id for f in failures):
            return
        if len(failures) < MAX_JOB_FAILURES:
            failures.append({"image_id": image_id, "external_id": "", "reason": reason})
        Job.objects.filter(pk=job.pk).update(failed=F("failed") + 1, failures=failures)
        _job_finish_if_complete(job.pk)


def baseline_image_ensure(*, image: Image, final_attempt: bool = True) -> ImageBaseline | None:
    """Compute the baseline of a new image for its project's current parameters, if missing.

    Returns
    -------
    ImageBaseline or None
        The new row, or None when one already existed.
    """
    parameters = baseline_parameters_effective(image.project)
    exists = ImageBaseline.objects.filter(
        image=image,
        parameters_hash=baseline_parameters_hash(parameters),
        code_version=BASELINE_CODE_VERSION,
    ).exists()
    if exists:
        return None
    return baseline_compute(image=image, parameters=parameters, final_attempt=final_attempt)


# --- summaries --------------------------------------------------------------------


def baseline_summary(project: Project) -> dict[str, Any]:
    """Counts for the project's current parameters: computed, failed, missing, flags, classes."""
    rows = list(baselines_current(project).values_list("status", "flags", "ita_class"))
    n_images = project.images.count()
    flags = dict.fromkeys(FLAG_NAMES, 0)
    classes = dict.fromkeys(ITA_CLASS_NAMES, 0)
    n_ok = n_failed = n_flagged = 0
    for status, row_flags, ita_class in rows:
        if status != ImageBaseline.Status.OK:
            n_failed += 1
            continue
        n_ok += 1
        n_flagged += bool(row_flags)
        for flag in row_flags or []:
            flags[flag] = flags.get(flag, 0) + 1
        if ita_class:
            classes[ita_class] = classes.get(ita_class, 0) + 1
    return {
        "n_images": n_images,
        "n_ok": n_ok,
        "n_failed": n_failed,
        "n_flagged": n_flagged,
        "n_missing": max(0, n_images - n_ok - n_failed),
        "n_unflagged": n_ok - n_flagged,
        "flags": flags,
        "classes": classes,
    }


# --- comparison with human labels -------------------------------------------------


#: What the mean label is compared with (keys of the comparison's ``correlations``).
COMPARISON_MEASURES = ("ita", "apparent_albedo", "apparent_albedo_normalized")


def baseline_comparison(
    *,
    project: Project,
    phase: Phase | None = None,
    exclude_flagged: bool = False,
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> dict[str, Any]:
    """Human labels against the baseline for one phase (or all phases pooled).

    Per image the human value is the plain mean of its non-repeat, valid label
    values in the phase (a pair of adjacent tones counts as its midpoint); the
    consensus tone is the median of those values rounded half up. Only images
    with an ok result for the project's current parameters are used.

    Parameters
    ----------
    project : Project
        The project.
    phase : Phase, optional
        Restrict to this phase's labels; all phases pooled when None.
    exclude_flagged : bool
        Leave out images with any quality flag.
    n_resamples, seed : int
        Bootstrap settings of :func:`metrics.correlation.spearman_bootstrap`.

    Returns
    -------
    dict
        ``points`` (one dict per image), ``correlations`` (``ita``,
        ``apparent_albedo``, ``apparent_albedo_normalized``:
        :func:`metrics.correlation.spearman_bootstrap` results of the mean label against each),
        ``by_tone`` (ITA values per consensus tone) and ``disagreements``
        (largest absolute differences between the rank of the mean label and
        the rank of ITA reversed, since a deeper tone has a lower ITA).

    Examples
    --------
    >>> baseline_comparison(project=project)["correlations"]["ita"]["rho"]  # doctest: +SKIP
    -0.91
    """
    from scipy import stats as scipy_stats

    labels = Label.objects.filter(phase__project=project, is_repeat=False, is_valid=True, value__isnull=False)
    if phase is not None:
        labels = labels.filter(phase=phase)
    values: dict[int, list[float]] = {}
    for image_id, value in labels.values_list("image_id", "value"):
        values.setdefault(image_id, []).append(float(value))
    results = baselines_current(project).filter(
        status=ImageBaseline.Status.OK, ita_median__isnull=False, image_id__in=list(values)
    )
    points = []
    for row in results.select_related("image").order_by("image_id"):
        if exclude_flagged and row.flags:
            continue
        image_values = values[row.image_id]
        points.append(
            {
                "image_id": row.image_id,
                "external_id": row.image.external_id,
                "baseline_id": row.id,
                "mean_label": float(np.mean(image_values)),
                "median_label": float(np.median(image_values)),
                "consensus_tone": round_half_up(float(np.median(image_values))),
                "n_labels": len(image_values),
                "ita": row.ita_median,
                "ita_class": row.ita_class,
                "apparent_albedo": row.albedo,
                "apparent_albedo_normalized": row.albedo_normalized,
                "flags": list(row.flags or []),
            }
        )
    mean_labels = [p["mean_label"] for p in points]
    correlations = {}
    for measure in COMPARISON_MEASURES:
        pairs = [(p["mean_label"], p[measure]) for p in points if p[measure] is not None]
        correlations[measure] = spearman_bootstrap(
            [a for a, _ in pairs],
            [b for _, b in pairs],
            n_resamples=n_resamples,
            seed=seed,
            confidence=BOOTSTRAP_CONFIDENCE,
        )
    by_tone: dict[int, list[float]] = {}
    for p in points:
        by_tone.setdefault(p["consensus_tone"], []).append(p["ita"])
    disagreements = []
    if len(points) >= 2:
        label_rank = scipy_stats.rankdata(mean_labels)
        ita_rank = scipy_stats.rankdata([-p["ita"] for p in points])
        for p, lr, ir in zip(points, label_rank, ita_rank, strict=True):
            p["label_rank"], p["ita_rank"] = float(lr), float(ir)
            p["rank_difference"] = float(abs(lr - ir))
        disagreements = sorted(points, key=lambda p: (-p["rank_difference"], p["image_id"]))
        disagreements = [p for p in disagreements if p["rank_difference"] > 0][:DISAGREEMENT_LIMIT]
    return {
        "project_id": project.id,
        "phase_id": phase.id if phase is not None else None,
        "phase": phase.get_kind_display() if phase is not None else "All phases",
        "exclude_flagged": exclude_flagged,
        "parameters_hash": baseline_parameters_hash(baseline_parameters_effective(project)),
        "code_version": BASELINE_CODE_VERSION,
        "n_labelled_images": len(values),
        "points": points,
        "correlations": correlations,
        "by_tone": {str(k): by_tone[k] for k in sorted(by_tone)},
        "disagreements": disagreements,
        "label_definition": "plain mean of the image's non-repeat valid label values",
    }
