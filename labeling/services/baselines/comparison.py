"""What the stored results say: counts per flag and ITA class, and the comparison with human labels.

Spearman's rho of the mean label against ITA and apparent albedo (with a seeded
bootstrap interval over images), ITA per consensus tone, and the images where
the human ranking and the ITA ranking disagree most.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from typing import Any, NamedTuple

import numpy as np
from django.core.cache import cache
from django.db.models import Count, Max, TextField
from django.db.models.functions import Cast
from django.utils import timezone

from metrics.correlation import spearman_bootstrap
from metrics.rounding import round_half_up

from ...models import ImageBaseline, Label, Phase, Project
from .. import queue
from ..consensus.caching import phase_versions
from .parameters import (
    BASELINE_CODE_VERSION,
    FLAG_NAMES,
    ITA_CLASS_NAMES,
    baseline_parameters_effective,
    baseline_parameters_hash,
    baselines_current,
)

#: Bootstrap of Spearman's rho: resamples and seed (recorded with every comparison).
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20_250_601
BOOTSTRAP_CONFIDENCE = 0.95
#: Images listed where the human ranking and the ITA ranking disagree most.
DISAGREEMENT_LIMIT = 20
#: What the mean label is compared with (keys of the comparison's ``correlations``).
COMPARISON_MEASURES = ("ita", "apparent_albedo", "apparent_albedo_normalized")


def baseline_summary(project: Project) -> dict[str, Any]:
    """Counts for the project's current parameters: computed, failed, missing, flags, classes.

    Counted in the database, grouped by (status, flags, ITA class): a project has a few dozen such
    combinations whatever its size (100,000 images: one grouped query instead of reading every row).
    """
    groups = baselines_current(project).values("status", "flags", "ita_class").annotate(n=Count("id")).order_by()
    n_images = project.images.count()
    flags = dict.fromkeys(FLAG_NAMES, 0)
    classes = dict.fromkeys(ITA_CLASS_NAMES, 0)
    n_ok = n_failed = n_flagged = 0
    for group in groups:
        status, row_flags, ita_class, n = group["status"], group["flags"], group["ita_class"], group["n"]
        if status != ImageBaseline.Status.OK:
            n_failed += n
            continue
        n_ok += n
        if row_flags:
            n_flagged += n
        for flag in row_flags or []:
            flags[flag] = flags.get(flag, 0) + n
        if ita_class:
            classes[ita_class] = classes.get(ita_class, 0) + n
    n_outdated = 0
    if n_ok + n_failed < n_images:
        current_ids = baselines_current(project).values("image_id")
        n_outdated = project.images.exclude(id__in=current_ids).filter(baselines__isnull=False).distinct().count()
    return {
        "n_images": n_images,
        "n_ok": n_ok,
        "n_failed": n_failed,
        "n_flagged": n_flagged,
        "n_missing": max(0, n_images - n_ok - n_failed),
        # Of the missing: images with results only from another method or parameter set.
        "n_outdated": n_outdated,
        "n_unflagged": n_ok - n_flagged,
        "flags": flags,
        "classes": classes,
    }


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
        ``by_tone`` (ITA values per consensus tone), ``coverage_by_tone``
        (per consensus tone: labelled images, images with an ITA, images with
        an ITA and no quality flag) and ``disagreements``
        (largest absolute differences between the rank of the mean label and
        the rank of ITA reversed, since a deeper tone has a lower ITA).

    On the demo project, ``["correlations"]["ita"]["rho"]`` (Spearman's rho of ITA with the mean label) is
    strongly negative: a deeper tone has a lower ITA.
    """
    values = _human_values(project, phase)
    points = _comparison_points(project, values, exclude_flagged=exclude_flagged)
    coverage = _coverage_by_tone(project, values)
    correlations = {
        measure: spearman_bootstrap(
            *_pairs(points, measure), n_resamples=n_resamples, seed=seed, confidence=BOOTSTRAP_CONFIDENCE
        )
        for measure in COMPARISON_MEASURES
    }
    by_tone: dict[int, list[float]] = {}
    for p in points:
        by_tone.setdefault(p["consensus_tone"], []).append(p["ita"])
    disagreements = _disagreements(points)
    return {
        "project_id": project.id,
        "phase_id": phase.id if phase is not None else None,
        "phase": phase.get_kind_display() if phase is not None else "All phases",
        "exclude_flagged": exclude_flagged,
        "parameters_hash": baseline_parameters_hash(baseline_parameters_effective(project)),
        "code_version": BASELINE_CODE_VERSION,
        "n_labelled_images": len(values),
        "n_points": len(points),
        "points": points,
        "correlations": correlations,
        "by_tone": {str(k): by_tone[k] for k in sorted(by_tone)},
        "coverage_by_tone": coverage,
        "disagreements": disagreements,
        "label_definition": "plain mean of the image's non-repeat valid label values",
    }


#: Comparisons are cached per (project, phase, flagged or not) and version of labels and baselines.
COMPARISON_CACHE_PREFIX = "baseline-comparison:v2"
COMPARISON_CACHE_TIMEOUT = 7 * 24 * 3600
#: The comparison's plots, drawn by the baselines page (``views.baselines``), cached under this prefix.
BASELINE_PLOT_CACHE_PREFIX = "baseline-plot:v1"


def _comparison_version(project: Project) -> str:
    """Changes when a label (new, changed or deleted) or a current baseline result changes.

    The labels' part is the consensus cache's phase versions (an index lookup per phase); the
    baselines' part one aggregate over the current results.
    """
    current = baselines_current(project).aggregate(n=Count("id"), t=Max("computed_at"))
    raw = f"{sorted(phase_versions(project).items())}|{current['n']}|{current['t']}|{BASELINE_CODE_VERSION}"
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


def baseline_comparison_cached(
    project: Project, phase: Phase | None, exclude_flagged: bool, *, compute: bool = False, with_points: bool = True
) -> dict[str, Any]:
    """:func:`baseline_comparison` from the cache, computed when labels or baselines changed.

    With a real worker (``FAIRTONE["CONSENSUS_BACKGROUND_REFRESH"]``) a changed comparison is served
    from its last computation with ``freshness.stale`` while the project's precompute task (debounced)
    recomputes it, so a lead never waits for the bootstrap; only a comparison never computed before is
    computed in the request. ``compute=True`` (the precompute task) always computes a missing one.
    ``with_points=False`` returns it without the per-image ``points`` (the page: a 100,000-image list
    costs a second to read back from the cache; ``n_points`` counts them).
    """
    scope = f"{project.pk}:{phase.pk if phase else 'all'}:{int(exclude_flagged)}"
    version = _comparison_version(project)
    part = "full" if with_points else "slim"
    key = f"{COMPARISON_CACHE_PREFIX}:{scope}:{version}"
    latest_key = f"{COMPARISON_CACHE_PREFIX}:latest:{scope}"
    result = cache.get(f"{key}:{part}")
    if result is not None:
        return result
    if not compute and queue.background_precompute_enabled():
        latest = cache.get(f"{latest_key}:{part}")
        if latest is not None:
            queue.precompute_schedule(project.pk)
            return {**latest, "freshness": {**latest["freshness"], "stale": True}}
    full = baseline_comparison(project=project, phase=phase, exclude_flagged=exclude_flagged)
    full["freshness"] = {"version": version, "computed_at": timezone.now().isoformat(), "stale": False}
    slim = {k: v for k, v in full.items() if k != "points"}
    cache.set_many(
        {f"{key}:full": full, f"{key}:slim": slim, f"{latest_key}:full": full, f"{latest_key}:slim": slim},
        COMPARISON_CACHE_TIMEOUT,
    )
    return full if with_points else slim


class HumanValues(NamedTuple):
    """Per labelled image (ascending ids): the mean, the median and the number of its label values."""

    image_ids: np.ndarray
    mean: np.ndarray
    median: np.ndarray
    n: np.ndarray

    def __len__(self) -> int:
        return int(self.image_ids.size)


#: Labels read per round trip by :func:`_human_values`.
HUMAN_ROWS = 20_000
_PAIR = np.dtype([("image", np.int64), ("value", np.float64)])


def _human_summary(images: np.ndarray, values: np.ndarray) -> HumanValues:
    """Mean, median and count of each image's values (``images`` ascending, each image's values ascending)."""
    image_ids, starts, counts = np.unique(images, return_index=True, return_counts=True)
    if not image_ids.size:
        empty = np.zeros(0)
        return HumanValues(image_ids, empty, empty, counts)
    mean = np.add.reduceat(values, starts) / counts
    median = (values[starts + (counts - 1) // 2] + values[starts + counts // 2]) / 2.0
    return HumanValues(image_ids, mean, median, counts)


def _human_values(project: Project, phase: Phase | None) -> HumanValues:
    """Each image's non-repeat, valid label values (in ``phase``, or all phases), summarised in arrays:
    no Python object per label (100,000 images x 4 labels: well under a second).

    The labels come sorted by image and value (the database sorts them) through a server-side cursor, and
    each batch's images are summarised as they come (an image cut by the batch's end waits for the next):
    every label at once, sorted in NumPy, held 75 MB at 1,000,000 labels. The sums are over the same values
    in the same order, so the numbers are the same."""
    labels = Label.objects.filter(phase__project=project, is_repeat=False, is_valid=True, value__isnull=False)
    if phase is not None:
        labels = labels.filter(phase=phase)
    rows = labels.order_by("image_id", "value").values_list("image_id", "value").iterator(chunk_size=HUMAN_ROWS)
    parts: list[HumanValues] = []
    images, values = np.zeros(0, dtype=np.int64), np.zeros(0)
    while True:
        batch = np.fromiter(itertools.islice(rows, HUMAN_ROWS), dtype=_PAIR)
        images = np.concatenate((images, batch["image"]))
        values = np.concatenate((values, batch["value"]))
        last = batch.size == 0
        # Every image but the last is complete (the last may go on in the next batch), all of them at the end.
        cut = images.size if last else int(np.searchsorted(images, images[-1], side="left"))
        if cut:
            parts.append(_human_summary(images[:cut], values[:cut]))
            images, values = images[cut:], values[cut:]
        if last:
            break
    if not parts:
        return _human_summary(images, values)
    return HumanValues(*(np.concatenate(column) for column in zip(*parts, strict=True)))


def _comparison_points(project: Project, human: HumanValues, *, exclude_flagged: bool) -> list[dict]:
    """One dict per labelled image with an ok result: its labels summarised next to its baseline."""
    rows = list(
        baselines_current(project)
        .filter(status=ImageBaseline.Status.OK, ita_median__isnull=False)
        .order_by("image_id")
        .annotate(flags_text=Cast("flags", TextField()))
        .values_list(
            "image_id",
            "image__external_id",
            "id",
            "ita_median",
            "ita_class",
            "albedo",
            "albedo_normalized",
            "flags_text",
        )
    )
    where = _positions(human, [row[0] for row in rows])
    tones = round_half_up(human.median).astype(np.int64).tolist()
    means, medians, counts = human.mean.tolist(), human.median.tolist(), human.n.tolist()
    points = []
    for (image_id, external_id, baseline_id, ita, ita_class, albedo, albedo_n, flags_text), k in zip(
        rows, where.tolist(), strict=True
    ):
        flags = _flags(flags_text)
        if k < 0 or (exclude_flagged and flags):
            continue  # not labelled, or flagged and left out
        points.append(
            {
                "image_id": image_id,
                "external_id": external_id,
                "baseline_id": baseline_id,
                "mean_label": means[k],
                "median_label": medians[k],
                "consensus_tone": tones[k],
                "n_labels": counts[k],
                "ita": ita,
                "ita_class": ita_class,
                "apparent_albedo": albedo,
                "apparent_albedo_normalized": albedo_n,
                "flags": list(flags or []),
            }
        )
    return points


def _flags(text: str | None) -> list[str]:
    """A result's flags from the JSON text of the column (decoded only when not the usual empty list)."""
    if not text or text in ("[]", "null"):
        return []
    return list(json.loads(text))


def _positions(human: HumanValues, image_ids: list[int]) -> np.ndarray:
    """Index of each of ``image_ids`` in ``human`` (-1 for an image without labels)."""
    ids = np.asarray(image_ids, dtype=np.int64)
    if not len(human) or not ids.size:
        return np.full(ids.size, -1, dtype=np.int64)
    k = np.searchsorted(human.image_ids, ids)
    k_clipped = np.minimum(k, len(human) - 1)
    return np.where(human.image_ids[k_clipped] == ids, k_clipped, -1)


def _coverage_by_tone(project: Project, human: HumanValues) -> list[dict]:
    """Per consensus tone: labelled images, how many got an ITA, how many an ITA without a flag.

    The baseline's coverage where the labelers put each tone: a detector that
    fails on the ends of the scale shows here as a low share at those tones.
    """
    rows = list(
        baselines_current(project)
        .annotate(flags_text=Cast("flags", TextField()))
        .values_list("image_id", "ita_median", "flags_text")
    )
    rows = [(image_id, ita, _flags(text)) for image_id, ita, text in rows]
    where = _positions(human, [row[0] for row in rows])
    has_ita = np.zeros(len(human), dtype=bool)
    unflagged = np.zeros(len(human), dtype=bool)
    measured = np.array([ita is not None for _, ita, _ in rows], dtype=bool)
    clean = np.array([ita is not None and not flags for _, ita, flags in rows], dtype=bool)
    known = where >= 0
    has_ita[where[known]] = measured[known]
    unflagged[where[known]] = clean[known]
    tones = round_half_up(human.median).astype(np.int64)
    return [
        {
            "tone": int(tone),
            "n_labelled": int((tones == tone).sum()),
            "n_with_ita": int(has_ita[tones == tone].sum()),
            "n_unflagged": int(unflagged[tones == tone].sum()),
        }
        for tone in np.unique(tones)
    ]


def _pairs(points: list[dict], measure: str) -> tuple[list[float], list[float]]:
    """The mean labels and ``measure`` of the points that have it."""
    pairs = [(p["mean_label"], p[measure]) for p in points if p[measure] is not None]
    return [a for a, _ in pairs], [b for _, b in pairs]


def _disagreements(points: list[dict]) -> list[dict]:
    """Add the label and ITA ranks to each point; the points whose ranks differ most, largest first."""
    from scipy import stats as scipy_stats

    if len(points) < 2:
        return []
    label_rank = scipy_stats.rankdata([p["mean_label"] for p in points])
    ita_rank = scipy_stats.rankdata([-p["ita"] for p in points])
    for p, lr, ir in zip(points, label_rank, ita_rank, strict=True):
        p["label_rank"], p["ita_rank"] = float(lr), float(ir)
        p["rank_difference"] = float(abs(lr - ir))
    disagreements = sorted(points, key=lambda p: (-p["rank_difference"], p["image_id"]))
    return [p for p in disagreements if p["rank_difference"] > 0][:DISAGREEMENT_LIMIT]


def baseline_correlations(
    *, project: Project, n_resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> dict[str, Any]:
    """The correlations of :func:`baseline_comparison` (all phases, flagged images included), from arrays.

    The same numbers as ``baseline_comparison(project=project)["correlations"]`` (same points in the same
    order, same bootstrap), without one Python dict per image: memory grows by a few numbers per image, so
    the data card of a 250,000-image release can afford it.
    """
    # Each image's plain mean label, from the labels streamed by image (label values are tones and midpoints
    # of two tones: their sums are exact in any order, so these are the means of the labels in any order).
    human = _human_values(project, None)
    image_ids, means = human.image_ids, human.mean
    del human
    rows = (
        baselines_current(project)
        .filter(status=ImageBaseline.Status.OK, ita_median__isnull=False)
        .order_by("image_id")
        .values_list("image_id", "ita_median", "albedo", "albedo_normalized", "flags")
    )
    nan = float("nan")
    baselines = np.fromiter(
        (
            (i, ita, nan if a is None else a, nan if an is None else an, bool(flags))
            for i, ita, a, an, flags in rows.iterator(chunk_size=20_000)
        ),
        dtype=[("image", np.int64), ("ita", np.float64), ("albedo", np.float64), ("albedo_n", np.float64), ("f", bool)],
    )
    baselines = baselines[np.isin(baselines["image"], image_ids)]
    mean_label = means[np.searchsorted(image_ids, baselines["image"])]
    correlations = {}
    for measure, column in zip(COMPARISON_MEASURES, ("ita", "albedo", "albedo_n"), strict=True):
        have = ~np.isnan(baselines[column])
        correlations[measure] = spearman_bootstrap(
            mean_label[have],
            baselines[column][have],
            n_resamples=n_resamples,
            seed=seed,
            confidence=BOOTSTRAP_CONFIDENCE,
        )
    # The same without the images that carry a quality flag (issue 22: on the demo 31 of 48 are flagged and
    # the pooled figure alone cannot say whether they drive it).
    clean = ~baselines["f"] & ~np.isnan(baselines["ita"])
    ita_unflagged = spearman_bootstrap(
        mean_label[clean],
        baselines["ita"][clean],
        n_resamples=n_resamples,
        seed=seed,
        confidence=BOOTSTRAP_CONFIDENCE,
    )
    return {
        "n_points": int(baselines.size),
        "n_flagged": int(baselines["f"].sum()),
        "correlations": correlations,
        "ita_unflagged": ita_unflagged,
        "parameters_hash": baseline_parameters_hash(baseline_parameters_effective(project)),
        "code_version": BASELINE_CODE_VERSION,
        "label_definition": "plain mean of the image's non-repeat valid label values",
    }
