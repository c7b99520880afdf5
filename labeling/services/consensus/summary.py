"""One phase's summary: agreement, spread of the values, label distribution, kappa matrix, flags.

``phase_summary_compute`` runs the steps in order; each step is one function below
(the per-labeler statistics are in ``labelers``).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from metrics import agreement
from metrics.intervals import wilson_interval

from ...models import Phase
from .labelers import labelers_statistics
from .loading import PhaseLabels, distribution, phase_labels_load, value_categories
from .numbers import (
    CONFIDENCE,
    MIN_IMAGES,
    N_RESAMPLES,
    UNDER_REPRESENTED,
    WIDE_RANGE,
    json_clean,
    num,
    stat,
    too_little,
)


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
    half = allow_pairs or bool(np.any(values[~np.isnan(values)] % 1))
    categories = value_categories(n_tones, half)
    table = agreement.consensus_table(
        data.first, data.second, data.uncertain, wide_range=WIDE_RANGE, index=data.image_ids
    )
    several = table["n_valid"].to_numpy() >= 2
    n_images_2plus = int(several.sum())
    reason = None if n_images_2plus >= MIN_IMAGES else too_little(n_images_2plus)
    invalid_cells = ~np.isnan(data.first) & np.isnan(values)
    summary = {
        **_counts(phase, data, invalid_cells, n_images_2plus),
        "agreement": _agreement_block(table, values.T, several, reason),
        "agreement_intervals": _rate_intervals(table, several, reason),
        **_spread(table, values.T, several),
        "label_distribution": _label_distribution(data, values, invalid_cells, categories, n_tones),
        "kappa": _kappa_block(values.T, data.labeler_ids.tolist(), categories),
        "per_labeler": labelers_statistics(data, values, categories, invalid_cells, reason),
        "flags": {
            "wide_range": int(table["wide_range"].sum()),
            "invalid": int(table["has_invalid_annotation"].sum()),
            "uncertain": int(table["any_uncertainty"].sum()),
        },
        "agreement_all_images": _all_images_agreement(phase, data),
    }
    images = {
        "table": table,
        "first": data.first.astype(np.float32),
        "second": data.second.astype(np.float32),
        "uncertain": data.uncertain,
        "labelled": data.labelled,
        "labeler_ids": data.labeler_ids,
    }
    return json_clean(summary), images


def _all_images_agreement(phase: Phase, data: PhaseLabels) -> dict | None:
    """Calibration 2 with its repeated images included: the data card's calibration-2 figures cover them.

    ``agreement`` (the phase's main numbers) leaves the repeated calibration-1
    images out (their labels are for test-retest), so on the default split 29
    of 59 calibration images are missing from it; this block has them all, each
    labeler's calibration-2 label counted once. None for other phases or
    without repeats.
    """
    if phase.kind != Phase.Kind.CALIBRATION_2 or not data.row_repeat.any():
        return None
    everything = phase_labels_load(phase, include_repeats=True)
    values = everything.values
    table = agreement.consensus_table(everything.first, everything.second, everything.uncertain, wide_range=WIDE_RANGE)
    several = table["n_valid"].to_numpy() >= 2
    n_images_2plus = int(several.sum())
    reason = None if n_images_2plus >= MIN_IMAGES else too_little(n_images_2plus)
    return {
        "n_images": int(everything.image_ids.size),
        "n_images_2plus": n_images_2plus,
        "n_new_images": int(data.image_ids.size),
        "agreement": _agreement_block(table, values.T, several, reason),
        "agreement_intervals": _rate_intervals(table, several, reason),
        "definition": (
            "all calibration-2 images, the repeated calibration-1 images included (each labeler's "
            "calibration-2 label); the phase's other numbers cover the new images only"
        ),
    }


def _counts(phase: Phase, data: PhaseLabels, invalid_cells: np.ndarray, n_images_2plus: int) -> dict:
    """The phase and how many labels, repeats, skips, invalid pairs, images and labelers it has."""
    return {
        "phase": {"id": phase.id, "kind": phase.kind, "name": phase.get_kind_display(), "status": phase.status},
        "n_labels": int(data.row_labeler.size),
        "n_repeats": int(data.row_repeat.sum()),
        "n_skips": int((data.row_skip & ~data.row_repeat).sum()),
        "n_invalid": int(invalid_cells.sum()),
        "n_images": int(data.image_ids.size),
        "n_images_2plus": n_images_2plus,
        "n_labelers": int(data.labeler_ids.size),
        "labelers": data.labeler_ids.tolist(),
    }


def _agreement_block(table: pd.DataFrame, reliability: np.ndarray, several: np.ndarray, reason: str | None) -> dict:
    """Consensus rates, percent agreement, Krippendorff's alpha and Fleiss' kappa (labelers x images input)."""
    n_images_2plus = int(several.sum())
    enough = reason is None

    def rate(column: str) -> dict:
        share = table[column].to_numpy()[several].mean() if n_images_2plus else math.nan
        return stat(share, reason)

    if reliability.shape[1]:
        domain, counts = agreement.value_counts(reliability)
    else:
        domain, counts = np.zeros(0), np.zeros((0, 0), dtype=np.int64)
    return {
        "near_consensus": rate("near_consensus"),
        "overlap_consensus": rate("overlap_consensus"),
        "complete_consensus": rate("complete_consensus"),
        "percent_exact": stat(agreement.percent_exact(reliability) if enough else math.nan, reason),
        "percent_within_one": stat(agreement.percent_within_one(reliability) if enough else math.nan, reason),
        "alpha": alpha_block(counts, domain, n_images_2plus),
        "fleiss_kappa": _fleiss(counts, n_images_2plus),
    }


def _rate_intervals(table: pd.DataFrame, several: np.ndarray, reason: str | None) -> dict:
    """Wilson 95% intervals of the consensus rates (shares of images; 18 of 29 is 44-77%, issue 12).

    Kept beside ``agreement`` rather than in it: the release's data card recomputes
    that block in chunks and checks it equal to this one.
    """
    n = int(several.sum())
    intervals = {}
    for column in ("near_consensus", "overlap_consensus", "complete_consensus"):
        hits = int(table[column].to_numpy()[several].sum())
        low, high = wilson_interval(hits, n, CONFIDENCE) if n and reason is None else (None, None)
        intervals[column] = {
            "low": None if low is None else num(low),
            "high": None if high is None else num(high),
            "n": n,
        }
    return intervals


def alpha_block(counts: np.ndarray, domain: np.ndarray, n_images: int, *, lean: bool = False) -> dict:
    """Ordinal alpha with its bootstrap interval, and interval alpha alongside.

    ``lean``: interval alpha from the same count patterns as the ordinal estimate instead of
    ``alpha_from_counts`` (which makes two float64 copies of the matrix: 80 MB at 250,000 images x 19
    values); the release's streamed data card uses it.
    """
    if n_images < MIN_IMAGES:
        reason = too_little(n_images)
        return {
            "ordinal": stat(math.nan, reason, low=None, high=None, interpretation=None),
            "interval": stat(math.nan, reason),
            "confidence": CONFIDENCE,
            "n_resamples": N_RESAMPLES,
        }
    boot = agreement.bootstrap_alpha(
        counts=counts, value_domain=domain, n_resamples=N_RESAMPLES, confidence=CONFIDENCE, seed=0
    )
    ordinal = stat(boot.estimate)
    ordinal.update(
        low=num(boot.low),
        high=num(boot.high),
        interpretation=None if ordinal["value"] is None else boot.interpretation,
    )
    if lean:
        interval_alpha = agreement.bootstrap_alpha(
            counts=counts, value_domain=domain, level_of_measurement="interval", n_resamples=1, seed=0
        ).estimate
    else:
        interval_alpha = agreement.alpha_from_counts(counts, domain, "interval")
    interval = stat(interval_alpha)
    return {"ordinal": ordinal, "interval": interval, "confidence": CONFIDENCE, "n_resamples": N_RESAMPLES}


def _fleiss(counts: np.ndarray, n_images: int) -> dict:
    labelled = counts[counts.sum(axis=1) > 0]
    ratings = labelled.sum(axis=1)
    if n_images < MIN_IMAGES:
        return stat(math.nan, too_little(n_images))
    if ratings.min() != ratings.max():
        return stat(
            math.nan,
            f"not computed: images have between {ratings.min()} and {ratings.max()} valid labels; "
            "Fleiss' kappa needs the same number on every image (Krippendorff's alpha does not)",
        )
    return stat(agreement.fleiss_kappa(labelled))


def _spread(table: pd.DataFrame, reliability: np.ndarray, several: np.ndarray) -> dict:
    """How far the labels of an image spread: k-of-n agreement, distinct values, range histogram."""
    has_images = bool(reliability.shape[1])
    k_of_n = agreement.k_of_n_agreement(reliability) if has_images else pd.DataFrame()
    unique = agreement.unique_values_distribution(reliability, min_labels=2) if has_images else pd.DataFrame()
    range_values, range_counts = np.unique(table["range"].to_numpy()[several], return_counts=True)
    return {
        "k_of_n": k_of_n.to_dict("records"),
        "unique_values": unique.to_dict("records"),
        "range_histogram": [
            {"range": float(r), "n_images": int(c)} for r, c in zip(range_values, range_counts, strict=True)
        ],
    }


def _label_distribution(
    data: PhaseLabels, values: np.ndarray, invalid_cells: np.ndarray, categories: np.ndarray, n_tones: int
) -> dict:
    """Labels per value, skips, invalid pairs, and each tone's share (under-represented tones named)."""
    result = {
        "values": categories.tolist(),
        "counts": distribution(values[~np.isnan(values)], categories),
        "n_skips": int((data.row_skip & ~data.row_repeat).sum()),
        "n_invalid": int(invalid_cells.sum()),
    }
    _add_tone_shares(result, n_tones)
    return result


def _add_tone_shares(result: dict, n_tones: int) -> None:
    """Share of labels per whole tone (a pair counts half to each tone) and the under-represented tones."""
    shares = np.zeros(n_tones)
    for value, count in zip(result["values"], result["counts"], strict=True):
        if value % 1:
            shares[int(value) - 1] += count / 2
            shares[int(value)] += count / 2
        else:
            shares[int(value) - 1] += count
    total = shares.sum()
    fractions = shares / total if total else shares
    result["tone_shares"] = [num(f, 4) for f in fractions]
    threshold = UNDER_REPRESENTED / n_tones
    result["under_represented"] = [tone + 1 for tone in range(n_tones) if fractions[tone] < threshold] if total else []
    result["under_represented_threshold"] = num(threshold, 4)


def _kappa_block(reliability: np.ndarray, labeler_ids: list[int], categories: np.ndarray) -> dict:
    """Labeler x labeler quadratic-weighted kappa over the full value range, with the images in common."""
    present = ~np.isnan(reliability)
    n_common = (present.astype(np.int64) @ present.T.astype(np.int64)).tolist()
    kappa = agreement.kappa_matrix(reliability, categories, min_common=MIN_IMAGES) if labeler_ids else np.zeros((0, 0))
    return {
        "labelers": labeler_ids,
        "matrix": [[num(x, 4) for x in row] for row in kappa],
        "n_common": n_common,
        "min_common": MIN_IMAGES,
        "categories": categories.tolist(),
    }
