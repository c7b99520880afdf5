"""Large-sample intervals of alpha and the kappas: the delta method with a cluster-robust variance.

Every coefficient here is a smooth function of a sum over units (images, or subjects when several photos
show one person): alpha of the summed coincidence matrices, Cohen's kappa of the summed cross-table,
Fleiss' kappa of the summed agreement and category counts. With ``G`` independent units contributing
``c_g``, the sum ``T`` has the cluster-robust variance ``G / (G - 1) * sum_g (c_g - T / G)(c_g - T / G)'``,
and the coefficient ``f(T)`` the linearised (delta-method) variance

    var f(T) ~= G / (G - 1) * sum_g (grad f(T) . c_g - grad f(T) . T / G) ** 2

(Taylor linearisation, the "sandwich" of survey statistics [Wolter2007]; the jackknife of
:mod:`~metrics.agreement.bootstrap` estimates the same quantity). The interval is
``f(T) +- z * se``, kept within the coefficient's range. The gradient is taken by central differences of
the same batched statistic the bootstrap evaluates (one rule for each coefficient), so only the
per-unit scalars ``grad . c_g`` are ever formed: no units x cells matrix, no sort of the clusters' rows,
no resampling.

This is asymptotic: it is valid when units are many. Below :data:`ASYMPTOTIC_MIN_UNITS` units the
callers keep the BCa bootstrap (:func:`alpha_intervals` chooses). In seeded simulations
(``tests/metrics/test_agreement_asymptotic.py``: 4 labelers, several photos per person) both intervals
cover about 95% at the switch point and give the same interval there to within a few thousandths.

Pure NumPy; no Django.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal

import numpy as np
import numpy.typing as npt
import pandas as pd

from ._data import LevelOfMeasurement, _as_reliability_data, _check_level, _domain, _unit_codes
from .bootstrap import (
    AlphaBootstrap,
    CoefficientInterval,
    _alpha_batch,
    _count_patterns,
    _fill_pairs,
    _fleiss_batch,
    _kappa_batch,
    _pairwise_intervals,
    bootstrap_alpha_levels,
    bootstrap_cohen_kappa,
    bootstrap_fleiss_kappa,
)
from .kappa import _category_positions, _disagreement_weights, fleiss_kappa

__all__ = [
    "ASYMPTOTIC_MIN_UNITS",
    "DELTA_METHOD",
    "DeltaInterval",
    "alpha_intervals",
    "cohen_kappa_interval",
    "delta_alpha_levels",
    "delta_cohen_kappa",
    "delta_fleiss_kappa",
    "fleiss_kappa_interval",
    "interval_q",
    "kappa_matrix_intervals_by_size",
]

#: From this many units (images, or subjects) on, alpha's and the kappas' intervals are the delta
#: method's; below, the BCa bootstrap's. At 2,000 units both cover about 95% and agree to a few
#: thousandths (tests/metrics/test_agreement_asymptotic.py); the bootstrap of 100,000 images costs
#: seconds, the delta method milliseconds.
ASYMPTOTIC_MIN_UNITS = 2000
#: Name of the method, for the pages and the data card.
DELTA_METHOD = "delta method (linearised, cluster-robust standard error)"


@dataclass(frozen=True)
class DeltaInterval:
    """A coefficient with its delta-method interval.

    Attributes
    ----------
    estimate, low, high : float
        The coefficient and its interval (NaN if undefined); ``low <= estimate <= high``.
    se : float
        The linearised cluster-robust standard error.
    confidence : float
    n_units : int
        Independent units (images, or subjects).
    method : str
        ``"delta"``.
    """

    estimate: float
    low: float
    high: float
    se: float
    confidence: float
    n_units: int
    method: str = "delta"


def _gradient(statistic: Callable[[np.ndarray], np.ndarray], total: np.ndarray) -> np.ndarray:
    """Central-difference gradient of a batched statistic at ``total`` (one batch of 2D rows)."""
    size = total.size
    step = 1e-6 * max(1.0, float(np.abs(total).sum()) / max(size, 1))
    rows = np.repeat(total[None, :], 2 * size, axis=0)
    index = np.arange(size)
    rows[index, index] += step
    rows[size + index, index] -= step
    values = statistic(rows)
    return np.asarray((values[:size] - values[size:]) / (2 * step), dtype=np.float64)


def _interval(
    estimate: float, scores: np.ndarray, confidence: float, bounds: tuple[float, float]
) -> tuple[float, float, float]:
    """``estimate +- z * se`` from the units' linearised scores (``grad . c_g``), within ``bounds``."""
    n_units = scores.size
    if not math.isfinite(estimate) or n_units < 2 or not np.all(np.isfinite(scores)):
        return math.nan, math.nan, math.nan
    centred = scores - scores.mean()
    se = math.sqrt(n_units / (n_units - 1) * float(np.square(centred).sum()))
    half = NormalDist().inv_cdf(1 - (1 - confidence) / 2) * se
    low, high = max(bounds[0], estimate - half), min(bounds[1], estimate + half)
    return min(low, estimate), max(high, estimate), se


def _unit_index(clusters: npt.ArrayLike | None, n_items: int) -> tuple[np.ndarray, int]:
    if clusters is None:
        return np.arange(n_items), n_items
    group = np.asarray(clusters).ravel()
    if group.size != n_items:
        raise ValueError("clusters must have one entry per item.")
    if group.size == 0:
        return np.zeros(0, dtype=np.intp), 0
    return _unit_codes(group)


def _n_units(group: np.ndarray) -> int:
    return _unit_codes(group)[1] if group.size else 0


def delta_alpha_levels(
    reliability_data: npt.ArrayLike | None = None,
    levels: Sequence[LevelOfMeasurement] = ("ordinal", "interval"),
    confidence: float = 0.95,
    value_domain: npt.ArrayLike | None = None,
    *,
    counts: npt.ArrayLike | None = None,
    clusters: npt.ArrayLike | None = None,
) -> dict[str, DeltaInterval]:
    """Krippendorff's alpha at each level with its delta-method interval over items (or clusters).

    Arguments as :func:`~metrics.agreement.bootstrap_alpha_levels` (no resamples). Only pairable items
    (two or more labels) count, and ``n_units`` counts their units.

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> truth = rng.integers(1, 11, size=3000)
    >>> data = np.clip(truth + rng.integers(-1, 2, size=(4, 3000)), 1, 10)
    >>> r = delta_alpha_levels(data, ("ordinal",))["ordinal"]
    >>> bool(r.low < r.estimate < r.high), r.n_units
    (True, 3000)
    """
    for level in levels:
        _check_level(level)
    if (reliability_data is None) == (counts is None):
        raise ValueError("Give either reliability_data or counts, not both.")
    if counts is None:
        assert reliability_data is not None  # one of the two, checked above
        data = _as_reliability_data(reliability_data)
        values, count_matrix = (np.zeros(0), np.zeros((0, 0))) if data.size == 0 else _domain(data, value_domain)
    else:
        count_matrix = np.asarray(counts)
        n_values = count_matrix.shape[1]
        values = (
            np.arange(n_values, dtype=np.float64)
            if value_domain is None
            else np.asarray(value_domain, dtype=np.float64).ravel()
        )
    # One count per item, also when no item has a label (no value column): zeros, not an empty array,
    # so that ``clusters`` (one entry per item) lines up with the items either way.
    m = count_matrix.sum(axis=1) if count_matrix.ndim == 2 else np.zeros(0)
    pairable = m >= 2
    if clusters is not None and np.asarray(clusters).size != m.size:
        raise ValueError("clusters must have one entry per item.")
    units, n_units = _unit_index(
        None if clusters is None else np.asarray(clusters).ravel()[pairable], int(pairable.sum())
    )
    nan = math.nan
    if n_units == 0 or values.size < 2:
        return {level: DeltaInterval(nan, nan, nan, nan, confidence, n_units) for level in levels}
    items = count_matrix[pairable]
    # Distinct count rows (patterns) and each item's pattern: one integer key per row.
    base = int(items.max()) + 1
    keys = items.astype(np.int64) @ (base ** np.arange(values.size, dtype=np.int64))
    # The same codes, in the same (sorted) order, as ``np.unique(keys, return_inverse=True)``, by a hash
    # (few patterns among many items: several times faster); ``first`` holds one item of each pattern.
    pattern, distinct = pd.factorize(keys, sort=True)
    first = np.empty(distinct.size, dtype=np.intp)
    first[pattern] = np.arange(pattern.size)
    patterns = items[first].astype(np.float64)
    rows, cols = np.triu_indices(values.size)
    contributions = patterns[:, rows] * patterns[:, cols]
    contributions[:, rows == cols] -= patterns
    contributions /= (patterns.sum(axis=1) - 1)[:, None]
    frequency = np.bincount(pattern.ravel(), minlength=patterns.shape[0]).astype(np.float64)
    total = frequency @ contributions
    out: dict[str, DeltaInterval] = {}
    for level in levels:
        statistic = functools.partial(_alpha_batch, values=values, level=level)
        estimate = float(statistic(total[None, :])[0])
        per_pattern = contributions @ _gradient(statistic, total)
        scores = np.bincount(units, weights=per_pattern[pattern.ravel()], minlength=n_units)
        low, high, se = _interval(estimate, scores, confidence, (-math.inf, 1.0))
        out[level] = DeltaInterval(estimate, low, high, se, confidence, n_units)
    return out


def delta_cohen_kappa(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    *,
    categories: npt.ArrayLike,
    weights: Literal["linear", "quadratic"] | None = "quadratic",
    clusters: npt.ArrayLike | None = None,
    confidence: float = 0.95,
) -> DeltaInterval:
    """Weighted Cohen's kappa with its delta-method interval (as :func:`~metrics.agreement.bootstrap_cohen_kappa`).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> truth = rng.integers(1, 11, size=3000)
    >>> r = delta_cohen_kappa(truth, np.clip(truth + rng.integers(-1, 2, 3000), 1, 10), categories=range(1, 11))
    >>> bool(r.low < r.estimate < r.high), r.n_units
    (True, 3000)
    """
    x = np.asarray(a, dtype=np.float64).ravel()
    y = np.asarray(b, dtype=np.float64).ravel()
    if x.shape != y.shape:
        raise ValueError("a and b must have the same length.")
    both = ~np.isnan(x) & ~np.isnan(y)
    i, j, k = _category_positions(x[both], y[both], categories)
    w = _disagreement_weights(k, weights)
    cell = i * k + j
    units, n_units = _unit_index(None if clusters is None else np.asarray(clusters).ravel()[both], int(both.sum()))
    if n_units == 0:
        return DeltaInterval(math.nan, math.nan, math.nan, math.nan, confidence, 0)
    total = np.bincount(cell, minlength=k * k).astype(np.float64)

    def statistic(o: np.ndarray) -> np.ndarray:
        return _kappa_batch(o, w)

    estimate = float(statistic(total[None, :])[0])
    gradient = _gradient(statistic, total)
    scores = np.bincount(units, weights=gradient[cell], minlength=n_units)
    low, high, se = _interval(estimate, scores, confidence, (-math.inf, 1.0))
    return DeltaInterval(estimate, low, high, se, confidence, n_units)


def delta_fleiss_kappa(counts: npt.ArrayLike, confidence: float = 0.95) -> DeltaInterval:
    """Fleiss' kappa with its delta-method interval over items (as :func:`~metrics.agreement.bootstrap_fleiss_kappa`).

    Examples
    --------
    >>> r = delta_fleiss_kappa([[2, 0], [0, 2], [1, 1]] * 1000)
    >>> round(r.estimate, 4), bool(r.low < r.estimate < r.high)
    (0.3333, True)
    """
    table = np.asarray(counts, dtype=np.float64)
    estimate = fleiss_kappa(table)  # validates
    n_items = int(table.shape[0])
    if n_items < 2 or not math.isfinite(estimate):
        return DeltaInterval(estimate, math.nan, math.nan, math.nan, confidence, n_items)
    n = float(table[0].sum())
    patterns, frequency = _count_patterns(table)
    agreement_of_item = ((patterns**2).sum(axis=1) - n) / (n * (n - 1))
    contributions = np.column_stack([np.ones(len(patterns)), agreement_of_item, patterns])
    total = frequency.astype(np.float64) @ contributions
    per_pattern = contributions @ _gradient(_fleiss_batch, total)
    # Items of one pattern have one score: the sums of squares weight each pattern by its frequency.
    scores = np.repeat(per_pattern, frequency)
    low, high, se = _interval(estimate, scores, confidence, (-math.inf, 1.0))
    return DeltaInterval(estimate, low, high, se, confidence, n_items)


def fleiss_kappa_interval(
    counts: npt.ArrayLike,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    *,
    min_units: int = ASYMPTOTIC_MIN_UNITS,
) -> CoefficientInterval | DeltaInterval:
    """Fleiss' kappa with the delta method's interval from ``min_units`` items on, else the BCa bootstrap's."""
    table = np.asarray(counts, dtype=np.float64)
    if table.shape[0] >= min_units:
        return delta_fleiss_kappa(table, confidence)
    return bootstrap_fleiss_kappa(table, n_resamples, confidence, seed)


def cohen_kappa_interval(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    *,
    categories: npt.ArrayLike,
    weights: Literal["linear", "quadratic"] | None = "quadratic",
    clusters: npt.ArrayLike | None = None,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    min_units: int = ASYMPTOTIC_MIN_UNITS,
) -> CoefficientInterval | DeltaInterval:
    """Weighted Cohen's kappa with the delta method's interval from ``min_units`` units (items in common,
    or their clusters) on, else the BCa bootstrap's (:func:`~metrics.agreement.bootstrap_cohen_kappa`)."""
    x = np.asarray(a, dtype=np.float64).ravel()
    y = np.asarray(b, dtype=np.float64).ravel()
    both = ~np.isnan(x) & ~np.isnan(y)
    n_units = int(both.sum()) if clusters is None else _n_units(np.asarray(clusters).ravel()[both])
    if n_units >= min_units:
        return delta_cohen_kappa(x, y, categories=categories, weights=weights, clusters=clusters, confidence=confidence)
    return bootstrap_cohen_kappa(
        x,
        y,
        categories=categories,
        weights=weights,
        clusters=clusters,
        n_resamples=n_resamples,
        confidence=confidence,
        seed=seed,
    )


def kappa_matrix_intervals_by_size(
    reliability_data: npt.ArrayLike,
    categories: npt.ArrayLike,
    *,
    weights: Literal["linear", "quadratic"] | None = "quadratic",
    min_common: int = 2,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    clusters: npt.ArrayLike | None = None,
    min_units: int = ASYMPTOTIC_MIN_UNITS,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`~metrics.agreement.kappa_matrix_intervals` with each pair's interval from
    :func:`cohen_kappa_interval` (the delta method's from ``min_units`` units in common on).

    Returns ``low``, ``high`` and ``delta`` (True where the delta method gave the interval).
    """
    results = _pairwise_intervals(
        reliability_data,
        min_common,
        lambda first, second: cohen_kappa_interval(
            first,
            second,
            categories=categories,
            weights=weights,
            clusters=clusters,
            n_resamples=n_resamples,
            confidence=confidence,
            seed=seed,
            min_units=min_units,
        ),
    )
    n_labelers, by_pair = results
    delta = np.zeros((n_labelers, n_labelers), dtype=bool)
    for (first, second), result in by_pair.items():
        delta[first, second] = delta[second, first] = isinstance(result, DeltaInterval)
    return _fill_pairs(results, "low"), _fill_pairs(results, "high"), delta


def alpha_intervals(
    reliability_data: npt.ArrayLike | None = None,
    levels: Sequence[LevelOfMeasurement] = ("ordinal", "interval"),
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    value_domain: npt.ArrayLike | None = None,
    *,
    counts: npt.ArrayLike | None = None,
    clusters: npt.ArrayLike | None = None,
    n_units: int | None = None,
    min_units: int = ASYMPTOTIC_MIN_UNITS,
) -> dict[str, AlphaBootstrap | DeltaInterval]:
    """Alpha at each level with its interval: the delta method's from ``min_units`` units on, else the
    BCa bootstrap's (:func:`~metrics.agreement.bootstrap_alpha_levels`). ``n_units`` (the pairable
    items' units) is counted when not given."""
    if n_units is None:
        if counts is None:
            assert reliability_data is not None
            data = _as_reliability_data(reliability_data)
            pairable = (~np.isnan(data)).sum(axis=0) >= 2 if data.size else np.zeros(0, dtype=bool)
        else:
            pairable = np.asarray(counts).sum(axis=1) >= 2
        n_units = int(pairable.sum()) if clusters is None else _n_units(np.asarray(clusters).ravel()[pairable])
    if n_units >= min_units:
        return dict(
            delta_alpha_levels(
                reliability_data, levels, confidence, value_domain, counts=counts, clusters=clusters
            ).items()
        )
    return dict(
        bootstrap_alpha_levels(
            reliability_data, levels, n_resamples, confidence, seed, value_domain, counts=counts, clusters=clusters
        ).items()
    )


def interval_q(result: AlphaBootstrap | DeltaInterval, threshold: float) -> float:
    """Hayes & Krippendorff's q (the probability that alpha falls short of ``threshold``): the share of
    bootstrap resamples below it, or under the delta method's normal approximation ``Phi((t - a) / se)``."""
    from .krippendorff import alpha_q

    if isinstance(result, AlphaBootstrap):
        return alpha_q(result.resampled, threshold)
    if not (math.isfinite(result.estimate) and math.isfinite(result.se)):
        return math.nan
    if result.se == 0:
        return float(result.estimate < threshold)
    return NormalDist().cdf((threshold - result.estimate) / result.se)
