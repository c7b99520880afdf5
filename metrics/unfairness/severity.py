"""Severity of an unfairness score: its size relative to an error threshold."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Severity", "severity"]


@dataclass(frozen=True)
class Severity:
    """How large an unfairness score is relative to an error threshold.

    Attributes
    ----------
    ratio : float
        ``abs(score) / threshold``.
    level : str
        ``"negligible"`` (ratio < 0.5: "well below" the threshold in the seed's words),
        ``"moderate"`` (0.5 <= ratio < 1) or ``"severe"`` (ratio >= 1: the gap alone
        reaches the error that would change the outcome, e.g. a size recommendation).
    """

    ratio: float
    level: str


def severity(score: float, threshold: float) -> Severity:
    """Judge an unfairness score against an error threshold (seed 000 used 2 mm).

    The seed calls scores "well below the error threshold" not discernible in outcome.
    We make that a rule: ``ratio = |score| / threshold``; below 0.5 is
    ``"negligible"``, from 0.5 up to 1 ``"moderate"``, 1 or more ``"severe"``.
    Significance is a separate question: a non-significant score should be reported as
    such whatever its severity.

    Parameters
    ----------
    score : float
        A categorical or continuous unfairness score (same unit as the threshold).
    threshold : float
        Error that matters downstream; must be positive.

    Returns
    -------
    Severity
        Ratio and level.

    Examples
    --------
    >>> severity(0.3, 2.0)
    Severity(ratio=0.15, level='negligible')
    >>> severity(-2.5, 2.0).level
    'severe'
    """
    if not threshold > 0:
        raise ValueError(f"threshold must be positive, got {threshold}")
    if not np.isfinite(score):
        raise ValueError(f"score must be finite, got {score}")
    ratio = abs(float(score)) / float(threshold)
    level = "negligible" if ratio < 0.5 else "moderate" if ratio < 1.0 else "severe"
    return Severity(ratio=ratio, level=level)
