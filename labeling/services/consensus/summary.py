"""One phase's summary: agreement, spread of the values, label distribution, kappa matrix, flags.

``phase_summary_compute`` runs the steps in order; each step is one function below
(the per-labeler statistics are in ``labelers``).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from metrics import agreement
from metrics.agreement.bootstrap import INTERVAL_METHOD

from ...models import Phase
from . import numbers
from .bands import tone_band_block
from .labelers import labelers_statistics
from .loading import PhaseLabels, distribution, image_subject_units, phase_labels_load, value_categories
from .numbers import (
    CONFIDENCE,
    MAX_COEFFICIENT_WIDTH,
    MAX_INTERVAL_WIDTH,
    MIN_IMAGES,
    N_RESAMPLES,
    UNDER_REPRESENTED,
    WIDE_RANGE,
    ZERO_WIDTH_MIN_IMAGES,
    below_floor,
    clustered_share,
    coefficient_stat,
    json_clean,
    num,
    too_little,
    wilson_share,
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
    # Several photos of one person: every interval below resamples people, not photos (issue 22).
    clusters = image_subject_units(phase.project_id, data.image_ids)
    summary = {
        **_counts(phase, data, invalid_cells, n_images_2plus),
        "agreement": _agreement_block(table, values.T, several, reason, clusters=clusters),
        "agreement_intervals": _rate_intervals(table, several, reason),
        **_spread(table, values.T, several),
        "label_distribution": _label_distribution(data, values, invalid_cells, categories, n_tones),
        "kappa": _kappa_block(values.T, data.labeler_ids.tolist(), categories, clusters=clusters),
        "per_labeler": labelers_statistics(data, values, categories, invalid_cells, reason, clusters=clusters),
        "tone_bands": tone_band_block(values.T, data.labeler_ids.tolist(), n_tones=n_tones, clusters=clusters),
        "flags": {
            "wide_range": int(table["wide_range"].sum()),
            "invalid": int(table["has_invalid_annotation"].sum()),
            "uncertain": int(table["any_uncertainty"].sum()),
        },
        "flag_shares": flag_shares(
            int(table["wide_range"].sum()),
            int(table["has_invalid_annotation"].sum()),
            int(table["any_uncertainty"].sum()),
            int(data.image_ids.size),
            n_images_2plus,
            reason,
        ),
        # Skips pile up on some images (no skin visible): clustered by image.
        "skip_share": clustered_share(
            (data.labelled & np.isnan(data.first)).sum(axis=1), data.labelled.sum(axis=1), unit="images", of_labels=True
        ),
        "confidence": CONFIDENCE,
        "max_interval_width": MAX_INTERVAL_WIDTH,
        "max_coefficient_width": MAX_COEFFICIENT_WIDTH,
        "agreement_all_images": _all_images_agreement(phase, data),
    }
    _add_row_shares(summary)
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
        "agreement": _agreement_block(
            table, values.T, several, reason, clusters=image_subject_units(phase.project_id, everything.image_ids)
        ),
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


def _agreement_block(
    table: pd.DataFrame,
    reliability: np.ndarray,
    several: np.ndarray,
    reason: str | None,
    *,
    clusters: np.ndarray | None = None,
) -> dict:
    """Consensus rates, percent agreement, Krippendorff's alpha and Fleiss' kappa (labelers x images input)."""
    n_images_2plus = int(several.sum())

    def rate(column: str) -> dict:
        return consensus_rate(int(table[column].to_numpy()[several].sum()), n_images_2plus, reason)

    if reliability.shape[1]:
        domain, counts = agreement.value_counts(reliability)
    else:
        domain, counts = np.zeros(0), np.zeros((0, 0), dtype=np.int64)
    return {
        "near_consensus": rate("near_consensus"),
        "overlap_consensus": rate("overlap_consensus"),
        "complete_consensus": rate("complete_consensus"),
        "percent_exact": pair_agreement(reliability, 0.0, reason),
        "percent_within_one": pair_agreement(reliability, 1.0, reason),
        "alpha": alpha_block(counts, domain, n_images_2plus, clusters=clusters),
        "fleiss_kappa": _fleiss(counts, n_images_2plus),
    }


def consensus_rate(hits: int, n_images_2plus: int, reason: str | None) -> dict:
    """A consensus rate: a share of images with 2+ valid labels, with its Wilson 95% interval.

    Images are independent units here (one yes/no per image). 18 of 29 is 44-77% (issue 12). The data
    card's chunked reading (``releases.agreement``) builds the same dict with this function.
    """
    return wilson_share(hits, n_images_2plus, reason=reason, unit="images with 2+ labels")


def pair_agreement(reliability: np.ndarray, tolerance: float, reason: str | None) -> dict:
    """Pairs of labels that agree (exactly, or within ``tolerance`` tones), pooled over images.

    The pairs of one image are not independent, so the interval is image-clustered
    (:func:`metrics.agreement.clustered_proportion`: ratio estimator, cluster-robust variance, Wilson on
    the effective sample size); ``n`` counts images, ``n_units`` pairs.
    """
    agreeing, pairs = agreement.pairwise_agreement_counts(reliability, tolerance)
    return clustered_share(agreeing, pairs, reason=reason, unit="images with 2+ labels")


def flag_shares(wide_range: int, invalid: int, uncertain: int, n_images: int, n_2plus: int, reason: str | None) -> dict:
    """Shares of the flagged images with Wilson intervals (the card's denominators: wide range among images
    with 2+ valid labels, invalid and uncertain among all images with a label)."""
    return {
        "wide_range": wilson_share(wide_range, n_2plus, reason=reason, unit="images with 2+ labels"),
        "invalid": wilson_share(invalid, n_images, reason=reason, unit="images"),
        "uncertain": wilson_share(uncertain, n_images, reason=reason, unit="images"),
    }


def _rate_intervals(table: pd.DataFrame, several: np.ndarray, reason: str | None) -> dict:
    """The consensus rates' Wilson 95% intervals alone (``low``, ``high``, ``n``), as before the rates
    carried them (the rates in ``agreement`` have them too)."""
    n = int(several.sum())
    intervals = {}
    for column in ("near_consensus", "overlap_consensus", "complete_consensus"):
        rate = consensus_rate(int(table[column].to_numpy()[several].sum()), n, reason)
        intervals[column] = {"low": rate["low"], "high": rate["high"], "n": n}
    return intervals


def _add_row_shares(summary: dict) -> None:
    """Each row of the k-of-n and distinct-values tables gets its share with a Wilson interval."""
    groups: dict[int, int] = {}
    for row in summary["k_of_n"]:
        groups[row["n_labels"]] = groups.get(row["n_labels"], 0) + row["n_items"]
    for row in summary["k_of_n"]:
        row["share"] = wilson_share(
            row["n_items"], groups[row["n_labels"]], unit=f"images with {row['n_labels']} labels"
        )
    total = sum(row["n_items"] for row in summary["unique_values"])
    for row in summary["unique_values"]:
        row["share"] = wilson_share(row["n_items"], total, unit="images with 2+ labels")


def alpha_block(
    counts: np.ndarray, domain: np.ndarray, n_images: int, *, lean: bool = False, clusters: np.ndarray | None = None
) -> dict:
    """Ordinal alpha and interval alpha, each with its BCa bootstrap interval over images (subjects), or
    from ``DELTA_MIN_UNITS`` units on its delta-method interval (``method`` says which).

    Each is a :func:`coefficient_stat` ("too little data" under ``MIN_IMAGES`` images or when the
    interval is wider than ``MAX_COEFFICIENT_WIDTH``); the ordinal one carries Krippendorff's reading
    (``interpretation``, None when hidden). Both come from the count patterns
    (:func:`metrics.agreement.bootstrap_alpha`), which copy nothing the size of the matrix; ``lean`` is
    kept for the release's streamed data card, which passes it.
    """
    del lean  # both levels use the pattern bootstrap now
    # The floor counts what the interval resamples: people, when several photos show one person.
    n_people = None
    if clusters is not None and counts.size:
        n_people = int(np.unique(np.asarray(clusters)[counts.sum(axis=1) >= 2]).size)
    if n_images < MIN_IMAGES:
        reason = too_little(n_images)
    elif n_people is not None and n_people < numbers.COEFFICIENT_MIN_UNITS:
        reason = below_floor(n_people, "people in the images with 2+ labels")
    elif n_images < numbers.COEFFICIENT_MIN_UNITS:
        reason = below_floor(n_images, "images with 2+ labels")
    else:
        reason = None
    if reason is not None:
        return {
            "ordinal": coefficient_stat(math.nan, None, None, n_images, reason=reason, interpretation=None),
            "interval": coefficient_stat(math.nan, None, None, n_images, reason=reason),
            "confidence": CONFIDENCE,
            "n_resamples": N_RESAMPLES,
            "method": "bootstrap",
            "delta_min_units": numbers.DELTA_MIN_UNITS,
            "max_width": MAX_COEFFICIENT_WIDTH,
            "resampled": "subjects" if clusters is not None else "images",
        }
    levels = {}
    # Both levels from the same resamples (one draw; each as bootstrap_alpha gives it alone), or from
    # DELTA_MIN_UNITS units on both with the delta method's interval (the same interval, in milliseconds).
    boots = agreement.alpha_intervals(
        counts=counts,
        value_domain=domain,
        levels=("ordinal", "interval"),
        n_resamples=N_RESAMPLES,
        confidence=CONFIDENCE,
        seed=0,
        clusters=clusters,
        n_units=n_images if n_people is None else n_people,
        min_units=numbers.DELTA_MIN_UNITS,
    )
    for level, boot in boots.items():
        levels[level] = coefficient_stat(
            boot.estimate,
            boot.low,
            boot.high,
            n_images,
            conclusive_below=agreement.ALPHA_TENTATIVE,
            interval=numbers.interval_method(boot),
        )
        if level == "ordinal":
            # Hayes & Krippendorff's q: how likely alpha falls short of each threshold (the bootstrap's
            # resamples, or the delta method's normal approximation).
            levels[level]["q"] = {
                "tentative": num(agreement.interval_q(boot, agreement.ALPHA_TENTATIVE), 4),
                "reliable": num(agreement.interval_q(boot, agreement.ALPHA_RELIABLE), 4),
            }
    delta = isinstance(boots["ordinal"], agreement.DeltaInterval)
    ordinal = levels["ordinal"]
    # Read from the interval, never from the point estimate (issue 22).
    ordinal["interpretation"] = (
        None if ordinal["value"] is None else agreement.read_alpha_interval(ordinal["low"], ordinal["high"])
    )
    return {
        **levels,
        "confidence": CONFIDENCE,
        "n_resamples": 0 if delta else N_RESAMPLES,
        # "delta" (linearised, cluster-robust standard error, from DELTA_MIN_UNITS units) or "bootstrap".
        "method": "delta" if delta else "bootstrap",
        "delta_min_units": numbers.DELTA_MIN_UNITS,
        "max_width": MAX_COEFFICIENT_WIDTH,
        # What the interval resamples; it never resamples the labelers (conditional on this panel).
        "resampled": "subjects" if clusters is not None else "images",
    }


def _fleiss(counts: np.ndarray, n_images: int) -> dict:
    """Fleiss' kappa with its BCa bootstrap interval over images, or its delta-method one from
    ``DELTA_MIN_UNITS`` images on (only when every image has as many labels)."""
    labelled = counts[counts.sum(axis=1) > 0]
    ratings = labelled.sum(axis=1)
    if n_images < MIN_IMAGES:
        return coefficient_stat(math.nan, None, None, n_images, reason=too_little(n_images))
    if ratings.min() != ratings.max():
        return coefficient_stat(
            math.nan,
            None,
            None,
            n_images,
            reason=f"not computed: images have between {ratings.min()} and {ratings.max()} valid labels; "
            "Fleiss' kappa needs the same number on every image (Krippendorff's alpha does not)",
        )
    result = agreement.fleiss_kappa_interval(
        labelled, n_resamples=N_RESAMPLES, confidence=CONFIDENCE, seed=0, min_units=numbers.DELTA_MIN_UNITS
    )
    return coefficient_stat(
        result.estimate, result.low, result.high, n_images, interval=numbers.interval_method(result)
    )


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
    _add_share_intervals(result, values, categories, n_tones)
    return result


def _add_share_intervals(result: dict, values: np.ndarray, categories: np.ndarray, n_tones: int) -> None:
    """Each value's and each whole tone's share of the labels with an image-clustered 95% interval.

    Labels of one image are not independent (an image that looks like tone 6 gets several 6s), so the
    shares are pooled over images with the clustered interval of :func:`clustered_share`.
    """
    present = ~np.isnan(values)
    per_image = present.sum(axis=1).astype(np.float64)
    # Each image's labels per value, counted once (``(values == value).sum(axis=1)`` per value gave the
    # same int64 columns, one pass over the matrix per value).
    per_value = _per_image_value_counts(values, categories)
    result["shares"] = [
        clustered_share(per_value[:, column], per_image, unit="images with a valid label", of_labels=True)
        for column in range(categories.size)
    ]
    index = {float(value): column for column, value in enumerate(categories.tolist())}

    def count(value: float) -> np.ndarray:
        column = index.get(float(value))
        return (values == value).sum(axis=1) if column is None else per_value[:, column]

    tone_shares = []
    for tone in range(1, n_tones + 1):
        whole = count(tone)
        # An image's label is one value, so the two half-steps' counts add without double counting.
        halves = count(tone - 0.5) + count(tone + 0.5)
        tone_shares.append(
            clustered_share(whole + halves / 2, per_image, unit="images with a valid label", of_labels=True)
        )
    result["tone_share_intervals"] = tone_shares


def _per_image_value_counts(values: np.ndarray, categories: np.ndarray) -> np.ndarray:
    """Images x categories int64 counts: ``[i, c]`` = labels of image ``i`` equal to ``categories[c]``
    (NaN and values outside ``categories`` counted nowhere)."""
    n_images = values.shape[0]
    n_categories = categories.size
    if n_categories == 0 or values.size == 0:
        return np.zeros((n_images, n_categories), dtype=np.int64)
    sorter = np.argsort(categories, kind="stable")
    ordered = categories[sorter]
    flat = values.ravel()
    position = np.minimum(np.searchsorted(ordered, flat), n_categories - 1)
    hit = ordered[position] == flat  # NaN compares False
    image = np.repeat(np.arange(n_images), values.shape[1])
    cells = image[hit] * n_categories + sorter[position[hit]]
    return np.bincount(cells, minlength=n_images * n_categories).reshape(n_images, n_categories).astype(np.int64)


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


def _kappa_block(
    reliability: np.ndarray, labeler_ids: list[int], categories: np.ndarray, *, clusters: np.ndarray | None = None
) -> dict:
    """Labeler x labeler quadratic-weighted kappa over the full value range, with the images in common.

    ``low`` and ``high``: each kappa's BCa bootstrap 95% interval over the images in common (over the
    people, when ``clusters`` says which photos show the same person), or its delta-method interval from
    ``DELTA_MIN_UNITS`` units in common on (``delta`` says where); a kappa
    whose interval is wider than ``MAX_COEFFICIENT_WIDTH`` (or has no width over fewer than
    ``ZERO_WIDTH_MIN_IMAGES`` images in common) is None in ``matrix`` ("too little data", ``too_wide``
    True) with its interval kept.
    """
    present = ~np.isnan(reliability)
    n_common = (present.astype(np.int64) @ present.T.astype(np.int64)).tolist()
    if labeler_ids:
        kappa = agreement.kappa_matrix(reliability, categories, min_common=MIN_IMAGES)
        low, high, delta = agreement.kappa_matrix_intervals_by_size(
            reliability,
            categories,
            min_common=MIN_IMAGES,
            n_resamples=N_RESAMPLES,
            confidence=CONFIDENCE,
            clusters=clusters,
            min_units=numbers.DELTA_MIN_UNITS,
        )
    else:
        kappa = low = high = np.zeros((0, 0))
        delta = np.zeros((0, 0), dtype=bool)
    n_delta = int(np.triu(delta, 1).sum())
    n_boot = int(np.triu(np.isfinite(low), 1).sum()) - n_delta
    too_wide = (high - low) > MAX_COEFFICIENT_WIDTH + 1e-12  # NaN compares False
    if labeler_ids:  # an interval of no width from few images in common says nothing (ZERO_WIDTH_MIN_IMAGES)
        few = (np.abs(high - low) <= 1e-12) & (np.asarray(n_common) < ZERO_WIDTH_MIN_IMAGES)
        np.fill_diagonal(few, False)  # a labeler against themself
        too_wide |= few
    shown = np.where(too_wide, np.nan, kappa)
    return {
        "labelers": labeler_ids,
        "matrix": [[num(x, 4) for x in row] for row in shown],
        "low": [[num(x, 4) for x in row] for row in low],
        "high": [[num(x, 4) for x in row] for row in high],
        "too_wide": too_wide.tolist(),
        "n_common": n_common,
        "min_common": MIN_IMAGES,
        "max_width": MAX_COEFFICIENT_WIDTH,
        # One method per cell: the delta method's from DELTA_MIN_UNITS units in common, else the bootstrap's.
        "interval": (
            numbers.DELTA_INTERVAL_METHOD
            if n_delta and not n_boot
            else f"{INTERVAL_METHOD} below {numbers.DELTA_MIN_UNITS:,} units in common, "
            f"{numbers.DELTA_INTERVAL_METHOD} from there"
            if n_delta
            else INTERVAL_METHOD
        ),
        "delta": delta.tolist(),
        "delta_min_units": numbers.DELTA_MIN_UNITS,
        "resampled": "subjects" if clusters is not None else "images",
        "categories": categories.tolist(),
    }
