"""Individual labelers: test-retest consistency, signed bias, and labels far from all others."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from ._data import LevelOfMeasurement, _as_reliability_data
from .kappa import cohen_kappa_weighted
from .krippendorff import krippendorff_alpha

__all__ = ["OUTLIER_DISTANCE", "TestRetestResult", "bias_change", "labeler_bias", "outlier_labels", "test_retest"]


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
    mean_shift_low, mean_shift_high : float
        Its t interval (cluster-robust over ``clusters`` when given, as each band's bias); NaN with fewer
        than 2 units.
    n_units : int
        Independent units among the ``n`` images (subjects, or images, when ``clusters`` is given).
    """

    __test__ = False  # not a pytest test class despite the name

    n: int
    exact: float
    within_one: float
    weighted_kappa: float
    alpha: float
    mean_shift: float
    mean_shift_low: float = math.nan
    mean_shift_high: float = math.nan
    n_units: int = 0


def test_retest(
    round1: npt.ArrayLike,
    round2: npt.ArrayLike,
    categories: npt.ArrayLike,
    *,
    level_of_measurement: LevelOfMeasurement = "ordinal",
    clusters: npt.ArrayLike | None = None,
    confidence: float = 0.95,
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
    clusters : array_like, shape (n_images,), optional
        The subject of each image when a person has several of them: the mean shift's interval is then
        clustered by subject. Default: each image on its own.
    confidence : float
        Of the mean shift's interval.

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
    >>> round(result.mean_shift_low, 2), round(result.mean_shift_high, 2)
    (-0.42, 1.42)
    """
    from .bands import _cluster_t_interval, _units

    first = np.asarray(round1, dtype=np.float64).ravel()
    second = np.asarray(round2, dtype=np.float64).ravel()
    if first.shape != second.shape:
        raise ValueError("round1 and round2 must have the same length.")
    both = ~np.isnan(first) & ~np.isnan(second)
    units, _ = _units(clusters, both.size)
    first, second, units = first[both], second[both], units[both]
    n = int(first.size)
    if n == 0:
        nan = math.nan
        return TestRetestResult(0, nan, nan, nan, nan, nan)
    shift = second - first
    low, high, n_units = _cluster_t_interval(shift, units, int(units.max()) + 1, confidence)
    return TestRetestResult(
        n=n,
        exact=float(np.mean(shift == 0)),
        within_one=float(np.mean(np.abs(shift) <= 1)),
        weighted_kappa=cohen_kappa_weighted(first, second, categories=categories),
        alpha=krippendorff_alpha(np.vstack([first, second]), level_of_measurement),
        mean_shift=float(shift.mean()),
        mean_shift_low=low,
        mean_shift_high=high,
        n_units=n_units,
    )


# The contract name starts with "test_"; keep pytest from collecting it.
test_retest.__test__ = False  # type: ignore[attr-defined]


def labeler_bias(
    reliability_data: npt.ArrayLike,
    *,
    labelers: Sequence[object] | None = None,
    clusters: npt.ArrayLike | None = None,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Signed bias of each labeler against the mean of the other labelers, with its interval.

    For every item a labeler labelled and at least one other labeler labelled, the difference is
    ``value - mean(values of the others)``; positive means the labeler labels deeper (higher tone
    numbers) than the others. The same definition as each band's bias in
    :func:`~metrics.agreement.agreement_by_band` (over the whole scale here; a randomised test holds the
    two equal): against the others' mean, exchangeable labelers have an expected bias of zero, and the
    panel's biases sum to zero on images every labeler labelled. An earlier version took the others'
    *median* and broke it down by the band of that median, which regresses to the mean at the ends of the
    scale (``tests/metrics/test_agreement_bands.py``); per band, use ``agreement_by_band``.

    Parameters
    ----------
    reliability_data : array_like, shape (n_labelers, n_items)
        Labels, ``NaN`` for missing.
    labelers : sequence, optional
        Labeler ids (default ``0..n_labelers-1``).
    clusters : array_like, shape (n_items,), optional
        The subject of each item: with several photos of one person, the interval is clustered by
        subject (CR1, ``G - 1`` degrees of freedom over ``G`` subjects). Default: each item on its own.
    confidence : float
        Of the interval.

    Returns
    -------
    pandas.DataFrame
        Indexed by labeler: ``n`` (items compared), ``n_units`` (independent units among them: subjects
        when people repeat), ``mean_diff`` (signed) with its t interval ``low`` / ``high``, its standard
        error ``se`` and degrees of freedom ``df`` (``n_units - 1``; NaN with fewer than 2 units) and
        ``mean_abs_diff``; ``NaN`` means where ``n == 0``.

    Examples
    --------
    >>> labeler_bias([[2, 3, 4], [1, 2, 3], [1, 2, 3]])["mean_diff"].tolist()
    [1.0, -0.5, -0.5]
    """
    from .bands import _cluster_t_interval, _units

    data = _as_reliability_data(reliability_data)
    if data.size == 0:
        data = np.zeros((0 if data.ndim != 2 else data.shape[0], 0))
    n_labelers, n_items = data.shape
    names = list(range(n_labelers)) if labelers is None else list(labelers)
    if len(names) != n_labelers:
        raise ValueError("labelers must have one entry per row of reliability_data.")
    units, _ = _units(clusters, n_items)
    n_all_units = int(units.max()) + 1 if units.size else 0
    present = ~np.isnan(data)
    n_valid = present.sum(axis=0)
    filled = np.where(present, data, 0.0)
    total = filled.sum(axis=0)
    names_ = ("n", "n_units", "mean_diff", "low", "high", "se", "df", "mean_abs_diff")
    columns: dict[str, list[float]] = {k: [] for k in names_}
    for position in range(n_labelers):
        usable = present[position] & (n_valid >= 2)
        others_mean = (total[usable] - filled[position, usable]) / (n_valid[usable] - 1)
        diff = data[position, usable] - others_mean
        low, high, n_units = _cluster_t_interval(diff, units[usable], n_all_units, confidence)
        columns["n"].append(diff.size)
        columns["n_units"].append(n_units)
        columns["mean_diff"].append(float(diff.mean()) if diff.size else math.nan)
        columns["low"].append(low)
        columns["high"].append(high)
        columns["se"].append(_t_se(low, high, n_units, confidence))
        columns["df"].append(n_units - 1 if n_units >= 2 else math.nan)
        columns["mean_abs_diff"].append(float(np.abs(diff).mean()) if diff.size else math.nan)
    table = pd.DataFrame(columns, index=pd.Index(names, name="labeler"))
    table["n"] = table["n"].astype("int64")
    table["n_units"] = table["n_units"].astype("int64")
    return table


def _t_se(low: float, high: float, n_units: int, confidence: float) -> float:
    """The standard error behind a t interval with ``n_units - 1`` degrees of freedom."""
    if n_units < 2 or not math.isfinite(low):
        return math.nan
    from scipy.special import stdtrit

    return (high - low) / 2 / float(stdtrit(n_units - 1, 1 - (1 - confidence) / 2))


def bias_change(
    before: tuple[float, float, float],
    after: tuple[float, float, float],
    *,
    confidence: float = 0.95,
) -> tuple[float, float, float]:
    """Change of a labeler's bias between two phases, ``after - before``, with a Welch t interval.

    ``before`` and ``after`` are ``(mean_diff, se, df)`` from :func:`labeler_bias` on each phase's labels.
    The phases hold different images (and, at most, a few repeated ones), so the two estimates are taken
    as independent: standard error ``sqrt(se1^2 + se2^2)``, Welch-Satterthwaite degrees of freedom. A
    labeler's mean value also moves with the phase's mix of images; the bias against the others on the
    same images does not, which is why the change is read from the bias.

    Returns
    -------
    (change, low, high)
        NaN bounds when either side has no standard error.

    Examples
    --------
    >>> change, low, high = bias_change((0.1, 0.05, 99), (0.6, 0.05, 99))
    >>> round(change, 2), round(low, 2), round(high, 2)
    (0.5, 0.36, 0.64)
    """
    (m1, se1, df1), (m2, se2, df2) = before, after
    change = m2 - m1
    if not all(math.isfinite(x) for x in (se1, se2, df1, df2)) or se1 + se2 == 0:
        return change, math.nan, math.nan
    from scipy.special import stdtrit

    v1, v2 = se1**2, se2**2
    df = (v1 + v2) ** 2 / (v1**2 / df1 + v2**2 / df2) if v1 + v2 > 0 else df1 + df2
    half = float(stdtrit(df, 1 - (1 - confidence) / 2)) * math.sqrt(v1 + v2)
    return change, change - half, change + half


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
