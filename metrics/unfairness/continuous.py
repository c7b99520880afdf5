"""Continuous unfairness (seed 000, e.g. skin tone, body shape): least-squares slope and its t-test."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ._checks import _as_errors, _check_alpha

__all__ = ["ContinuousUnfairness", "continuous_unfairness"]


@dataclass(frozen=True)
class ContinuousUnfairness:
    """Unfairness with respect to a continuous attribute (seed 000: body shape, skin tone).

    Attributes
    ----------
    slope, intercept : float
        Least-squares line ``error = intercept + slope * attribute``.
    p_value : float
        Two-sided p-value of the t-test of ``slope == 0``.
    significant : bool
        ``p_value < alpha``.
    score : float
        ``slope * (P_high - P_low)``: the fitted error at the high percentile of the
        attribute minus that at the low percentile. Positive when the error grows with
        the attribute (e.g. towards deeper tones on a light-to-deep scale).
    stderr : float
        Standard error of the slope.
    rvalue : float
        Pearson correlation coefficient.
    percentiles : tuple of float
        The two percentiles used (default 5 and 95).
    attribute_range : tuple of float
        The attribute values at those percentiles (``numpy.percentile``, linear).
    n : int
        Number of samples.
    alpha : float
        Significance level used.
    """

    slope: float
    intercept: float
    p_value: float
    significant: bool
    score: float
    stderr: float
    rvalue: float
    percentiles: tuple[float, float]
    attribute_range: tuple[float, float]
    n: int
    alpha: float


def continuous_unfairness(
    errors: Sequence[float] | np.ndarray,
    attribute: Sequence[float] | np.ndarray,
    *,
    alpha: float = 0.05,
    percentiles: tuple[float, float] = (5, 95),
) -> ContinuousUnfairness:
    """Unfairness of a per-sample error along a continuous attribute.

    Fits ``error = intercept + slope * attribute`` by least squares
    (:func:`scipy.stats.linregress`); the slope is significant when the two-sided t-test
    gives ``p < alpha``. The score is the fitted difference between the attribute's
    high and low percentiles, ``slope * (P95 - P5)``, in the units of the error.

    Parameters
    ----------
    errors : array-like of float, shape (n,)
        Per-sample error, larger is worse. Must be finite.
    attribute : array-like of float, shape (n,)
        Attribute value per sample (e.g. normalised body cross-section, mean skin-tone
        label). Must be finite and not constant.
    alpha : float, default 0.05
        Significance level.
    percentiles : tuple of two floats, default (5, 95)
        Low and high percentile of the attribute between which the score is measured.

    Returns
    -------
    ContinuousUnfairness
        Line, test and score.

    Raises
    ------
    ValueError
        Length mismatch, NaN values, fewer than 3 samples, or a constant attribute.

    Examples
    --------
    >>> result = continuous_unfairness([1.0, 1.5, 1.9, 2.6, 3.0], [1, 2, 3, 4, 5])
    >>> round(result.slope, 3), round(result.score, 3)
    (0.51, 1.836)
    """
    from scipy.stats import linregress

    _check_alpha(alpha)
    values = _as_errors(errors)
    x = np.asarray(attribute, dtype=np.float64)
    if x.shape != values.shape:
        raise ValueError(f"errors and attribute differ in length: {values.size} vs {x.size}")
    bad = np.flatnonzero(~np.isfinite(x))
    if bad.size:
        raise ValueError(f"attribute contains {bad.size} NaN or infinite value(s), first at index {bad[:5].tolist()}")
    if values.size < 3:
        raise ValueError(f"need at least 3 samples for a slope t-test, got {values.size}")
    if np.all(x == x[0]):
        raise ValueError("the attribute is constant: no slope can be fitted")
    low_pct, high_pct = (float(p) for p in percentiles)
    if not 0 <= low_pct < high_pct <= 100:
        raise ValueError(f"percentiles must satisfy 0 <= low < high <= 100, got {percentiles}")
    fit = linregress(x, values)
    low, high = np.percentile(x, [low_pct, high_pct])
    return ContinuousUnfairness(
        slope=float(fit.slope),
        intercept=float(fit.intercept),
        p_value=float(fit.pvalue),
        significant=bool(fit.pvalue < alpha),
        score=float(fit.slope * (high - low)),
        stderr=float(fit.stderr),
        rvalue=float(fit.rvalue),
        percentiles=(low_pct, high_pct),
        attribute_range=(float(low), float(high)),
        n=int(values.size),
        alpha=float(alpha),
    )
