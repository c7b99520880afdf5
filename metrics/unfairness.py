"""The four unfairness scores of seed 000 on a per-sample model error.

The error is one number per sample where larger is worse (e.g. the mean deviation
between predicted and true silhouette boundaries, in mm). Seed 000 defines:

* **categorical** (gender): two-sample Kolmogorov-Smirnov test; if significant, the
  score is the difference of the group means;
* **continuous** (body shape, skin tone): least-squares line of error on the attribute,
  t-test on the slope; if significant, the score is the fitted error difference between
  the 5th and 95th percentile of the attribute;
* **intersectional**: standardise the attributes, run DBSCAN for
  ``eps = 10**-1.5, 10**-1.49, ..., 10**0``; a cluster of at least 10 points of which at
  least 70% have error >= 1.7 is underperforming; the score is the number of customers
  in such clusters;
* **severity**: each score is judged against an error threshold (2 mm in the seed).

Every score is computed even when it is not significant (``significant`` says whether
it should be acted upon), so that reports can show the effect size either way.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "DEFAULT_EPS_EXPONENTS",
    "CategoricalUnfairness",
    "ContinuousUnfairness",
    "EpsClusters",
    "IntersectionalUnfairness",
    "PairUnfairness",
    "Severity",
    "categorical_unfairness",
    "continuous_unfairness",
    "intersectional_unfairness",
    "severity",
    "standardise",
]

#: Exponents of the seed's DBSCAN ensemble: eps = 10**e, e = -1.5, -1.49, ..., 0.
DEFAULT_EPS_EXPONENTS = np.round(np.arange(-1.5, 0.0001, 0.01), 2)


# --------------------------------------------------------------------------- checks


def _as_errors(errors: Sequence[float] | np.ndarray) -> np.ndarray:
    values = np.asarray(errors, dtype=np.float64)
    if values.ndim != 1:
        raise ValueError(f"errors must be one-dimensional, got shape {values.shape}")
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        raise ValueError(f"errors contain {bad.size} NaN or infinite value(s), first at index {bad[:5].tolist()}")
    return values


def _check_alpha(alpha: float) -> None:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")


# ---------------------------------------------------------------------- categorical


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
        Two-sided p-value of the KS test (no multiple-comparison correction).
    significant : bool
        ``p_value < alpha``.
    score : float
        ``mean(higher_error_group) - mean(lower_error_group)``, never negative.
    mean_higher, mean_lower : float
        The two group means.
    n_higher, n_lower : int
        The two group sizes.
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


@dataclass(frozen=True)
class CategoricalUnfairness:
    """Unfairness with respect to a categorical attribute (seed 000: gender).

    The top-level fields describe the *worst pair*: among significant pairs the one
    with the largest score; if no pair is significant, the pair with the smallest
    p-value (ties: larger score). With two groups that is the only pair.

    Attributes
    ----------
    statistic, p_value, significant, score
        As in :class:`PairUnfairness`, for the worst pair. ``score`` is non-negative:
        the mean error of the worse-off group minus that of the better-off group.
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
    nothing but the names. With more than two groups no multiple-comparison correction
    is applied: compare the p-values with ``alpha / n_pairs`` for Bonferroni.

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
    pairs = []
    for a, b in itertools.combinations(names, 2):
        test = ks_2samp(samples[a], samples[b])
        hi, lo = (b, a) if means[b] > means[a] else (a, b)
        pairs.append(
            PairUnfairness(
                higher_error_group=hi,
                lower_error_group=lo,
                statistic=float(test.statistic),
                p_value=float(test.pvalue),
                significant=bool(test.pvalue < alpha),
                score=means[hi] - means[lo],
                mean_higher=means[hi],
                mean_lower=means[lo],
                n_higher=int(samples[hi].size),
                n_lower=int(samples[lo].size),
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
    )


# ----------------------------------------------------------------------- continuous


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


# ------------------------------------------------------------------ intersectional


@dataclass(frozen=True)
class EpsClusters:
    """DBSCAN outcome for one ``eps`` of the ensemble.

    Attributes
    ----------
    exponent, eps : float
        ``eps = 10 ** exponent``.
    n_clusters : int
        Number of DBSCAN clusters (noise excluded).
    underperforming : tuple of ndarray
        Indices of the members of each underperforming cluster, in DBSCAN label order.
    fractions : tuple of float
        Fraction of members with error >= the error threshold, per underperforming
        cluster.
    """

    exponent: float
    eps: float
    n_clusters: int
    underperforming: tuple[np.ndarray, ...]
    fractions: tuple[float, ...]


@dataclass(frozen=True)
class IntersectionalUnfairness:
    """Intersectional unfairness (seed 000): customers in underperforming clusters.

    Attributes
    ----------
    n_customers : int
        The score: number of distinct samples that belong to an underperforming cluster
        for at least one ``eps`` of the ensemble.
    members : ndarray of int
        Their indices (sorted): the union over the ensemble.
    fraction : float
        ``n_customers / n_samples``.
    clusters : tuple of EpsClusters
        Per ``eps`` (in the order given), the clusters found.
    n_samples : int
        Number of samples.
    standardised : ndarray of shape (n_samples, n_features)
        The z-scored features the clustering ran on.
    min_samples, min_cluster_size, error_threshold, min_fraction
        The parameters used.
    """

    n_customers: int
    members: np.ndarray
    fraction: float
    clusters: tuple[EpsClusters, ...]
    n_samples: int
    standardised: np.ndarray
    min_samples: int
    min_cluster_size: int
    error_threshold: float
    min_fraction: float


def standardise(features: np.ndarray) -> np.ndarray:
    """Z-score each column: ``(x - mean) / std`` with the population std (ddof=0).

    A constant column is only centred (scale 1), as :class:`sklearn.preprocessing.StandardScaler`
    does.

    Parameters
    ----------
    features : array-like of shape (n, d)
        Finite values.

    Returns
    -------
    ndarray of shape (n, d)
        Float64 standardised features.

    Examples
    --------
    >>> standardise([[1.0, 5.0], [3.0, 5.0]]).tolist()
    [[-1.0, 0.0], [1.0, 0.0]]
    """
    x = np.asarray(features, dtype=np.float64)
    mean = x.mean(axis=0)
    std = x.std(axis=0)
    std = np.where(std > 0, std, 1.0)
    return (x - mean) / std


def intersectional_unfairness(
    errors: Sequence[float] | np.ndarray,
    features: np.ndarray,
    *,
    eps_exponents: Sequence[float] | np.ndarray = DEFAULT_EPS_EXPONENTS,
    min_samples: int = 10,
    min_cluster_size: int = 10,
    error_threshold: float = 1.7,
    min_fraction: float = 0.7,
    progress: bool = False,
) -> IntersectionalUnfairness:
    """Customers in clusters of similar attributes where the model underperforms.

    The features (seed 000: body shape and skin tone) are z-scored per column
    (:func:`standardise`), then DBSCAN runs for every ``eps = 10 ** e`` of
    ``eps_exponents`` (seed: 151 values from -1.5 to 0). A cluster is underperforming
    when it has at least ``min_cluster_size`` members (core and border points) and
    ``n_at_or_above / size >= min_fraction``, where ``n_at_or_above`` counts members
    with ``error >= error_threshold``. The score is the number of distinct customers
    in any underperforming cluster of the ensemble.

    The labels are exactly those of ``sklearn.cluster.DBSCAN(eps, min_samples=...)``
    (euclidean, border points given to the first cluster that reaches them), computed
    by :mod:`metrics._dbscan` for all ``eps`` from one neighbour search; for 2-D
    features this is tens of times faster than looping scikit-learn. More than two
    features fall back to scikit-learn's DBSCAN.

    Parameters
    ----------
    errors : array-like of float, shape (n,)
        Per-sample error, larger is worse.
    features : array-like of shape (n, d)
        Attributes to cluster on (raw; they are standardised here).
    eps_exponents : array-like of float
        ``eps = 10.0 ** eps_exponents``.
    min_samples : int, default 10
        DBSCAN's ``min_samples`` (the point itself counts).
    min_cluster_size : int, default 10
        Smallest cluster that can be underperforming.
    error_threshold : float, default 1.7
        Error at or above which a member counts as underperformed.
    min_fraction : float, default 0.7
        Fraction of such members that makes a cluster underperforming.
    progress : bool, default False
        Show a tqdm progress bar on stderr over the ``eps`` values.

    Returns
    -------
    IntersectionalUnfairness
        Score, members and per-eps clusters.

    Raises
    ------
    ValueError
        Length mismatch, NaN values, or features that are not 2-D arrays.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> features = rng.normal(size=(300, 2))
    >>> errors = np.where(features[:, 1] > 1.2, 2.5, 1.0)
    >>> result = intersectional_unfairness(errors, features)
    >>> bool(np.all(errors[result.members] >= 0) and result.n_customers > 0)
    True
    """
    values = _as_errors(errors)
    x = np.asarray(features, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"features must be 2-D (n_samples, n_features), got shape {x.shape}")
    if x.shape[0] != values.size:
        raise ValueError(f"errors and features differ in length: {values.size} vs {x.shape[0]}")
    if not np.all(np.isfinite(x)):
        raise ValueError("features contain NaN or infinite values")
    if min_samples < 1 or min_cluster_size < 1:
        raise ValueError("min_samples and min_cluster_size must be at least 1")
    exponents = np.asarray(eps_exponents, dtype=np.float64)
    eps_values = np.power(10.0, exponents)
    z = standardise(x)
    above = values >= error_threshold

    labels_iter = _labels_per_eps(z, eps_values, min_samples)
    if progress:
        from tqdm import tqdm

        labels_iter = tqdm(
            labels_iter,
            total=eps_values.size,
            desc="DBSCAN ensemble",
            unit="eps",
            leave=False,
        )
    per_eps = []
    flagged = np.zeros(values.size, dtype=bool)
    for exponent, (eps, labels) in zip(exponents, labels_iter, strict=True):
        n_clusters = int(labels.max()) + 1 if labels.size else 0
        clustered = labels >= 0
        size = np.bincount(labels[clustered], minlength=n_clusters)
        bad = np.bincount(labels[clustered & above], minlength=n_clusters)
        with np.errstate(invalid="ignore", divide="ignore"):
            fraction = bad / np.maximum(size, 1)
        under = np.flatnonzero((size >= min_cluster_size) & (fraction >= min_fraction))
        groups = []
        if under.size:
            order = np.argsort(labels, kind="stable")
            starts = np.searchsorted(labels[order], under)
            for label, start in zip(under, starts, strict=True):
                groups.append(np.sort(order[start : start + size[label]]))
            flagged |= np.isin(labels, under)
        per_eps.append(
            EpsClusters(
                exponent=float(exponent),
                eps=float(eps),
                n_clusters=n_clusters,
                underperforming=tuple(groups),
                fractions=tuple(float(fraction[k]) for k in under),
            )
        )
    members = np.flatnonzero(flagged)
    return IntersectionalUnfairness(
        n_customers=int(members.size),
        members=members,
        fraction=float(members.size / values.size) if values.size else 0.0,
        clusters=tuple(per_eps),
        n_samples=int(values.size),
        standardised=z,
        min_samples=int(min_samples),
        min_cluster_size=int(min_cluster_size),
        error_threshold=float(error_threshold),
        min_fraction=float(min_fraction),
    )


def _labels_per_eps(points: np.ndarray, eps_values: np.ndarray, min_samples: int):
    n, d = points.shape
    if n == 0:
        for eps in eps_values:
            yield float(eps), np.empty(0, dtype=np.intp)
        return
    if d == 2 and n >= 12:
        from metrics._dbscan import dbscan_labels_many

        yield from dbscan_labels_many(points, eps_values, min_samples)
        return
    # Other dimensions, or the tiny sizes where scikit-learn switches to brute force.
    from sklearn.cluster import DBSCAN

    for eps in eps_values:
        yield (
            float(eps),
            DBSCAN(eps=float(eps), min_samples=min_samples).fit(points).labels_,
        )


# ------------------------------------------------------------------------ severity


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
