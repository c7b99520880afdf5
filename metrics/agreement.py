"""Inter-labeler agreement statistics for ordinal skin-tone labels.

Pure NumPy/SciPy/pandas; this module never imports Django.

Conventions
-----------
* ``reliability_data`` is a *labelers x items* array with ``NaN`` for a missing
  label, the convention of the ``krippendorff`` package on PyPI.
* A label is a number: the tone number, or the midpoint of two adjacent tones
  (a labeler who picked tones 3 and 4 gives 3.5).
* Functions return ``NaN`` (or a result object whose ``n`` is 0 or small) when
  there is too little data, so that the UI can say "too little data"; they do
  not raise on degenerate input and do not leak NumPy warnings.

Krippendorff's alpha is computed from an *items x values* count matrix (how many
labelers gave each value to each item), which one database aggregate can
supply, via the coincidence matrix (Krippendorff 2011, "Computing
Krippendorff's Alpha-Reliability"). Results agree with the ``krippendorff``
package to about 1e-12.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt
import pandas as pd

__all__ = [
    "AlphaBootstrap",
    "ImageConsensus",
    "LevelOfMeasurement",
    "TestRetestResult",
    "alpha_from_counts",
    "alpha_leave_one_out",
    "bootstrap_alpha",
    "cohen_kappa_weighted",
    "consensus_table",
    "fleiss_kappa",
    "image_consensus",
    "interpret_alpha",
    "k_of_n_agreement",
    "kappa_matrix",
    "krippendorff_alpha",
    "labeler_bias",
    "percent_exact",
    "percent_within_one",
    "selection_values",
    "selections_to_arrays",
    "test_retest",
    "unique_values_distribution",
    "value_counts",
]

LevelOfMeasurement = Literal["nominal", "ordinal", "interval", "ratio"]
_LEVELS = ("nominal", "ordinal", "interval", "ratio")

#: Krippendorff's (2004) thresholds: alpha >= .800 reliable, >= .667 tentative.
ALPHA_RELIABLE = 0.800
ALPHA_TENTATIVE = 0.667

Selection = int | Sequence[int] | None


# --------------------------------------------------------------------------
# Value counts and Krippendorff's alpha
# --------------------------------------------------------------------------


def _as_reliability_data(reliability_data: npt.ArrayLike) -> np.ndarray:
    data = np.asarray(reliability_data, dtype=np.float64)
    if data.size == 0:
        return data.reshape(0, 0) if data.ndim != 2 else data
    if data.ndim != 2:
        raise ValueError(f"reliability_data must be a 2-D labelers x items array, got {data.ndim} dimension(s).")
    return data


def _value_codes(data: np.ndarray, value_domain: npt.ArrayLike | None) -> tuple[np.ndarray, np.ndarray]:
    """Map labels to column indices of the value domain.

    Returns the domain and a labelers x items ``intp`` array of column indices,
    with ``len(domain)`` for a missing label.
    """
    finite = ~np.isnan(data)
    observed = np.unique(data[finite])
    if value_domain is None:
        domain = observed
    else:
        domain = np.asarray(value_domain, dtype=np.float64).ravel()
        if np.unique(domain).size != domain.size:
            raise ValueError("value_domain must not contain duplicates.")
        if not np.isin(observed, domain).all():
            raise ValueError("The reliability data contains out-of-domain values.")
    n_values = domain.size
    if observed.size == 0:
        return domain, np.full(data.shape, n_values, dtype=np.intp)
    # The domain order is kept as given (it defines the ordinal ranks), so find
    # each observed value's column through a sorted copy.
    sorter = np.argsort(domain, kind="stable")
    observed_column = sorter[np.searchsorted(domain[sorter], observed)]
    # Fast path: labels on a grid of whole or half (or quarter, tenth) steps map
    # through a lookup table, which is several times faster than a binary
    # search per label. All labels are in `observed`, so no check is needed.
    grid_scales = (1, 2, 4, 10) if np.isfinite(observed[[0, -1]]).all() else ()
    for scale in grid_scales:
        scaled = observed * scale
        if not np.array_equal(scaled, np.round(scaled)):
            continue
        low, span = int(scaled[0]), int(scaled[-1] - scaled[0])
        if span > 1_000_000:
            break
        table = np.full(span + 2, n_values, dtype=np.intp)
        table[scaled.astype(np.int64) - low] = observed_column
        offsets = np.where(finite, data * scale - low, span + 1)
        return domain, table[offsets.astype(np.intp)]
    position = np.searchsorted(observed, np.where(finite, data, observed[0]))
    return domain, np.where(finite, observed_column[position], n_values)


def _counts_from_codes(codes: np.ndarray, n_values: int) -> np.ndarray:
    """Items x values count matrix from labelers x items column indices."""
    n_items = codes.shape[1]
    width = n_values + 1  # last column collects missing labels
    flat = codes + (np.arange(n_items, dtype=np.intp) * width)[None, :]
    counts = np.bincount(flat.ravel(), minlength=n_items * width)
    return np.ascontiguousarray(counts.reshape(n_items, width)[:, :n_values])


def _domain(data: np.ndarray, value_domain: npt.ArrayLike | None) -> tuple[np.ndarray, np.ndarray]:
    """Return the value domain and the items x values count matrix."""
    if data.size == 0:
        domain = np.zeros(0) if value_domain is None else np.asarray(value_domain, dtype=np.float64).ravel()
        n_items = data.shape[1] if data.ndim == 2 else 0
        return domain, np.zeros((n_items, domain.size), dtype=np.int64)
    domain, codes = _value_codes(data, value_domain)
    return domain, _counts_from_codes(codes, domain.size)


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


def _check_level(level: str) -> None:
    if level not in _LEVELS:
        raise ValueError(f"level_of_measurement must be one of {_LEVELS}, got {level!r}.")


def _distance_matrix(values: np.ndarray, n_v: np.ndarray, level: str) -> np.ndarray:
    """Squared distance between values (Krippendorff 2011, section D).

    ``n_v`` may have a leading batch dimension (only used by ``ordinal``).
    """
    if level == "nominal":
        return 1.0 - np.eye(values.size)
    if level == "interval":
        return np.subtract.outer(values, values) ** 2
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
    return (between - ends) ** 2


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
    return o


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
    Krippendorff (2011), 4 observers x 12 units, as counts of values 1..5:

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
    Krippendorff (2011), 4 observers x 12 units:

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


# --------------------------------------------------------------------------
# Bootstrap
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class AlphaBootstrap:
    """Krippendorff's alpha with an item-bootstrap percentile interval.

    Attributes
    ----------
    estimate : float
        Alpha on the full data (NaN if undefined).
    low, high : float
        Percentile confidence interval (NaN if no resample gave a defined alpha).
    confidence : float
        Confidence level of ``[low, high]``.
    n_resamples : int
        Number of resamples drawn.
    n_valid_resamples : int
        Resamples whose alpha is defined (the interval uses these only).
    n_items : int
        Pairable items (items with two or more labels): the units resampled.
    n_pairable : int
        Pairable values (labels on pairable items).
    level_of_measurement : str
    resampled : ndarray, shape (n_resamples,)
        Alpha of each resample (NaN where undefined), e.g. for a histogram.
        Not part of equality or ``repr``.
    """

    estimate: float
    low: float
    high: float
    confidence: float
    n_resamples: int
    n_valid_resamples: int
    n_items: int
    n_pairable: int
    level_of_measurement: str
    resampled: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False, compare=False)

    @property
    def interpretation(self) -> str:
        """``interpret_alpha(self.estimate)``."""
        return interpret_alpha(self.estimate)


# Resamples per matrix product; bounds memory to chunk x n_patterns x 8 bytes.
_BOOTSTRAP_CHUNK = 250


def _count_patterns(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of an items x values count matrix and their frequencies."""
    n_values = counts.shape[1]
    integral = np.issubdtype(counts.dtype, np.integer) or np.array_equal(counts, np.round(counts))
    base = int(counts.max()) + 1 if counts.size else 1
    if integral and counts.min(initial=0) >= 0 and base**n_values < 2**62:
        # One integer key per row: much faster than np.unique(axis=0), which
        # sorts rows lexicographically (0.9 s for 100,000 x 19).
        powers = base ** np.arange(n_values, dtype=np.int64)
        keys = counts.astype(np.int64) @ powers
        _, first, frequency = np.unique(keys, return_index=True, return_counts=True)
        return counts[first], frequency
    return np.unique(counts, axis=0, return_counts=True)


def _alpha_batch(o_upper: np.ndarray, values: np.ndarray, level: str) -> np.ndarray:
    """Alpha for a batch of coincidence matrices given by their upper triangles."""
    n_values = values.size
    rows, cols = np.triu_indices(n_values)
    o = np.empty((o_upper.shape[0], n_values, n_values))
    o[:, rows, cols] = o_upper
    o[:, cols, rows] = o_upper
    n_v = o.sum(axis=1)
    n = n_v.sum(axis=1)
    if level == "ordinal":
        d = _distance_matrix(values, n_v, level)  # batch x V x V
        observed = np.einsum("bij,bij->b", o, d)
        expected = np.einsum("bi,bij,bj->b", n_v, d, n_v)
    else:
        d = _distance_matrix(values, n_v, level)
        observed = o.reshape(o.shape[0], -1) @ d.ravel()
        expected = np.einsum("bi,ij,bj->b", n_v, d, n_v)
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = expected / (n - 1)
        alpha = 1.0 - observed / expected
    alpha[~(expected > 0) | ~(n > 1)] = np.nan
    return alpha


def bootstrap_alpha(
    reliability_data: npt.ArrayLike | None = None,
    level_of_measurement: LevelOfMeasurement = "ordinal",
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int | np.random.Generator | None = 0,
    value_domain: npt.ArrayLike | None = None,
    *,
    counts: npt.ArrayLike | None = None,
) -> AlphaBootstrap:
    """Krippendorff's alpha with a bootstrap confidence interval over items.

    Items (images) are resampled with replacement. Only pairable items (two or
    more labels) are resampled: the others add nothing to alpha, and including
    them would make the interval depend on how many unlabelled images the
    array happens to hold.

    Approach: an item contributes ``C_i = (c_i c_i^T - diag(c_i)) / (m_i - 1)``
    to the coincidence matrix, and a resample's coincidence matrix is
    ``sum_i w_i C_i`` with multinomial weights ``w``. Items with the same count
    vector have the same ``C_i``, and with a handful of labelers and 10-20
    values there are few distinct count vectors (patterns). Drawing ``N`` items
    uniformly with replacement is the same as drawing multinomial counts over
    patterns with probabilities ``pattern frequency / N``, so each resample is
    one multinomial draw over the K patterns and the (symmetric) coincidence
    matrices of a chunk of resamples are one (chunk x K) @ (K x V(V+1)/2)
    product. Cost is O(n_resamples * K * V^2), independent of the number of
    items: 1,000 resamples of 100,000 images x 4 labelers took 0.1-0.4 s with
    10 values and 0.8-1.5 s with 19 (half-steps) on a busy 2-core machine
    (``bench/bench_agreement.py``).

    Parameters
    ----------
    reliability_data : array_like, shape (n_labelers, n_items), optional
        Labels, ``NaN`` for missing. Give this or ``counts``.
    level_of_measurement : {"nominal", "ordinal", "interval", "ratio"}
    n_resamples : int
        Number of bootstrap resamples.
    confidence : float
        Confidence level of the percentile interval, in (0, 1).
    seed : int, Generator or None
        Seed for ``numpy.random.default_rng``; the same seed gives the same result.
    value_domain : array_like, optional
        Values in rank order (see ``krippendorff_alpha``); with ``counts``, the
        value of each column (default ``0..V-1``).
    counts : array_like, shape (n_items, n_values), optional, keyword-only
        Items x values count matrix instead of ``reliability_data``.

    Returns
    -------
    AlphaBootstrap
        ``estimate``, ``low``, ``high`` are NaN when alpha is undefined
        (``n_items`` tells whether there was too little data).

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> truth = rng.integers(1, 11, size=500)
    >>> data = np.clip(truth + rng.integers(-1, 2, size=(4, 500)), 1, 10)
    >>> result = bootstrap_alpha(data, n_resamples=200, seed=0)
    >>> bool(result.low < result.estimate < result.high), result.n_items
    (True, 500)
    """
    _check_level(level_of_measurement)
    if (reliability_data is None) == (counts is None):
        raise ValueError("Give either reliability_data or counts, not both.")
    if not 0 < confidence < 1:
        raise ValueError("confidence must be in (0, 1).")
    if n_resamples < 1:
        raise ValueError("n_resamples must be at least 1.")
    if counts is None:
        data = _as_reliability_data(reliability_data)
        if data.size == 0:
            values, count_matrix = np.zeros(0), np.zeros((0, 0))
        else:
            values, count_matrix = _domain(data, value_domain)
    else:
        count_matrix = np.asarray(counts)
        if count_matrix.ndim != 2:
            raise ValueError("counts must be a 2-D items x values array.")
        n_values = count_matrix.shape[1]
        values = (
            np.arange(n_values, dtype=np.float64)
            if value_domain is None
            else np.asarray(value_domain, dtype=np.float64).ravel()
        )
        if values.size != n_values:
            raise ValueError("value_domain must have one entry per column of counts.")

    m = count_matrix.sum(axis=1) if count_matrix.size else np.zeros(0)
    pairable = count_matrix[m >= 2] if count_matrix.size else count_matrix
    n_items = int(pairable.shape[0])
    n_pairable = int(m[m >= 2].sum()) if m.size else 0
    empty = AlphaBootstrap(
        math.nan,
        math.nan,
        math.nan,
        confidence,
        n_resamples,
        0,
        n_items,
        n_pairable,
        level_of_measurement,
    )
    if n_items == 0 or values.size < 2:
        return empty

    patterns, frequency = _count_patterns(pairable)
    # Upper triangle of each pattern's (c c^T - diag(c)) / (m - 1): K x V(V+1)/2.
    pattern_counts = patterns.astype(np.float64)
    rows, cols = np.triu_indices(values.size)
    contributions = pattern_counts[:, rows] * pattern_counts[:, cols]
    contributions[:, rows == cols] -= pattern_counts
    contributions /= (pattern_counts.sum(axis=1) - 1)[:, None]
    estimate = float(
        _alpha_batch(
            (frequency.astype(np.float64) @ contributions)[None, :],
            values,
            level_of_measurement,
        )[0]
    )
    probabilities = frequency / n_items
    rng = np.random.default_rng(seed)
    alphas = np.empty(n_resamples)
    for start in range(0, n_resamples, _BOOTSTRAP_CHUNK):
        size = min(_BOOTSTRAP_CHUNK, n_resamples - start)
        weights = rng.multinomial(n_items, probabilities, size=size)
        o_upper = weights.astype(np.float64) @ contributions
        alphas[start : start + size] = _alpha_batch(o_upper, values, level_of_measurement)
    valid = alphas[~np.isnan(alphas)]
    if valid.size == 0:
        low = high = math.nan
    else:
        tail = (1 - confidence) / 2
        low, high = (float(q) for q in np.quantile(valid, [tail, 1 - tail]))
    return AlphaBootstrap(
        estimate,
        low,
        high,
        confidence,
        n_resamples,
        int(valid.size),
        n_items,
        n_pairable,
        level_of_measurement,
        alphas,
    )


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


# --------------------------------------------------------------------------
# Pairwise agreement, kappas
# --------------------------------------------------------------------------


def _pairwise_fraction(reliability_data: npt.ArrayLike, tolerance: float) -> float:
    data = _as_reliability_data(reliability_data)
    if data.size == 0:
        return math.nan
    values, counts = _domain(data, None)
    counts = counts.astype(np.float64)
    m = counts.sum(axis=1)
    total_pairs = (m * (m - 1) / 2).sum()
    if total_pairs == 0:
        return math.nan
    close = (np.abs(np.subtract.outer(values, values)) <= tolerance).astype(np.float64)
    # sum_{v,w} c_v close_vw c_w counts ordered pairs plus self-pairs (close_vv = 1)
    agreeing = (np.einsum("iv,vw,iw->", counts, close, counts) - m.sum()) / 2
    return float(agreeing / total_pairs)


def percent_exact(reliability_data: npt.ArrayLike) -> float:
    """Fraction of labeler pairs that gave exactly the same value to an item.

    Pooled over all pairs: every item labelled by ``m`` labelers contributes its
    ``m (m - 1) / 2`` pairs, so items with more labels weigh more.

    Parameters
    ----------
    reliability_data : array_like, shape (n_labelers, n_items)
        Labels, ``NaN`` for missing.

    Returns
    -------
    float
        A fraction in [0, 1] (multiply by 100 for %), ``NaN`` if no item has two
        labels.

    Examples
    --------
    Item 1: 3 of 3 pairs agree, item 2 (2, 3, 2): 1 of 3, item 3: 1 of 1.

    >>> round(percent_exact([[1, 2, 3], [1, 3, np.nan], [1, 2, 3]]), 4)
    0.7143
    """
    return _pairwise_fraction(reliability_data, 0.0)


def percent_within_one(reliability_data: npt.ArrayLike) -> float:
    """Fraction of labeler pairs whose values differ by at most one tone.

    Pooled over pairs as in ``percent_exact``. 3 and 4.5 differ by 1.5, so they
    are not within one.

    Parameters
    ----------
    reliability_data : array_like, shape (n_labelers, n_items)
        Labels, ``NaN`` for missing.

    Returns
    -------
    float
        A fraction in [0, 1], ``NaN`` if no item has two labels.

    Examples
    --------
    Item 1 (1, 2, 1): 3 of 3 pairs, item 2 (2, 4, 2): 1 of 3, item 3: 1 of 1.

    >>> round(percent_within_one([[1, 2, 3], [2, 4, np.nan], [1, 2, 3]]), 4)
    0.7143
    """
    return _pairwise_fraction(reliability_data, 1.0)


def fleiss_kappa(counts: npt.ArrayLike) -> float:
    """Fleiss' kappa (nominal) from an items x categories count matrix.

    Parameters
    ----------
    counts : array_like, shape (n_items, n_categories)
        Number of labelers who chose each category for each item. Every item
        must have the same number of ratings.

    Returns
    -------
    float
        Kappa, ``NaN`` if there are no items, fewer than two ratings per item,
        or no disagreement is possible (all ratings in one category).

    Raises
    ------
    ValueError
        If the items do not all have the same number of ratings (use
        ``krippendorff_alpha``, which handles missing labels).

    Examples
    --------
    >>> round(fleiss_kappa([[2, 0], [0, 2], [1, 1]]), 4)
    0.3333
    """
    table = np.asarray(counts, dtype=np.float64)
    if table.ndim != 2:
        raise ValueError("counts must be a 2-D items x categories array.")
    if table.shape[0] == 0:
        return math.nan
    ratings = table.sum(axis=1)
    if not np.all(ratings == ratings[0]):
        raise ValueError(
            "Fleiss' kappa needs the same number of ratings for every item, got "
            f"between {ratings.min():g} and {ratings.max():g}; use "
            "krippendorff_alpha for incomplete data."
        )
    n = ratings[0]
    if n < 2:
        return math.nan
    p_category = table.sum(axis=0) / table.sum()
    p_item = ((table**2).sum(axis=1) - n) / (n * (n - 1))
    p_observed = p_item.mean()
    p_expected = (p_category**2).sum()
    if p_expected >= 1:
        return math.nan
    return float((p_observed - p_expected) / (1 - p_expected))


def cohen_kappa_weighted(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    *,
    categories: npt.ArrayLike,
    weights: Literal["linear", "quadratic"] | None = "quadratic",
) -> float:
    """Weighted Cohen's kappa between two labelers over their common items.

    Same definition as ``sklearn.metrics.cohen_kappa_score(a, b,
    labels=categories, weights=weights)``: the disagreement weight of two
    labels is ``|i - j|`` or ``(i - j) ** 2`` of their positions in
    ``categories``. Pass the full label range (e.g. 1..10, or 1, 1.5, ..., 10
    with half-steps) so that unused values do not shrink the distances.

    Parameters
    ----------
    a, b : array_like, shape (n_items,)
        Labels of the two labelers, ``NaN`` for missing; items missing in either
        are dropped.
    categories : array_like
        All possible labels, in order (keyword-only).
    weights : {"quadratic", "linear", None}
        ``None`` gives unweighted kappa.

    Returns
    -------
    float
        Kappa, ``NaN`` if there is no common item or no disagreement is
        possible (both labelers always used a single and the same label).

    Raises
    ------
    ValueError
        If a label is not in ``categories``.

    Examples
    --------
    >>> round(cohen_kappa_weighted([1, 2, 3, 4], [1, 2, 4, 4],
    ...                            categories=[1, 2, 3, 4, 5]), 4)
    0.9167
    """
    x = np.asarray(a, dtype=np.float64).ravel()
    y = np.asarray(b, dtype=np.float64).ravel()
    if x.shape != y.shape:
        raise ValueError("a and b must have the same length.")
    cats = np.asarray(categories, dtype=np.float64).ravel()
    if cats.size == 0 or np.unique(cats).size != cats.size:
        raise ValueError("categories must be non-empty and without duplicates.")
    both = ~np.isnan(x) & ~np.isnan(y)
    x, y = x[both], y[both]
    if x.size == 0:
        return math.nan
    sorter = np.argsort(cats, kind="stable")
    sorted_cats = cats[sorter]

    def positions(labels: np.ndarray) -> np.ndarray:
        pos = np.minimum(np.searchsorted(sorted_cats, labels), cats.size - 1)
        if not np.array_equal(sorted_cats[pos], labels):
            raise ValueError("Labels outside categories.")
        return sorter[pos]

    i, j = positions(x), positions(y)
    k = cats.size
    observed = np.bincount(i * k + j, minlength=k * k).reshape(k, k).astype(float)
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0)) / observed.sum()
    ranks = np.arange(k)
    if weights is None:
        w = 1.0 - np.eye(k)
    elif weights == "linear":
        w = np.abs(np.subtract.outer(ranks, ranks)).astype(float)
    elif weights == "quadratic":
        w = np.subtract.outer(ranks, ranks).astype(float) ** 2
    else:
        raise ValueError("weights must be 'linear', 'quadratic' or None.")
    disagreement_expected = (w * expected).sum()
    if disagreement_expected == 0:
        return math.nan
    return float(1.0 - (w * observed).sum() / disagreement_expected)


def kappa_matrix(
    reliability_data: npt.ArrayLike,
    categories: npt.ArrayLike,
    *,
    weights: Literal["linear", "quadratic"] | None = "quadratic",
    min_common: int = 2,
) -> np.ndarray:
    """Pairwise weighted Cohen's kappa, labeler x labeler.

    Parameters
    ----------
    reliability_data : array_like, shape (n_labelers, n_items)
        Labels, ``NaN`` for missing.
    categories : array_like
        All possible labels, in order (see ``cohen_kappa_weighted``).
    weights : {"quadratic", "linear", None}
    min_common : int
        Pairs of labelers with fewer common items than this get ``NaN``.

    Returns
    -------
    ndarray, shape (n_labelers, n_labelers)
        Symmetric; ``NaN`` where two labelers share fewer than ``min_common``
        items or kappa is undefined. The diagonal is a labeler's kappa with
        itself (1.0 unless undefined).

    Examples
    --------
    >>> kappa_matrix([[1, 2, 3], [1, 2, 3], [1, np.nan, np.nan]], [1, 2, 3])
    array([[ 1.,  1., nan],
           [ 1.,  1., nan],
           [nan, nan, nan]])
    """
    data = _as_reliability_data(reliability_data)
    n_labelers = data.shape[0]
    matrix = np.full((n_labelers, n_labelers), np.nan)
    present = ~np.isnan(data)
    for first in range(n_labelers):
        for second in range(first, n_labelers):
            if (present[first] & present[second]).sum() < min_common:
                continue
            kappa = cohen_kappa_weighted(data[first], data[second], categories=categories, weights=weights)
            matrix[first, second] = matrix[second, first] = kappa
    return matrix


# --------------------------------------------------------------------------
# Distributions for the data card
# --------------------------------------------------------------------------


def _sorted_items(reliability_data: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Items x labelers values sorted per item (NaN last) and label counts."""
    data = _as_reliability_data(reliability_data)
    if data.size == 0:
        return np.zeros((0, 0)), np.zeros(0, dtype=np.int64)
    ordered = np.sort(data.T, axis=1)
    return ordered, (~np.isnan(ordered)).sum(axis=1)


def _mode_counts(ordered: np.ndarray) -> np.ndarray:
    """Size of the largest group of equal values per row (NaN never equal)."""
    if ordered.shape[1] == 0:
        return np.zeros(ordered.shape[0], dtype=np.int64)
    equal = ordered[:, :, None] == ordered[:, None, :]
    return equal.sum(axis=2).max(axis=1)


def _unique_counts(ordered: np.ndarray) -> np.ndarray:
    if ordered.shape[1] == 0:
        return np.zeros(ordered.shape[0], dtype=np.int64)
    valid = ~np.isnan(ordered)
    new = valid.copy()
    new[:, 1:] &= ordered[:, 1:] != ordered[:, :-1]
    return new.sum(axis=1)


def k_of_n_agreement(reliability_data: npt.ArrayLike) -> pd.DataFrame:
    """Distribution of "k of n labelers agreed exactly" over items.

    For each item, ``n`` is its number of labels and ``k`` the size of the
    largest group of labelers who gave exactly the same value.

    Parameters
    ----------
    reliability_data : array_like, shape (n_labelers, n_items)
        Labels, ``NaN`` for missing.

    Returns
    -------
    pandas.DataFrame
        Columns ``n_labels``, ``k_agreed``, ``n_items`` and ``fraction``
        (share of the items with that ``n_labels``), one row per observed
        ``(n, k)``, sorted; items without labels are left out. Empty if no item
        has a label.

    Examples
    --------
    >>> k_of_n_agreement([[1, 2, 3, 1], [1, 3, 3, 2], [1, 4, 5, np.nan]])
       n_labels  k_agreed  n_items  fraction
    0         2         1        1  1.000000
    1         3         1        1  0.333333
    2         3         2        1  0.333333
    3         3         3        1  0.333333
    """
    ordered, n_labels = _sorted_items(reliability_data)
    k = _mode_counts(ordered)
    labelled = n_labels > 0
    frame = pd.DataFrame({"n_labels": n_labels[labelled], "k_agreed": k[labelled]})
    table = frame.value_counts().rename("n_items").sort_index().reset_index()
    table["fraction"] = table["n_items"] / table.groupby("n_labels")["n_items"].transform("sum")
    return table.astype({"n_labels": "int64", "k_agreed": "int64", "n_items": "int64"})


def unique_values_distribution(reliability_data: npt.ArrayLike, *, min_labels: int = 1) -> pd.DataFrame:
    """Distribution of the number of distinct values per item.

    Parameters
    ----------
    reliability_data : array_like, shape (n_labelers, n_items)
        Labels, ``NaN`` for missing.
    min_labels : int
        Only items with at least this many labels are counted.

    Returns
    -------
    pandas.DataFrame
        Columns ``n_unique_values``, ``n_items``, ``fraction`` (of the counted
        items), sorted by ``n_unique_values``. Empty if no item qualifies.

    Examples
    --------
    >>> unique_values_distribution([[1, 2, 3, 1], [1, 3, 3, 2], [1, 4, 5, 2]])
       n_unique_values  n_items  fraction
    0                1        1      0.25
    1                2        2      0.50
    2                3        1      0.25
    """
    ordered, n_labels = _sorted_items(reliability_data)
    unique = _unique_counts(ordered)[(n_labels >= max(min_labels, 1))]
    table = (
        pd.Series(unique, name="n_unique_values", dtype="int64")
        .value_counts()
        .rename("n_items")
        .sort_index()
        .reset_index()
    )
    table["fraction"] = table["n_items"] / table["n_items"].sum()
    return table.astype({"n_unique_values": "int64", "n_items": "int64"})


# --------------------------------------------------------------------------
# Test-retest and labeler bias
# --------------------------------------------------------------------------


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


def _round_half_up(x: np.ndarray) -> np.ndarray:
    return np.floor(x + 0.5)


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
        If true, break the bias down by tone band: the others' median rounded
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
        median = np.nanmedian(others[:, usable], axis=0) if usable.any() else np.zeros(0)
        diff = own[usable] - median
        rows.append(
            pd.DataFrame(
                {
                    "labeler": names[position],
                    "band": _round_half_up(median),
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


# --------------------------------------------------------------------------
# Per-image aggregation of selections (one tone, two adjacent tones, or skip)
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class ImageConsensus:
    """Aggregate of all labelers' selections on one image.

    A selection is one tone, two adjacent tones (value: their midpoint), or a
    skip (no value). Two non-adjacent tones are an invalid annotation (no
    value). Statistics use the valid values only; consensus fields need at least
    two valid selections and are ``False`` otherwise.

    Attributes
    ----------
    values : tuple of float
        One per labeler; ``NaN`` for a skip or an invalid selection.
    valid_values : tuple of float
        The non-NaN ``values``, in labeler order.
    n_labels : int
        Labelers who selected something (valid or not).
    n_valid : int
        Valid selections.
    mean, std, median : float
        Of the valid values; ``std`` is the population standard deviation
        (``ddof=0``). ``NaN`` if there is no valid value.
    mode : float
        Most frequent valid value; ties go to the lowest value. ``NaN`` if none.
    mode_count : int
        How many labelers gave ``mode`` (the largest group agreeing exactly).
    min, max, range : float
        Of the valid values (``range = max - min``); ``NaN`` if none.
    complete_consensus : bool
        At least two valid selections, all identical (same tone or same pair).
    overlap_consensus : bool
        At least two valid selections sharing at least one tone.
    near_consensus : bool
        At least two valid values, all within one tone (``max - min <= 1``).
    n_unique_values : int
        Distinct valid values.
    n_connected_groups : int
        Runs of consecutive tones in the union of the tones of the valid
        selections (0 if none).
    any_uncertainty : bool
        Some labeler set the uncertain flag.
    has_invalid_annotation : bool
        Some labeler selected two non-adjacent tones.
    wide_range : bool
        ``range >= wide_range`` tones (parameter of ``image_consensus``).
    flags : tuple of str
        Review flags: ``"wide_range"`` and/or ``"invalid"`` (an invalid
        annotation).
    """

    values: tuple[float, ...]
    valid_values: tuple[float, ...]
    n_labels: int
    n_valid: int
    mean: float
    std: float
    median: float
    mode: float
    mode_count: int
    min: float
    max: float
    range: float
    complete_consensus: bool
    overlap_consensus: bool
    near_consensus: bool
    n_unique_values: int
    n_connected_groups: int
    any_uncertainty: bool
    has_invalid_annotation: bool
    wide_range: bool
    flags: tuple[str, ...]


def _tones(selection: Selection) -> tuple[int, ...]:
    if selection is None:
        return ()
    if isinstance(selection, int | np.integer):
        return (int(selection),)
    return tuple(sorted({int(tone) for tone in selection}))


def image_consensus(
    selections: Sequence[Selection],
    uncertain: Sequence[bool] | None = None,
    *,
    wide_range: float = 3,
) -> ImageConsensus:
    """Aggregate the labelers' selections on one image (data-card fields).

    Parameters
    ----------
    selections : sequence
        One entry per labeler: ``None`` or ``()`` for a skip, a tone number, or
        a sequence of one or two tone numbers (two adjacent tones when the
        labeler was unsure between them; non-adjacent pairs and more than two
        tones are invalid).
    uncertain : sequence of bool, optional
        Each labeler's uncertain flag.
    wide_range : float
        Raise the ``wide_range`` flag when ``max - min >= wide_range`` tones.

    Returns
    -------
    ImageConsensus
        See its attributes for the definitions.

    Examples
    --------
    >>> result = image_consensus([(4, 5), 5, 4, None])  # mid-deep+deep, ...
    >>> result.values[0], result.mean, result.near_consensus, result.n_connected_groups
    (4.5, 4.5, True, 1)
    """
    values: list[float] = []
    valid_tones: list[tuple[int, ...]] = []
    n_labels = 0
    has_invalid = False
    for selection in selections:
        tones = _tones(selection)
        if not tones:
            values.append(math.nan)
            continue
        n_labels += 1
        if len(tones) == 1 or (len(tones) == 2 and tones[1] - tones[0] == 1):
            values.append(sum(tones) / len(tones))
            valid_tones.append(tones)
        else:
            values.append(math.nan)
            has_invalid = True
    valid = [value for value in values if not math.isnan(value)]
    n_valid = len(valid)
    nan = math.nan
    if valid:
        array = np.asarray(valid)
        unique, frequency = np.unique(array, return_counts=True)
        best = int(np.argmax(frequency))  # first maximum = lowest value
        mean, std, median = (
            float(array.mean()),
            float(array.std()),
            float(np.median(array)),
        )
        mode, mode_count = float(unique[best]), int(frequency[best])
        low, high = float(array.min()), float(array.max())
        covered = sorted({tone for tones in valid_tones for tone in range(tones[0], tones[-1] + 1)})
        groups = 1 + sum(1 for a, b in itertools.pairwise(covered) if b - a > 1)
    else:
        mean = std = median = mode = low = high = nan
        mode_count, unique, groups = 0, (), 0
    spread = high - low
    several = n_valid >= 2
    complete = several and all(tones == valid_tones[0] for tones in valid_tones)
    overlap = several and bool(set.intersection(*(set(t) for t in valid_tones)))
    near = several and spread <= 1
    is_wide = bool(valid) and spread >= wide_range
    flags = tuple(name for name, raised in (("wide_range", is_wide), ("invalid", has_invalid)) if raised)
    return ImageConsensus(
        values=tuple(values),
        valid_values=tuple(valid),
        n_labels=n_labels,
        n_valid=n_valid,
        mean=mean,
        std=std,
        median=median,
        mode=mode,
        mode_count=mode_count,
        min=low,
        max=high,
        range=spread,
        complete_consensus=complete,
        overlap_consensus=overlap,
        near_consensus=near,
        n_unique_values=len(unique),
        n_connected_groups=groups,
        any_uncertainty=bool(uncertain is not None and any(uncertain)),
        has_invalid_annotation=has_invalid,
        wide_range=is_wide,
        flags=flags,
    )


def selections_to_arrays(
    selections: Sequence[Sequence[Selection]],
) -> tuple[np.ndarray, np.ndarray]:
    """Convert per-image selection lists to the arrays of ``consensus_table``.

    Parameters
    ----------
    selections : sequence of sequences
        ``selections[image][labeler]`` as in ``image_consensus``; images may
        have different numbers of labelers (padded with skips).

    Returns
    -------
    first_tone, second_tone : ndarray, shape (n_images, n_labelers)
        Lowest and highest selected tone; ``NaN`` for a skip; ``second_tone`` is
        ``NaN`` for a single tone. A selection of more than two tones is encoded
        as (lowest, highest), which ``consensus_table`` treats as invalid.

    Examples
    --------
    >>> selections_to_arrays([[3, (3, 4)], [None, 2]])[1].tolist()
    [[nan, 4.0], [nan, nan]]
    """
    n_images = len(selections)
    n_labelers = max((len(row) for row in selections), default=0)
    first = np.full((n_images, n_labelers), np.nan)
    second = np.full((n_images, n_labelers), np.nan)
    for image, row in enumerate(selections):
        for labeler, selection in enumerate(row):
            tones = _tones(selection)
            if tones:
                first[image, labeler] = tones[0]
                if len(tones) > 1:
                    # Three or more tones are invalid; a gap >= 2 marks them so.
                    second[image, labeler] = tones[-1] if len(tones) == 2 else max(tones[-1], tones[0] + 2)
    return first, second


def selection_values(first_tone: npt.ArrayLike, second_tone: npt.ArrayLike | None = None) -> np.ndarray:
    """Numeric value of each selection (``NaN`` for a skip or invalid pair).

    Parameters
    ----------
    first_tone, second_tone : array_like
        As returned by ``selections_to_arrays`` (same shape; ``second_tone``
        ``NaN`` or equal to ``first_tone`` for a single tone).

    Returns
    -------
    ndarray
        The tone, the midpoint of two adjacent tones, or ``NaN``. Transpose an
        images x labelers result to get ``reliability_data`` for alpha.

    Examples
    --------
    >>> selection_values([[3, 4, 1]], [[4, np.nan, 3]]).tolist()
    [[3.5, 4.0, nan]]
    """
    first = np.asarray(first_tone, dtype=np.float64)
    second = first if second_tone is None else np.asarray(second_tone, dtype=np.float64)
    second = np.where(np.isnan(second), first, second)
    low, high = np.fmin(first, second), np.fmax(first, second)
    valid = ~np.isnan(first) & (high - low <= 1)
    return np.where(valid, (low + high) / 2, np.nan)


def consensus_table(
    first_tone: npt.ArrayLike,
    second_tone: npt.ArrayLike | None = None,
    uncertain: npt.ArrayLike | None = None,
    *,
    wide_range: float = 3,
    index: Sequence[object] | pd.Index | None = None,
) -> pd.DataFrame:
    """Vectorised ``image_consensus`` for many images.

    Parameters
    ----------
    first_tone : array_like, shape (n_images, n_labelers)
        First (or only) selected tone, ``NaN`` for a skip.
    second_tone : array_like, shape (n_images, n_labelers), optional
        Second selected tone, ``NaN`` when a single tone was selected.
    uncertain : array_like of bool, shape (n_images, n_labelers), optional
        Uncertain flags.
    wide_range : float
        Threshold of the ``wide_range`` flag, in tones.
    index : sequence, optional
        Image ids for the result's index.

    Returns
    -------
    pandas.DataFrame
        One row per image, columns ``n_labels``, ``n_valid``, ``mean``, ``std``,
        ``median``, ``mode``, ``mode_count``, ``min``, ``max``, ``range``,
        ``complete_consensus``, ``overlap_consensus``, ``near_consensus``,
        ``n_unique_values``, ``n_connected_groups``, ``any_uncertainty``,
        ``has_invalid_annotation``, ``wide_range``, ``invalid`` (same
        definitions as ``ImageConsensus``; ``invalid`` is
        ``has_invalid_annotation`` as a review flag).

    Examples
    --------
    >>> first, second = selections_to_arrays([[(4, 5), 5, 4], [1, 4, (2, 5)]])
    >>> consensus_table(first, second)[["mean", "near_consensus", "wide_range"]]
       mean  near_consensus  wide_range
    0   4.5            True       False
    1   2.5           False        True
    """
    first = np.atleast_2d(np.asarray(first_tone, dtype=np.float64))
    second = (
        np.full_like(first, np.nan) if second_tone is None else np.atleast_2d(np.asarray(second_tone, dtype=np.float64))
    )
    if second.shape != first.shape:
        raise ValueError("first_tone and second_tone must have the same shape.")
    n_images = first.shape[0]
    second = np.where(np.isnan(second), first, second)
    low, high = np.fmin(first, second), np.fmax(first, second)
    selected = ~np.isnan(first)
    valid = selected & (high - low <= 1)
    values = np.where(valid, (low + high) / 2, np.nan)
    n_valid = valid.sum(axis=1)
    has_any = n_valid > 0
    several = n_valid >= 2

    ordered = np.sort(values, axis=1)  # NaN last
    with np.errstate(invalid="ignore", divide="ignore"):
        total = np.where(valid, values, 0.0).sum(axis=1)
        mean = np.where(has_any, total / np.maximum(n_valid, 1), np.nan)
        squares = np.where(valid, (values - mean[:, None]) ** 2, 0.0).sum(axis=1)
        std = np.where(has_any, np.sqrt(squares / np.maximum(n_valid, 1)), np.nan)
    rows = np.arange(n_images)
    lower_mid = np.maximum((n_valid - 1) // 2, 0)
    upper_mid = np.minimum(n_valid // 2, max(first.shape[1] - 1, 0))
    if first.shape[1]:
        median = np.where(has_any, (ordered[rows, lower_mid] + ordered[rows, upper_mid]) / 2, np.nan)
        minimum = np.where(has_any, ordered[:, 0], np.nan)
        maximum = np.where(has_any, ordered[rows, np.maximum(n_valid - 1, 0)], np.nan)
        equal_counts = (ordered[:, :, None] == ordered[:, None, :]).sum(axis=2)
        best = np.argmax(equal_counts, axis=1)  # first maximum = lowest value
        mode = np.where(has_any, ordered[rows, best], np.nan)
        mode_count = equal_counts[rows, best]
    else:
        median = minimum = maximum = mode = np.full(n_images, np.nan)
        mode_count = np.zeros(n_images, dtype=np.int64)
    spread = maximum - minimum

    big = np.inf
    valid_low = np.where(valid, low, big)
    valid_high = np.where(valid, high, big)
    complete = (
        several
        & (np.where(valid, low, -big).max(axis=1, initial=-big) == valid_low.min(axis=1, initial=big))
        & (np.where(valid, high, -big).max(axis=1, initial=-big) == valid_high.min(axis=1, initial=big))
    )
    # Selections are intervals of consecutive tones: they share a tone iff the
    # largest lower end is at most the smallest upper end.
    overlap = several & (np.where(valid, low, -big).max(axis=1, initial=-big) <= valid_high.min(axis=1, initial=big))
    with np.errstate(invalid="ignore"):
        near = several & (spread <= 1)
        is_wide = has_any & (spread >= wide_range)

    # Connected groups: mark covered tones with a difference array, count runs.
    if valid.any():
        offset = int(np.nanmin(low[valid]))
        width = int(np.nanmax(high[valid])) - offset + 2
        marks = np.zeros((n_images, width + 1), dtype=np.int64)
        image_idx = np.broadcast_to(rows[:, None], first.shape)[valid]
        np.add.at(marks, (image_idx, low[valid].astype(np.int64) - offset), 1)
        np.add.at(marks, (image_idx, high[valid].astype(np.int64) - offset + 1), -1)
        covered = np.cumsum(marks, axis=1)[:, :width] > 0
        starts = covered.copy()
        starts[:, 1:] &= ~covered[:, :-1]
        groups = starts.sum(axis=1)
    else:
        groups = np.zeros(n_images, dtype=np.int64)

    invalid = (selected & ~valid).any(axis=1)
    any_uncertain = (
        np.zeros(n_images, dtype=bool)
        if uncertain is None
        else np.atleast_2d(np.asarray(uncertain, dtype=bool)).any(axis=1)
    )
    return pd.DataFrame(
        {
            "n_labels": selected.sum(axis=1),
            "n_valid": n_valid,
            "mean": mean,
            "std": std,
            "median": median,
            "mode": mode,
            "mode_count": np.where(has_any, mode_count, 0),
            "min": minimum,
            "max": maximum,
            "range": spread,
            "complete_consensus": complete,
            "overlap_consensus": overlap,
            "near_consensus": near,
            "n_unique_values": _unique_counts(ordered),
            "n_connected_groups": groups,
            "any_uncertainty": any_uncertain,
            "has_invalid_annotation": invalid,
            "wide_range": is_wide,
            "invalid": invalid,
        },
        index=None if index is None else pd.Index(index),
    )
