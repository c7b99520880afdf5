"""Colorimetric baselines of images (ITA, apparent albedo) and their comparison with human labels.

The numbers come from :mod:`labeling.colorimetry` (pure NumPy/Pillow); this package
stores them (one :class:`~labeling.models.ImageBaseline` per image, parameter set
and code version), runs them as jobs with progress, draws the small skin overlay
a lead checks them with, and compares them with the labels (Spearman's rho with a
seeded bootstrap interval over images, ITA per consensus tone, the images where
humans and ITA disagree most).

Skin pixels: with a *skin* mask exactly its pixels are measured; otherwise the
face detector of :mod:`colorimetry.face` chooses the cheeks and forehead of the
face (refined by the face's own colour), inside the silhouette when a
*silhouette* mask (or a mask of unknown kind) is given. No face: no number
(flags ``no_face``, ``too_little_skin``) unless the project chose the labelled
colour-rule fallback (``skin_detector`` ``face_or_rules``).

Modules, each importing only those before it: ``parameters`` (defaults,
validation, the effective set and its hash, the current results), ``measure``
(decoding one image, its statistics and overlay; no database), ``progress`` (an
image counted once on its run's ``Job``), ``storage`` (one image's result row and
overlay: :func:`baseline_compute`), ``runs`` (starting, preparing, batching,
abandoning and retrying runs; the baseline of a new image), ``comparison`` (counts
per flag and class, the comparison with human labels), ``validation`` (the audit by
labelled tone, the tone-stratified mask sample and its scores; issue 21). Callers import the names
below from ``labeling.services.baselines``.
"""

from .comparison import (
    BOOTSTRAP_CONFIDENCE,
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    COMPARISON_MEASURES,
    DISAGREEMENT_LIMIT,
    baseline_comparison,
    baseline_correlations,
    baseline_summary,
)
from .measure import OVERLAY_MAX_SIDE
from .parameters import (
    BASELINE_CODE_VERSION,
    DEFAULT_PARAMETERS,
    FITZPATRICK_MAPPINGS,
    FLAG_NAMES,
    ITA_CLASS_NAMES,
    ITA_CLASS_RANGES,
    PARAMETER_SPECS,
    SKIN_DETECTOR_CHOICES,
    baseline_parameters_effective,
    baseline_parameters_hash,
    baseline_parameters_validate,
    baselines_current,
)
from .progress import MAX_JOB_FAILURES
from .runs import (
    BASELINE_BATCH_SIZE,
    BASELINE_TASK_SOFT_TIME_LIMIT,
    BASELINE_TASK_TIME_LIMIT,
    baseline_image_ensure,
    baseline_images_without_current,
    baseline_retry_failed,
    baseline_run_batch,
    baseline_run_batch_abandon,
    baseline_run_outdated,
    baseline_run_prepare,
    baseline_run_start,
)
from .storage import baseline_compute
from .validation import (
    DEFAULT_PER_TONE,
    MAX_PER_TONE,
    baseline_audit,
    baseline_audit_cached,
    mask_sample_item_score,
    mask_sample_polygon_save,
    mask_sample_propose,
    mask_sample_report,
    mask_sample_rescore,
)

__all__ = [
    "BASELINE_BATCH_SIZE",
    "BASELINE_CODE_VERSION",
    "BASELINE_TASK_SOFT_TIME_LIMIT",
    "BASELINE_TASK_TIME_LIMIT",
    "BOOTSTRAP_CONFIDENCE",
    "BOOTSTRAP_RESAMPLES",
    "BOOTSTRAP_SEED",
    "COMPARISON_MEASURES",
    "DEFAULT_PARAMETERS",
    "DEFAULT_PER_TONE",
    "MAX_PER_TONE",
    "DISAGREEMENT_LIMIT",
    "FITZPATRICK_MAPPINGS",
    "FLAG_NAMES",
    "ITA_CLASS_NAMES",
    "ITA_CLASS_RANGES",
    "MAX_JOB_FAILURES",
    "OVERLAY_MAX_SIDE",
    "PARAMETER_SPECS",
    "SKIN_DETECTOR_CHOICES",
    "baseline_audit",
    "baseline_audit_cached",
    "baseline_comparison",
    "baseline_correlations",
    "baseline_compute",
    "baseline_image_ensure",
    "baseline_images_without_current",
    "baseline_parameters_effective",
    "baseline_parameters_hash",
    "baseline_parameters_validate",
    "baseline_retry_failed",
    "baseline_run_batch",
    "baseline_run_batch_abandon",
    "baseline_run_outdated",
    "baseline_run_prepare",
    "baseline_run_start",
    "baseline_summary",
    "baselines_current",
    "mask_sample_item_score",
    "mask_sample_polygon_save",
    "mask_sample_propose",
    "mask_sample_report",
    "mask_sample_rescore",
]
