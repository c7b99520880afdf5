"""The baseline audited on the project's own photos (issue 21): by labelled tone, and against masks.

* :func:`baseline_audit` (:func:`baseline_audit_cached`) — per labelled (consensus) tone: the share of images in which the automatic
  detector found a face (Wilson interval), ITA, L* and h* medians and spread, Spearman's rho of the
  labels against ITA within and across bands, and whether the deepest tones' faces are found less
  often than the lightest ones' beyond chance (Newcombe's interval; :mod:`metrics.baseline_audit`).
* :func:`mask_sample_propose` — a sample stratified by labelled tone, drawn with a recorded seed;
  :func:`mask_sample_polygon_save` stores a polygon drawn in the browser as the image's skin mask;
  :func:`mask_sample_item_score` measures the two readings compared (automatic, masked) and
  :func:`mask_sample_report` summarises them per tone, with intervals, under the code version.

The labelled tone is the one of the comparison with labels: the median of the image's non-repeat valid
label values over every phase, rounded half up.
"""

from __future__ import annotations

import io
import itertools
import math
import secrets
from typing import Any

import numpy as np
from django.core.exceptions import ValidationError
from django.core.files.base import ContentFile
from django.db import transaction
from django.db.models import TextField
from django.db.models.functions import Cast
from django.utils import timezone
from PIL import Image as PILImage
from PIL import ImageDraw

from metrics.baseline_audit import baseline_audit as audit_statistics
from metrics.baseline_audit import coverage_sentence
from metrics.intervals import wilson_interval
from metrics.rounding import round_half_up

from ...colorimetry import ImageDecodeError, LandmarkModelUnavailable, MaskSizeError, measure_image
from ...models import Image, ImageBaseline, MaskSample, MaskSampleItem, Project
from ..audit import audit
from ..media_files import local_copy
from .comparison import _flags, _human_values, _positions
from .parameters import (
    BASELINE_CODE_VERSION,
    baseline_parameters_effective,
    baseline_parameters_hash,
    baselines_current,
    stats_options,
)

#: What "labelled tone" means here (recorded with every audit and sample).
TONE_DEFINITION = "median of the image's non-repeat valid label values over every phase, rounded half up"
#: Bootstrap of the rank correlations (as the comparison with labels).
AUDIT_RESAMPLES = 1000
AUDIT_SEED = 20_250_601
#: Baseline rows read per round trip by the audit.
AUDIT_ROWS = 5000
#: Images per tone proposed by default, and the most a lead may ask for.
DEFAULT_PER_TONE = 10
MAX_PER_TONE = 200
#: An ITA error within this many degrees counts as "within" (the evaluation sets' bar).
WITHIN_DEGREES = 5.0
#: A drawn polygon: at least 3 and at most this many vertices.
MAX_POLYGON_POINTS = 2000


def _tone_name(project: Project) -> str:
    return "MST" if project.scale.kind == "monk" else "tone"


def baseline_audit(project: Project) -> dict[str, Any]:
    """The audit of the project's current baseline by labelled tone (see the module docstring).

    An image with a skin mask counts with the automatic detector's own reading of it for the coverage
    (recorded beside the mask's numbers) and with its masked numbers for ITA, L* and h*. Images without a
    current result or whose result failed (an unreadable file says nothing about faces) are left out and
    counted, as are masked images measured before the automatic reading was recorded (``n_masked``).
    """
    n_tones = project.scale.tones.count()
    human = _human_values(project, None)
    tones = round_half_up(human.median).astype(np.int64) if len(human) else np.zeros(0, dtype=np.int64)
    rows = (
        baselines_current(project)
        .annotate(flags_text=Cast("flags", TextField()))
        .values_list("image_id", "status", "ita_median", "lightness_median", "stats__hue_angle", "flags_text",
                     "parameters__mask_kind", "stats__automatic__face_found")
    )  # fmt: skip
    # Read through a server-side cursor a batch at a time into arrays (NaN for nothing measured): every row
    # at once (250,000 tuples and their floats) held 210 MB, and the process kept the pages.
    use = np.zeros(len(human), dtype=bool)
    found = np.zeros(len(human), dtype=bool)
    ita = np.full(len(human), math.nan)
    lightness = np.full(len(human), math.nan)
    hue = np.full(len(human), math.nan)
    n_masked = n_failed = n_with_result = 0
    batch: list[tuple] = []
    iterator = rows.iterator(chunk_size=AUDIT_ROWS)
    while True:
        batch = list(itertools.islice(iterator, AUDIT_ROWS))
        if not batch:
            break
        where = _positions(human, [row[0] for row in batch])
        n_with_result += int((where >= 0).sum())
        for (
            _image_id,
            status,
            ita_value,
            lightness_value,
            hue_value,
            flags_text,
            mask_kind,
            automatic_found,
        ), k in zip(batch, where.tolist(), strict=True):
            if k < 0:
                continue
            if status != ImageBaseline.Status.OK:
                n_failed += 1
                continue
            if mask_kind == "skin":
                # Its numbers are the mask's; whether the detector found the face is recorded beside them.
                if automatic_found is None:  # measured before the automatic reading was recorded
                    n_masked += 1
                    continue
                found[k] = bool(automatic_found)
            else:
                found[k] = "no_face" not in _flags(flags_text)
            use[k] = True
            ita[k] = math.nan if ita_value is None else float(ita_value)
            lightness[k] = math.nan if lightness_value is None else float(lightness_value)
            hue[k] = math.nan if hue_value is None else float(hue_value)
    del batch
    keep = np.flatnonzero(use & (tones >= 1) & (tones <= n_tones))
    result = audit_statistics(
        tones[keep],
        human.mean[keep],
        found[keep],
        ita[keep],
        lightness=lightness[keep],
        hue=hue[keep],
        n_tones=n_tones,
        n_resamples=AUDIT_RESAMPLES,
        seed=AUDIT_SEED,
    )
    parameters = baseline_parameters_effective(project)
    result.update(
        project_id=project.pk,
        tone_definition=TONE_DEFINITION,
        tone_name=_tone_name(project),
        n_labelled=len(human),
        n_without_current_result=int(len(human) - n_with_result),
        n_masked=n_masked,
        n_failed=n_failed,
        skin_detector=parameters["skin_detector"],
        parameters_hash=baseline_parameters_hash(parameters),
        code_version=BASELINE_CODE_VERSION,
        sentence=coverage_sentence(result, _tone_name(project)),
        bootstrap={"n_resamples": AUDIT_RESAMPLES, "seed": AUDIT_SEED},
    )
    return result


#: The audit's statistics are cached with the comparison's version (labels and current results).
AUDIT_CACHE_PREFIX = "baseline-audit:v1"


def baseline_audit_cached(project: Project) -> dict[str, Any]:
    """:func:`baseline_audit` (cached until a label or a current result changes) with the latest mask
    sample's report (read fresh: a mask drawn a moment ago is in it)."""
    from django.core.cache import cache

    from .comparison import COMPARISON_CACHE_TIMEOUT, _comparison_version

    key = f"{AUDIT_CACHE_PREFIX}:{project.pk}:{_comparison_version(project)}"
    result = cache.get(key)
    if result is None:
        result = baseline_audit(project)
        cache.set(key, result, COMPARISON_CACHE_TIMEOUT)
    sample = project.mask_samples.first()
    return {**result, "mask_validation": mask_sample_report(sample) if sample is not None else None}


# --------------------------------------------------------------------------- the stratified sample


def _per_tone_checked(value: Any) -> int:
    if isinstance(value, bool):
        raise ValidationError({"per_tone": f"A whole number from 1 to {MAX_PER_TONE}."})
    try:
        number = int(str(value).strip()) if not isinstance(value, int) else value
    except (TypeError, ValueError):
        raise ValidationError(
            {"per_tone": f"A whole number from 1 to {MAX_PER_TONE}, got {str(value)[:20]!r}."}
        ) from None
    if not 1 <= number <= MAX_PER_TONE:
        raise ValidationError({"per_tone": f"A whole number from 1 to {MAX_PER_TONE}, got {number}."})
    return number


def _seed_checked(value: Any) -> int:
    if value in (None, ""):
        return secrets.randbelow(2**31)
    if isinstance(value, bool):
        raise ValidationError({"seed": "A whole number from 0 to 2147483647."})
    try:
        number = int(str(value).strip()) if not isinstance(value, int) else value
    except (TypeError, ValueError):
        raise ValidationError({"seed": "A whole number from 0 to 2147483647."}) from None
    if not 0 <= number < 2**31:
        raise ValidationError({"seed": "A whole number from 0 to 2147483647."})
    return number


def mask_sample_propose(
    *, project: Project, user=None, per_tone: Any = DEFAULT_PER_TONE, seed: Any = None
) -> MaskSample:
    """Draw ``per_tone`` labelled images of every labelled tone (all of a tone that has fewer).

    Seeded (``seed``, or a random one, recorded): the same seed on the same labels draws the same
    images. Within a tone the candidates are ordered by image id before the draw.

    Raises
    ------
    ValidationError
        A bad ``per_tone`` or ``seed``, an archived project, or no labelled image.
    """
    from ..project_lifecycle import project_refuse_if_archived

    project_refuse_if_archived(project.pk, "draw a mask sample")
    per_tone, seed = _per_tone_checked(per_tone), _seed_checked(seed)
    human = _human_values(project, None)
    if not len(human):
        raise ValidationError("No image has a label yet: a sample is stratified by labelled tone.")
    tones = round_half_up(human.median).astype(np.int64)
    rng = np.random.default_rng(seed)
    chosen: list[tuple[int, int]] = []
    for tone in np.unique(tones).tolist():
        ids = np.sort(human.image_ids[tones == tone])
        picked = ids if ids.size <= per_tone else np.sort(rng.choice(ids, size=per_tone, replace=False))
        chosen.extend((int(image_id), int(tone)) for image_id in picked)
    with transaction.atomic():
        sample = MaskSample.objects.create(
            project=project, per_tone=per_tone, seed=seed, tone_definition=TONE_DEFINITION, created_by=user
        )
        masks = dict(Image.objects.filter(id__in=[i for i, _ in chosen]).values_list("id", "mask_kind"))
        MaskSampleItem.objects.bulk_create(
            [
                MaskSampleItem(
                    sample=sample,
                    image_id=image_id,
                    tone=tone,
                    mask_source=MaskSampleItem.MaskSource.IMPORTED if masks.get(image_id) == "skin" else "",
                )
                for image_id, tone in chosen
            ]
        )
        audit(project, "baseline.mask_sample", sample, user=user, per_tone=per_tone, seed=seed, n_images=len(chosen))
    for item in sample.items.filter(mask_source=MaskSampleItem.MaskSource.IMPORTED).select_related("image"):
        mask_sample_item_score(item)
    return sample


# --------------------------------------------------------------------------- masks drawn in the browser


def _polygon_checked(points: Any) -> list[list[float]]:
    """``[[x, y], ...]`` fractions of the image (0 to 1), 3 to :data:`MAX_POLYGON_POINTS` vertices."""
    message = (
        f"Send the polygon as a list of 3 to {MAX_POLYGON_POINTS} [x, y] points, each a fraction of the "
        "image's width and height from 0 to 1."
    )
    if not isinstance(points, list) or not 3 <= len(points) <= MAX_POLYGON_POINTS:
        raise ValidationError({"points": message})
    clean = []
    for point in points:
        if not isinstance(point, list | tuple) or len(point) != 2:
            raise ValidationError({"points": message})
        try:
            x, y = (float(v) for v in point if not isinstance(v, bool))
        except (TypeError, ValueError):
            raise ValidationError({"points": message}) from None
        if not (math.isfinite(x) and math.isfinite(y) and 0 <= x <= 1 and 0 <= y <= 1):
            raise ValidationError({"points": message})
        clean.append([x, y])
    xs, ys = np.array([p[0] for p in clean]), np.array([p[1] for p in clean])
    area = 0.5 * abs(float(np.dot(xs, np.roll(ys, 1)) - np.dot(ys, np.roll(xs, 1))))
    if area <= 1e-6:
        raise ValidationError({"points": "The polygon encloses no area: draw around the skin."})
    return clean


def _mask_png(width: int, height: int, points: list[list[float]]) -> bytes:
    mask = PILImage.new("L", (width, height), 0)
    ImageDraw.Draw(mask).polygon([(x * width, y * height) for x, y in points], fill=255)
    buffer = io.BytesIO()
    mask.save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()


def mask_sample_polygon_save(*, item: MaskSampleItem, points: Any, user=None) -> MaskSampleItem:
    """Store a drawn polygon as the image's skin mask and score the item; all or nothing.

    The image then has a skin mask like one given with an import (its baseline is computed on it from
    now on). An image whose mask is a silhouette keeps it: the polygon is refused with the reason.

    Raises
    ------
    ValidationError
        A bad polygon, an archived project, or an image with a silhouette mask.
    """
    from ..project_lifecycle import project_refuse_if_archived

    image = item.image
    project_refuse_if_archived(image.project_id, "draw masks")
    clean = _polygon_checked(points)
    if image.mask and image.mask_kind != "skin":
        raise ValidationError(
            "This image has a silhouette mask from its import; a drawn skin mask would replace it. "
            "Give its skin mask with an import instead."
        )
    png = _mask_png(image.width, image.height, clean)
    field = Image._meta.get_field("mask")
    old = image.mask.name if image.mask else ""
    with transaction.atomic():
        locked = Image.objects.select_for_update().get(pk=image.pk)
        name = field.storage.save(field.generate_filename(locked, "mask.png"), ContentFile(png))
        try:
            Image.objects.filter(pk=image.pk).update(mask=name, mask_kind="skin")
            MaskSampleItem.objects.filter(pk=item.pk).update(
                polygon=clean, mask_source=MaskSampleItem.MaskSource.DRAWN, scored_at=None
            )
            audit(image.project_id, "baseline.mask_drawn", image, user=user, sample=item.sample_id, points=len(clean))
        except Exception:
            field.storage.delete(name)
            raise
    if old and old != name:
        transaction.on_commit(lambda: field.storage.delete(old))
    item.refresh_from_db()
    item.image.refresh_from_db()
    # The image's current baseline now comes from the mask: computed again (the same row is updated;
    # results of other parameter sets or versions are kept).
    from .storage import baseline_compute

    image = item.image
    transaction.on_commit(
        lambda: baseline_compute(image=image, parameters=baseline_parameters_effective(image.project))
    )
    return mask_sample_item_score(item)


# --------------------------------------------------------------------------- scoring


def mask_sample_item_score(item: MaskSampleItem) -> MaskSampleItem:
    """Measure the item's image with the project's current parameters, without and with its skin mask.

    The automatic reading is the one the project's baseline gives without a mask (its detector and
    parameters); the masked reading measures exactly the mask's pixels. Stored with the code version
    and the parameters' hash; a file that cannot be read is stored as the item's error.
    """
    image = item.image
    parameters = baseline_parameters_effective(image.project)
    options = stats_options(parameters)
    updates: dict[str, Any] = {
        "code_version": BASELINE_CODE_VERSION,
        "parameters_hash": baseline_parameters_hash(parameters),
        "scored_at": timezone.now(),
        "error": "",
        "masked_ita": None,
        "automatic_ita": None,
        "automatic_face_found": None,
        "automatic_method": "",
    }
    if not image.mask or image.mask_kind != "skin":
        updates["error"] = "no skin mask yet"
    else:
        original_text = ""
        try:
            # A box (one person in a group photo) is measured inside the box, as its baseline is.
            where = {"region": image.box} if image.box is not None else {}
            # Through the storage (issue 25): the files themselves on the local disk, temporary copies from a bucket.
            with (
                local_copy(image.original.name, image.original.storage) as original,
                local_copy(image.mask.name, image.mask.storage) as mask,
            ):
                original_text = str(original)
                automatic = measure_image(original, max_pixels=parameters["max_pixels"], **where, **options)
                masked = measure_image(original, mask, max_pixels=parameters["max_pixels"], **where, **options)
        except (ImageDecodeError, MaskSizeError, LandmarkModelUnavailable, FileNotFoundError, OSError) as exc:
            message = f"{type(exc).__name__}: {exc}"
            if original_text:
                message = message.replace(original_text, image.original_filename)
            if image.original.name:
                message = message.replace(image.original.name, image.original_filename)
            updates["error"] = message[:500]
        else:
            updates.update(
                masked_ita=masked["ita_median"],
                automatic_ita=automatic["ita_median"],
                automatic_face_found="no_face" not in automatic["flags"],
                automatic_method=automatic["face_method"][:60],
            )
    MaskSampleItem.objects.filter(pk=item.pk).update(**updates)
    item.refresh_from_db()
    return item


def _mean_interval(errors: np.ndarray) -> tuple[float | None, float | None]:
    """Student's t interval of the mean error (None below 2 values)."""
    from scipy import stats as scipy_stats

    if errors.size < 2:
        return None, None
    half = float(scipy_stats.t.ppf(0.975, errors.size - 1) * errors.std(ddof=1) / math.sqrt(errors.size))
    mean = float(errors.mean())
    return mean - half, mean + half


def _share(k: int, n: int) -> dict[str, Any]:
    low, high = wilson_interval(k, n) if n else (math.nan, math.nan)
    return {
        "k": k,
        "n": n,
        "value": k / n if n else None,
        "ci_low": None if n == 0 else low,
        "ci_high": None if n == 0 else high,
    }


def mask_sample_report(sample: MaskSample) -> dict[str, Any]:
    """Per labelled tone: masks given, the automatic detector's coverage and its ITA error against the mask.

    The error is automatic ITA minus masked ITA (degrees; + = read lighter than the skin the lead
    marked), over the items scored with the current code version and parameters: mean with a t interval,
    median absolute error, and the share within :data:`WITHIN_DEGREES` (Wilson). Items scored under an
    older method are counted as ``n_outdated`` (score them again).
    """
    project = sample.project
    current_hash = baseline_parameters_hash(baseline_parameters_effective(project))
    items = list(sample.items.order_by("tone", "id").values(
        "id", "image_id", "tone", "mask_source", "masked_ita", "automatic_ita", "automatic_face_found",
        "code_version", "parameters_hash", "error", "image__external_id",
    ))  # fmt: skip
    by_tone = []
    for tone in sorted({item["tone"] for item in items}):
        here = [item for item in items if item["tone"] == tone]
        current = [
            i
            for i in here
            if i["code_version"] == BASELINE_CODE_VERSION and i["parameters_hash"] == current_hash and not i["error"]
        ]
        masked = [i for i in current if i["masked_ita"] is not None]
        found = [i for i in masked if i["automatic_face_found"]]
        errors = np.array([i["automatic_ita"] - i["masked_ita"] for i in found if i["automatic_ita"] is not None])
        low, high = _mean_interval(errors)
        by_tone.append(
            {
                "tone": tone,
                "n_images": len(here),
                "n_with_mask": sum(1 for i in here if i["mask_source"]),
                "n_scored": len(masked),
                "n_outdated": sum(
                    1 for i in here if i["mask_source"] and i["code_version"] and i not in current and not i["error"]
                ),
                "coverage": _share(len(found), len(masked)),
                "n_errors": int(errors.size),
                "mean_error": float(errors.mean()) if errors.size else None,
                "mean_error_ci_low": low,
                "mean_error_ci_high": high,
                "median_abs_error": float(np.median(np.abs(errors))) if errors.size else None,
                "within": _share(int((np.abs(errors) <= WITHIN_DEGREES).sum()), int(errors.size)),
            }
        )
    return {
        "sample_id": sample.pk,
        "per_tone": sample.per_tone,
        "seed": sample.seed,
        "tone_definition": sample.tone_definition,
        "created_at": sample.created_at.isoformat(),
        "code_version": BASELINE_CODE_VERSION,
        "parameters_hash": current_hash,
        "within_degrees": WITHIN_DEGREES,
        "error_definition": "automatic ITA minus masked ITA, degrees (+: read lighter than the masked skin)",
        "n_images": len(items),
        "n_with_mask": sum(1 for i in items if i["mask_source"]),
        "by_tone": by_tone,
        "items": [
            {
                "id": i["id"],
                "image_id": i["image_id"],
                "external_id": i["image__external_id"],
                "tone": i["tone"],
                "mask_source": i["mask_source"],
                "masked_ita": i["masked_ita"],
                "automatic_ita": i["automatic_ita"],
                "automatic_face_found": i["automatic_face_found"],
                "code_version": i["code_version"],
                "error": i["error"],
            }
            for i in items
        ],
    }


def mask_sample_rescore(sample: MaskSample) -> int:
    """Score again every item with a mask whose readings are not the current method's; how many."""
    current_hash = baseline_parameters_hash(baseline_parameters_effective(sample.project))
    n = 0
    for item in sample.items.select_related("image").exclude(mask_source=""):
        if item.code_version != BASELINE_CODE_VERSION or item.parameters_hash != current_hash or item.error:
            mask_sample_item_score(item)
            n += 1
    return n
