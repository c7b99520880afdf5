"""Intersectional unfairness (seed 000): samples in underperforming clusters of a DBSCAN ensemble.

Seed 000 calls the samples "samples"; here they are images (or people, when results are per person).
The ensemble is kept as the seed's reproduction; the report's intersectional verdict is the grid test of
:mod:`metrics.unfairness.grid`, which finds small regions the ensemble misses.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._checks import _as_errors

__all__ = [
    "DEFAULT_EPS_EXPONENTS",
    "ClusterFinding",
    "EpsClusters",
    "IntersectionalUnfairness",
    "describe_finding",
    "intersectional_unfairness",
    "min_samples_sweep",
    "standardise",
]

#: Exponents of the seed's DBSCAN ensemble: eps = 10**e, e = -1.5, -1.49, ..., 0.
DEFAULT_EPS_EXPONENTS = np.round(np.arange(-1.5, 0.0001, 0.01), 2)


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
class ClusterFinding:
    """Flagged samples of one region: overlapping underperforming clusters across ``eps``.

    Attributes
    ----------
    members : ndarray of int
        Indices of the samples (union of the region's flagged clusters), sorted.
    n_eps : int
        Number of ``eps`` values of the ensemble at which a cluster of this region is flagged.
    consistency : float
        ``n_eps / len(ensemble)``: how consistently the region is found (seed 000: a cluster
        found "consistently" for ``10**-0.1 <= eps <= 10**-0.01``).
    exponent_range : tuple of float
        Smallest and largest ``log10(eps)`` at which it is flagged.
    feature_ranges : tuple of tuple of float
        Per clustering feature (raw, not standardised), the smallest and largest member value.
    mean_error : float
        Mean error of the members.
    fraction_at_or_above : float
        Fraction of members with error at or above the cluster error threshold.
    """

    members: np.ndarray
    n_eps: int
    consistency: float
    exponent_range: tuple[float, float]
    feature_ranges: tuple[tuple[float, float], ...]
    mean_error: float
    fraction_at_or_above: float


@dataclass(frozen=True)
class IntersectionalUnfairness:
    """Intersectional unfairness (seed 000): samples in underperforming clusters.

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
    p_value : float or None
        Permutation p-value of ``n_customers`` (None without permutations):
        ``(1 + #{shuffles with at least as many samples}) / (1 + n_permutations)``, the
        errors shuffled across samples and the same ensemble rerun on the same clusters.
    significant : bool or None
        ``p_value < alpha`` (None without permutations). The score of the seed has no null
        reference: on data with no unfairness at all it flags samples in most data sets.
    n_permutations : int
        Shuffles behind the p-value.
    null_counts : ndarray of int or None
        ``n_customers`` of each shuffle.
    findings : tuple of ClusterFinding
        Flagged samples grouped into regions (overlapping flagged clusters across ``eps``
        merged), with how consistently each region is flagged over the ensemble.
    alpha : float
        Significance level of the permutation test.
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
    p_value: float | None = None
    significant: bool | None = None
    n_permutations: int = 0
    null_counts: np.ndarray | None = None
    findings: tuple[Any, ...] = ()
    alpha: float = 0.05


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
    return np.asarray((x - mean) / std)


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
    n_permutations: int = 0,
    seed: int = 0,
    alpha: float = 0.05,
    strata: Sequence[object] | np.ndarray | None = None,
    clusters: Sequence[object] | np.ndarray | None = None,
) -> IntersectionalUnfairness:
    """Customers in clusters of similar attributes where the model underperforms.

    The features (seed 000: body shape and skin tone) are z-scored per column
    (:func:`standardise`), then DBSCAN runs for every ``eps = 10 ** e`` of
    ``eps_exponents`` (seed: 151 values from -1.5 to 0). A cluster is underperforming
    when it has at least ``min_cluster_size`` members (core and border points) and
    ``n_at_or_above / size >= min_fraction``, where ``n_at_or_above`` counts members
    with ``error >= error_threshold``. The score is the number of distinct samples
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
    n_permutations : int, default 0
        Shuffles of the errors across samples for the permutation p-value (0: none, the
        seed's score alone). The clusters depend only on the features, so each shuffle
        reuses them and only recounts the underperformers per cluster. A cluster whose
        chance of reaching ``min_fraction`` under a shuffle is below ``1e-12``
        (hypergeometric tail) is left out of the shuffles; identical clusters found at
        several ``eps`` are counted once.
    seed : int, default 0
        Seed of the shuffles.
    alpha : float, default 0.05
        Significance level of the permutation test.
    strata : array-like of shape (n,), optional
        A categorical attribute (e.g. body shape given as "slim", "average", "heavy"): samples
        of different categories are never neighbours, so no cluster mixes categories and each
        region is one category times a range of the features. For every ``eps`` below
        ``2 * sqrt(2)`` (the seed's ensemble stops at 1) this is exactly DBSCAN on the features
        plus the one-hot encoding of ``strata``, all z-scored: two samples of different
        categories differ by ``1 / sqrt(p (1 - p)) >= 2`` in each of two one-hot columns, so
        they are at least ``2 * sqrt(2)`` apart, while samples of one category keep their
        distance on the features. It is computed with one added column that places the
        categories farther apart than the largest ``eps`` (so one feature plus ``strata`` keeps
        the fast 2-D path). Categories carry no order or distance: an ordinal code would invent
        both.
    clusters : array-like of shape (n,), optional
        Person of each sample: the permutation null then moves whole people (each person's errors go
        to a person with as many samples, :func:`metrics.unfairness.robust.cluster_permutations`), so
        that several photos of one person are not shuffled as if independent.

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
    points = z
    if strata is not None:
        import pandas as pd

        categories = np.asarray(strata, dtype=object)
        if categories.shape != (values.size,):
            raise ValueError(f"strata must have one entry per sample: {categories.size} vs {values.size}")
        codes, _ = pd.factorize(pd.Series(categories).astype(str), sort=True)
        spacing = 2.0 * float(eps_values.max(initial=1.0)) + 1.0
        points = np.column_stack([codes.astype(np.float64) * spacing, z])

    labels_iter = _labels_per_eps(points, eps_values, min_samples)
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
    n_above = int(np.count_nonzero(above))
    candidates = _Candidates(values.size, n_above, min_fraction) if n_permutations > 0 else None
    found: list[tuple[int, np.ndarray]] = []
    for position, (exponent, (eps, labels)) in enumerate(zip(exponents, labels_iter, strict=True)):
        n_clusters = int(labels.max()) + 1 if labels.size else 0
        clustered = labels >= 0
        size = np.bincount(labels[clustered], minlength=n_clusters)
        bad = np.bincount(labels[clustered & above], minlength=n_clusters)
        with np.errstate(invalid="ignore", divide="ignore"):
            fraction = bad / np.maximum(size, 1)
        under = np.flatnonzero((size >= min_cluster_size) & (fraction >= min_fraction))
        groups = []
        big = np.flatnonzero(size >= min_cluster_size)
        if under.size or (candidates is not None and big.size):
            order = np.argsort(labels, kind="stable")
            starts = np.searchsorted(labels[order], np.arange(n_clusters))
            for label in under:
                groups.append(np.sort(order[starts[label] : starts[label] + size[label]]))
                found.append((position, groups[-1]))
            if under.size:
                flagged |= np.isin(labels, under)
            if candidates is not None:
                for label in candidates.possible(big, size):
                    candidates.add(np.sort(order[starts[label] : starts[label] + size[label]]))
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
    null_counts = p_value = significant = None
    if candidates is not None:
        null_counts = candidates.null_counts(above, n_permutations, np.random.default_rng(seed), clusters)
        p_value = float((1 + np.count_nonzero(null_counts >= members.size)) / (1 + n_permutations))
        significant = bool(p_value < alpha)
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
        p_value=p_value,
        significant=significant,
        n_permutations=int(n_permutations),
        null_counts=null_counts,
        findings=_findings(found, exponents, x, values, above),
        alpha=float(alpha),
    )


def _needed(size: np.ndarray, min_fraction: float) -> np.ndarray:
    """Smallest count ``b`` of underperformers with ``b / size >= min_fraction`` (as computed above)."""
    size = np.asarray(size, dtype=np.int64)
    need = np.ceil(min_fraction * size).astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        need = np.where((need - 1) / np.maximum(size, 1) >= min_fraction, need - 1, need)
        need = np.where(need / np.maximum(size, 1) < min_fraction, need + 1, need)
    return np.maximum(need, 0)


class _Candidates:
    """Distinct clusters of the ensemble that a shuffle of the errors could flag."""

    # A cluster whose hypergeometric chance of being underperforming is below this is skipped.
    NEGLIGIBLE = 1e-12
    # Shuffles per block: the (n_samples x block) 0/1 matrix of shuffled flags stays below ~32 MB.
    BLOCK_CELLS = 4_000_000

    def __init__(self, n: int, n_above: int, min_fraction: float) -> None:
        self.n = n
        self.n_above = n_above
        self.min_fraction = min_fraction
        self.seen: set[bytes] = set()
        self.members: list[np.ndarray] = []

    def possible(self, labels: np.ndarray, size: np.ndarray) -> np.ndarray:
        from scipy.stats import hypergeom

        sizes = size[labels]
        need = _needed(sizes, self.min_fraction)
        ok = need <= np.minimum(sizes, self.n_above)
        labels, sizes, need = labels[ok], sizes[ok], need[ok]
        if labels.size:
            chance = hypergeom.sf(need - 1, self.n, self.n_above, sizes)
            labels = labels[chance >= self.NEGLIGIBLE]
        return labels

    def add(self, members: np.ndarray) -> None:
        key = members.tobytes()
        if key not in self.seen:
            self.seen.add(key)
            self.members.append(members)

    def null_counts(
        self,
        above: np.ndarray,
        n_permutations: int,
        rng: np.random.Generator,
        clusters: Sequence[object] | np.ndarray | None = None,
    ) -> np.ndarray:
        from scipy.sparse import csr_matrix

        from .robust import cluster_permutations

        counts = np.zeros(n_permutations, dtype=np.int64)
        if not self.members:
            return counts
        sizes = np.array([m.size for m in self.members])
        matrix = csr_matrix(
            (
                np.ones(int(sizes.sum()), dtype=np.float32),
                np.concatenate(self.members),
                np.r_[0, np.cumsum(sizes)],
            ),
            shape=(len(self.members), self.n),
        )
        transposed = matrix.T.tocsr()
        need = _needed(sizes, self.min_fraction)[:, None]
        flags = above.astype(np.float32)
        block = max(1, self.BLOCK_CELLS // max(self.n, 1))
        for start in range(0, n_permutations, block):
            stop = min(n_permutations, start + block)
            if clusters is None:
                shuffled = rng.permuted(np.broadcast_to(flags, (stop - start, self.n)), axis=1).T
            else:
                moves = cluster_permutations(clusters, self.n, stop - start, rng)
                shuffled = np.stack([flags[perm] for perm in moves], axis=1)
            bad = matrix @ np.ascontiguousarray(shuffled)
            flagged = (bad >= need - 0.5).astype(np.float32)
            covered = transposed @ flagged
            counts[start:stop] = np.count_nonzero(covered > 0, axis=0)
        return counts


def _findings(
    found: list[tuple[int, np.ndarray]],
    exponents: np.ndarray,
    features: np.ndarray,
    errors: np.ndarray,
    above: np.ndarray,
) -> tuple[ClusterFinding, ...]:
    """Flagged clusters merged into regions (clusters sharing a customer), with their eps spread."""
    if not found:
        return ()
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    n = errors.size
    sizes = np.array([m.size for _, m in found])
    matrix = csr_matrix(
        (np.ones(int(sizes.sum()), dtype=np.int8), np.concatenate([m for _, m in found]), np.r_[0, np.cumsum(sizes)]),
        shape=(len(found), n),
    )
    # Clusters sharing a member are one region: components of the cluster-customer graph.
    _, component = connected_components((matrix @ matrix.T.astype(np.int32)) > 0, directed=False)
    findings = []
    for c in np.unique(component):
        rows = np.flatnonzero(component == c)
        members = np.unique(np.concatenate([found[r][1] for r in rows]))
        positions = sorted({found[r][0] for r in rows})
        findings.append(
            ClusterFinding(
                members=members,
                n_eps=len(positions),
                consistency=len(positions) / exponents.size,
                exponent_range=(float(exponents[positions[0]]), float(exponents[positions[-1]])),
                feature_ranges=tuple(
                    (float(features[members, j].min()), float(features[members, j].max()))
                    for j in range(features.shape[1])
                ),
                mean_error=float(errors[members].mean()),
                fraction_at_or_above=float(above[members].mean()),
            )
        )
    findings.sort(key=lambda f: (-f.n_eps, -f.members.size))
    return tuple(findings)


def describe_finding(
    finding: ClusterFinding,
    feature_names: Sequence[str],
    categorical: dict[str, np.ndarray] | None = None,
) -> str:
    """The region of a finding in words: each feature's range, and the main category of others.

    Parameters
    ----------
    finding : ClusterFinding
        A flagged region.
    feature_names : sequence of str
        Names of the clustering features, in order.
    categorical : dict[str, Any] of str to array, optional
        Other per-sample attributes (e.g. pose, gender): the most common value among the
        members is named with its share in the region and in all samples, so that a value that
        merely reflects the data (29% of the region, 25% of all) is not read as what the
        region is; when no value reaches half of the region, the attribute is called mixed.

    Returns
    -------
    str
        E.g. ``"pose side (92%; 40% overall), skin_tone 8-10, body_shape 0.31-0.38"``.

    Examples
    --------
    >>> f = ClusterFinding(np.array([0, 1, 2]), 5, 0.03, (-0.1, -0.01), ((8.0, 10.0), (0.31, 0.38)), 2.4, 0.9)
    >>> describe_finding(f, ["skin_tone", "body_shape"], {"pose": np.array(["side", "side", "front", "front"])})
    'pose side (67%; 50% overall), skin_tone 8-10, body_shape 0.31-0.38'
    >>> describe_finding(f, ["skin_tone", "body_shape"], {"pose": np.array(["a", "b", "c", "a"])})
    'pose mixed (most common a, 33%; 50% overall), skin_tone 8-10, body_shape 0.31-0.38'
    """
    parts = []
    for name, column in (categorical or {}).items():
        everyone = np.asarray(column, dtype=object).astype(str)
        values = everyone[finding.members]
        if values.size:
            kinds, counts = np.unique(values, return_counts=True)
            top = int(np.argmax(counts))
            share = counts[top] / values.size
            overall = float(np.mean(everyone == kinds[top]))
            if share > 0.5:
                parts.append(f"{name} {kinds[top]} ({share:.0%}; {overall:.0%} overall)")
            else:
                parts.append(f"{name} mixed (most common {kinds[top]}, {share:.0%}; {overall:.0%} overall)")
    for name, (low, high) in zip(feature_names, finding.feature_ranges, strict=True):
        parts.append(f"{name} {low:.3g}" if low == high else f"{name} {low:.3g}-{high:.3g}")
    return ", ".join(parts)


def min_samples_sweep(
    errors: Sequence[float] | np.ndarray,
    features: np.ndarray,
    values: Sequence[int] = (5, 10, 20),
    **options: Any,
) -> dict[int, int]:
    """Flagged samples for several DBSCAN ``min_samples`` (seed 000 does not give it).

    Parameters
    ----------
    errors, features
        As for :func:`intersectional_unfairness`.
    values : sequence of int, default (5, 10, 20)
        ``min_samples`` values to try.
    **options
        Other keyword arguments of :func:`intersectional_unfairness` (no permutations run).

    Returns
    -------
    dict of int to int
        ``min_samples -> n_customers``.
    """
    options = {k: v for k, v in options.items() if k not in ("n_permutations", "min_samples")}
    return {
        int(m): intersectional_unfairness(errors, features, min_samples=int(m), **options).n_customers for m in values
    }


def _labels_per_eps(points: np.ndarray, eps_values: np.ndarray, min_samples: int) -> Iterator[tuple[float, np.ndarray]]:
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
