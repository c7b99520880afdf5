"""Categorical unfairness (seed 000, e.g. gender): two-sample KS test, then the difference of group means."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ._checks import _as_errors, _check_alpha
from .verdict import holm

__all__ = ["CategoricalUnfairness", "PairUnfairness", "categorical_unfairness"]


@dataclass(frozen=True)
class PairUnfairness:
    """KS test and mean difference between two groups.

    Attributes
    ----------
    higher_error_group, lower_error_group : object
        The group with the higher mean error and the other one.
    statistic : float
        Two-sample Kolmogorov-Smirnov statistic.
    p_value : float
        Two-sided p-value of the KS test (raw, no multiple-comparison correction).
    significant : bool
        ``p_value_adjusted < alpha`` (with two groups: ``p_value < alpha``).
    score : float
        ``mean(higher_error_group) - mean(lower_error_group)``, never negative.
    mean_higher, mean_lower : float
        The two group means.
    n_higher, n_lower : int
        The two group sizes.
    p_value_adjusted : float
        Holm-adjusted p-value over all pairs of groups (equals ``p_value`` with two groups).
    """

    higher_error_group: object
    lower_error_group: object
    statistic: float
    p_value: float
    significant: bool
    score: float
    mean_higher: float
    mean_lower: float
    n_higher: int
    n_lower: int
    p_value_adjusted: float = float("nan")


@dataclass(frozen=True)
class CategoricalUnfairness:
    """Unfairness with respect to a categorical attribute (seed 000: gender).

    The top-level fields describe the *worst pair*: among significant pairs the one
    with the largest score; if no pair is significant, the pair with the smallest
    p-value (ties: larger score). With two groups that is the only pair. With more,
    significance is decided on Holm-adjusted p-values over all ``k (k - 1) / 2`` pairs,
    so "significant" keeps its nominal rate when no group differs (taking the worst of
    3 / 4 / 6 uncorrected pairs said "significant" 11% / 21% / 37% of the time).

    Attributes
    ----------
    statistic, p_value, significant, score
        As in :class:`PairUnfairness`, for the worst pair (``p_value`` raw,
        ``significant`` from the adjusted p-value). ``score`` is non-negative: the mean
        error of the worse-off group minus that of the better-off group.
    worst_pair : PairUnfairness
        The pair the top-level fields describe.
    pairs : tuple of PairUnfairness
        Every pair of groups, in the order of the sorted group labels.
    group_means : dict
        Mean error per group.
    group_sizes : dict
        Number of samples per group.
    alpha : float
        Significance level used.
    p_value_adjusted : float
        Holm-adjusted p-value of the worst pair.
    correction : str
        The multiple-comparison correction, in words (``"none (two groups)"`` or
        ``"Holm over 3 pairs"``).
    n_pairs : int
        Number of pairs tested.
    """

    statistic: float
    p_value: float
    significant: bool
    score: float
    worst_pair: PairUnfairness
    pairs: tuple[PairUnfairness, ...]
    group_means: dict
    group_sizes: dict
    alpha: float
    p_value_adjusted: float = float("nan")
    correction: str = "none (two groups)"
    n_pairs: int = 1


def categorical_unfairness(
    errors: Sequence[float] | np.ndarray,
    groups: Sequence[object] | np.ndarray,
    *,
    alpha: float = 0.05,
) -> CategoricalUnfairness:
    """Unfairness of a per-sample error across the groups of a categorical attribute.

    For each pair of groups, a two-sample Kolmogorov-Smirnov test
    (:func:`scipy.stats.ks_2samp`, two-sided, default method) decides whether the two
    error distributions differ (``p < alpha``); the score is the difference of the
    group means, signed so that it is non-negative (worse-off minus better-off group,
    the groups are named in the result). Renaming or reordering group labels changes
    nothing but the names. With more than two groups the pairwise p-values are
    Holm-adjusted (family-wise error rate ``alpha`` over the ``k (k - 1) / 2`` pairs) and
    a pair is significant when its adjusted p-value is below ``alpha``.

    Parameters
    ----------
    errors : array-like of float, shape (n,)
        Per-sample error, larger is worse. Must be finite.
    groups : array-like, shape (n,)
        Group label of each sample (any hashable, not missing).
    alpha : float, default 0.05
        Significance level.

    Returns
    -------
    CategoricalUnfairness
        Per pair and worst-pair statistics.

    Raises
    ------
    ValueError
        Length mismatch, NaN errors, missing group labels, fewer than two groups, or a
        group with fewer than two samples (a mean difference from one sample is not a
        distribution; the message names the group).

    Examples
    --------
    >>> result = categorical_unfairness([1.0, 1.2, 0.9, 1.1, 2.0, 2.2, 1.9, 2.1],
    ...                                 ["f", "f", "f", "f", "m", "m", "m", "m"])
    >>> result.worst_pair.higher_error_group, round(result.score, 3)
    ('m', 1.0)
    >>> bool(result.significant)
    True
    """
    from scipy.stats import ks_2samp

    _check_alpha(alpha)
    values = _as_errors(errors)
    labels = np.asarray(groups, dtype=object)
    if labels.shape != values.shape:
        raise ValueError(f"errors and groups differ in length: {values.size} vs {labels.size}")
    missing = [i for i, g in enumerate(labels) if g is None or (isinstance(g, float) and np.isnan(g))]
    if missing:
        raise ValueError(f"{len(missing)} missing group label(s), first at index {missing[:5]}")
    names = sorted(set(labels.tolist()), key=lambda g: (type(g).__name__, g))
    if len(names) < 2:
        raise ValueError(f"need at least 2 groups, got {len(names)}: {names}")
    samples = {g: values[labels == g] for g in names}
    small = [f"{g!r} ({samples[g].size})" for g in names if samples[g].size < 2]
    if small:
        raise ValueError("each group needs at least 2 samples; too few in " + ", ".join(small))

    means = {g: float(samples[g].mean()) for g in names}
    combos = list(itertools.combinations(names, 2))
    tests = [ks_2samp(samples[a], samples[b]) for a, b in combos]
    adjusted = holm([float(t.pvalue) for t in tests])
    pairs = []
    for (a, b), test, p_adjusted in zip(combos, tests, adjusted, strict=True):
        hi, lo = (b, a) if means[b] > means[a] else (a, b)
        pairs.append(
            PairUnfairness(
                higher_error_group=hi,
                lower_error_group=lo,
                statistic=float(test.statistic),
                p_value=float(test.pvalue),
                significant=bool(p_adjusted < alpha),
                score=means[hi] - means[lo],
                mean_higher=means[hi],
                mean_lower=means[lo],
                n_higher=int(samples[hi].size),
                n_lower=int(samples[lo].size),
                p_value_adjusted=float(p_adjusted),
            )
        )
    significant = [p for p in pairs if p.significant]
    if significant:
        worst = max(significant, key=lambda p: p.score)
    else:
        worst = min(pairs, key=lambda p: (p.p_value, -p.score))
    return CategoricalUnfairness(
        statistic=worst.statistic,
        p_value=worst.p_value,
        significant=worst.significant,
        score=worst.score,
        worst_pair=worst,
        pairs=tuple(pairs),
        group_means=means,
        group_sizes={g: int(samples[g].size) for g in names},
        alpha=float(alpha),
        p_value_adjusted=worst.p_value_adjusted,
        correction="none (two groups)" if len(pairs) == 1 else f"Holm over {len(pairs)} pairs",
        n_pairs=len(pairs),
    )
