"""Individual labelers: test-retest consistency, signed bias, and labels far from all others."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from ..rounding import round_half_up
from ._data import LevelOfMeasurement, _as_reliability_data
from .kappa import cohen_kappa_weighted
from .krippendorff import krippendorff_alpha

__all__ = ["OUTLIER_DISTANCE", "TestRetestResult", "labeler_bias", "outlier_labels", "test_retest"]


@dataclass(frozen=True)
class TestRetestResult:
    """Consistency of one labeler between two rounds on the same images.

    Attributes
    ----------
    n : int
        Images labelled in both rounds (the others are ignored).
    exact, within_one : float
        Fractions of images with the same value / values at most one tone apart.
    weighted_kappa : float
        Quadratic-weighted Cohen's kappa, round 1 vs round 2.
    alpha : float
        Krippendorff's alpha with the two rounds as two coders.
    mean_shift : float
        Mean of ``round2 - round1``; positive means the labeler drifted deeper
        (towards higher tone numbers).
    """

    __test__ = False  # not a pytest test class despite the name

    n: int
    exact: float
    within_one: float
    weighted_kappa: float
    alpha: float
    mean_shift: float


def test_retest(
    round1: npt.ArrayLike,
    round2: npt.ArrayLike,
    categories: npt.ArrayLike,
    *,
    level_of_measurement: LevelOfMeasurement = "ordinal",
) -> TestRetestResult:
    """Test-retest consistency of one labeler (e.g. calibration 1 vs 2).

    Parameters
    ----------
    round1, round2 : array_like, shape (n_images,)
        The labeler's values on the same images in each round, ``NaN`` where
        missing.
    categories : array_like
        The full scale (for the weighted kappa).
    level_of_measurement : {"nominal", "ordinal", "interval", "ratio"}
        Level of the alpha.

    Returns
    -------
    TestRetestResult
        All statistics are ``NaN`` when ``n == 0``; kappa and alpha are ``NaN``
        when undefined (e.g. a single image, or one value throughout).

    Examples
    --------
    >>> result = test_retest([1, 2, 3, 4], [1, 3, 3, 5], categories=range(1, 6))
    >>> result.n, result.exact, result.within_one, result.mean_shift
    (4, 0.5, 1.0, 0.5)
    """
    first = np.asarray(round1, dtype=np.float64).ravel()
    second = np.asarray(round2, dtype=np.float64).ravel()
    if first.shape != second.shape:
        raise ValueError("round1 and round2 must have the same length.")
    both = ~np.isnan(first) & ~np.isnan(second)
    first, second = first[both], second[both]
    n = int(first.size)
    if n == 0:
        nan = math.nan
        return TestRetestResult(0, nan, nan, nan, nan, nan)
    shift = second - first
    return TestRetestResult(
        n=n,
        exact=float(np.mean(shift == 0)),
        within_one=float(np.mean(np.abs(shift) <= 1)),
        weighted_kappa=cohen_kappa_weighted(first, second, categories=categories),
        alpha=krippendorff_alpha(np.vstack([first, second]), level_of_measurement),
        mean_shift=float(shift.mean()),
    )


# The contract name starts with "test_"; keep pytest from collecting it.
test_retest.__test__ = False  # type: ignore[attr-defined]


def _nanmedian_columns(values: np.ndarray) -> np.ndarray:
    """``np.nanmedian(values, axis=0)`` for columns with at least one value, by one sort of the few rows.

    NumPy's nanmedian goes through masked arrays for a short axis (0.1 s of CPU for 4 x 100,000); NaN
    sorts last, so a column's middle values are at ``(count - 1) // 2`` and ``count // 2``.
    """
    if values.shape[1] == 0:
        return np.zeros(0)
    ordered = np.sort(values, axis=0)
    count = (~np.isnan(values)).sum(axis=0)
    low = np.take_along_axis(ordered, ((count - 1) // 2)[None, :], axis=0)[0]
    high = np.take_along_axis(ordered, (count // 2)[None, :], axis=0)[0]
    return np.asarray((low + high) / 2)


def labeler_bias(
    reliability_data: npt.ArrayLike,
    *,
    by_band: bool = False,
    labelers: Sequence[object] | None = None,
) -> pd.DataFrame:
    """Signed bias of each labeler against the median of the other labelers.

    For every item a labeler labelled and at least one other labeler labelled,
    the difference is ``value - median(values of the others)``; positive means
    the labeler labels deeper (higher tone numbers) than the others.

    Parameters
    ----------
    reliability_data : array_like, shape (n_labelers, n_items)
        Labels, ``NaN`` for missing.
    by_band : bool
        If true, break the bias down by tone band (where labelers differ most: Schumann et al. 2023
        [Schumann2023]): the others' median rounded
        half up (2.5 -> 3) to a whole tone.
    labelers : sequence, optional
        Labeler ids (default ``0..n_labelers-1``).

    Returns
    -------
    pandas.DataFrame
        ``by_band=False``: indexed by labeler, columns ``n`` (items compared),
        ``mean_diff`` (signed) and ``mean_abs_diff``; ``NaN`` means where
        ``n == 0``. ``by_band=True``: columns ``labeler``, ``band``, ``n``,
        ``mean_diff``, ``mean_abs_diff``, one row per labeler and observed band.

    Examples
    --------
    >>> labeler_bias([[2, 3, 4], [1, 2, 3], [1, 2, 3]])["mean_diff"].tolist()
    [1.0, -0.5, -0.5]
    """
    data = _as_reliability_data(reliability_data)
    n_labelers = data.shape[0]
    names = list(range(n_labelers)) if labelers is None else list(labelers)
    if len(names) != n_labelers:
        raise ValueError("labelers must have one entry per row of reliability_data.")
    rows: list[pd.DataFrame] = []
    for position in range(n_labelers):
        others = np.delete(data, position, axis=0)
        own = data[position]
        usable = ~np.isnan(own) & (~np.isnan(others)).any(axis=0)
        median = _nanmedian_columns(others[:, usable])
        diff = own[usable] - median
        rows.append(
            pd.DataFrame(
                {
                    "labeler": names[position],
                    "band": round_half_up(median),
                    "diff": diff,
                }
            )
        )
    long = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame({"labeler": [], "band": [], "diff": []})
    long["abs_diff"] = long["diff"].abs()
    keys = ["labeler", "band"] if by_band else ["labeler"]
    grouped = long.groupby(keys, sort=True)
    table = pd.DataFrame(
        {
            "n": grouped["diff"].size(),
            "mean_diff": grouped["diff"].mean(),
            "mean_abs_diff": grouped["abs_diff"].mean(),
        }
    )
    if by_band:
        return table.reset_index()
    table = table.reindex(pd.Index(names, name="labeler"))
    table["n"] = table["n"].fillna(0).astype("int64")
    return table


#: A label at least this far (in tones) from every other label on the same image is an outlier.
OUTLIER_DISTANCE = 2.0


def outlier_labels(values: npt.ArrayLike, *, distance: float = OUTLIER_DISTANCE) -> np.ndarray:
    """Which labels of one image are far from every other label (the review rule).

    A label is an outlier when at least one other label exists and every other
    label is at least ``distance`` tones away from it: a labeler who picked 7
    where the others picked 2, 3 and 3 is flagged, while two labelers who both
    picked 7 confirm each other and are not.

    Parameters
    ----------
    values : array_like, shape (n_labels,)
        The values of the labels of one image (a tone, or the midpoint of two
        adjacent tones), ``NaN`` for a label without a value (skip or invalid
        selection); those are neither outliers nor compared with.
    distance : float
        Smallest distance, in tones, to the nearest other label.

    Returns
    -------
    numpy.ndarray of bool, shape (n_labels,)
        ``True`` for an outlier. All ``False`` with fewer than two values.

    Examples
    --------
    >>> outlier_labels([2, 3, 3, 7]).tolist()
    [False, False, False, True]
    >>> outlier_labels([2, 7, 7]).tolist(), outlier_labels([2, 4.5, np.nan]).tolist()
    ([True, False, False], [True, True, False])
    """
    data = np.asarray(values, dtype=np.float64)
    if data.ndim != 1:
        raise ValueError(f"values must be 1-D (the labels of one image), got {data.ndim} dimension(s).")
    outlier = np.zeros(data.shape, dtype=bool)
    present = np.flatnonzero(~np.isnan(data))
    if present.size < 2:
        return outlier
    known = data[present]
    gaps = np.abs(known[:, None] - known[None, :])
    np.fill_diagonal(gaps, np.inf)
    outlier[present] = gaps.min(axis=1) >= distance
    return outlier
