"""Mean error per group (tone band, gender, body shape) and the largest gap between two groups.

This is the shared core of every disparity verdict of the report. Each group's mean error gets a
cluster-robust interval; every pair of groups is compared at once by :func:`metrics.unfairness.robust.
contrast_max_t` (wild cluster bootstrap of the largest studentised difference, family-wise over the
pairs), whose critical value gives simultaneous intervals of every pairwise difference, and from them
an interval of the largest true gap ``max_gh |mu_g - mu_h|``:

    [max(0, max_gh (|d_gh| - c se_gh)), max_gh (|d_gh| + c se_gh)]

It excludes 0 exactly when the test rejects. The level (:func:`metrics.unfairness.severity.
disparity_level`) is read from that interval. Two more readings per group answer other questions:

* **performance**: is the group's mean error itself above the threshold? Judged by the group's own
  interval (``above``: the whole interval is above; ``may reach``: it contains the threshold). A model
  poor for everyone is poor in every group and unfair in none; the two are reported apart.
* **power**: the minimum detectable gap, ``(c + z_0.80) sqrt(se_g^2 + se_ref^2)`` against the largest
  other group: the gap this test would find 80% of the time. Each ``se`` is the larger of the group's own
  and the one its size implies from the pooled spread (``s sqrt(deff / n_g)``): a band of four images
  whose errors happen to agree must not look precise. When the gap exceeds half the threshold, "not
  significant" for that group means "too few to tell", not "fair".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .robust import DEFAULT_BOOTSTRAPS, Z_POWER_80, contrast_max_t
from .severity import Disparity, disparity_level

__all__ = [
    "GroupReading",
    "PairGap",
    "PairwiseDisparity",
    "pairwise_contrasts",
    "pairwise_disparity",
    "performance_reading",
]


@dataclass(frozen=True)
class GroupReading:
    """One group's mean error and what it says.

    Attributes
    ----------
    label : str
        The group (e.g. ``"9-10"``, ``"f"``).
    n, n_clusters : int
        Samples and distinct clusters (people).
    mean, se, ci_low, ci_high : float or None
        Mean error, its cluster-robust standard error and ``1 - alpha`` interval (None when it cannot
        be estimated: no sample, or fewer than 2 clusters).
    tested : bool
        Whether the group enters the pairwise test (at least 2 clusters).
    min_detectable_gap : float or None
        Gap to the largest other group this test finds with 80% power.
    reading : str
        ``"higher than 1-2, 3-4"`` / ``"lower than 9-10"`` (its significant pairs), ``"within half the threshold"`` (every pair it is in has a
        simultaneous upper bound below half the threshold), ``"too few to tell"`` (otherwise, when the
        minimum detectable gap is above half the threshold), ``"no gap detected"``, ``"too few to test"``
        or ``"no samples"``.
    performance : str
        ``"above the threshold"``, ``"may reach the threshold"``, ``"below the threshold"`` or
        ``"unknown"`` (no interval).
    """

    label: str
    n: int
    n_clusters: int
    mean: float | None
    se: float | None
    ci_low: float | None
    ci_high: float | None
    tested: bool
    min_detectable_gap: float | None
    reading: str
    performance: str


@dataclass(frozen=True)
class PairGap:
    """One pair of groups: ``higher`` has the higher mean error.

    Attributes
    ----------
    higher, lower : str
        Group labels.
    gap : float
        ``mean(higher) - mean(lower)`` (non-negative).
    ci_low, ci_high : float
        Simultaneous interval of that difference (may reach below 0).
    p_adjusted : float
        Family-wise adjusted p-value (max-t).
    significant : bool
        ``p_adjusted < alpha``.
    """

    higher: str
    lower: str
    gap: float
    ci_low: float
    ci_high: float
    p_adjusted: float
    significant: bool


@dataclass(frozen=True)
class PairwiseDisparity:
    """Mean error per group and the largest gap between groups, with its level.

    Attributes
    ----------
    groups : tuple of GroupReading
        In the given order.
    pairs : tuple of PairGap
        Every pair of tested groups.
    gap : float
        Largest minus smallest tested group mean.
    gap_ci : tuple of float
        Interval of the largest true gap (module docstring).
    p_value : float
        p-value of "every group mean is equal".
    significant : bool
        ``p_value < alpha`` (equivalently ``gap_ci[0] > 0``).
    critical : float
        Critical value of the simultaneous intervals.
    disparity : Disparity
        The gap's level, from ``gap_ci``.
    worst, best : str
        Tested groups with the highest and lowest mean error.
    threshold, alpha : float
        Settings.
    n_boot : int
        Bootstrap resamples.
    n_clusters : int
        Clusters in all.
    clustered : bool
        Whether clusters were given.
    method : str
        In words.
    """

    groups: tuple[GroupReading, ...]
    pairs: tuple[PairGap, ...]
    gap: float
    gap_ci: tuple[float, float]
    p_value: float
    significant: bool
    critical: float
    disparity: Disparity
    worst: str
    best: str
    threshold: float
    alpha: float
    n_boot: int
    n_clusters: int
    clustered: bool
    method: str


def performance_reading(mean: float | None, low: float | None, high: float | None, threshold: float) -> str:
    """Is a mean error above the threshold, judged by its interval?

    Examples
    --------
    >>> performance_reading(2.6, 2.5, 2.7, 2.0), performance_reading(1.9, 1.7, 2.1, 2.0)
    ('above the threshold', 'may reach the threshold')
    >>> performance_reading(1.0, 0.9, 1.1, 2.0), performance_reading(1.0, None, None, 2.0)
    ('below the threshold', 'unknown')
    """
    if mean is None or low is None or high is None:
        return "unknown"
    if low > threshold:
        return "above the threshold"
    if high >= threshold:
        return "may reach the threshold"
    return "below the threshold"


def _names(names: list[str], most: int = 3) -> str:
    shown = ", ".join(str(n) for n in names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def pairwise_contrasts(tested: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Rows ``e_a - e_b`` for every pair ``a < b`` of the tested groups."""
    k = sizes.size
    rows = []
    for i, a in enumerate(tested):
        for b in tested[i + 1 :]:
            row = np.zeros(k)
            row[a], row[b] = 1.0, -1.0
            rows.append(row)
    return np.array(rows).reshape(-1, k)


def pairwise_disparity(
    errors: Sequence[float] | np.ndarray,
    index: Sequence[int] | np.ndarray,
    labels: Sequence[str],
    *,
    threshold: float,
    alpha: float = 0.05,
    clusters: Sequence[object] | np.ndarray | None = None,
    n_boot: int = DEFAULT_BOOTSTRAPS,
    seed: int = 0,
    what: str = "groups",
) -> PairwiseDisparity:
    """Mean error per group, every pairwise gap tested at once, the largest gap's interval and level.

    Parameters
    ----------
    errors : array-like of float, shape (n,)
        Per-sample error.
    index : array-like of int, shape (n,)
        Group of each sample, ``0 .. len(labels) - 1``.
    labels : sequence of str
        Group names (empty groups allowed).
    threshold : float
        Error threshold.
    alpha : float, default 0.05
        Level of every interval and of the test.
    clusters : array-like, optional
        Cluster (person) of each sample.
    n_boot : int, default 999
        Wild bootstrap resamples.
    seed : int, default 0
        Seed.
    what : str, default "groups"
        What the groups are, for the method's words ("bands", "groups").

    Returns
    -------
    PairwiseDisparity

    Raises
    ------
    ValueError
        Fewer than two groups with at least 2 clusters.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> group = np.repeat([0, 1, 2], 300)
    >>> errors = 1.0 + 1.5 * (group == 2) + rng.normal(0, 0.4, 900)
    >>> d = pairwise_disparity(errors, group, ["a", "b", "c"], threshold=2.0, n_boot=199)
    >>> d.worst, d.significant, d.disparity.level, round(d.gap, 1)
    ('c', True, 'moderate', 1.5)
    >>> [g.performance for g in d.groups]
    ['below the threshold', 'below the threshold', 'above the threshold']
    """
    if not threshold > 0:
        raise ValueError(f"threshold must be positive, got {threshold}")
    values = np.asarray(errors, dtype=np.float64)
    group = np.asarray(index, dtype=np.intp)
    k = len(labels)
    sizes = np.bincount(group, minlength=k)
    try:
        test = contrast_max_t(
            values, group, k, pairwise_contrasts, clusters=clusters, n_boot=n_boot, alpha=alpha, seed=seed
        )
    except ValueError as exc:
        if not str(exc).startswith("nothing to test"):
            raise
        unit = "clusters" if clusters is not None else "samples"
        raise ValueError(
            f"need at least two {what} with 2 or more {unit} each ({what} sizes {sizes.tolist()})"
        ) from None
    tested = test.tested
    c = test.critical
    pairs = []
    above: dict[int, list[int]] = {}
    below: dict[int, list[int]] = {}
    upper_of: dict[int, float] = {}
    row = 0
    lower_bounds, upper_bounds = [], []
    for i, a in enumerate(tested):
        for b in tested[i + 1 :]:
            d, se = float(test.estimates[row]), float(test.se[row])
            hi, lo = (a, b) if d >= 0 else (b, a)
            p = float(test.p_adjusted[row])
            sig = bool(p < alpha)
            if sig:
                above.setdefault(int(hi), []).append(int(lo))
                below.setdefault(int(lo), []).append(int(hi))
            lower_bounds.append(max(0.0, abs(d) - c * se))
            upper_bounds.append(abs(d) + c * se)
            for member in (int(a), int(b)):
                upper_of[member] = max(upper_of.get(member, 0.0), abs(d) + c * se)
            pairs.append(
                PairGap(
                    higher=str(labels[hi]),
                    lower=str(labels[lo]),
                    gap=abs(d),
                    ci_low=abs(d) - c * se,
                    ci_high=abs(d) + c * se,
                    p_adjusted=p,
                    significant=sig,
                )
            )
            row += 1
    gap_ci = (float(max(lower_bounds)), float(max(upper_bounds)))
    if not np.isfinite(gap_ci[1]):
        gap_ci = (0.0, float("inf"))
    disparity = (
        disparity_level(*gap_ci, threshold)
        if np.isfinite(gap_ci[1])
        else Disparity("inconclusive", 0.5 * threshold, float(threshold), "too few resamples for an interval")
    )
    means = np.array([test.groups[g].mean for g in tested], dtype=np.float64)
    worst, best = int(tested[np.argmax(means)]), int(tested[np.argmin(means)])

    # The spread a group of its size would have: pooled within-group residuals, widened by the clustering.
    def planned_se(h: int) -> float:
        own = test.groups[h].se or 0.0
        return max(own, test.pooled_sd * float(np.sqrt(test.design_effect / max(sizes[h], 1))))

    readings = []
    tested_set = set(tested.tolist())
    for g, stats in enumerate(test.groups):
        mdg = None
        if stats.se is not None and g in tested_set:
            others = [h for h in tested if h != g]
            ref = max(others, key=lambda h: (sizes[h], -h))
            mdg = float((c + Z_POWER_80) * np.hypot(planned_se(g), planned_se(ref)))
            if not np.isfinite(mdg):
                mdg = None
        if stats.n == 0:
            reading = "no samples"
        elif g not in tested_set:
            reading = "too few to test"
        elif g in above or g in below:
            reading = "; ".join(
                f"{word} {_names([labels[h] for h in others])}"
                for word, others in (("higher than", above.get(g)), ("lower than", below.get(g)))
                if others
            )
        elif upper_of.get(g, float("inf")) < disparity.margin:
            reading = "within half the threshold"
        elif mdg is None or mdg > disparity.margin:
            reading = "too few to tell"
        else:
            reading = "no gap detected"
        readings.append(
            GroupReading(
                label=str(labels[g]),
                n=stats.n,
                n_clusters=stats.n_clusters,
                mean=stats.mean,
                se=stats.se,
                ci_low=None if stats.ci_low is None else float(stats.ci_low),
                ci_high=None if stats.ci_high is None else float(stats.ci_high),
                tested=bool(g in tested_set),
                min_detectable_gap=mdg,
                reading=reading,
                performance=performance_reading(stats.mean, stats.ci_low, stats.ci_high, threshold),
            )
        )
    unit = f"{test.n_clusters} clusters" if clusters is not None else "samples"
    method = (
        f"largest studentised difference over the {len(pairs)} pairs of {tested.size} {what} "
        f"({'cluster-robust' if clusters is not None else 'Welch'} standard errors), calibrated by a wild "
        f"bootstrap with {n_boot} resamples (Rademacher weights per {'cluster' if clusters is not None else 'sample'}, "
        f"over {unit}); simultaneous intervals, family-wise error rate {alpha:g}"
    )
    return PairwiseDisparity(
        groups=tuple(readings),
        pairs=tuple(pairs),
        gap=float(means.max() - means.min()),
        gap_ci=gap_ci,
        p_value=float(test.p_value),
        significant=bool(test.p_value < alpha),
        critical=float(c),
        disparity=disparity,
        worst=str(labels[worst]),
        best=str(labels[best]),
        threshold=float(threshold),
        alpha=float(alpha),
        n_boot=int(n_boot),
        n_clusters=int(test.n_clusters),
        clustered=clusters is not None,
        method=method,
    )
