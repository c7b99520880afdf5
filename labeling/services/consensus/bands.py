"""Agreement per tone band for the dashboard, its API and the data card (issue 22).

The numbers are :func:`metrics.agreement.agreement_by_band`'s; this module applies the dashboard's rules
to them and makes them JSON-safe: no coefficient below ``COEFFICIENT_MIN_UNITS`` images (or subjects) in
a band (counts only), no share or bias from fewer than ``MIN_IMAGES`` images, every number with its 95%
interval. Bands are fixed on the scale (pairs of tones on a scale of 6 tones or more, single tones on
smaller ones: :func:`metrics.agreement.default_band_width`), never cut at the data's quantiles, so the
deepest tones keep a band of their own however few images they have; each band says how many images and
subjects it rests on.
"""

from __future__ import annotations

import math

import numpy as np

from metrics import agreement

from .numbers import (
    COEFFICIENT_MIN_UNITS,
    CONFIDENCE,
    DELTA_MIN_UNITS,
    MIN_IMAGES,
    N_RESAMPLES,
    coefficient_stat,
    interval_method,
    num,
    share_stat,
    too_little,
)

#: How an image is put in a band, in words for the pages and the card.
BAND_DEFINITION = (
    "each image with two or more valid labels is put in the band of its consensus tone: the median of its "
    "valid labels, rounded half up (a pair of adjacent tones counts as their midpoint)"
)
#: What a labeler's bias in a band is, in words.
BIAS_DEFINITION = (
    "mean of (the labeler's value minus the mean of the other labelers' values on the same image); "
    "positive = deeper. 95% t interval with a cluster-robust standard error over images (subjects when "
    "people repeat)"
)
#: Many cells, each at 95%: some exclude 0 by chance.
CELLS_NOTE = (
    "Each bias interval is a 95% interval of its own: with several labelers and bands, about one cell in "
    "twenty excludes 0 where there is no bias, so read a lone flagged cell from few images with care"
)


def _bias_reading(low: float | None, high: float | None) -> str | None:
    if low is None or high is None:
        return None
    if low > 0:
        return "deeper"
    if high < 0:
        return "lighter"
    return "no bias shown"


def bias_stat(
    row: agreement.LabelerBandBias,
    *,
    where: str = "in this band",
    unit: str = "images in the band",
    se: float | None = None,
    df: float | None = None,
) -> dict:
    """One labeler's bias (in one band, or over the whole scale: ``where`` and ``unit`` say which):
    ``mean_diff`` with its 95% interval and its reading, or the count and why not. The labelers table
    and the tone bands show the bias through this one function."""
    reason = None
    if row.n == 0:
        reason = f"no image {where}"
    elif row.n < MIN_IMAGES:
        reason = too_little(row.n, where)
    low, high = (None, None) if reason else (num(row.low, 4), num(row.high, 4))
    return {
        "labeler": row.labeler,
        "n": row.n,
        "n_units": row.n_units,
        "mean_diff": {
            "value": None if reason else num(row.mean_diff, 4),
            "reason": reason,
            "too_wide": False,
            "low": low,
            "high": high,
            "n": row.n,
            "unit": unit,
            "interval": "t, cluster-robust",
            "reading": None if reason else _bias_reading(low, high),
            # With ``se`` (the overall bias): its standard error and degrees of freedom, for the change
            # between phases (labelers.labeler_drift).
            **({} if se is None else {"se": None if reason else num(se, 6), "df": None if reason else num(df, 2)}),
        },
    }


def _near(share: agreement.BandShare, clustered: bool) -> dict:
    reason = None
    if share.n == 0:
        reason = "no image in this band"
    elif share.n < MIN_IMAGES:
        reason = too_little(share.n, "in this band")
    return share_stat(
        share.estimate,
        share.low,
        share.high,
        share.n,
        reason=reason,
        unit="images in the band",
        interval="clustered by subject" if clustered and share.n_units < share.n else "Wilson",
        k=share.k,
        n_units=share.n_units,
    )


def _alpha(band: agreement.ToneBandAgreement, unit: str) -> dict:
    """Ordinal alpha of a band (a :func:`coefficient_stat`; counts only below the floor).

    No Krippendorff reading: within a band the range of tones is restricted, so .667 and .800 do not apply.
    """
    boot = band.alpha
    if boot is None or band.n_units < COEFFICIENT_MIN_UNITS:
        return coefficient_stat(math.nan, None, None, band.n_units, unit=unit)
    return coefficient_stat(boot.estimate, boot.low, boot.high, band.n_units, unit=unit, interval=interval_method(boot))


def tone_band_block(
    reliability: np.ndarray,
    labeler_ids: list,
    *,
    n_tones: int,
    clusters: np.ndarray | None = None,
    band_width: int | None = None,
    n_resamples: int = N_RESAMPLES,
) -> dict:
    """Agreement per tone band of one phase (labelers x images values), JSON-safe.

    Returns
    -------
    dict
        ``bands``: one dict per band of the scale (``name``, ``low``, ``high``, ``n_images``, ``n_units``,
        ``n_labels``, ``near_consensus`` (a share), ``alpha`` (a coefficient, no reading), ``bias`` (one
        per labeler, in ``labeler_ids`` order: ``labeler``, ``n``, ``n_units`` and ``mean_diff`` with
        ``value``, ``low``, ``high`` and ``reading`` "deeper", "lighter" or "no bias shown", or a
        ``reason``)); ``band_width``, ``n_images``, ``n_unbanded``,
        ``resampled`` ("images" or "subjects"), ``labelers`` and the definitions and the
        range-restriction note in words.
    """
    width = agreement.default_band_width(n_tones) if band_width is None else band_width
    result = agreement.agreement_by_band(
        reliability,
        n_tones=n_tones,
        band_width=width,
        labelers=labeler_ids,
        clusters=clusters,
        alpha_min_units=COEFFICIENT_MIN_UNITS,
        n_resamples=n_resamples,
        confidence=CONFIDENCE,
        seed=0,
        asymptotic_min_units=DELTA_MIN_UNITS,
    )
    unit = "subjects in the band" if result.clustered else "images in the band"
    bands = [
        {
            "name": band.name,
            "low": band.low,
            "high": band.high,
            "n_images": band.n_images,
            "n_units": band.n_units,
            "n_labels": band.n_labels,
            "near_consensus": _near(band.near_consensus, result.clustered),
            "alpha": _alpha(band, unit),
            "bias": [bias_stat(row) for row in band.bias],
        }
        for band in result.bands
    ]
    return {
        "bands": bands,
        "band_width": width,
        "n_images": result.n_images,
        "n_unbanded": result.n_unbanded,
        "labelers": list(labeler_ids),
        "resampled": "subjects" if result.clustered else "images",
        "confidence": CONFIDENCE,
        "coefficient_min_units": COEFFICIENT_MIN_UNITS,
        "delta_min_units": DELTA_MIN_UNITS,
        "min_images": MIN_IMAGES,
        "definition": BAND_DEFINITION,
        "bias_definition": BIAS_DEFINITION,
        "cells_note": CELLS_NOTE,
        "width_choice": (
            f"bands of {width} tone{'s' if width > 1 else ''} on a {n_tones}-tone scale, fixed on the scale "
            "(never cut at the data's quantiles): one band per tone would leave each band about a tenth of the "
            "images; pairs keep the deepest tones in a band of their own"
            if width > 1
            else f"one band per tone of the {n_tones}-tone scale"
        ),
        "note": agreement.RANGE_RESTRICTION_NOTE,
    }
