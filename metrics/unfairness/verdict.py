"""One verdict per continuous attribute: seed 000's slope test read together with the band means.

The straight line of seed 000 and the bands of :mod:`metrics.unfairness.bands` answer two
questions about the same data: "does the error trend with the attribute?" and "does any band
fare worse than another?". The verdict combines them so that its words cannot contradict
either: it is significant when either test is, after Holm's correction for the two tests
(so "significant" keeps its nominal rate under no difference), and its severity is the worst
of the fitted P5-P95 score, the largest band gap, and any band whose mean error alone reaches
the threshold ("severe"). It is never "negligible" while a band says otherwise, and it
names that band.
"""

from __future__ import annotations

from dataclasses import dataclass

from .bands import BandUnfairness
from .continuous import ContinuousUnfairness
from .severity import severity

__all__ = ["LEVELS", "ContinuousVerdict", "continuous_verdict", "holm"]

#: Severity levels from mildest to worst.
LEVELS = ("negligible", "moderate", "severe")


@dataclass(frozen=True)
class ContinuousVerdict:
    """The verdict on one continuous attribute.

    Attributes
    ----------
    significant : bool
        The slope t-test or the band-gap test rejects after Holm's correction over the two.
    p_value : float
        The smaller Holm-adjusted p-value of the two tests.
    level : str
        Worst of the P5-P95 score's severity, the band gap's severity and ``"severe"`` when a
        band's mean error reaches the threshold (one of :data:`LEVELS`).
    worst_band : str
        Band with the highest mean error.
    worse_end : str
        ``"high"`` or ``"low"``: the end of the attribute scale that fares worse (bands).
    driver : str
        What sets the level: ``"score"``, ``"band gap"`` or ``"band mean"``.
    """

    significant: bool
    p_value: float
    level: str
    worst_band: str
    worse_end: str
    driver: str


def holm(p_values: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error rate), in the input order.

    Examples
    --------
    >>> [round(p, 3) for p in holm([0.01, 0.04, 0.03])]
    [0.03, 0.06, 0.06]
    """
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [0.0] * len(p_values)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def continuous_verdict(line: ContinuousUnfairness, bands: BandUnfairness) -> ContinuousVerdict:
    """Combine seed 000's slope test with the band means into one verdict.

    Parameters
    ----------
    line : ContinuousUnfairness
        Slope t-test and P5-P95 score.
    bands : BandUnfairness
        Band means and gap on the same data, with the threshold.

    Returns
    -------
    ContinuousVerdict
        Significance, level and the band that drives it.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics.unfairness import band_unfairness, continuous_unfairness
    >>> rng = np.random.default_rng(0)
    >>> tone = rng.integers(1, 11, 2000)
    >>> errors = 1.0 + 1.5 * (tone >= 9) + rng.normal(0, 0.3, 2000)
    >>> verdict = continuous_verdict(continuous_unfairness(errors, tone),
    ...                              band_unfairness(errors, tone, threshold=2.0))
    >>> verdict.level, verdict.driver, verdict.worst_band, verdict.worse_end
    ('severe', 'band mean', '9-10', 'high')
    """
    adjusted = holm([line.p_value, bands.gap_p_value])
    candidates = [
        (LEVELS.index(severity(line.score, bands.threshold).level), "score"),
        (LEVELS.index(bands.gap_severity.level), "band gap"),
    ]
    if bands.above_threshold:
        candidates.append((LEVELS.index("severe"), "band mean"))
    # Ties go to the band findings: they name a band.
    rank, driver = max(candidates, key=lambda c: (c[0], c[1] != "score", c[1] == "band mean"))
    return ContinuousVerdict(
        significant=bool(min(adjusted) < line.alpha),
        p_value=float(min(adjusted)),
        level=LEVELS[rank],
        worst_band=bands.worst_band,
        worse_end=bands.worse_end,
        driver=driver,
    )
