"""How large a disparity is, relative to an error threshold: read from its interval, never from a point.

Seed 000 judges a score against an error threshold (2 mm there): a gap "well below" it is not
discernible in the outcome. :func:`disparity_level` turns that into a reading of the gap's confidence
interval, as an equivalence test with a stated margin (Lakens 2017 [Lakens2017], "Equivalence tests"):

* ``"negligible"``: the interval's upper bound is below half the threshold (the margin), so a gap of
  half the threshold or more is excluded;
* ``"severe"``: the lower bound reaches the threshold;
* ``"moderate"``: the lower bound reaches the margin (but not the threshold);
* ``"inconclusive"``: otherwise - the data cannot exclude a moderate (or severe) gap, nor show one.

This is the one rule behind every level word of the report, the evaluation page and the gates.
:func:`severity` is the ratio of a single score to the threshold (seed 000's point reading), kept for
the seed's scores; it is never the level a verdict states.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["DISPARITY_RULE", "LEVELS", "Disparity", "Severity", "disparity_level", "severity"]

#: Levels of a disparity, from best to worst (``inconclusive``: neither a negligible nor a moderate gap shown).
LEVELS = ("negligible", "inconclusive", "moderate", "severe")
#: Fraction of the threshold below which a gap is negligible (the equivalence margin).
MARGIN_FRACTION = 0.5
#: The rule in words (report settings, page, README).
DISPARITY_RULE = (
    "disparity read from the gap's 95% interval: negligible when its upper bound is below half the threshold "
    "(equivalence margin), moderate when its lower bound reaches half the threshold, severe when it reaches the "
    "threshold, otherwise inconclusive (a moderate or severe gap can be neither shown nor excluded)"
)


@dataclass(frozen=True)
class Disparity:
    """A gap's level and the words that go with it.

    Attributes
    ----------
    level : str
        One of :data:`LEVELS`.
    margin : float
        Half the threshold.
    threshold : float
        The error threshold.
    reading : str
        E.g. ``"moderate or severe cannot be excluded (95% CI 0.12 to 1.31; margin 1)"``.
    """

    level: str
    margin: float
    threshold: float
    reading: str


def disparity_level(low: float, high: float, threshold: float) -> Disparity:
    """Level of a non-negative gap from its interval ``[low, high]`` (see the module docstring).

    Examples
    --------
    >>> disparity_level(0.0, 0.4, 2.0).level
    'negligible'
    >>> disparity_level(0.77, 1.13, 2.0).reading
    'moderate cannot be excluded (95% CI 0.77 to 1.13; half the threshold 1)'
    >>> disparity_level(1.2, 1.8, 2.0).level, disparity_level(2.1, 3.0, 2.0).level
    ('moderate', 'severe')
    >>> disparity_level(0.1, 2.5, 2.0).reading
    'moderate or severe cannot be excluded (95% CI 0.1 to 2.5; half the threshold 1)'
    """
    if not threshold > 0:
        raise ValueError(f"threshold must be positive, got {threshold}")
    if not (np.isfinite(low) and np.isfinite(high)) or low > high:
        raise ValueError(f"need a finite interval low <= high, got {low}, {high}")
    margin = MARGIN_FRACTION * float(threshold)
    ci = f"95% CI {low:.3g} to {high:.3g}; half the threshold {margin:g}"
    if high < margin:
        level, words = "negligible", f"negligible: a gap of half the threshold or more is excluded ({ci})"
    elif low >= threshold:
        level, words = "severe", f"severe: the gap reaches the threshold ({ci})"
    elif low >= margin:
        level, words = "moderate", f"moderate: the gap reaches half the threshold ({ci})"
    elif high >= threshold:
        level, words = "inconclusive", f"moderate or severe cannot be excluded ({ci})"
    else:
        level, words = "inconclusive", f"moderate cannot be excluded ({ci})"
    return Disparity(level=level, margin=margin, threshold=float(threshold), reading=words)


@dataclass(frozen=True)
class Severity:
    """A single score's size relative to the threshold (seed 000's point reading).

    Attributes
    ----------
    ratio : float
        ``abs(score) / threshold``.
    level : str
        ``"negligible"`` (ratio < 0.5), ``"moderate"`` (< 1) or ``"severe"``: the seed's words for a
        point estimate. Verdicts use :func:`disparity_level` on an interval instead.
    """

    ratio: float
    level: str


def severity(score: float, threshold: float) -> Severity:
    """Ratio of a seed 000 score to the error threshold, and the seed's point word for it.

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
