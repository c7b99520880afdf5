"""Consensus and labeler-quality statistics for a project's lead (issue 4).

Every number comes from ``metrics.agreement``; this module only loads labels,
arranges them as arrays and makes the results JSON-safe (``None`` plus a reason
instead of ``NaN``; "too little data" instead of a misleading value).

How the phase dashboard stays fast (100,000 images x 4 labels):

* one ``values_list`` query per phase pulls the labels as tuples, turned into
  NumPy columns and pivoted to an images x labelers matrix with ``np.unique``;
  everything after that is vectorised (``consensus_table``, the count-matrix
  alpha and its pattern bootstrap, bincounts);
* the result is cached in Django's cache under (phase id, version), where the
  version is ``max(updated_at)`` and ``count`` of the phase's labels, read for
  every phase of the project with one aggregate query. A new, changed or
  deleted label changes the version, so a stale summary is never served.

Repeated calibration-2 labels (``is_repeat``) never enter between-labeler
statistics; they are used for test-retest only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from django.core.cache import cache

from metrics import agreement

from ..models import Label, Membership, Phase, Project

#: Agreement statistics over fewer images than this (with 2+ valid labels) are not shown.
MIN_IMAGES = 5
#: An image is flagged when its labels span this many tones or more (seed 000).
WIDE_RANGE = 3
#: Bootstrap resamples of the alpha confidence interval.
N_RESAMPLES = 1000
CONFIDENCE = 0.95
#: A tone is "under-represented" when its share of labels is below this fraction
#: of an even share (1 / n_tones).
UNDER_REPRESENTED = 0.5
CACHE_TIMEOUT = 7 * 24 * 3600
CACHE_PREFIX = "consensus:v1"

_LABEL_FIELDS = (
    "image_id",
    "labeler_id",
    "tone_low",
    "tone_high",
    "uncertain",
    "is_repeat",
    "time_spent_ms",
)

IMAGE_COLUMNS = (
    "n_labels",
    "n_valid",
    "mean",
    "std",
    "median",
    "mode",
    "mode_count",
    "min",
    "max",
    "range",
    "complete_consensus",
    "overlap_consensus",
    "near_consensus",
    "n_unique_values",
    "n_connected_groups",
    "any_uncertainty",
    "has_invalid_annotation",
    "wide_range",
)


# --------------------------------------------------------------------------
# JSON-safe numbers
# --------------------------------------------------------------------------


def _num(x: Any, digits: int = 6) -> float | None:
    """A finite float rounded to ``digits``, or ``None`` (never NaN in JSON)."""
    if x is None:
        return None
    x = float(x)
    return None if not math.isfinite(x) else round(x, digits)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def too_little(n_images: int, what: str = "with 2+ labels", need: int = MIN_IMAGES) -> str:
    """The reason shown instead of a number computed from too few images."""
    return f"too little data: {_plural(n_images, 'image')} {what} (needs {need})"


def _stat(value: float, reason: str | None = None, **extra: Any) -> dict:
    """``{"value": x, "reason": None}`` or ``{"value": None, "reason": why}``."""
    number = _num(value)
    if reason is not None:
        number = None
    elif number is None:
        reason = "undefined: no disagreement is possible (every label has the same value)"
    return {"value": number, "reason": reason, **extra}


# --------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------


def phase_versions(project: Project) -> dict[int, str]:
    """Cache version of each phase of ``project`` that has labels.

    The version is the phase's latest ``Label.updated_at`` (one index lookup per
    phase on ``(phase, updated_at)``, about a millisecond even with 400,000 labels;
    a ``COUNT`` would scan them all) plus a counter of deleted labels kept by a
    ``post_delete`` signal, so a new, changed or deleted label gives a new version.
    """
    versions = {}
    for phase_id in project.phases.values_list("id", flat=True):
        last = (
            Label.objects.filter(phase_id=phase_id).order_by("-updated_at").values_list("updated_at", flat=True).first()
        )
        if last is not None:
            deleted = cache.get(f"{CACHE_PREFIX}:deleted:{phase_id}", 0)
            versions[phase_id] = f"{last.isoformat()}/{deleted}"
    return versions


def label_deleted_count(sender, instance: Label, **kwargs) -> None:
    key = f"{CACHE_PREFIX}:deleted:{instance.phase_id}"
    cache.add(key, 0, None)
    try:
        cache.incr(key)
    except ValueError:  # evicted between add and incr
        cache.set(key, 1, None)


@dataclass
class PhaseLabels:
    """The labels of one phase as arrays (between-labeler part pivoted images x labelers)."""

    image_ids: np.ndarray  # (n_images,) images with a non-repeat label
    labeler_ids: np.ndarray  # (n_labelers,) every labeler with a label in the phase
    first: np.ndarray  # (n_images, n_labelers) tone_low, NaN if no label or a skip
    second: np.ndarray  # (n_images, n_labelers) tone_high, NaN if a single tone
    uncertain: np.ndarray  # (n_images, n_labelers) bool
    labelled: np.ndarray  # (n_images, n_labelers) bool: a label exists (skips included)
    # One entry per label row (repeats included): workload statistics.
    row_labeler: np.ndarray
    row_skip: np.ndarray
    row_uncertain: np.ndarray
    row_repeat: np.ndarray
    row_seconds: np.ndarray

    @property
    def values(self) -> np.ndarray:
        """Images x labelers numeric values (NaN for no label, a skip or an invalid pair)."""
        return agreement.selection_values(self.first, self.second)


# PostgreSQL: each column comes back as one integer array (parsed in C by psycopg),
# about 3x faster than 400,000 row tuples (bench/bench_dashboard.py).
_COLUMNS_SQL = """
SELECT array_agg(image_id), array_agg(labeler_id), array_agg(COALESCE(tone_low, 0)),
       array_agg(COALESCE(tone_high, 0)), array_agg(uncertain::int), array_agg(is_repeat::int),
       array_agg(time_spent_ms)
FROM labeling_label WHERE phase_id = %s
"""


def _label_columns(phase: Phase) -> list[np.ndarray]:
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(_COLUMNS_SQL, [phase.id])
            columns = cursor.fetchone()
        if columns[0] is None:
            return [np.zeros(0, dtype=np.int64) for _ in range(7)]
        return [np.asarray(c, dtype=np.int64) for c in columns]
    rows = list(Label.objects.filter(phase=phase).order_by().values_list(*_LABEL_FIELDS))
    if not rows:
        return [np.zeros(0, dtype=np.int64) for _ in range(7)]
    return [np.asarray([0 if v is None else int(v) for v in col], dtype=np.int64) for col in zip(*rows, strict=True)]


def phase_labels_load(phase: Phase) -> PhaseLabels:
    """Pull a phase's labels with one query into arrays."""
    image, labeler, low, high, uncertain, repeat, ms = _label_columns(phase)
    low = np.where(low > 0, low, np.nan).astype(np.float64)  # 0 = no tone (a skip)
    high = np.where(high > 0, high, np.nan).astype(np.float64)
    uncertain = uncertain.astype(bool)
    repeat = repeat.astype(bool)
    seconds = ms.astype(np.float64) / 1000.0

    labeler_ids = np.unique(labeler)
    keep = ~repeat
    image_ids, image_code = np.unique(image[keep], return_inverse=True)
    labeler_code = np.searchsorted(labeler_ids, labeler[keep])
    shape = (image_ids.size, labeler_ids.size)
    first = np.full(shape, np.nan)
    second = np.full(shape, np.nan)
    cell_uncertain = np.zeros(shape, dtype=bool)
    labelled = np.zeros(shape, dtype=bool)
    first[image_code, labeler_code] = low[keep]
    second[image_code, labeler_code] = high[keep]
    cell_uncertain[image_code, labeler_code] = uncertain[keep]
    labelled[image_code, labeler_code] = True
    return PhaseLabels(
        image_ids=image_ids,
        labeler_ids=labeler_ids,
        first=first,
        second=second,
        uncertain=cell_uncertain,
        labelled=labelled,
        row_labeler=labeler,
        row_skip=np.isnan(low),
        row_uncertain=uncertain,
        row_repeat=repeat,
        row_seconds=seconds,
    )


def value_categories(n_tones: int, half_steps: bool) -> np.ndarray:
    """All possible values: tones 1..n, with half-steps (adjacent pairs) if allowed."""
    if half_steps:
        return np.arange(2, 2 * n_tones + 1) / 2
    return np.arange(1, n_tones + 1, dtype=np.float64)


def _distribution(values: np.ndarray, categories: np.ndarray) -> list[int]:
    values = values[~np.isnan(values)]
    positions = np.searchsorted(categories, values)
    positions = positions[(positions < categories.size)]
    return np.bincount(positions, minlength=categories.size).tolist()


# --------------------------------------------------------------------------
# One phase
# --------------------------------------------------------------------------


def _alpha_block(counts: np.ndarray, domain: np.ndarray, n_images: int) -> dict:
    """Ordinal alpha with its bootstrap interval, and interval alpha alongside."""
    if n_images < MIN_IMAGES:
        reason = too_little(n_images)
        return {
            "ordinal": _stat(math.nan, reason, low=None, high=None, interpretation=None),
            "interval": _stat(math.nan, reason),
            "confidence": CONFIDENCE,
            "n_resamples": N_RESAMPLES,
        }
    boot = agreement.bootstrap_alpha(
        counts=counts, value_domain=domain, n_resamples=N_RESAMPLES, confidence=CONFIDENCE, seed=0
    )
    ordinal = _stat(boot.estimate)
    ordinal.update(
        low=_num(boot.low),
        high=_num(boot.high),
        interpretation=None if ordinal["value"] is None else boot.interpretation,
    )
    interval = _stat(agreement.alpha_from_counts(counts, domain, "interval"))
    return {"ordinal": ordinal, "interval": interval, "confidence": CONFIDENCE, "n_resamples": N_RESAMPLES}


def _fleiss(counts: np.ndarray, n_images: int) -> dict:
    labelled = counts[counts.sum(axis=1) > 0]
    ratings = labelled.sum(axis=1)
    if n_images < MIN_IMAGES:
        return _stat(math.nan, too_little(n_images))
    if ratings.min() != ratings.max():
        return _stat(
            math.nan,
            f"not computed: images have between {ratings.min()} and {ratings.max()} valid labels; "
            "Fleiss' kappa needs the same number on every image (Krippendorff's alpha does not)",
        )
    return _stat(agreement.fleiss_kappa(labelled))


def phase_summary_compute(phase: Phase, *, n_tones: int, allow_pairs: bool = True) -> tuple[dict, dict]:
    """Compute a phase's summary (JSON-safe dict) and its per-image table.

    Returns
    -------
    summary : dict
        Everything the phase dashboard shows; labelers by membership id.
    images : dict
        ``table`` (``consensus_table`` DataFrame indexed by image id) and the
        images x labelers arrays ``first``, ``second``, ``uncertain``, ``labelled``
        plus ``labeler_ids``, for the per-image page.
    """
    data = phase_labels_load(phase)
    values = data.values
    reliability = values.T
    half = allow_pairs or bool(np.any(values[~np.isnan(values)] % 1))
    categories = value_categories(n_tones, half)
    table = agreement.consensus_table(
        data.first, data.second, data.uncertain, wide_range=WIDE_RANGE, index=data.image_ids
    )
    several = table["n_valid"].to_numpy() >= 2
    n_images_2plus = int(several.sum())
    enough = n_images_2plus >= MIN_IMAGES
    reason = None if enough else too_little(n_images_2plus)

    def rate(column: str) -> dict:
        share = table[column].to_numpy()[several].mean() if n_images_2plus else math.nan
        return _stat(share, reason)

    if data.image_ids.size:
        domain, counts = agreement.value_counts(reliability)
    else:
        domain, counts = np.zeros(0), np.zeros((0, 0), dtype=np.int64)
    n_label_rows = data.row_labeler.size
    selected = ~np.isnan(data.first)
    invalid_cells = selected & np.isnan(values)

    agreement_block = {
        "near_consensus": rate("near_consensus"),
        "overlap_consensus": rate("overlap_consensus"),
        "complete_consensus": rate("complete_consensus"),
        "percent_exact": _stat(agreement.percent_exact(reliability) if enough else math.nan, reason),
        "percent_within_one": _stat(agreement.percent_within_one(reliability) if enough else math.nan, reason),
        "alpha": _alpha_block(counts, domain, n_images_2plus),
        "fleiss_kappa": _fleiss(counts, n_images_2plus),
    }
    k_of_n = agreement.k_of_n_agreement(reliability) if data.image_ids.size else pd.DataFrame()
    unique = agreement.unique_values_distribution(reliability, min_labels=2) if data.image_ids.size else pd.DataFrame()
    ranges = table["range"].to_numpy()[several]
    range_values, range_counts = np.unique(ranges, return_counts=True)

    # Labeler x labeler quadratic-weighted kappa over the full value range.
    present = ~np.isnan(reliability)
    n_common = (present.astype(np.int64) @ present.T.astype(np.int64)).tolist()
    kappa = (
        agreement.kappa_matrix(reliability, categories, min_common=MIN_IMAGES)
        if data.labeler_ids.size
        else np.zeros((0, 0))
    )

    labeler_ids = data.labeler_ids.tolist()
    bias = agreement.labeler_bias(reliability, labelers=labeler_ids) if labeler_ids else None
    bias_band = agreement.labeler_bias(reliability, by_band=True, labelers=labeler_ids) if labeler_ids else None
    loo = agreement.alpha_leave_one_out(reliability, labelers=labeler_ids) if labeler_ids else None
    per_labeler = []
    for position, labeler_id in enumerate(labeler_ids):
        rows = data.row_labeler == labeler_id
        answered = rows & ~data.row_skip
        own = values[:, position]
        own = own[~np.isnan(own)]
        # Other labelers' images with 2+ valid labels without this labeler.
        others_images = int((np.delete(present, position, axis=0).sum(axis=0) >= 2).sum())
        n_bias = int(bias.loc[labeler_id, "n"]) if bias is not None else 0
        bias_reason = None if n_bias >= MIN_IMAGES else too_little(n_bias, "shared with other labelers")
        loo_reason = (
            None if others_images >= MIN_IMAGES else too_little(others_images, "with 2+ labels from the other labelers")
        )
        bands = bias_band[bias_band["labeler"] == labeler_id] if bias_band is not None else []
        per_labeler.append(
            {
                "labeler": labeler_id,
                "n_labels": int(rows.sum()),
                "n_skips": int((rows & data.row_skip).sum()),
                "n_repeats": int((rows & data.row_repeat).sum()),
                "n_uncertain": int((answered & data.row_uncertain).sum()),
                "uncertain_rate": _stat(
                    data.row_uncertain[answered].mean() if answered.any() else math.nan,
                    None if answered.any() else "no answered image",
                ),
                "median_seconds": _num(np.median(data.row_seconds[rows]), 2) if rows.any() else None,
                "n_valid": int(own.size),
                "mean_value": _num(own.mean(), 4) if own.size else None,
                "std_value": _num(own.std(), 4) if own.size else None,
                "distribution": _distribution(own, categories),
                "n_invalid": int(invalid_cells[:, position].sum()),
                "bias": {
                    "n": n_bias,
                    "mean_diff": _stat(bias.loc[labeler_id, "mean_diff"], bias_reason),
                    "mean_abs_diff": _stat(bias.loc[labeler_id, "mean_abs_diff"], bias_reason),
                },
                "bias_by_band": [
                    {
                        "band": int(row.band),
                        "n": int(row.n),
                        "mean_diff": _stat(
                            row.mean_diff, None if row.n >= MIN_IMAGES else too_little(int(row.n), "in this band")
                        ),
                    }
                    for row in bands.itertuples()
                ],
                "alpha_without": _stat(loo.loc[labeler_id, "alpha_without"], loo_reason),
                "alpha_change": _stat(loo.loc[labeler_id, "change"], loo_reason or reason),
            }
        )

    non_repeat = ~data.row_repeat
    summary = {
        "phase": {"id": phase.id, "kind": phase.kind, "name": phase.get_kind_display(), "status": phase.status},
        "n_labels": int(n_label_rows),
        "n_repeats": int(data.row_repeat.sum()),
        "n_skips": int((data.row_skip & non_repeat).sum()),
        "n_invalid": int(invalid_cells.sum()),
        "n_images": int(data.image_ids.size),
        "n_images_2plus": n_images_2plus,
        "n_labelers": len(labeler_ids),
        "labelers": labeler_ids,
        "agreement": agreement_block,
        "k_of_n": k_of_n.to_dict("records"),
        "unique_values": unique.to_dict("records"),
        "range_histogram": [
            {"range": float(r), "n_images": int(c)} for r, c in zip(range_values, range_counts, strict=True)
        ],
        "label_distribution": {
            "values": categories.tolist(),
            "counts": _distribution(values[~np.isnan(values)], categories),
            "n_skips": int((data.row_skip & non_repeat).sum()),
            "n_invalid": int(invalid_cells.sum()),
        },
        "kappa": {
            "labelers": labeler_ids,
            "matrix": [[_num(x, 4) for x in row] for row in kappa],
            "n_common": n_common,
            "min_common": MIN_IMAGES,
            "categories": categories.tolist(),
        },
        "per_labeler": per_labeler,
        "flags": {
            "wide_range": int(table["wide_range"].sum()),
            "invalid": int(table["has_invalid_annotation"].sum()),
            "uncertain": int(table["any_uncertainty"].sum()),
        },
    }
    _add_tone_shares(summary["label_distribution"], n_tones)
    images = {
        "table": table,
        "first": data.first.astype(np.float32),
        "second": data.second.astype(np.float32),
        "uncertain": data.uncertain,
        "labelled": data.labelled,
        "labeler_ids": data.labeler_ids,
    }
    return _json_clean(summary), images


def _add_tone_shares(distribution: dict, n_tones: int) -> None:
    """Share of labels per whole tone (a pair counts half to each tone) and the under-represented tones."""
    shares = np.zeros(n_tones)
    for value, count in zip(distribution["values"], distribution["counts"], strict=True):
        if value % 1:
            shares[int(value) - 1] += count / 2
            shares[int(value)] += count / 2
        else:
            shares[int(value) - 1] += count
    total = shares.sum()
    fractions = shares / total if total else shares
    distribution["tone_shares"] = [_num(f, 4) for f in fractions]
    threshold = UNDER_REPRESENTED / n_tones
    distribution["under_represented"] = (
        [tone + 1 for tone in range(n_tones) if fractions[tone] < threshold] if total else []
    )
    distribution["under_represented_threshold"] = _num(threshold, 4)


def _json_clean(obj: Any) -> Any:
    """NumPy scalars to Python, NaN to None, recursively."""
    if isinstance(obj, dict):
        return {str(k): _json_clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_json_clean(v) for v in obj]
    if isinstance(obj, np.bool_ | bool):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, float | np.floating):
        return _num(obj)
    return obj


# --------------------------------------------------------------------------
# Cached access
# --------------------------------------------------------------------------


def _key(kind: str, phase_id: int, version: str) -> str:
    return f"{CACHE_PREFIX}:{kind}:{phase_id}:{version}"


def _background_refresh() -> bool:
    """Serve the last summary while a worker recomputes (needs a real worker; see settings)."""
    from django.conf import settings

    return bool(settings.FAIRTONE.get("CONSENSUS_BACKGROUND_REFRESH")) and not settings.CELERY_TASK_ALWAYS_EAGER


def phase_summary_refresh(phase: Phase, version: str | None = None) -> tuple[dict, dict]:
    """Compute a phase's summary for its current labels and cache it (also as the phase's latest)."""
    if version is None:
        version = phase_versions(phase.project).get(phase.id, "empty")
    project = phase.project
    summary, images = phase_summary_compute(
        phase, n_tones=project.scale.tones.count(), allow_pairs=project.allow_adjacent_pairs
    )
    from django.utils import timezone

    summary = {**summary, "freshness": {"version": version, "computed_at": timezone.now().isoformat(), "stale": False}}
    cache.set_many(
        {
            _key("summary", phase.id, version): summary,
            _key("images", phase.id, version): images,
            _key("latest", phase.id, "any"): (version, summary, images),
        },
        CACHE_TIMEOUT,
    )
    return summary, images


def phase_summary(phase: Phase, *, version: str | None = None, with_images: bool = False) -> dict:
    """A phase's summary from the cache, computed (and cached) when the labels changed.

    On a big project the computation takes seconds (100,000 images x 4 labels:
    about 1.5 s of SQL and 3 s of statistics on a loaded 2-core machine), so with a
    real worker (``FAIRTONE["CONSENSUS_BACKGROUND_REFRESH"]``) a changed phase is
    served from its last computation, marked ``freshness.stale``, while a Celery
    task recomputes it (stale-while-revalidate): the dashboard always answers from
    the cache. Only the very first view of a phase computes in the request.

    Parameters
    ----------
    phase : Phase
    version : str, optional
        From ``phase_versions`` (saves the aggregate query when known).
    with_images : bool
        Return ``{"summary": ..., "images": ...}`` with the per-image table.
    """
    if version is None:
        version = phase_versions(phase.project).get(phase.id, "empty")
    summary_key, images_key = _key("summary", phase.id, version), _key("images", phase.id, version)
    summary = cache.get(summary_key)
    images = cache.get(images_key) if with_images and summary is not None else None
    if summary is None or (with_images and images is None):
        latest = cache.get(_key("latest", phase.id, "any")) if _background_refresh() else None
        if latest is not None:
            _, summary, images = latest
            summary = {**summary, "freshness": {**summary["freshness"], "stale": True}}
            # One refresh at a time per phase; the lock expires if a worker dies.
            if cache.add(_key("refreshing", phase.id, "any"), True, 300):
                from ..consensus_tasks import consensus_refresh_task

                consensus_refresh_task.delay(phase.id)
        else:
            summary, images = phase_summary_refresh(phase, version)
    return {"summary": summary, "images": images} if with_images else summary


def test_retest_compute(project: Project) -> dict:
    """Test-retest per labeler: calibration-2 repeats vs the same labeler's calibration-1 labels."""
    phases = {p.kind: p for p in project.phases.all()}
    cal1, cal2 = phases.get(Phase.Kind.CALIBRATION_1), phases.get(Phase.Kind.CALIBRATION_2)
    n_tones = project.scale.tones.count()
    categories = value_categories(n_tones, True)
    empty = {"per_labeler": [], "pooled": None, "reason": "no calibration-2 repeats yet", "pairs": []}
    if cal1 is None or cal2 is None:
        return empty
    retest = list(Label.objects.filter(phase=cal2, is_repeat=True).values_list("labeler_id", "image_id", "value"))
    if not retest:
        return empty
    first = {
        (labeler, image): value
        for labeler, image, value in Label.objects.filter(
            phase=cal1, image_id__in={image for _, image, _ in retest}
        ).values_list("labeler_id", "image_id", "value")
    }
    pairs = [
        (labeler, image, first[(labeler, image)], value)
        for labeler, image, value in retest
        if (labeler, image) in first and first[(labeler, image)] is not None and value is not None
    ]
    pairs.sort()

    def block(round1: list[float], round2: list[float]) -> dict:
        result = agreement.test_retest(round1, round2, categories)
        reason = None if result.n >= MIN_IMAGES else too_little(result.n, "labelled in both calibrations")
        return {
            "n": result.n,
            "exact": _stat(result.exact, reason),
            "within_one": _stat(result.within_one, reason),
            "weighted_kappa": _stat(result.weighted_kappa, reason),
            "mean_shift": _stat(result.mean_shift, reason),
        }

    per_labeler = []
    for labeler in sorted({p[0] for p in pairs}):
        own = [p for p in pairs if p[0] == labeler]
        per_labeler.append({"labeler": labeler, **block([p[2] for p in own], [p[3] for p in own])})
    return _json_clean(
        {
            "per_labeler": per_labeler,
            "pooled": block([p[2] for p in pairs], [p[3] for p in pairs]) if pairs else None,
            "reason": None if pairs else "no labeler labelled a repeated image in both calibrations",
            "pairs": [[p[0], p[2], p[3]] for p in pairs],
        }
    )


test_retest_compute.__test__ = False  # type: ignore[attr-defined]


def _drift(phase_summaries: list[dict]) -> dict[int, list[dict]]:
    """Each labeler's baseline (mean, distribution) per phase and its change from their previous phase."""
    baselines: dict[int, list[dict]] = {}
    for summary in phase_summaries:
        means = [row["mean_value"] for row in summary["per_labeler"] if row["mean_value"] is not None]
        panel = float(np.mean(means)) if means else None
        for row in summary["per_labeler"]:
            history = baselines.setdefault(row["labeler"], [])
            previous = next((h for h in reversed(history) if h["mean"] is not None), None)
            mean = row["mean_value"]
            drift = relative = None
            if previous is not None and mean is not None:
                drift = _num(mean - previous["mean"], 4)
                if panel is not None and previous["panel_mean"] is not None:
                    relative = _num((mean - panel) - (previous["mean"] - previous["panel_mean"]), 4)
            history.append(
                {
                    "phase": summary["phase"]["name"],
                    "phase_id": summary["phase"]["id"],
                    "n": row["n_valid"],
                    "mean": mean,
                    "std": row["std_value"],
                    "panel_mean": _num(panel, 4),
                    "distribution": row["distribution"],
                    "drift": drift,
                    "drift_vs_panel": relative,
                }
            )
    return baselines


def project_consensus(project: Project, phase: Phase | None = None) -> dict:
    """The whole dashboard for ``project`` with ``phase`` in detail (labelers by pseudonym).

    Two queries when everything is cached (the version aggregate and the
    pseudonyms) plus cache reads; a changed phase is recomputed.
    """
    versions = phase_versions(project)
    phases = [p for p in project.phases.order_by("id") if p.id in versions]
    phases.sort(key=lambda p: p.index)
    summaries = [phase_summary(p, version=versions[p.id]) for p in phases]
    if phase is None and phases:
        phase = next((p for p in phases if p.kind == Phase.Kind.MAIN), phases[-1])
    selected = next((s for s in summaries if phase is not None and s["phase"]["id"] == phase.id), None)
    retest_key = "{}:retest:{}:{}".format(
        CACHE_PREFIX, project.id, "|".join(f"{p.id}={versions[p.id]}" for p in phases)
    )
    retest = cache.get(retest_key)
    if retest is None:
        retest = test_retest_compute(project)
        cache.set(retest_key, retest, CACHE_TIMEOUT)
    names = dict(Membership.objects.filter(project=project).values_list("id", "pseudonym"))
    baselines = _drift(summaries)
    retest_by_labeler = {row["labeler"]: row for row in retest["per_labeler"]}
    labelers = [
        {
            "labeler": names.get(labeler_id, "?"),
            "baseline": history,
            "test_retest": retest_by_labeler.get(labeler_id),
        }
        for labeler_id, history in sorted(baselines.items(), key=lambda item: names.get(item[0], ""))
    ]
    return {
        "project": {
            "id": project.id,
            "name": project.name,
            "scale": project.scale.name,
            "tones": [{"position": t.position, "code": t.code, "hex": t.hex_colour} for t in project.scale.tones.all()],
        },
        # Changes whenever a label of any phase changes (cache key of the plots).
        "version": "|".join(f"{p.id}={versions[p.id]}" for p in phases),
        "min_images": MIN_IMAGES,
        "wide_range": WIDE_RANGE,
        "phases": [_with_names(s, names) for s in summaries],
        "selected": _with_names(selected, names) if selected else None,
        "labelers": labelers,
        "test_retest": {
            **{k: v for k, v in retest.items() if k != "pairs"},
            "per_labeler": [{**row, "labeler": names.get(row["labeler"], "?")} for row in retest["per_labeler"]],
            "pairs": [[names.get(labeler, "?"), a, b] for labeler, a, b in retest["pairs"]],
        },
    }


def _with_names(summary: dict, names: dict[int, str]) -> dict:
    """A copy of a phase summary with membership ids replaced by pseudonyms."""
    out = dict(summary)
    out["labelers"] = [names.get(i, "?") for i in summary["labelers"]]
    out["kappa"] = {**summary["kappa"], "labelers": out["labelers"]}
    out["per_labeler"] = [{**row, "labeler": names.get(row["labeler"], "?")} for row in summary["per_labeler"]]
    return out


# --------------------------------------------------------------------------
# Per-image table
# --------------------------------------------------------------------------

BOOLEAN_FILTERS = ("complete_consensus", "overlap_consensus", "near_consensus", "any_uncertainty", "wide_range")
SORTABLE = ("image_id",) + tuple(c for c in IMAGE_COLUMNS if c != "has_invalid_annotation")


def _truthy(text: str) -> bool | None:
    text = (text or "").strip().lower()
    if text in {"1", "true", "yes", "on"}:
        return True
    if text in {"0", "false", "no", "off"}:
        return False
    return None


def consensus_images(images: dict, params: dict[str, str]) -> np.ndarray:
    """Row positions of the per-image table matching ``params``, in the requested order.

    ``params``: ``flag`` (``wide_range``, ``invalid`` or ``any``), booleans in
    ``BOOLEAN_FILTERS`` (``true``/``false``), ``min_range``, ``max_range``,
    ``n_unique``, ``min_labels`` (valid labels), ``ordering`` (a column of
    ``SORTABLE``, ``-`` for descending; NaN last).
    """
    table: pd.DataFrame = images["table"]
    keep = np.ones(len(table), dtype=bool)
    flag = params.get("flag", "")
    if flag == "wide_range":
        keep &= table["wide_range"].to_numpy()
    elif flag == "invalid":
        keep &= table["has_invalid_annotation"].to_numpy()
    elif flag == "any":
        keep &= (table["wide_range"] | table["has_invalid_annotation"]).to_numpy()
    for column in BOOLEAN_FILTERS:
        wanted = _truthy(params.get(column, ""))
        if wanted is not None:
            keep &= table[column].to_numpy() == wanted
    for name, column, compare in (
        ("min_range", "range", np.greater_equal),
        ("max_range", "range", np.less_equal),
        ("n_unique", "n_unique_values", np.equal),
        ("min_labels", "n_valid", np.greater_equal),
    ):
        try:
            bound = float(params.get(name, ""))
        except ValueError:
            continue
        with np.errstate(invalid="ignore"):
            keep &= compare(table[column].to_numpy(), bound)
    rows = np.flatnonzero(keep)
    ordering = params.get("ordering", "") or "image_id"
    descending = ordering.startswith("-")
    column = ordering.lstrip("-")
    if column not in SORTABLE:
        column, descending = "image_id", False
    key = (table.index.to_numpy() if column == "image_id" else table[column].to_numpy())[rows].astype(np.float64)
    if descending:
        key = -key
    key = np.where(np.isnan(key), np.inf, key)  # NaN last either way
    return rows[np.argsort(key, kind="stable")]


def _selection_text(low: float, high: float) -> str:
    if math.isnan(low):
        return ""
    if math.isnan(high):
        return str(int(low))
    return f"{int(low)}+{int(high)}"


def image_rows(images: dict, rows: np.ndarray, names: dict[int, str]) -> list[dict]:
    """JSON-safe per-image records (data-card fields) for the table rows ``rows``."""
    table: pd.DataFrame = images["table"]
    labelers = images["labeler_ids"]
    first, second = images["first"], images["second"]
    uncertain, labelled = images["uncertain"], images["labelled"]
    records = []
    subset = table.iloc[rows]
    for position, (image_id, row) in zip(rows, subset.iterrows(), strict=True):
        labels = []
        for column in np.flatnonzero(labelled[position]):
            low, high = float(first[position, column]), float(second[position, column])
            value = agreement.selection_values([low], [high])[0]
            labels.append(
                {
                    "labeler": names.get(int(labelers[column]), "?"),
                    "selection": _selection_text(low, high) or "skip",
                    "value": _num(value),
                    "uncertain": bool(uncertain[position, column]),
                    "valid": math.isnan(low) or not math.isnan(value),
                }
            )
        flags = [
            name
            for name in ("wide_range", "invalid")
            if row["wide_range" if name == "wide_range" else "has_invalid_annotation"]
        ]
        record = {
            "image_id": int(image_id),
            "labels": labels,
            "valid_values": [lab["value"] for lab in labels if lab["value"] is not None],
        }
        for column in IMAGE_COLUMNS:
            record[column] = _json_clean(row[column].item() if hasattr(row[column], "item") else row[column])
        record["flags"] = flags
        records.append(record)
    return records


# --------------------------------------------------------------------------
# Plots (matplotlib, Agg, imported lazily; rendered from the dashboard dict)
# --------------------------------------------------------------------------

PLOTS = {
    "label_distribution": "Label distribution per phase",
    "range_histogram": "Per-image range of values",
    "kappa_heatmap": "Labeler x labeler weighted kappa",
    "test_retest": "Test-retest per labeler",
    "labeler_bias": "Labeler bias per tone band",
}
FORMATS = {"png": "image/png", "svg": "image/svg+xml"}
_GREY = "#9a9a9a"
_ACCENT = "#2f5d8a"


def _message(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True, color="#444", transform=ax.transAxes)
    ax.set_axis_off()


def _plot_label_distribution(fig, dashboard: dict) -> None:
    phases = dashboard["phases"]
    if not phases:
        _message(fig.subplots(), "No labels yet.")
        return
    colours = {tone["position"]: tone["hex"] for tone in dashboard["project"]["tones"]}
    axes = fig.subplots(len(phases), 1, sharex=True, squeeze=False)[:, 0]
    for ax, summary in zip(axes, phases, strict=True):
        dist = summary["label_distribution"]
        values, counts = np.asarray(dist["values"]), np.asarray(dist["counts"], dtype=float)
        total = counts.sum()
        share = counts / total * 100 if total else counts
        colour = [colours.get(int(v), _GREY) if v % 1 == 0 else "#c8c8c8" for v in values]
        ax.bar(values, share, width=0.42 if np.any(values % 1) else 0.8, color=colour, edgecolor="#333", linewidth=0.5)
        for v, s, c in zip(values, share, counts, strict=True):
            ax.annotate(f"{int(c)}", (v, s), xytext=(0, 2), textcoords="offset points", ha="center", fontsize=7)
        for tone in dist["under_represented"]:
            ax.axvspan(tone - 0.5, tone + 0.5, color="#b03a2e", alpha=0.08, linewidth=0)
        ax.set_ylabel("% of labels")
        title = f"{summary['phase']['name']}: {int(total)} labels, {dist['n_skips']} skips"
        if dist["under_represented"]:
            title += f"; under-represented tones (shaded): {', '.join(map(str, dist['under_represented']))}"
        ax.set_title(title, fontsize=9, loc="left")
        ax.set_ylim(0, max(share.max() * 1.18, 1) if total else 1)
    axes[-1].set_xlabel("Value (tone; x.5 = two adjacent tones)")
    axes[-1].set_xticks(range(1, len(colours) + 1))


def _plot_range_histogram(fig, dashboard: dict) -> None:
    ax = fig.subplots()
    selected = dashboard["selected"]
    if not selected or not selected["range_histogram"]:
        _message(ax, "No image with 2+ labels yet.")
        return
    ranges = [row["range"] for row in selected["range_histogram"]]
    counts = [row["n_images"] for row in selected["range_histogram"]]
    threshold = dashboard["wide_range"]
    colour = ["#b03a2e" if r >= threshold else _ACCENT for r in ranges]
    ax.bar(ranges, counts, width=0.4, color=colour)
    for r, c in zip(ranges, counts, strict=True):
        ax.annotate(str(c), (r, c), xytext=(0, 2), textcoords="offset points", ha="center", fontsize=8)
    ax.axvline(threshold - 0.25, color="#b03a2e", linestyle="--", linewidth=1)
    ax.set_xlabel(f"Range of the values on an image (max - min, tones); red: flagged (>= {threshold})")
    ax.set_ylabel("Images")
    ax.set_title(f"{selected['phase']['name']}: {selected['n_images_2plus']} images with 2+ labels", fontsize=10)


def _plot_kappa_heatmap(fig, dashboard: dict) -> None:
    ax = fig.subplots()
    selected = dashboard["selected"]
    if not selected or not selected["kappa"]["labelers"]:
        _message(ax, "No labels yet.")
        return
    kappa = selected["kappa"]
    names = kappa["labelers"]
    matrix = np.array([[np.nan if x is None else x for x in row] for row in kappa["matrix"]], dtype=float)
    from matplotlib import colormaps

    cmap = colormaps["RdBu"].with_extremes(bad="#e6e6e3")
    image = ax.imshow(np.ma.masked_invalid(matrix), vmin=-1, vmax=1, cmap=cmap)
    for i in range(len(names)):
        for j in range(len(names)):
            text = "n<{}".format(kappa["min_common"]) if np.isnan(matrix[i, j]) else f"{matrix[i, j]:.2f}"
            ax.text(j, i, text, ha="center", va="center", fontsize=8)
    ax.set_xticks(range(len(names)), names, rotation=45, ha="right")
    ax.set_yticks(range(len(names)), names)
    ax.set_title(f"{selected['phase']['name']}: quadratic-weighted Cohen's kappa", fontsize=10)
    fig.colorbar(image, ax=ax, shrink=0.8)


def _plot_test_retest(fig, dashboard: dict) -> None:
    retest = dashboard["test_retest"]
    pairs = retest["pairs"]
    if not pairs:
        _message(fig.subplots(), retest["reason"] or "No test-retest pairs.")
        return
    names = sorted({p[0] for p in pairs})
    columns = min(4, len(names))
    rows = -(-len(names) // columns)
    axes = fig.subplots(rows, columns, squeeze=False, sharex=True, sharey=True).ravel()
    n_tones = len(dashboard["project"]["tones"])
    rng = np.random.default_rng(0)
    stats = {row["labeler"]: row for row in retest["per_labeler"]}
    for ax, name in zip(axes, names, strict=False):
        own = np.array([[p[1], p[2]] for p in pairs if p[0] == name], dtype=float)
        jitter = rng.uniform(-0.12, 0.12, size=own.shape)
        ax.plot([0.5, n_tones + 0.5], [0.5, n_tones + 0.5], color=_GREY, linewidth=0.8)
        ax.scatter(own[:, 0] + jitter[:, 0], own[:, 1] + jitter[:, 1], s=14, color=_ACCENT, alpha=0.7)
        exact = stats[name]["exact"]["value"]
        label = f"{name}: n={len(own)}" + (f", exact {exact * 100:.0f}%" if exact is not None else "")
        ax.set_title(label, fontsize=9)
        ax.set_xlim(0.5, n_tones + 0.5)
        ax.set_ylim(0.5, n_tones + 0.5)
        ax.set_aspect("equal")
    for ax in axes[len(names) :]:
        ax.set_axis_off()
    fig.supxlabel("Calibration 1 value")
    fig.supylabel("Calibration 2 value (repeat)")


def _plot_labeler_bias(fig, dashboard: dict) -> None:
    ax = fig.subplots()
    selected = dashboard["selected"]
    lines = 0
    if selected:
        for row in selected["per_labeler"]:
            bands = [b for b in row["bias_by_band"] if b["mean_diff"]["value"] is not None]
            if not bands:
                continue
            lines += 1
            ax.plot(
                [b["band"] for b in bands], [b["mean_diff"]["value"] for b in bands], marker="o", label=row["labeler"]
            )
    if not lines:
        _message(ax, f"Too little data: no tone band with {dashboard['min_images']}+ shared images.")
        return
    ax.axhline(0, color=_GREY, linewidth=0.8)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_xlabel("Tone band (median of the other labelers, rounded)")
    ax.set_ylabel("Mean signed difference (+ = deeper)")
    ax.set_title(f"{selected['phase']['name']}: bias against the other labelers", fontsize=10)
    ax.legend(fontsize=8)


_PLOTTERS = {
    "label_distribution": (_plot_label_distribution, lambda d: (8, 1.9 * max(len(d["phases"]), 1) + 0.6)),
    "range_histogram": (_plot_range_histogram, lambda d: (7, 3.6)),
    "kappa_heatmap": (_plot_kappa_heatmap, lambda d: (5.5, 4.6)),
    "test_retest": (
        _plot_test_retest,
        lambda d: (8, 2.4 * max(1, -(-len({p[0] for p in d["test_retest"]["pairs"]}) // 4)) + 0.8),
    ),
    "labeler_bias": (_plot_labeler_bias, lambda d: (7, 3.6)),
}


def plot_render(dashboard: dict, name: str, fmt: str) -> bytes:
    """Render the plot ``name`` of a ``project_consensus`` dashboard as PNG or SVG bytes."""
    import io

    import matplotlib

    matplotlib.use("Agg")  # no display; a no-op when already set
    from matplotlib.figure import Figure

    if name not in _PLOTTERS or fmt not in FORMATS:
        raise ValueError(f"Unknown plot {name}.{fmt}.")
    draw, size = _PLOTTERS[name]
    with matplotlib.rc_context({"svg.hashsalt": "fairtone", "font.size": 9}):
        fig = Figure(figsize=size(dashboard), layout="constrained")
        draw(fig, dashboard)
        buffer = io.BytesIO()
        fig.savefig(buffer, format=fmt, dpi=110, metadata={"Date": None} if fmt == "svg" else None)
    return buffer.getvalue()
