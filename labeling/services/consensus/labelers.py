"""Labeler quality: per-labeler statistics of a phase, test-retest across the calibrations, drift."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from metrics import agreement

from ...models import Label, Phase, Project
from . import numbers
from .bands import bias_stat
from .loading import PhaseLabels, distribution, image_subject_units, value_categories
from .numbers import (
    CONFIDENCE,
    MIN_IMAGES,
    N_RESAMPLES,
    clustered_share,
    coefficient_stat,
    json_clean,
    num,
    stat,
    too_little,
    wilson_share,
)

# --------------------------------------------------------------------------
# Per labeler, one phase
# --------------------------------------------------------------------------


@dataclass
class _Panel:
    """What every labeler's row of a phase is computed from."""

    data: PhaseLabels
    values: np.ndarray  # images x labelers
    categories: np.ndarray
    invalid_cells: np.ndarray
    reason: str | None  # why the phase's agreement is not shown (None: it is)
    present: np.ndarray  # labelers x images: a valid value
    bias: pd.DataFrame
    loo: pd.DataFrame
    clusters: np.ndarray | None = None  # the subject of each image when people repeat (issue 22)
    # Per labeler: the value domain and items x values counts of the other labelers (alpha without them).
    counts_without: list[tuple[np.ndarray, np.ndarray]] | None = None


def labelers_statistics(
    data: PhaseLabels,
    values: np.ndarray,
    categories: np.ndarray,
    invalid_cells: np.ndarray,
    reason: str | None,
    *,
    clusters: np.ndarray | None = None,
) -> list[dict]:
    """One row per labeler of the phase: workload, own values, bias and leave-one-out alpha.

    ``clusters``: the subject of each image when people repeat (``summary.image_subject_units``); alpha
    without a labeler then resamples subjects, and its floor counts subjects.
    """
    labeler_ids = data.labeler_ids.tolist()
    if not labeler_ids:
        return []
    reliability = values.T
    panel = _Panel(
        data=data,
        values=values,
        categories=categories,
        invalid_cells=invalid_cells,
        reason=reason,
        present=~np.isnan(reliability),
        bias=agreement.labeler_bias(reliability, labelers=labeler_ids, clusters=clusters),
        loo=agreement.alpha_leave_one_out(reliability, labelers=labeler_ids),
        clusters=clusters,
        counts_without=agreement.value_counts_without_each(reliability) if reliability.shape[1] else None,
    )
    return [
        {**_workload(data, labeler_id), **_own_values(panel, position), **_against_others(panel, position, labeler_id)}
        for position, labeler_id in enumerate(labeler_ids)
    ]


def _share(hits: int, n: int, reason: str | None, unit: str = "images") -> dict:
    """``hits / n`` with its Wilson 95% interval (``low``, ``high``), ``n`` and ``k``; hidden with a reason
    when too few or when the interval is too wide to read (``numbers.MAX_INTERVAL_WIDTH``)."""
    if not n:
        return wilson_share(0, 0, reason=reason or "nothing to count", unit=unit)
    return wilson_share(hits, n, reason=reason, unit=unit)


def _workload(data: PhaseLabels, labeler_id: int) -> dict:
    """Labels, skips, repeats, uncertain answers and time of one labeler (every label row)."""
    rows = data.row_labeler == labeler_id
    answered = rows & ~data.row_skip
    return {
        "labeler": labeler_id,
        "n_labels": int(rows.sum()),
        "n_skips": int((rows & data.row_skip).sum()),
        "n_repeats": int((rows & data.row_repeat).sum()),
        "n_uncertain": int((answered & data.row_uncertain).sum()),
        "uncertain_rate": _share(
            int((answered & data.row_uncertain).sum()),
            int(answered.sum()),
            None if answered.any() else "no answered image",
            unit="answered labels",
        ),
        "skip_rate": _share(
            int((rows & data.row_skip).sum()),
            int(rows.sum()),
            None if rows.any() else "no label",
            unit="labels",
        ),
        "median_seconds": num(np.median(data.row_seconds[rows]), 2) if rows.any() else None,
    }


def _own_values(panel: _Panel, position: int) -> dict:
    """The labeler's valid values: count, mean, spread and distribution, and their invalid pairs."""
    own = panel.values[:, position]
    own = own[~np.isnan(own)]
    return {
        "n_valid": int(own.size),
        "mean_value": num(own.mean(), 4) if own.size else None,
        "std_value": num(own.std(), 4) if own.size else None,
        "distribution": distribution(own, panel.categories),
        "n_invalid": int(panel.invalid_cells[:, position].sum()),
    }


def _against_others(panel: _Panel, position: int, labeler_id: int) -> dict:
    """Bias against the other labelers and alpha without this labeler (per tone band: ``summary``'s
    ``tone_bands``, with intervals, services.consensus.bands)."""
    # Other labelers' images with 2+ valid labels without this labeler.
    others_images = int((np.delete(panel.present, position, axis=0).sum(axis=0) >= 2).sum())
    row = panel.bias.loc[labeler_id].to_dict()
    bias = bias_stat(
        agreement.LabelerBandBias(
            labeler_id, int(row["n"]), int(row["n_units"]), row["mean_diff"], row["low"], row["high"]
        ),
        where="shared with other labelers",
        unit="images shared with other labelers",
        se=row["se"],
        df=row["df"],
    )
    loo_reason = (
        None if others_images >= MIN_IMAGES else too_little(others_images, "with 2+ labels from the other labelers")
    )
    return {
        "bias": {
            **bias,
            "mean_abs_diff": stat(row["mean_abs_diff"], bias["mean_diff"]["reason"]),
        },
        **_alpha_without(panel, position, labeler_id, others_images, loo_reason),
    }


def _alpha_without(panel: _Panel, position: int, labeler_id: int, n_images: int, reason: str | None) -> dict:
    """Alpha of the other labelers with its BCa interval (the delta method's from ``DELTA_MIN_UNITS``
    units on; a :func:`coefficient_stat`), and the change.

    The change (alpha without minus alpha of everyone) has no interval of its own; it is hidden with
    the same reason when alpha without the labeler is (too few images, or its interval too wide).
    """
    low = high = None
    method = numbers.INTERVAL_METHOD
    others = np.delete(panel.values.T, position, axis=0)
    n_units, unit = n_images, "images with 2+ labels from the other labelers"
    if panel.clusters is not None:
        # Photos of one person are resampled together, and the floor counts people (issue 22).
        n_units = int(np.unique(panel.clusters[(~np.isnan(others)).sum(axis=0) >= 2]).size)
        unit = "subjects with 2+ labels from the other labelers"
    if reason is None and n_units >= numbers.COEFFICIENT_MIN_UNITS:
        # The other labelers' counts, taken from the panel's (the same numbers as from ``others``).
        domain, counts = panel.counts_without[position] if panel.counts_without is not None else (None, None)
        boot = agreement.alpha_intervals(
            others if counts is None else None,
            ("ordinal",),
            n_resamples=N_RESAMPLES,
            confidence=CONFIDENCE,
            seed=0,
            value_domain=domain,
            counts=counts,
            clusters=panel.clusters,
            n_units=n_units if panel.clusters is not None else None,
            min_units=numbers.DELTA_MIN_UNITS,
        )["ordinal"]
        low, high, method = boot.low, boot.high, numbers.interval_method(boot)
    without = coefficient_stat(
        panel.loo.loc[labeler_id, "alpha_without"],
        low,
        high,
        n_units,
        reason=reason,
        unit=unit,
        interval=method,
        resampled="subjects" if panel.clusters is not None else "images",
    )
    # Hidden whenever alpha without the labeler is (too few images, the floor, or its interval too wide).
    change_reason = reason or panel.reason or without["reason"]
    return {"alpha_without": without, "alpha_change": stat(panel.loo.loc[labeler_id, "change"], change_reason)}


# --------------------------------------------------------------------------
# Test-retest (calibration 2 repeats) and drift across phases
# --------------------------------------------------------------------------


def _retest_pairs(cal1: Phase, retest: list[tuple[int, int, float]]) -> list[tuple[int, int, float, float]]:
    """(labeler, image, calibration-1 value, calibration-2 repeat value), sorted; both values present.

    ``retest``: (labeler, image, value) of the calibration-2 repeats.
    """
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
    return pairs


def _retest_block(
    round1: list[float],
    round2: list[float],
    categories: np.ndarray,
    images: list[int] | None = None,
    *,
    subjects: list[int] | None = None,
) -> dict:
    """Test-retest of pairs of labels (calibration 1, calibration 2).

    One labeler's pairs are one per image: Wilson intervals. The pooled row (``images`` given) has one
    pair per labeler and image, and the labelers of one image are alike: its intervals are clustered
    by image (``n`` images, ``n_units`` pairs). The weighted kappa has a BCa bootstrap interval over
    images (whole images resampled in the pooled row). With ``subjects`` (the person of each pair's image,
    given when a person has several of the repeated images) the clusters are people instead, for the
    shares and the kappa alike, and the kappa's floor counts people (issue 22).
    """
    clusters = subjects if subjects is not None else images
    unit = "subjects" if subjects is not None else "images"
    result = agreement.test_retest(round1, round2, categories, clusters=clusters)
    reason = None if result.n >= MIN_IMAGES else too_little(result.n, "labelled in both calibrations")
    if clusters is not None and result.n:
        first, second = np.asarray(round1, dtype=np.float64), np.asarray(round2, dtype=np.float64)
        keys, cluster = np.unique(np.asarray(clusters), return_inverse=True)
        pairs = np.bincount(cluster, minlength=keys.size).astype(np.float64)
        difference = np.abs(second - first)

        def pooled(tolerance: float) -> dict:
            hits = np.bincount(cluster, weights=(difference <= tolerance).astype(np.float64), minlength=keys.size)
            return clustered_share(hits, pairs, reason=reason, unit=unit)

        exact, within_one = pooled(0.0), pooled(1.0)
    else:
        exact = _share(round(result.exact * result.n) if result.n else 0, result.n, reason)
        within_one = _share(round(result.within_one * result.n) if result.n else 0, result.n, reason)
    kappa = agreement.cohen_kappa_interval(
        round1,
        round2,
        categories=categories,
        clusters=clusters,
        n_resamples=N_RESAMPLES,
        confidence=CONFIDENCE,
        seed=0,
        min_units=numbers.DELTA_MIN_UNITS,
    )
    return {
        "n": result.n,
        "exact": exact,
        "within_one": within_one,
        "weighted_kappa": coefficient_stat(
            result.weighted_kappa,
            kappa.low,
            kappa.high,
            kappa.n_units if clusters is not None else result.n,
            reason=reason,
            unit=unit if clusters is not None else "images labelled in both calibrations",
            interval=numbers.interval_method(kappa),
            resampled=unit if clusters is not None else "images",
        ),
        # With its t interval (clustered by person, or by image in the pooled row), read as each bias is.
        "mean_shift": bias_stat(
            agreement.LabelerBandBias(
                None, result.n, result.n_units, result.mean_shift, result.mean_shift_low, result.mean_shift_high
            ),
            where="labelled in both calibrations",
            unit="images labelled in both calibrations",
        )["mean_diff"],
    }


def test_retest_compute(project: Project) -> dict:
    """Test-retest per labeler: calibration-2 repeats vs the same labeler's calibration-1 labels."""
    phases = {p.kind: p for p in project.phases.all()}
    cal1, cal2 = phases.get(Phase.Kind.CALIBRATION_1), phases.get(Phase.Kind.CALIBRATION_2)
    categories = value_categories(project.scale.tones.count(), True)
    empty = {"per_labeler": [], "pooled": None, "reason": "no calibration-2 repeats yet", "pairs": []}
    if cal1 is None or cal2 is None:
        return empty
    retest = list(Label.objects.filter(phase=cal2, is_repeat=True).values_list("labeler_id", "image_id", "value"))
    if not retest:
        return empty
    pairs = _retest_pairs(cal1, retest)
    # The person of each repeated image, when a person has several of them: the bootstrap resamples people.
    repeated = np.unique(np.array([p[1] for p in pairs], dtype=np.int64))
    units = image_subject_units(project.id, repeated) if pairs else None
    subject_of = None if units is None else dict(zip(repeated.tolist(), units.tolist(), strict=True))
    per_labeler = []
    for labeler in sorted({p[0] for p in pairs}):
        own = [p for p in pairs if p[0] == labeler]
        per_labeler.append(
            {
                "labeler": labeler,
                **_retest_block(
                    [p[2] for p in own],
                    [p[3] for p in own],
                    categories,
                    subjects=None if subject_of is None else [subject_of[p[1]] for p in own],
                ),
            }
        )
    return json_clean(
        {
            "per_labeler": per_labeler,
            "pooled": (
                _retest_block(
                    [p[2] for p in pairs],
                    [p[3] for p in pairs],
                    categories,
                    [p[1] for p in pairs],
                    subjects=None if subject_of is None else [subject_of[p[1]] for p in pairs],
                )
                if pairs
                else None
            ),
            "reason": None if pairs else "no labeler labelled a repeated image in both calibrations",
            "pairs": [[p[0], p[2], p[3]] for p in pairs],
        }
    )


test_retest_compute.__test__ = False  # type: ignore[attr-defined]


def labeler_drift(phase_summaries: list[dict]) -> dict[int, list[dict]]:
    """Each labeler's baseline (mean, distribution) per phase, and the change of their bias since their
    latest earlier phase with one, with its interval (``bias_change``: the bias is taken against the others on the same
    images, so the phases' different mixes of images cancel; Welch t interval, read from the interval).

    ``drift`` (the change of the labeler's mean value) stays in the API as a description only: it moves
    with the phases' mix of images too, so no reading is taken from it.
    """
    baselines: dict[int, list[dict]] = {}
    for summary in phase_summaries:
        for row in summary["per_labeler"]:
            history = baselines.setdefault(row["labeler"], [])
            previous = next((h for h in reversed(history) if h["mean"] is not None), None)
            mean = row["mean_value"]
            bias = (row.get("bias") or {}).get("mean_diff") or {}
            # Against their latest earlier phase with a bias (calibration 2's few new images often have
            # none: its repeats are left out of the between-labeler numbers).
            earlier = next((h for h in reversed(history) if h["bias"].get("value") is not None), None)
            drift = change = None
            if previous is not None and mean is not None:
                drift = num(mean - previous["mean"], 4)
            if history:
                change = _bias_change(earlier["bias"] if earlier else {"reason": "no earlier bias"}, bias)
                change["since"] = earlier["phase"] if earlier else None
            history.append(
                {
                    "phase": summary["phase"]["name"],
                    "phase_id": summary["phase"]["id"],
                    "n": row["n_valid"],
                    "mean": mean,
                    "std": row["std_value"],
                    "distribution": row["distribution"],
                    "drift": drift,
                    "bias": bias,
                    "bias_change": change,
                }
            )
    return baselines


_CHANGE = {"unit": "tones", "interval": "Welch t", "too_wide": False}


def _bias_change(before: dict, after: dict) -> dict:
    """The change of a labeler's bias stat between two phases, with its interval, or why there is none."""
    sides = (before, after)
    if any(side.get("value") is None for side in sides):
        why = next((side["reason"] for side in sides if side.get("reason")), None)
        return {
            **_CHANGE,
            "value": None,
            "low": None,
            "high": None,
            "reading": None,
            "reason": why or "no bias to compare",
        }
    value = num(after["value"] - before["value"], 4)
    if any(side.get("se") is None for side in sides):
        return {**_CHANGE, "value": value, "low": None, "high": None, "reading": None, "reason": None}
    _, low, high = agreement.bias_change(
        (before["value"], before["se"], before["df"]),
        (after["value"], after["se"], after["df"]),
        confidence=CONFIDENCE,
    )
    low_, high_ = num(low, 4), num(high, 4)
    reading = None
    if low_ is not None and high_ is not None:
        reading = "deeper" if low_ > 0 else "lighter" if high_ < 0 else "no change shown"
    return {**_CHANGE, "value": value, "low": low_, "high": high_, "reading": reading, "reason": None}
