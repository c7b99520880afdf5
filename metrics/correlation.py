"""Rank correlation of paired measurements with a bootstrap interval.

Used to compare human skin-tone labels with a colorimetric baseline (the mean
label of each image against its ITA); pure NumPy/SciPy, never imports Django.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["resample_ranks", "spearman_bootstrap", "spearman_fisher_interval"]


def spearman_bootstrap(
    x: Sequence[float] | np.ndarray,
    y: Sequence[float] | np.ndarray,
    *,
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
    bootstrap_max_n: int | None = 5_000,
) -> dict[str, Any]:
    """Spearman's rho with a percentile bootstrap interval over the paired items (large samples:
    Fisher's z interval with Bonett and Wright's variance).

    Pairs are resampled with replacement; in each resample, copies of one item
    and equal values share the mean of the ranks they occupy (as
    ``scipy.stats.spearmanr`` would rank the resampled data), computed from the
    resample's counts by :func:`resample_ranks` instead of sorting every
    resample.

    Above ``bootstrap_max_n`` pairs the bootstrap costs seconds to minutes (2,000 resamples of
    100,000 pairs) and buys nothing: the interval is then Fisher's z interval with Bonett and
    Wright's (2000) variance for Spearman's rho, ``tanh(atanh(rho) +- z * sqrt((1 + rho**2 / 2) /
    (n - 3)))``: at these sizes it holds the bootstrap's interval, slightly wider as |rho| nears 1
    (a test compares the two and checks its coverage on simulations). ``interval_method`` says which was used.

    Parameters
    ----------
    x, y : sequence of float
        Paired values (one pair per image).
    n_resamples : int
        Bootstrap resamples (pairs drawn with replacement).
    seed : int
        Seed of ``numpy.random.default_rng``; the same seed gives the same interval.
    confidence : float
        Coverage of the interval.
    bootstrap_max_n : int or None
        Largest number of pairs given a bootstrap interval (None: always bootstrap).

    Returns
    -------
    dict
        ``n``, ``rho``, ``p_value`` (scipy's), ``ci_low``, ``ci_high``,
        ``n_resamples``, ``seed``, ``confidence``, ``interval_method`` (``"bootstrap"`` or
        ``"fisher_z_bonett_wright"``); statistics are None when
        undefined (fewer than 3 pairs or a constant variable). Resamples that are
        constant are left out of the interval.

    Examples
    --------
    >>> r = spearman_bootstrap([1, 2, 3, 4, 5], [5, 6, 7, 8, 7], n_resamples=200, seed=0)
    >>> round(r["rho"], 4), r["n"]
    (0.8208, 5)
    >>> bool(r["ci_low"] <= r["rho"] <= r["ci_high"])
    True
    >>> spearman_bootstrap([1, 2], [2, 1])["rho"] is None
    True
    """
    xs = np.asarray(x, dtype=float)
    ys = np.asarray(y, dtype=float)
    result: dict[str, Any] = {
        "n": int(xs.size),
        "rho": None,
        "p_value": None,
        "ci_low": None,
        "ci_high": None,
        "n_resamples": n_resamples,
        "seed": seed,
        "confidence": confidence,
        "interval_method": "bootstrap",
    }
    if xs.size < 3 or np.ptp(xs) == 0 or np.ptp(ys) == 0:
        return result
    rho, p_value = spearman_rho(xs, ys)
    result["rho"], result["p_value"] = float(rho), float(p_value)
    if bootstrap_max_n is not None and xs.size > bootstrap_max_n:
        result.update(spearman_fisher_interval(result["rho"], int(xs.size), confidence))
        result["interval_method"], result["n_resamples"], result["seed"] = "fisher_z_bonett_wright", 0, None
        return result
    rng = np.random.default_rng(seed)
    rhos = []
    # Chunks keep the (resamples x n) arrays to a few MB for large projects.
    chunk = max(1, min(n_resamples, 1_000_000 // xs.size))
    for start in range(0, n_resamples, chunk):
        rows = min(chunk, n_resamples - start)
        index = rng.integers(0, xs.size, size=(rows, xs.size))
        # How often each image is drawn; a resample is the originals weighted by it.
        counts = np.bincount((index + xs.size * np.arange(rows)[:, None]).ravel(), minlength=rows * xs.size)
        counts = counts.reshape(rows, xs.size).astype(float)
        rx = resample_ranks(xs, counts)
        ry = resample_ranks(ys, counts)
        mx = (counts * rx).sum(axis=1, keepdims=True) / xs.size
        my = (counts * ry).sum(axis=1, keepdims=True) / xs.size
        dx, dy = rx - mx, ry - my
        denominator = np.sqrt((counts * dx * dx).sum(axis=1) * (counts * dy * dy).sum(axis=1))
        with np.errstate(invalid="ignore", divide="ignore"):
            rhos.append((counts * dx * dy).sum(axis=1) / denominator)
    values = np.concatenate(rhos)
    values = values[np.isfinite(values)]
    if values.size:
        alpha = (1.0 - confidence) / 2.0
        low, high = np.quantile(values, [alpha, 1.0 - alpha])
        result["ci_low"], result["ci_high"] = float(low), float(high)
    return result


def _average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks, ties averaged (``scipy.stats.rankdata``'s; every rank is a whole or half number)."""
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    return ((ends - counts + 1 + ends) / 2.0)[inverse.ravel()]


def spearman_rho(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Spearman's rho and its two-sided p-value, as ``scipy.stats.spearmanr(x, y)`` computes them (the same
    ranks, ``np.corrcoef`` of the same array, the t distribution's ``stdtr``), without importing
    ``scipy.stats``: that import adds 45 MB to a release job for the rest of its life (issue 25).
    NaN in either gives NaN, NaN; ``tests/metrics/test_correlation.py`` holds it equal to scipy's.
    """
    from scipy.special import stdtr

    xs, ys = np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()
    n = xs.size
    if n <= 1 or np.isnan(xs).any() or np.isnan(ys).any() or (xs[0] == xs).all() or (ys[0] == ys).all():
        return math.nan, math.nan
    # scipy ranks the columns of column_stack((x, y)) with apply_along_axis: a (2, n) buffer, transposed.
    ranked = np.empty((2, n))
    ranked[0], ranked[1] = _average_ranks(xs), _average_ranks(ys)
    rs = np.asarray(np.corrcoef(ranked.T, rowvar=False), dtype=np.float64)
    dof = n - 2
    with np.errstate(divide="ignore"):
        t = rs * np.sqrt((dof / ((rs + 1.0) * (1.0 - rs))).clip(0))
    p = 2 * stdtr(dof, -np.abs(t))
    return float(rs[1, 0]), float(p[1, 0])


def spearman_fisher_interval(rho: float, n: int, confidence: float = 0.95) -> dict[str, float]:
    """Fisher's z interval of Spearman's rho with Bonett and Wright's (2000) [BonettWright2000] variance ``(1 + rho**2 / 2) / (n - 3)``.

    Examples
    --------
    >>> r = spearman_fisher_interval(0.5, 1003)
    >>> round(r["ci_low"], 4), round(r["ci_high"], 4)
    (0.4491, 0.5477)
    """
    from scipy.special import ndtri  # scipy.stats.norm.ppf's own function, without importing scipy.stats

    z = ndtri(0.5 + confidence / 2.0)
    rho = float(np.clip(rho, -0.999999, 0.999999))
    half = z * np.sqrt((1.0 + rho * rho / 2.0) / (n - 3))
    centre = np.arctanh(rho)
    return {"ci_low": float(np.tanh(centre - half)), "ci_high": float(np.tanh(centre + half))}


def resample_ranks(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Average ranks (1-based, ties averaged) of ``values`` in each weighted resample.

    ``counts[b, j]`` is how often item ``j`` is in resample ``b``. Equal values
    (including copies of one item) share the mean of the ranks they occupy, as in
    ``scipy.stats.rankdata``; computed in O(n) per resample from cumulative counts
    instead of sorting every resample.

    Parameters
    ----------
    values : numpy.ndarray, shape (n,)
        The original items' values.
    counts : numpy.ndarray, shape (n_resamples, n)
        How often each item is drawn in each resample (rows sum to the
        resample size).

    Returns
    -------
    numpy.ndarray of float, shape (n_resamples, n)
        The rank each item's copies get in each resample. The entry of an item
        drawn zero times is a placeholder (it is weighted by its count, 0).

    Examples
    --------
    Item 0 drawn twice, item 1 not, item 2 once: the resample is
    ``[10, 10, 30]`` with ranks ``[1.5, 1.5, 3]``.

    >>> ranks = resample_ranks(np.array([10.0, 20.0, 30.0]), np.array([[2.0, 0.0, 1.0]]))
    >>> ranks[0, [0, 2]].tolist()
    [1.5, 3.0]
    """
    unique, inverse = np.unique(values, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(inverse[order]) != 0])
    group_counts = np.add.reduceat(counts[:, order], starts, axis=1)
    group_ranks = np.cumsum(group_counts, axis=1) - (group_counts - 1.0) / 2.0
    return group_ranks[:, inverse]
