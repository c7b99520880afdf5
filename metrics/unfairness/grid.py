"""Intersectional regions found on a grid: tone band x body-shape band (x gender) cells, max-t over cells.

Seed 000's intersectional score (the DBSCAN ensemble, :mod:`metrics.unfairness.intersectional`) found a
planted region of 4% of people with +1.5 mm error only 37-40% of the time in an independent review. A
plain grid does better: cut each attribute into its bands (skin tone on the scale, body shape at its
quantiles or by category, gender by group), and compare every cell with the rest of the data. The
cells are tested together by the largest studentised cell-minus-rest difference, calibrated by the wild
(cluster) bootstrap of :func:`metrics.unfairness.robust.contrast_max_t` (single-step max-t adjusted
p-values, family-wise error over every tested cell: Westfall & Young 1993 [WestfallYoung1993]; cells as slices as in Slice
Finder, Chung et al. 2019). The test is one-sided (a cell whose error is *higher* than the rest's): that
is the question, and errors are skewed to the right, which makes a cell mean's t-statistic heavy on the
low side; the two-sided largest |t| over 25 cells of 40 images said "significant" 8-10% of the time on
skewed nulls, the one-sided one 5% or less (``bench/sim_verdicts.py``). A cell is flagged only when the test as a whole rejects and the cell's own
simultaneous interval lies above 0; each flagged cell carries its mean error, its gap to the rest with
that interval, and the level read from the interval (:func:`metrics.unfairness.severity.disparity_level`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._checks import _as_errors, _check_alpha
from .disparity import performance_reading
from .robust import DEFAULT_BOOTSTRAPS, cluster_codes, contrast_max_t
from .severity import disparity_level

__all__ = ["GridCell", "GridUnfairness", "grid_unfairness"]

#: Fewest samples a cell needs to be tested.
MIN_CELL = 10
#: Fewest clusters (people) a cell needs to be tested when samples are clustered.
MIN_CELL_CLUSTERS = 5


@dataclass(frozen=True)
class GridCell:
    """One cell of the grid.

    Attributes
    ----------
    labels : dict[str, Any]
        Factor name -> band or group.
    description : str
        E.g. ``"skin_tone 9-10, body_shape 0.35-0.38"``.
    n, n_clusters : int
        Samples and people.
    mean, rest_mean : float
        Mean error in the cell and in every other sample.
    gap : float
        ``mean - rest_mean``.
    ci_low, ci_high : float or None
        Simultaneous interval of the gap (None for an untested cell).
    p_adjusted : float or None
        Family-wise adjusted p-value.
    tested : bool
        At least ``MIN_CELL`` samples (and ``MIN_CELL_CLUSTERS`` people when clustered).
    flagged : bool
        The test rejects and the cell's interval lies above 0: the model underperforms there.
    level : str or None
        Level of a flagged cell's gap, from its interval.
    reading : str or None
        The level in words.
    performance : str
        The cell's mean error against the threshold, by its own interval.
    """

    labels: dict[str, Any]
    description: str
    n: int
    n_clusters: int
    mean: float
    rest_mean: float
    gap: float
    ci_low: float | None
    ci_high: float | None
    p_adjusted: float | None
    tested: bool
    flagged: bool
    level: str | None
    reading: str | None
    performance: str


@dataclass(frozen=True)
class GridUnfairness:
    """The grid test.

    Attributes
    ----------
    factors : tuple of str
        The attributes crossed.
    cells : tuple of GridCell
        Every non-empty cell.
    n_tested : int
        Cells tested.
    p_value : float
        p-value of "no cell differs from the rest".
    significant : bool
        ``p_value < alpha``.
    flagged : tuple of GridCell
        Cells where the model underperforms (empty unless ``significant``), largest lower bound first.
    critical : float
        Critical value of the simultaneous intervals.
    threshold, alpha : float
        Settings.
    n_boot : int
        Bootstrap resamples.
    clustered : bool
        Whether clusters were given.
    method : str
        In words.
    """

    factors: tuple[str, ...]
    cells: tuple[GridCell, ...]
    n_tested: int
    p_value: float
    significant: bool
    flagged: tuple[GridCell, ...]
    critical: float
    threshold: float
    alpha: float
    n_boot: int
    clustered: bool
    method: str


def grid_unfairness(
    errors: Sequence[float] | np.ndarray,
    factors: Mapping[str, Sequence[object] | np.ndarray],
    *,
    threshold: float,
    alpha: float = 0.05,
    clusters: Sequence[object] | np.ndarray | None = None,
    n_boot: int = DEFAULT_BOOTSTRAPS,
    seed: int = 0,
    min_cell: int = MIN_CELL,
    min_cell_clusters: int = MIN_CELL_CLUSTERS,
) -> GridUnfairness:
    """Cells of two or more banded attributes, each compared with the rest, tested jointly (max-t).

    Parameters
    ----------
    errors : array-like of float, shape (n,)
        Per-sample error.
    factors : mapping of str to array-like
        Per attribute, each sample's band or group label (e.g. ``{"skin_tone": ["9-10", ...],
        "body_shape": ["0.35-0.38", ...]}``), in the order they are named.
    threshold : float
        Error threshold (levels of flagged cells, performance).
    alpha : float, default 0.05
        Family-wise level.
    clusters : array-like, optional
        Person of each sample.
    n_boot : int, default 999
        Wild bootstrap resamples.
    seed : int, default 0
        Seed.
    min_cell, min_cell_clusters : int
        Smallest cell tested (samples; people when clustered).

    Returns
    -------
    GridUnfairness

    Raises
    ------
    ValueError
        Fewer than two factors, length mismatch, or fewer than two testable cells.

    Examples
    --------
    A region of about 4% of the samples with +1.5:

    >>> rng = np.random.default_rng(0)
    >>> tone = rng.choice(["1-2", "3-4", "5-6", "7-8", "9-10"], 1000)
    >>> body = rng.choice(["q1", "q2", "q3", "q4", "q5"], 1000)
    >>> errors = 1.0 + 1.5 * ((tone == "9-10") & (body == "q5")) + rng.normal(0, 0.4, 1000)
    >>> grid = grid_unfairness(errors, {"skin_tone": tone, "body_shape": body}, threshold=2.0, n_boot=199)
    >>> grid.significant, [c.description for c in grid.flagged], grid.flagged[0].level
    (True, ['skin_tone 9-10, body_shape q5'], 'moderate')
    """
    _check_alpha(alpha)
    values = _as_errors(errors)
    n = values.size
    if len(factors) < 2:
        raise ValueError(f"a grid needs at least two attributes, got {len(factors)}")
    names = [str(name) for name in factors]
    columns = []
    for name, labels in factors.items():
        column = np.asarray(labels, dtype=object).astype(str)
        if column.shape != (n,):
            raise ValueError(f"{name}: {column.size} labels for {n} samples")
        columns.append(column)
    keys = np.array(["\x1f".join(parts) for parts in zip(*columns, strict=True)], dtype=object)
    cell_keys, index = np.unique(keys, return_inverse=True)
    k = cell_keys.size
    cluster, _ = cluster_codes(clusters, n)
    sizes = np.bincount(index, minlength=k)
    people = np.array([np.unique(cluster[index == j]).size for j in range(k)])
    need_people = min_cell_clusters if clusters is not None else 2
    testable = np.flatnonzero((sizes >= min_cell) & (people >= need_people) & (sizes < n))
    if testable.size < 2:
        raise ValueError(
            f"fewer than two cells with at least {min_cell} samples"
            + (f" and {min_cell_clusters} people" if clusters is not None else "")
            + f" ({testable.size} of {k} cells)"
        )
    # Cell g against the rest: e_g - sum_(h != g) n_h / (n - n_g) e_h.
    contrasts = np.zeros((testable.size, k))
    for r, g in enumerate(testable):
        contrasts[r] = -sizes / (n - sizes[g])
        contrasts[r, g] = 1.0
    test = contrast_max_t(
        values, index, k, contrasts, clusters=clusters, n_boot=n_boot, alpha=alpha, seed=seed, alternative="greater"
    )
    significant = bool(test.p_value < alpha)
    total = float(values.sum())
    sums = np.bincount(index, weights=values, minlength=k)
    row_of = {int(g): row for row, g in enumerate(testable)}
    cells = []
    for c in range(k):
        cell_labels = dict(zip(names, cell_keys[c].split("\x1f"), strict=True))
        mean = float(sums[c] / sizes[c])
        rest = float((total - sums[c]) / (n - sizes[c])) if n > sizes[c] else float("nan")
        stats = test.groups[c]
        row = row_of.get(c)
        ci_low = ci_high = p_adj = None
        flagged = False
        level = reading = None
        if row is not None:
            ci_low, ci_high = float(test.ci_low[row]), float(test.ci_high[row])
            p_adj = float(test.p_adjusted[row])
            flagged = significant and ci_low > 0
            if flagged:
                disparity = disparity_level(max(0.0, ci_low), max(0.0, ci_high), threshold)
                level, reading = disparity.level, disparity.reading
        cells.append(
            GridCell(
                labels=cell_labels,
                description=", ".join(f"{name} {value}" for name, value in cell_labels.items()),
                n=int(sizes[c]),
                n_clusters=int(people[c]),
                mean=mean,
                rest_mean=rest,
                gap=mean - rest,
                ci_low=ci_low,
                ci_high=ci_high,
                p_adjusted=p_adj,
                tested=row is not None,
                flagged=bool(flagged),
                level=level,
                reading=reading,
                performance=performance_reading(stats.mean, stats.ci_low, stats.ci_high, threshold),
            )
        )
    flagged_cells = tuple(sorted((c for c in cells if c.flagged), key=lambda c: -(c.ci_low or 0.0)))
    method = (
        f"each of {testable.size} cells ({' x '.join(names)}; at least {min_cell} samples"
        + (f" and {min_cell_clusters} people" if clusters is not None else "")
        + ") against the rest, one-sided (higher error), largest studentised difference calibrated by a wild "
        + ("cluster " if clusters is not None else "")
        + f"bootstrap ({n_boot} resamples); family-wise error rate {alpha:g} over the cells"
    )
    return GridUnfairness(
        factors=tuple(names),
        cells=tuple(cells),
        n_tested=int(testable.size),
        p_value=float(test.p_value),
        significant=significant,
        flagged=flagged_cells,
        critical=float(test.critical),
        threshold=float(threshold),
        alpha=float(alpha),
        n_boot=int(n_boot),
        clustered=clusters is not None,
        method=method,
    )
