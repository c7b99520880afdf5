"""One verdict per attribute: is there a disparity, and how large can it be?

Two questions, two answers. **Disparity**: do bands or groups fare differently? Its significance comes
from robust tests (for a continuous attribute: the cluster-robust trend test and the band-gap test,
Holm-adjusted [Holm1979] over the two, so "significant" keeps its nominal rate; for a categorical one: the
pairwise group-gap test), and its level from the largest gap's interval (:func:`metrics.unfairness.
severity.disparity_level`): "negligible" only when a gap of half the threshold is excluded. **Performance**
(how poor the model is for a band or group, judged against the threshold by that group's interval) is
reported apart by :mod:`metrics.unfairness.disparity` and never enters the level: a model whose error is
2.6 mm for everyone is poor for everyone and unfair to no one.

Seed 000's own tests (the least-squares slope t-test, the KS test) are reproduced beside the verdict and
do not decide it: they treat photos of one person as independent and, for the slope, every tone as
equally noisy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .bands import BandUnfairness
from .disparity import PairwiseDisparity
from .robust import RobustSlope
from .severity import LEVELS

__all__ = ["LEVELS", "ContinuousVerdict", "Verdict", "categorical_verdict", "continuous_verdict", "holm"]


@dataclass(frozen=True)
class Verdict:
    """The disparity verdict on one attribute.

    Attributes
    ----------
    significant : bool
        The disparity tests reject (Holm-adjusted over the trend and band tests for a continuous
        attribute).
    p_value : float
        The smallest adjusted p-value.
    level : str
        One of :data:`LEVELS`, from the largest gap's interval (disparity only).
    reading : str
        The level in words, with the interval.
    gap : float
        Largest gap between two bands or groups.
    gap_ci : tuple of float
        Its simultaneous interval.
    worst_band : str
        Band or group with the highest mean error (stated as worst only when ``significant``).
    best_band : str
        The one with the lowest.
    worse_end : str or None
        ``"high"`` / ``"low"``: the end of a continuous attribute that is shown to fare worse (the trend
        test's sign when it rejects, else the band test's end band); None when not shown.
    tests : dict[str, Any]
        Per test: ``{"p_value": raw, "p_adjusted": Holm}``.
    """

    significant: bool
    p_value: float
    level: str
    reading: str
    gap: float
    gap_ci: tuple[float, float]
    worst_band: str
    best_band: str
    worse_end: str | None
    tests: dict[str, Any] = field(default_factory=dict[str, Any])


#: Kept under its former name: the verdict on a continuous attribute.
ContinuousVerdict = Verdict


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


def continuous_verdict(trend: RobustSlope, bands: BandUnfairness) -> Verdict:
    """Combine the robust trend test with the bands into one disparity verdict.

    Parameters
    ----------
    trend : RobustSlope
        The cluster-robust slope test (:func:`metrics.unfairness.robust_slope`).
    bands : BandUnfairness
        Band means and gap on the same data.

    Returns
    -------
    Verdict
        Significance (Holm over the two tests), level from the band gap's interval, direction.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics.unfairness import band_unfairness, robust_slope
    >>> rng = np.random.default_rng(0)
    >>> tone = rng.integers(1, 11, 2000)
    >>> errors = 1.0 + 1.5 * (tone >= 9) + rng.normal(0, 0.3, 2000)
    >>> verdict = continuous_verdict(robust_slope(errors, tone),
    ...                              band_unfairness(errors, tone, threshold=2.0, n_permutations=199))
    >>> verdict.significant, verdict.level, verdict.worst_band, verdict.worse_end
    (True, 'moderate', '9-10', 'high')
    """
    adjusted = holm([trend.p_value, bands.gap_p_value])
    significant = bool(min(adjusted) < bands.alpha)
    worse_end = None
    if adjusted[0] < bands.alpha:
        worse_end = "high" if trend.slope > 0 else "low"
    elif adjusted[1] < bands.alpha:
        worse_end = bands.worse_end
    return Verdict(
        significant=significant,
        p_value=float(min(adjusted)),
        level=bands.disparity.level,
        reading=bands.disparity.reading,
        gap=bands.gap,
        gap_ci=bands.gap_ci,
        worst_band=bands.worst_band,
        best_band=bands.best_band,
        worse_end=worse_end,
        tests={
            "trend": {"p_value": trend.p_value, "p_adjusted": adjusted[0], "method": trend.method},
            "band_gap": {"p_value": bands.gap_p_value, "p_adjusted": adjusted[1], "method": bands.method},
        },
    )


def categorical_verdict(groups: PairwiseDisparity) -> Verdict:
    """The disparity verdict on a categorical attribute from its pairwise group gaps.

    Examples
    --------
    >>> import numpy as np
    >>> from metrics.unfairness import group_disparity
    >>> rng = np.random.default_rng(0)
    >>> sex = rng.choice(["f", "m"], 800)
    >>> errors = 1.0 + 1.2 * (sex == "m") + rng.normal(0, 0.3, 800)
    >>> v = categorical_verdict(group_disparity(errors, sex, threshold=2.0, n_boot=199))
    >>> v.significant, v.worst_band, v.level
    (True, 'm', 'moderate')
    """
    return Verdict(
        significant=groups.significant,
        p_value=groups.p_value,
        level=groups.disparity.level,
        reading=groups.disparity.reading,
        gap=groups.gap,
        gap_ci=groups.gap_ci,
        worst_band=groups.worst,
        best_band=groups.best,
        worse_end=None,
        tests={"group_gap": {"p_value": groups.p_value, "p_adjusted": groups.p_value, "method": groups.method}},
    )
