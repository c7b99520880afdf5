"""Confidence intervals of proportions (pure NumPy/SciPy).

A rate such as "near consensus on 62% of images" says little without its uncertainty: 18 of 29 images
and 1,800 of 2,900 give the same 62%. The Wilson score interval (Wilson 1927) [Wilson1927] keeps good coverage for
small ``n`` and for proportions near 0 or 1, where the textbook Wald interval ``p +- z sqrt(p(1-p)/n)``
collapses to zero width or leaves [0, 1] (Brown, Cai and DasGupta 2001 [CaiDasGupta2001], "Interval Estimation for a
Binomial Proportion"). It equals ``statsmodels.stats.proportion.proportion_confint(k, n,
method="wilson")``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
from numpy.typing import ArrayLike

__all__ = [
    "ProportionDifference",
    "fisher_exact_two_sided",
    "proportion_difference",
    "wilson_interval",
    "wilson_interval_effective",
]


def wilson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of the proportion ``k / n``.

    Parameters
    ----------
    k : int
        Successes, ``0 <= k <= n``.
    n : int
        Trials. ``n == 0`` gives ``(nan, nan)``: no data, no interval.
    confidence : float
        Coverage, strictly between 0 and 1.

    Returns
    -------
    tuple of float
        ``(low, high)`` within [0, 1]; ``low`` is exactly 0 when ``k == 0`` and ``high`` exactly 1 when
        ``k == n``.

    Raises
    ------
    ValueError
        ``k`` or ``n`` negative or not whole, ``k > n``, or ``confidence`` outside (0, 1).

    Examples
    --------
    Newcombe (1998 [Newcombe1998], "Two-sided confidence intervals for the single proportion: comparison of seven
    methods", Statistics in Medicine 17, table I, score method) gives 0.2553 to 0.3662 for 81 of 263 and
    0.0061 to 0.1718 for 1 of 29:

    >>> [round(x, 4) for x in wilson_interval(81, 263)], [round(x, 4) for x in wilson_interval(1, 29)]
    ([0.2553, 0.3662], [0.0061, 0.1718])

    18 of 29 images (62.1%) leaves a wide interval, about 44% to 77%:

    >>> low, high = wilson_interval(18, 29)
    >>> round(low, 3), round(high, 3)
    (0.44, 0.773)

    Nothing observed is still informative, and the interval stays inside [0, 1]:

    >>> low, high = wilson_interval(0, 10)
    >>> low, round(high, 4)
    (0.0, 0.2775)
    >>> wilson_interval(0, 0)
    (nan, nan)
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence!r}")
    if int(k) != k or int(n) != n or k < 0 or n < 0 or k > n:
        raise ValueError(f"need whole numbers 0 <= k <= n, got k={k!r}, n={n!r}")
    k, n = int(k), int(n)
    if n == 0:
        return (math.nan, math.nan)
    return _wilson_bounds(k / n, n, _z(confidence), at_zero=k == 0, at_one=k == n)


def _z(confidence: float) -> float:
    """The two-sided normal quantile of ``confidence`` (the standard library's: importing scipy.stats took
    0.6 s of a lead page's first visit)."""
    return NormalDist().inv_cdf(1 - (1 - confidence) / 2)


def _wilson_bounds(p: float, n: float, z: float, *, at_zero: bool, at_one: bool) -> tuple[float, float]:
    """Wilson score bounds of the share ``p`` over ``n`` (possibly fractional) trials at normal quantile ``z``."""
    z2n = z * z / n
    denominator = 1 + z2n
    centre = (p + z2n / 2) / denominator
    half = z * math.sqrt(max(p * (1 - p), 0.0) / n + z2n / (4 * n)) / denominator
    low = 0.0 if at_zero else max(0.0, centre - half)
    high = 1.0 if at_one else min(1.0, centre + half)
    return (low, high)


def wilson_interval_effective(p: float, n_effective: float, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a share ``p`` whose information is that of ``n_effective`` independent trials.

    For a proportion estimated from clustered data (pairs of labels on the same image, labels of the same
    image), the effective sample size is the number of independent trials that would give the same
    variance: ``n_eff = p (1 - p) / var(p)`` (Kish 1965) [Kish1965]. Korn and Graubard (1998 [KornGraubard1998], "Confidence intervals for
    proportions with small expected number of positive counts estimated from survey data", Survey
    Methodology 24) plug it into an interval for a binomial proportion; this is the Wilson version, which
    keeps ``[0, 1]`` and is not degenerate at 0 or 1. ``n_effective`` need not be whole; with
    ``p = k / n`` and ``n_effective = n`` it is :func:`wilson_interval`.

    Examples
    --------
    >>> wilson_interval_effective(18 / 29, 29) == wilson_interval(18, 29)
    True
    >>> [round(x, 3) for x in wilson_interval_effective(0.62, 14.5)]
    [0.371, 0.818]
    >>> wilson_interval_effective(0.5, 0)
    (nan, nan)
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence!r}")
    if not math.isfinite(p) or not math.isfinite(n_effective) or n_effective <= 0:
        return (math.nan, math.nan)
    if not 0 <= p <= 1:
        raise ValueError(f"p must lie in [0, 1], got {p!r}")
    return _wilson_bounds(p, n_effective, _z(confidence), at_zero=p == 0, at_one=p == 1)


@dataclass(frozen=True)
class ProportionDifference:
    """Two proportions compared (see :func:`proportion_difference`).

    Attributes
    ----------
    difference : float
        ``k1 / n1 - k2 / n2``.
    low, high : float
        Newcombe's hybrid score interval of the difference.
    p_value : float
        Two-sided Fisher exact test of equal proportions.
    differs : bool
        The interval excludes 0: the rates differ beyond chance at this confidence.
    """

    difference: float
    low: float
    high: float
    p_value: float
    differs: bool


def proportion_difference(k1: int, n1: int, k2: int, n2: int, confidence: float = 0.95) -> ProportionDifference:
    """Difference of two independent proportions with Newcombe's interval and Fisher's exact test.

    The interval is Newcombe's hybrid score interval (1998, "Interval estimation for the difference
    between independent proportions: comparison of eleven methods", Statistics in Medicine 17, method
    10), built from the two Wilson intervals; it keeps its coverage for small samples where the Wald
    interval does not. It makes a claim such as "consensus rates are comparable between calibration and
    main phases" testable: they differ beyond chance when the interval excludes 0.

    Parameters
    ----------
    k1, n1, k2, n2 : int
        Successes and trials of each group (``n1, n2 > 0``).
    confidence : float
        Coverage of the interval.

    Returns
    -------
    ProportionDifference

    Examples
    --------
    Newcombe's example (a), 56/70 against 48/80, method 10: 0.0524 to 0.3339.

    >>> result = proportion_difference(56, 70, 48, 80)
    >>> round(result.difference, 4), round(result.low, 4), round(result.high, 4), result.differs
    (0.2, 0.0524, 0.3339, True)
    >>> proportion_difference(18, 29, 60, 100).differs
    False
    """
    if n1 <= 0 or n2 <= 0:
        raise ValueError(f"both groups need trials, got n1={n1!r}, n2={n2!r}")
    l1, u1 = wilson_interval(k1, n1, confidence)
    l2, u2 = wilson_interval(k2, n2, confidence)
    p1, p2 = k1 / n1, k2 / n2
    difference = p1 - p2
    low = difference - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    high = difference + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    p_value = fisher_exact_two_sided(k1, n1, k2, n2)
    return ProportionDifference(difference, low, high, p_value, bool(low > 0 or high < 0))


def fisher_exact_two_sided(k1: int, n1: int, k2: int, n2: int) -> float:
    """Two-sided p-value of Fisher's exact test of ``k1 / n1`` against ``k2 / n2``.

    The sum of the hypergeometric probabilities of every table with the same margins that is no more
    likely than the observed one (relative tolerance 1e-7, as ``scipy.stats.fisher_exact``, which the
    tests hold it equal to; written here because importing ``scipy.stats`` took 0.6 s of a lead page's
    first visit).

    Examples
    --------
    >>> round(fisher_exact_two_sided(3, 4, 1, 4), 4)
    0.4857
    """
    total, successes = n1 + n2, k1 + k2
    low, high = max(0, successes - n2), min(successes, n1)
    x = np.arange(low, high + 1)

    def log_comb(n: ArrayLike, k: ArrayLike) -> np.ndarray:
        n_, k_ = np.asarray(n), np.asarray(k)
        return np.asarray(_lgamma(n_ + 1) - _lgamma(k_ + 1) - _lgamma(n_ - k_ + 1))

    log_p = log_comb(n1, x) + log_comb(n2, successes - x) - log_comb(total, successes)
    observed = log_p[k1 - low]
    p = np.exp(log_p)
    return float(min(1.0, p[log_p <= observed + math.log1p(1e-7)].sum()))


def _lgamma(values: ArrayLike) -> np.ndarray:
    result: np.ndarray = np.vectorize(math.lgamma, otypes=[float])(np.asarray(values, dtype=float))
    return result
