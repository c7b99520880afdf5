"""Confidence intervals of proportions (pure NumPy/SciPy).

A rate such as "near consensus on 62% of images" says little without its uncertainty: 18 of 29 images
and 1,800 of 2,900 give the same 62%. The Wilson score interval (Wilson 1927) keeps good coverage for
small ``n`` and for proportions near 0 or 1, where the textbook Wald interval ``p +- z sqrt(p(1-p)/n)``
collapses to zero width or leaves [0, 1] (Brown, Cai and DasGupta 2001, "Interval Estimation for a
Binomial Proportion"). It equals ``statsmodels.stats.proportion.proportion_confint(k, n,
method="wilson")``.
"""

from __future__ import annotations

import math

__all__ = ["wilson_interval"]


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
    Newcombe (1998, "Two-sided confidence intervals for the single proportion: comparison of seven
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
    from scipy.stats import norm

    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence!r}")
    if int(k) != k or int(n) != n or k < 0 or n < 0 or k > n:
        raise ValueError(f"need whole numbers 0 <= k <= n, got k={k!r}, n={n!r}")
    k, n = int(k), int(n)
    if n == 0:
        return (math.nan, math.nan)
    z = float(norm.ppf(1 - (1 - confidence) / 2))
    p = k / n
    z2n = z * z / n
    denominator = 1 + z2n
    centre = (p + z2n / 2) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z2n / (4 * n)) / denominator
    low = 0.0 if k == 0 else max(0.0, centre - half)
    high = 1.0 if k == n else min(1.0, centre + half)
    return (low, high)
