"""Intervals of shares whose units are clustered by image: pairs of labels, labels of a tone.

"Pairs of labels that agree exactly" pools every pair of labels on every image: an image labelled by 4
labelers gives 6 pairs, and those 6 pairs are not independent (an easy image makes them all agree, a hard
one makes them all disagree). A Wilson interval over pairs treats the 6 as 6 independent trials and is
too narrow: in a seeded simulation (``tests/metrics/test_agreement_clustered.py``; 4 labels per image,
40% of images hard) it covered the true rate 69-84% of the time instead of 95%, while the interval below
covered it 95-97% (10, 30 and 100 images; exact and within-one agreement; 2 to 4 labels per image).

:func:`clustered_proportion` treats the share as a ratio estimator over images (clusters):

* estimate ``R = sum(y_i) / sum(m_i)`` (``y_i`` successes, ``m_i`` trials of image ``i``; the pooled
  share, the same number as :func:`~metrics.agreement.percent_exact`);
* its linearised, cluster-robust variance (Cochran 1977 [Cochran1977], "Sampling Techniques", 6.11; the CR1 small-
  sample factor ``n / (n - 1)``)::

      var(R) = n / (n - 1) * sum((y_i - R m_i) ** 2) / (sum m_i) ** 2       (n images with m_i > 0)

* the effective number of independent trials ``n_eff = R (1 - R) / var(R)`` (Kish's design effect
  ``deff = M / n_eff`` with ``M = sum m_i``; truncated at ``deff >= 1``, so ``n_eff <= M``), shrunk for
  the ``n - 1`` degrees of freedom as Korn and Graubard (1998) [KornGraubard1998] do: ``n_eff * (z / t_{n-1}) ** 2``;
* the Wilson interval of ``R`` over ``n_eff`` trials (:func:`metrics.intervals.wilson_interval_effective`).

When every pair agrees (or none does) the variance is 0 and says nothing about the clustering; the
interval then assumes the worst case, every pair of an image alike (``n_eff`` = the number of images).

:func:`cluster_bootstrap_proportion` is the image-cluster bootstrap of the same estimate (seeded,
percentile), for cross-checks: it agrees with the analytic interval on large samples and under-covers
on small ones (86-89% at 10 images in the same simulation), which is why the analytic one is used.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from ..intervals import wilson_interval_effective
from ._data import _as_reliability_data, _domain

__all__ = [
    "ClusteredProportion",
    "cluster_bootstrap_proportion",
    "clustered_proportion",
    "pairwise_agreement_counts",
    "pairwise_agreement_interval",
]


@dataclass(frozen=True)
class ClusteredProportion:
    """A pooled share over clustered trials with its cluster-robust interval.

    Attributes
    ----------
    estimate : float
        ``sum(successes) / sum(trials)``; NaN without trials.
    low, high : float
        The interval (NaN with fewer than 2 clusters).
    n_clusters : int
        Clusters (images) with at least one trial.
    n_trials : float
        ``sum(trials)`` (pairs of labels, labels).
    n_effective : float
        Independent trials the data are worth (after the degrees-of-freedom shrinkage).
    design_effect : float
        ``n_trials / n_effective`` before the shrinkage (1: no clustering; NaN at a share of 0 or 1).
    confidence : float
    method : str
    """

    estimate: float
    low: float
    high: float
    n_clusters: int
    n_trials: float
    n_effective: float
    design_effect: float
    confidence: float
    method: str = "cluster-robust ratio estimator, Wilson interval on the effective sample size"


def clustered_proportion(
    successes: npt.ArrayLike, trials: npt.ArrayLike, confidence: float = 0.95
) -> ClusteredProportion:
    """Share ``sum(successes) / sum(trials)`` with an interval that respects the clusters.

    Parameters
    ----------
    successes, trials : array_like, shape (n_clusters,)
        Per cluster (image): successes (e.g. agreeing pairs) and trials (pairs), ``0 <= successes <=
        trials``. Need not be whole (a label of two adjacent tones counts half to each). Clusters without
        trials are ignored.
    confidence : float
        Coverage of the interval.

    Returns
    -------
    ClusteredProportion

    Examples
    --------
    Six images with 4 labels each (6 pairs): all pairs agree on three images, one pair on the others.
    21 of 36 pairs agree; Wilson over the 36 pairs would say 42% to 73%; the images say much less:

    >>> r = clustered_proportion([6, 6, 6, 1, 1, 1], [6, 6, 6, 6, 6, 6])
    >>> round(r.estimate, 4), round(r.low, 3), round(r.high, 3), round(r.design_effect, 2)
    (0.5833, 0.197, 0.889, 5.14)

    Independent trials (one per cluster) give Wilson's interval, shrunk for the degrees of freedom:

    >>> r = clustered_proportion([1] * 60 + [0] * 40, [1] * 100)
    >>> round(r.design_effect, 3), round(r.low, 3), round(r.high, 3)
    (1.01, 0.5, 0.692)
    """
    y = np.asarray(successes, dtype=np.float64).ravel()
    m = np.asarray(trials, dtype=np.float64).ravel()
    if y.shape != m.shape:
        raise ValueError(f"successes and trials differ in length: {y.size} and {m.size}")
    if np.any(m < 0) or np.any(y < 0) or np.any(y > m + 1e-9):
        raise ValueError("need 0 <= successes <= trials in every cluster")
    keep = m > 0
    y, m = y[keep], m[keep]
    n = int(y.size)
    total = float(m.sum())
    nan = math.nan
    if n == 0:
        return ClusteredProportion(nan, nan, nan, 0, 0.0, nan, nan, confidence)
    estimate = min(1.0, max(0.0, float(y.sum()) / total))
    if n < 2:
        return ClusteredProportion(estimate, nan, nan, n, total, nan, nan, confidence)
    residual = y - estimate * m
    # A sum of squares, not ``@``: OpenBLAS's threads wait for each other on a busy machine (30-45 ms per
    # 100,000 images; the dashboard computes some 40 of these shares).
    variance = n / (n - 1) * float(np.square(residual).sum()) / total**2
    binomial = estimate * (1 - estimate)
    if binomial <= 0 or variance <= 0:
        # A share of 0 or 1 (or images that all agree to the same share): the data cannot show how
        # alike the trials of an image are; assume the worst, one independent trial per image.
        n_eff, design_effect = float(n), (nan if binomial <= 0 else total / n)
    else:
        n_eff = min(total, binomial / variance)
        design_effect = total / n_eff
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    n_eff *= (z / _student_t_quantile(n - 1, confidence)) ** 2
    low, high = wilson_interval_effective(estimate, n_eff, confidence)
    return ClusteredProportion(estimate, low, high, n, total, n_eff, design_effect, confidence)


# From this many degrees of freedom the Cornish-Fisher expansion of the t quantile is within 1e-13 of it
# (its first omitted term is O(df ** -5)); below, Newton's method on the summed distribution function.
_T_EXPANSION_DF = 1000


def _student_t_two_sided(t: float, df: int) -> float:
    """``P(|T| <= t)`` for Student's t with integer ``df`` (Abramowitz and Stegun 26.7.3-4 [AbramowitzStegun1964])."""
    theta = math.atan(t / math.sqrt(df))
    sin, cos2 = math.sin(theta), math.cos(theta) ** 2
    if df == 1:
        return 2 * theta / math.pi
    # The series' terms are running products of cos(theta)**2 times ratios of odd and even numbers.
    k = np.arange(1, df // 2 if df % 2 == 0 else (df - 1) // 2, dtype=np.float64)
    ratios = (2 * k - 1) / (2 * k) if df % 2 == 0 else (2 * k) / (2 * k + 1)
    total = 1.0 + float(np.cumprod(cos2 * ratios).sum())
    if df % 2 == 0:
        return sin * total
    return 2 / math.pi * (theta + sin * math.cos(theta) * total)


@functools.lru_cache(maxsize=256)
def _student_t_quantile(df: int, confidence: float) -> float:
    """The two-sided ``confidence`` quantile of Student's t with integer ``df`` (``t.ppf(1 - tail, df)``).

    Written here because importing ``scipy.special`` (for ``stdtrit``) took 0.7 s of CPU of a fresh
    process's first consensus computation; the tests hold it to ``scipy.special.stdtrit`` within 1e-12.
    Large ``df``: the Cornish-Fisher expansion in the normal quantile (Abramowitz and Stegun 26.7.5);
    otherwise Newton's method on the exact distribution function, started from that expansion.
    """
    x = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    x2 = x * x
    g = (
        x * (x2 + 1) / 4,
        x * ((5 * x2 + 16) * x2 + 3) / 96,
        x * (((3 * x2 + 19) * x2 + 17) * x2 - 15) / 384,
        x * ((((79 * x2 + 776) * x2 + 1482) * x2 - 1920) * x2 - 945) / 92160,
    )
    t = x + sum(term / float(df) ** (i + 1) for i, term in enumerate(g))
    if df >= _T_EXPANSION_DF:
        return t
    if df <= 2:  # closed forms
        tail = 1 - confidence
        if df == 1:
            return math.tan(math.pi * (0.5 - tail / 2))
        return math.sqrt(2 / (tail * (2 - tail)) - 2)
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    t = max(t, x)
    for _ in range(100):
        density = math.exp(log_norm - (df + 1) / 2 * math.log1p(t * t / df))
        step = (_student_t_two_sided(t, df) - confidence) / (2 * density)
        t -= step
        if abs(step) <= 1e-15 * t:
            break
    return t


def cluster_bootstrap_proportion(
    successes: npt.ArrayLike,
    trials: npt.ArrayLike,
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile interval of ``sum(successes) / sum(trials)`` from resampling whole clusters (seeded).

    Examples
    --------
    >>> low, high = cluster_bootstrap_proportion([6, 6, 6, 1, 1, 1], [6] * 6, seed=1)
    >>> 0.1 < low < 0.4 < 0.8 < high <= 1.0
    True
    """
    y = np.asarray(successes, dtype=np.float64).ravel()
    m = np.asarray(trials, dtype=np.float64).ravel()
    keep = m > 0
    y, m = y[keep], m[keep]
    if y.size < 2:
        return (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, y.size, size=(n_resamples, y.size))
    shares = y[picks].sum(axis=1) / m[picks].sum(axis=1)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(shares, [tail, 100 - tail])
    return (float(low), float(high))


#: Up to this many pairs of labelers, :func:`pairwise_agreement_counts` compares the labelers pair by pair
#: (4 labelers: 6 passes over the items); above, through the items x values count matrix.
_PAIRS_BY_LABELER_MAX = 15


def pairwise_agreement_counts(reliability_data: npt.ArrayLike, tolerance: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Per item: pairs of labels whose values differ by at most ``tolerance``, and all pairs.

    ``tolerance=0``: exact agreement (:func:`~metrics.agreement.percent_exact` is ``agreeing.sum() /
    pairs.sum()``); ``tolerance=1``: within one tone.

    Examples
    --------
    >>> agreeing, pairs = pairwise_agreement_counts([[1, 2, 3], [1, 3, np.nan], [1, 2, 3]])
    >>> agreeing.tolist(), pairs.tolist()
    ([3.0, 1.0, 1.0], [3.0, 3.0, 1.0])
    """
    data = _as_reliability_data(reliability_data)
    n_items = data.shape[1] if data.ndim == 2 else 0
    if data.size == 0:
        return np.zeros(n_items), np.zeros(n_items)
    n_labelers = data.shape[0]
    if tolerance >= 0 and n_labelers * (n_labelers - 1) // 2 <= _PAIRS_BY_LABELER_MAX:
        # Few labelers: count each pair of labelers' agreeing items directly (both counts are whole
        # numbers, so they equal the count matrix's below exactly).
        present = ~np.isnan(data)
        m = present.sum(axis=0).astype(np.float64)
        agreeing_pairs = np.zeros(n_items, dtype=np.int64)
        for a in range(n_labelers - 1):
            for b in range(a + 1, n_labelers):
                agreeing_pairs += np.abs(data[a] - data[b]) <= tolerance  # NaN compares False
        return agreeing_pairs.astype(np.float64), m * (m - 1) / 2
    values, counts = _domain(data, None)
    counts = counts.astype(np.float64)
    m = counts.sum(axis=1)
    close = (np.abs(np.subtract.outer(values, values)) <= tolerance).astype(np.float64)
    agreeing = (np.einsum("iv,vw,iw->i", counts, close, counts) - m) / 2
    return agreeing, m * (m - 1) / 2


def pairwise_agreement_interval(
    reliability_data: npt.ArrayLike, tolerance: float = 0.0, confidence: float = 0.95
) -> ClusteredProportion:
    """Share of pairs of labels that agree (within ``tolerance``), with its image-clustered interval.

    Examples
    --------
    >>> r = pairwise_agreement_interval([[1, 2, 3, 4, 5], [1, 3, 3, 4, 6], [1, 2, 2, 4, 5]])
    >>> round(r.estimate, 4), r.n_clusters, r.n_trials
    (0.6, 5, 15.0)
    """
    agreeing, pairs = pairwise_agreement_counts(reliability_data, tolerance)
    return clustered_proportion(agreeing, pairs, confidence)
