"""Krippendorff's alpha from labels or from an items x values count matrix.

Alpha is computed via the coincidence matrix (Krippendorff 2011 [Krippendorff2011], "Computing
Krippendorff's Alpha-Reliability"); results agree with the ``krippendorff``
package (PyPI) to about 1e-12. Also: alpha with each labeler left out, and
Krippendorff's reading of a value.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pandas as pd

from ._data import LevelOfMeasurement, _as_reliability_data, _check_level, _counts_from_codes, _domain, _value_codes

__all__ = [
    "ALPHA_INTERVAL_READINGS",
    "ALPHA_RELIABLE",
    "ALPHA_TENTATIVE",
    "alpha_from_counts",
    "alpha_leave_one_out",
    "alpha_q",
    "interpret_alpha",
    "read_alpha_interval",
    "krippendorff_alpha",
    "value_counts",
    "value_counts_without_each",
]

#: Krippendorff's (2004) [Krippendorff2004] thresholds: alpha >= .800 reliable, >= .667 tentative.
ALPHA_RELIABLE = 0.800
ALPHA_TENTATIVE = 0.667


# Largest number of possible label tuples for the pattern route of
# `_coincidences_from_codes` (its bincount array is this long).
_MAX_PATTERN_KEYS = 1 << 21


def _coincidences_from_codes(codes: np.ndarray, n_values: int) -> np.ndarray:
    """Coincidence matrix straight from labelers x items column indices.

    With few labelers, each item's tuple of labels is one integer key, and the
    coincidence matrix is a weighted sum over the distinct keys: one bincount
    over items instead of items x values arrays (about 5x faster for 250,000
    items x 4 labelers x 10 values).
    """
    n_labelers = codes.shape[0]
    base = n_values + 1
    if base**n_labelers > _MAX_PATTERN_KEYS:
        return _coincidences(_counts_from_codes(codes, n_values))
    powers = base ** np.arange(n_labelers, dtype=np.int64)
    keys = powers @ codes.astype(np.int64)
    frequency = np.bincount(keys, minlength=base**n_labelers)
    seen = np.flatnonzero(frequency)
    tuples = (seen[None, :] // powers[:, None]) % base  # labelers x patterns
    present = tuples < n_values
    m = present.sum(axis=0)
    weight = np.zeros(seen.size)
    np.divide(frequency[seen], m - 1, out=weight, where=m >= 2)
    # Sum over ordered pairs of labelers of each pattern: small bincounts, no
    # BLAS call (a tall, thin matrix product was slow and erratic when the
    # cores are busy: OpenBLAS threads wait for each other).
    o = np.zeros(base * base)
    for first, second in itertools.permutations(range(n_labelers), 2):
        o += np.bincount(tuples[first] * base + tuples[second], weights=weight, minlength=base * base)
    return o.reshape(base, base)[:n_values, :n_values]


def value_counts(
    reliability_data: npt.ArrayLike, value_domain: npt.ArrayLike | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Count, for each item, how many labelers gave each value.

    Parameters
    ----------
    reliability_data : array_like, shape (n_labelers, n_items)
        Labels, ``NaN`` for missing.
    value_domain : array_like, optional
        The values, in rank order. Default: the sorted set of observed values.

    Returns
    -------
    values : ndarray, shape (n_values,)
        The value domain (column labels of ``counts``).
    counts : ndarray of int64, shape (n_items, n_values)
        ``counts[i, v]`` = number of labelers who gave ``values[v]`` to item ``i``.

    Raises
    ------
    ValueError
        If a label is not in ``value_domain``.

    Examples
    --------
    >>> values, counts = value_counts([[1, 2, np.nan], [1, 3.5, 2]])
    >>> values.tolist(), counts.tolist()
    ([1.0, 2.0, 3.5], [[2, 0, 0], [0, 1, 1], [0, 1, 0]])
    """
    data = _as_reliability_data(reliability_data)
    return _domain(data, value_domain)


def value_counts_without_each(reliability_data: npt.ArrayLike) -> list[tuple[np.ndarray, np.ndarray]]:
    """:func:`value_counts` of the data without each labeler in turn, from one count of everyone's values.

    Entry ``p`` equals ``value_counts(np.delete(reliability_data, p, axis=0))`` exactly (the same
    observed values as domain, the same int64 counts): everyone's labels are coded once, each labeler's
    row of codes left out in turn, and values nobody else gave leave the domain (alpha without each
    labeler, ``services.consensus.labelers``).

    Examples
    --------
    >>> [(v.tolist(), c.tolist()) for v, c in value_counts_without_each([[1, 2, 5], [1, 3, np.nan]])]
    [([1.0, 3.0], [[1, 0], [0, 1], [0, 0]]), ([1.0, 2.0, 5.0], [[1, 0, 0], [0, 1, 0], [0, 0, 1]])]
    """
    data = _as_reliability_data(reliability_data)
    if data.size == 0:
        return [value_counts(np.delete(data, p, axis=0)) for p in range(data.shape[0] if data.ndim == 2 else 0)]
    domain, codes = _value_codes(data, None)
    n_values = domain.size
    out = []
    for position in range(data.shape[0]):
        without = _counts_from_codes(np.delete(codes, position, axis=0), n_values)
        keep = without.sum(axis=0) > 0
        if keep.all():
            out.append((domain, without))
        else:
            out.append((domain[keep], np.ascontiguousarray(without[:, keep])))
    return out


def _distance_matrix(values: np.ndarray, n_v: np.ndarray, level: str) -> np.ndarray:
    """Squared distance between values (Krippendorff 2011 [Krippendorff2011], section D).

    ``n_v`` may have a leading batch dimension (only used by ``ordinal``).
    """
    if level == "nominal":
        return 1.0 - np.eye(values.size)
    if level == "interval":
        return np.asarray(np.subtract.outer(values, values) ** 2)
    if level == "ratio":
        total = np.add.outer(values, values)
        diff = np.subtract.outer(values, values)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(total != 0, diff / np.where(total != 0, total, 1), 0.0) ** 2
    # Ordinal: (sum of n_g for g from rank i to rank j - (n_i + n_j) / 2) ** 2,
    # so values nobody used (n_g = 0) add nothing to the distance.
    ranks = np.arange(values.size)
    low = np.minimum.outer(ranks, ranks)
    high = np.maximum.outer(ranks, ranks)
    cum = np.concatenate([np.zeros(n_v.shape[:-1] + (1,)), np.cumsum(n_v, axis=-1)], axis=-1)
    between = cum[..., high + 1] - cum[..., low]
    ends = (n_v[..., :, None] + n_v[..., None, :]) / 2
    return np.asarray((between - ends) ** 2)


def _coincidences(counts: np.ndarray, item_weights: np.ndarray | None = None) -> np.ndarray:
    """Coincidence matrix ``o`` (values x values) of an items x values count matrix.

    ``o = sum_i w_i (c_i c_i^T - diag(c_i)) / (m_i - 1)`` over items with
    ``m_i >= 2`` values (items with fewer are not pairable and add nothing);
    ``w_i`` are optional item weights (default 1).
    """
    counts = np.asarray(counts, dtype=np.float64)
    m = counts.sum(axis=1)
    weight = np.zeros_like(m)
    np.divide(1.0, m - 1, out=weight, where=m >= 2)
    if item_weights is not None:
        weight *= item_weights
    weighted = counts * weight[:, None]
    o = weighted.T @ counts
    o[np.diag_indices_from(o)] -= weighted.sum(axis=0)
    return np.asarray(o)


def _alpha_from_coincidences(o: np.ndarray, values: np.ndarray, level: str) -> float:
    n_v = o.sum(axis=0)
    n = n_v.sum()
    if n <= 1:
        return math.nan
    d = _distance_matrix(values, n_v, level)
    expected = (n_v @ d @ n_v) / (n - 1)  # d has a zero diagonal
    if not expected > 0:
        return math.nan
    return float(1.0 - (o * d).sum() / expected)


def alpha_from_counts(
    counts: npt.ArrayLike,
    values: npt.ArrayLike | None = None,
    level_of_measurement: LevelOfMeasurement = "ordinal",
) -> float:
    """Krippendorff's alpha from an items x values count matrix.

    Parameters
    ----------
    counts : array_like, shape (n_items, n_values)
        ``counts[i, v]`` = number of labelers who gave ``values[v]`` to item ``i``
        (for instance from one ``GROUP BY image, value`` database aggregate).
        Non-integer counts are accepted (weighted items).
    values : array_like, shape (n_values,), optional
        The value of each column, in rank order. Default ``0, 1, ..., n_values-1``
        (the ``krippendorff`` package's default).
    level_of_measurement : {"nominal", "ordinal", "interval", "ratio"}
        Metric used for the disagreement between two values.

    Returns
    -------
    float
        Alpha, or ``NaN`` when it is undefined: fewer than two pairable values
        (no item has two or more labels) or no disagreement possible (expected
        disagreement 0, e.g. every pairable label has the same value).

    Examples
    --------
    Krippendorff (2011) [Krippendorff2011], 4 observers x 12 units, as counts of values 1..5:

    >>> counts = [[3, 0, 0, 0, 0], [0, 3, 1, 0, 0], [0, 0, 4, 0, 0],
    ...           [0, 0, 4, 0, 0], [0, 4, 0, 0, 0], [1, 1, 1, 1, 0],
    ...           [0, 0, 0, 4, 0], [3, 1, 0, 0, 0], [0, 4, 0, 0, 0],
    ...           [0, 0, 0, 0, 3], [2, 0, 0, 0, 0], [0, 0, 1, 0, 0]]
    >>> round(alpha_from_counts(counts, [1, 2, 3, 4, 5], "ordinal"), 3)
    0.815
    """
    _check_level(level_of_measurement)
    counts = np.asarray(counts, dtype=np.float64)
    if counts.ndim != 2:
        raise ValueError("counts must be a 2-D items x values array.")
    if values is None:
        values = np.arange(counts.shape[1], dtype=np.float64)
    values = np.asarray(values, dtype=np.float64).ravel()
    if values.size != counts.shape[1]:
        raise ValueError("values must have one entry per column of counts.")
    if counts.size == 0:
        return math.nan
    return _alpha_from_coincidences(_coincidences(counts), values, level_of_measurement)


def krippendorff_alpha(
    reliability_data: npt.ArrayLike,
    level_of_measurement: LevelOfMeasurement = "ordinal",
    value_domain: npt.ArrayLike | None = None,
) -> float:
    """Krippendorff's alpha for labelers x items data with missing labels.

    Follows the ``krippendorff`` package (PyPI) exactly, but builds the
    items x values count matrix with ``np.bincount`` (no per-item Python loop
    and no items x labelers x values intermediate).

    Parameters
    ----------
    reliability_data : array_like, shape (n_labelers, n_items)
        Labels, ``NaN`` for missing. Values may be half-steps (3.5).
    level_of_measurement : {"nominal", "ordinal", "interval", "ratio"}
        Default ``"ordinal"`` (skin-tone scales are ordinal).
    value_domain : array_like, optional
        All possible values, in rank order. Default: the sorted set of observed
        values. As in the ``krippendorff`` package, values nobody used do not
        change alpha at any level: the ordinal distance sums the frequencies
        ``n_g`` of the pairable values between two ranks, and an unused value has
        ``n_g = 0``. Passing the full scale therefore only validates the data.

    Returns
    -------
    float
        Alpha, or ``NaN`` when alpha is undefined: empty input, no pairable
        values (no item labelled by two or more labelers, e.g. one labeler), or
        no disagreement possible (expected disagreement 0: every pairable label
        has the same value). The ``krippendorff`` package raises or returns
        ``nan`` with a warning in these cases.

    Raises
    ------
    ValueError
        If the data is not 2-D or holds values outside ``value_domain``.

    Examples
    --------
    Krippendorff (2011) [Krippendorff2011], 4 observers x 12 units:

    >>> nan = np.nan
    >>> data = [[1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
    ...         [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
    ...         [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
    ...         [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan]]
    >>> [round(krippendorff_alpha(data, level), 3)
    ...  for level in ("nominal", "ordinal", "interval", "ratio")]
    [0.743, 0.815, 0.849, 0.797]
    """
    _check_level(level_of_measurement)
    data = _as_reliability_data(reliability_data)
    if data.size == 0:
        return math.nan
    values, codes = _value_codes(data, value_domain)
    if values.size < 2:
        return math.nan
    o = _coincidences_from_codes(codes, values.size)
    return _alpha_from_coincidences(o, values, level_of_measurement)


#: The readings of :func:`read_alpha_interval`, in words for the pages and the data card.
ALPHA_INTERVAL_READINGS = {
    "reliable": "reliable: the whole 95% interval is at least .800",
    "tentative": "tentative: the whole 95% interval lies from .667 to .800; draw only tentative conclusions",
    "at least tentative": "at least tentative: the 95% interval is above .667 and reaches .800",
    "below reliable": "not shown reliable: the 95% interval is below .800 and reaches below .667",
    "not reliable": "not reliable: the whole 95% interval is below .667",
    "inconclusive": "inconclusive: the 95% interval reaches below .667 and above .800",
}


def read_alpha_interval(low: float, high: float) -> str:
    """Krippendorff's reading of alpha taken from its interval, never from the point estimate.

    A reading is stated only where the whole interval supports it (Hayes & Krippendorff 2007 [HayesKrippendorff2007] read the
    bootstrap distribution against the smallest acceptable alpha, see :func:`alpha_q`): ``"reliable"``
    (lower bound at least .800), ``"tentative"`` (the interval within .667 to .800), ``"at least
    tentative"`` (lower bound at least .667, upper above .800), ``"not reliable"`` (upper bound below
    .667), ``"below reliable"`` (upper bound below .800, lower below .667), ``"inconclusive"`` (the
    interval reaches below .667 and above .800). The words are :data:`ALPHA_INTERVAL_READINGS`.

    Examples
    --------
    The demo's calibration 2 (alpha 0.826 from 6 images) reads "reliable" from its point alone:

    >>> read_alpha_interval(0.683, 0.907), read_alpha_interval(0.81, 0.93), read_alpha_interval(0.2, 0.6)
    ('at least tentative', 'reliable', 'not reliable')
    >>> read_alpha_interval(0.6, 0.79), read_alpha_interval(0.5, 0.9), read_alpha_interval(0.7, 0.78)
    ('below reliable', 'inconclusive', 'tentative')
    """
    if not (math.isfinite(low) and math.isfinite(high)) or low > high:
        raise ValueError(f"an interval needs finite bounds low <= high, got {low}, {high}")
    if low >= ALPHA_RELIABLE:
        return "reliable"
    if high < ALPHA_TENTATIVE:
        return "not reliable"
    if low >= ALPHA_TENTATIVE:
        return "tentative" if high < ALPHA_RELIABLE else "at least tentative"
    return "below reliable" if high < ALPHA_RELIABLE else "inconclusive"


def alpha_q(resampled: npt.ArrayLike, alpha_min: float) -> float:
    """Hayes & Krippendorff's (2007) [HayesKrippendorff2007] q: the share of bootstrap resamples of alpha below ``alpha_min``.

    The probability of failing to reach the smallest acceptable alpha, under the bootstrap distribution
    (NaN resamples, where alpha is undefined, are left out).

    >>> alpha_q([0.6, 0.7, 0.75, 0.85, float("nan")], 0.667)
    0.25
    """
    values = np.asarray(resampled, dtype=np.float64)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return math.nan
    return float(np.count_nonzero(values < alpha_min) / values.size)


def interpret_alpha(alpha: float) -> str:
    """Krippendorff's reading of an alpha value.

    Parameters
    ----------
    alpha : float

    Returns
    -------
    str
        ``"reliable"`` (alpha >= .800), ``"tentative"`` (.667 <= alpha < .800),
        ``"not reliable"`` (below .667) or ``"undefined"`` (NaN).

    Examples
    --------
    >>> interpret_alpha(0.815), interpret_alpha(0.7), interpret_alpha(float("nan"))
    ('reliable', 'tentative', 'undefined')
    """
    if alpha is None or math.isnan(alpha):
        return "undefined"
    if alpha >= ALPHA_RELIABLE:
        return "reliable"
    if alpha >= ALPHA_TENTATIVE:
        return "tentative"
    return "not reliable"


def alpha_leave_one_out(
    reliability_data: npt.ArrayLike,
    level_of_measurement: LevelOfMeasurement = "ordinal",
    value_domain: npt.ArrayLike | None = None,
    *,
    labelers: Sequence[object] | None = None,
) -> pd.DataFrame:
    """Alpha with each labeler left out in turn.

    Parameters
    ----------
    reliability_data : array_like, shape (n_labelers, n_items)
        Labels, ``NaN`` for missing.
    level_of_measurement : {"nominal", "ordinal", "interval", "ratio"}
    value_domain : array_like, optional
        See ``krippendorff_alpha``.
    labelers : sequence, optional
        Labeler ids used as the index (default ``0..n_labelers-1``).

    Returns
    -------
    pandas.DataFrame
        Indexed by labeler, columns ``alpha_without`` (alpha of the other
        labelers) and ``change`` (``alpha_without - alpha of everyone``: positive
        means agreement improves without this labeler). NaN where undefined
        (e.g. only two labelers, or the others never labelled the same image).

    Examples
    --------
    >>> data = [[1, 2, 3, 4, 5], [1, 2, 3, 4, 5], [5, 1, 4, 2, 3]]
    >>> alpha_leave_one_out(data)["change"].idxmax()
    2
    """
    data = _as_reliability_data(reliability_data)
    n_labelers = data.shape[0]
    index = pd.Index(range(n_labelers) if labelers is None else list(labelers))
    if len(index) != n_labelers:
        raise ValueError("labelers must have one entry per row of reliability_data.")
    everyone = krippendorff_alpha(data, level_of_measurement, value_domain)
    without = [
        krippendorff_alpha(np.delete(data, labeler, axis=0), level_of_measurement, value_domain)
        for labeler in range(n_labelers)
    ]
    frame = pd.DataFrame({"alpha_without": np.asarray(without, dtype=np.float64)}, index)
    frame["change"] = frame["alpha_without"] - everyone
    frame.index.name = "labeler"
    return frame
