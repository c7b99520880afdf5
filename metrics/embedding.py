"""Subgroup fairness of an embedding space (seed 001, finDML).

Seed 001 is Dullerud et al., "Is Fairness Only Metric Deep? Evaluating and Addressing Subgroup
Gaps in Deep Metric Learning" (ICLR 2022 [Seed001], code ``ndullerud/dml-fairness``). Per subgroup ``a`` of
a sensitive attribute it measures (supplement D.4):

- recall@k (Jegou et al. 2011): queries are the points of ``a``; their neighbours are searched
  among *all* points (the query itself excluded); a query is a hit when at least one of its
  ``k`` nearest neighbours has the query's class label.
- alignment (Wang and Isola 2020) [WangIsola2020]: mean ``||phi(x) - phi(x')||**alpha`` (``alpha = 2``) over
  positive pairs, i.e. ``x`` in ``a`` and ``x' != x`` of the same class, ``x'`` from any group
  (the seed's formula is not in the text; we apply the same "queries from the subgroup, partners
  from everyone" rule as recall@k).
- uniformity ``U_KL`` (Roth et al. 2020, "rho spectrum"): ``KL(U || S)`` between the discrete
  uniform distribution and the singular values of the subgroup's embedding matrix normalised to
  sum to one (``scipy.stats.entropy(uniform, s / s.sum())``, as in Roth et al.'s
  ``metrics/rho_spectrum.py``); lower means variance spread over more directions. We use all
  ``min(n, D)`` singular values of the uncentred matrix (Roth et al. use a truncated SVD).
- cluster NMI (Manning et al. 2008) [Manning2008]: k-means with ``|Y|`` clusters run once on the *whole*
  dataset (seeded), then ``sklearn.metrics.normalized_mutual_info_score`` between class labels
  and cluster labels restricted to the subgroup.

Gaps: ``max - min`` over subgroups, and each subgroup minus the overall value. Embeddings are
L2-normalised onto the unit hypersphere by default, as the seed assumes (``phi`` maps to
``S^(D-1)``).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats
from scipy.spatial.distance import cdist
from sklearn.cluster import KMeans
from sklearn.metrics import normalized_mutual_info_score
from sklearn.neighbors import NearestNeighbors

__all__ = [
    "EmbeddingFairness",
    "SubgroupScores",
    "alignment",
    "cluster_nmi",
    "embedding_fairness",
    "recall_at_k",
    "uniformity",
]


@dataclass(frozen=True)
class SubgroupScores:
    """One embedding metric overall and per subgroup, with subgroup gaps.

    Attributes
    ----------
    metric : str
        Name of the metric (e.g. ``"recall@1"``).
    overall : float
        Value on the whole dataset (NaN only if listed in ``undefined`` under ``"overall"``).
    by_group : Mapping
        Subgroup -> value; NaN for subgroups listed in ``undefined``.
    sizes : Mapping
        Subgroup -> number of points.
    undefined : Mapping
        Subgroup (or ``"overall"``) -> reason the value is undefined.
    gap : float
        ``max - min`` over subgroups with a defined value (NaN if fewer than two).
    gap_to_overall : Mapping
        Subgroup -> value minus ``overall``.
    higher_is_better : bool
        Direction of the metric (alignment and uniformity: lower is better).
    """

    metric: str
    overall: float
    by_group: Mapping[Hashable, float]
    sizes: Mapping[Hashable, int]
    undefined: Mapping[Hashable, str] = field(default_factory=dict)
    gap: float = float("nan")
    gap_to_overall: Mapping[Hashable, float] = field(default_factory=dict)
    higher_is_better: bool = True

    @property
    def worst_group(self) -> Hashable | None:
        """Subgroup with the worst defined value, or None."""
        defined = {g: v for g, v in self.by_group.items() if g not in self.undefined}
        if not defined:
            return None
        pick = min if self.higher_is_better else max
        return pick(defined, key=defined.__getitem__)


@dataclass(frozen=True)
class EmbeddingFairness:
    """All four seed-001 metrics for one embedding (see :func:`embedding_fairness`)."""

    recall_at_k: SubgroupScores
    alignment: SubgroupScores
    uniformity: SubgroupScores
    cluster_nmi: SubgroupScores


def _prepare(embeddings: ArrayLike, normalize: bool, n_expected: int | None = None) -> np.ndarray:
    points = np.asarray(embeddings, dtype=float)
    if points.ndim != 2 or points.shape[0] < 2:
        raise ValueError("embeddings must be a 2-D array (n_points >= 2, n_dims)")
    if n_expected is not None and points.shape[0] != n_expected:
        raise ValueError("labels/groups must have one entry per embedding row")
    if not np.all(np.isfinite(points)):
        raise ValueError("embeddings must be finite")
    if normalize:
        norms = np.linalg.norm(points, axis=1, keepdims=True)
        if np.any(norms == 0):
            raise ValueError("cannot L2-normalise a zero embedding; pass normalize=False")
        points = points / norms
    return points


def _group_codes(groups: ArrayLike | None, n: int) -> tuple[list[Hashable], np.ndarray]:
    if groups is None:
        return [], np.zeros(n, dtype=int)
    values = np.asarray(groups)
    if values.shape != (n,):
        raise ValueError("groups must have one entry per embedding row")
    names, codes = np.unique(values, return_inverse=True)
    return [name.item() if hasattr(name, "item") else name for name in names], codes


def _summarise(
    metric: str,
    overall: float,
    per_group: dict[Hashable, float],
    sizes: dict[Hashable, int],
    undefined: dict[Hashable, str],
    higher_is_better: bool,
) -> SubgroupScores:
    defined = [v for g, v in per_group.items() if g not in undefined]
    gap = float(max(defined) - min(defined)) if len(defined) >= 2 else float("nan")
    to_overall = {g: float(v - overall) for g, v in per_group.items()}
    return SubgroupScores(
        metric=metric,
        overall=float(overall),
        by_group=per_group,
        sizes=sizes,
        undefined=undefined,
        gap=gap,
        gap_to_overall=to_overall,
        higher_is_better=higher_is_better,
    )


def recall_at_k(
    embeddings: ArrayLike,
    labels: ArrayLike,
    groups: ArrayLike | None = None,
    *,
    k: int = 1,
    normalize: bool = True,
) -> SubgroupScores:
    """Recall@k overall and per subgroup (seed 001, supplement D.4).

    Parameters
    ----------
    embeddings : array_like, shape (n, d)
        One embedding per point.
    labels : array_like, shape (n,)
        Class label per point.
    groups : array_like, shape (n,), optional
        Subgroup (sensitive attribute value) per point.
    k : int, default 1
        Number of neighbours (Euclidean distance; on normalised embeddings this is the cosine
        ranking). Ties are broken by scikit-learn's neighbour search order.
    normalize : bool, default True
        L2-normalise the embeddings first.

    Returns
    -------
    SubgroupScores
        Fraction of queries with a same-class point among their ``k`` nearest neighbours.

    Examples
    --------
    >>> x = [[0.0, 1.0], [0.1, 1.0], [1.0, 0.0], [1.0, 0.1]]
    >>> recall_at_k(x, [0, 0, 1, 1], ["a", "b", "a", "b"], normalize=False).overall
    1.0
    """
    label_values = np.asarray(labels)
    points = _prepare(embeddings, normalize, label_values.shape[0])
    n = points.shape[0]
    if not 1 <= k < n:
        raise ValueError("k must satisfy 1 <= k < n_points")
    search = NearestNeighbors(n_neighbors=k + 1).fit(points)
    _, neighbours = search.kneighbors(points)
    # Drop the query itself wherever it appears (with duplicate points it need not come first).
    is_self = neighbours == np.arange(n)[:, None]
    order = np.argsort(is_self, axis=1, kind="stable")
    neighbours = np.take_along_axis(neighbours, order, axis=1)[:, :k]
    hits = (label_values[neighbours] == label_values[:, None]).any(axis=1)
    names, codes = _group_codes(groups, n)
    per_group = {name: float(hits[codes == i].mean()) for i, name in enumerate(names)}
    sizes = {name: int(np.sum(codes == i)) for i, name in enumerate(names)}
    return _summarise(f"recall@{k}", float(hits.mean()), per_group, sizes, {}, True)


def _alignment_sums(points: np.ndarray, labels: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Per anchor: sum of ``||z_i - z_j||**alpha`` over same-class ``j != i``, and pair count."""
    n = points.shape[0]
    totals = np.zeros(n)
    counts = np.zeros(n)
    for label in np.unique(labels):
        members = np.flatnonzero(labels == label)
        if members.size < 2:
            continue
        block = points[members]
        if alpha == 2:
            # sum_j ||z_i - z_j||^2 = m ||z_i||^2 - 2 z_i . sum_j z_j + sum_j ||z_j||^2
            sq = np.einsum("ij,ij->i", block, block)
            sums = members.size * sq - 2.0 * block @ block.sum(axis=0) + sq.sum()
            totals[members] = np.maximum(sums, 0.0)
        else:
            totals[members] = (cdist(block, block) ** alpha).sum(axis=1)
        counts[members] = members.size - 1
    return totals, counts


def alignment(
    embeddings: ArrayLike,
    labels: ArrayLike,
    groups: ArrayLike | None = None,
    *,
    alpha: float = 2.0,
    normalize: bool = True,
) -> SubgroupScores:
    """Alignment (Wang and Isola 2020) [WangIsola2020] overall and per subgroup; lower is better.

    Mean of ``||phi(x) - phi(x')||**alpha`` over same-class pairs ``x != x'``, with anchors ``x``
    from the subgroup and partners ``x'`` from the whole dataset. A subgroup whose points have
    no same-class partner is undefined.

    Parameters
    ----------
    embeddings : array_like, shape (n, d)
        One embedding per point.
    labels : array_like, shape (n,)
        Class label per point.
    groups : array_like, shape (n,), optional
        Subgroup per point.
    alpha : float, default 2
        Exponent of the distance (Wang and Isola's default).
    normalize : bool, default True
        L2-normalise the embeddings first (alignment then lies in [0, 2**alpha]).

    Returns
    -------
    SubgroupScores
        Mean positive-pair distance overall and per subgroup.

    Examples
    --------
    >>> alignment([[0.0, 1.0], [0.0, 1.0], [1.0, 0.0]], [0, 0, 1]).overall
    0.0
    """
    label_values = np.asarray(labels)
    points = _prepare(embeddings, normalize, label_values.shape[0])
    if alpha <= 0:
        raise ValueError("alpha must be positive")
    totals, counts = _alignment_sums(points, label_values, alpha)
    names, codes = _group_codes(groups, points.shape[0])
    per_group: dict[Hashable, float] = {}
    undefined: dict[Hashable, str] = {}
    sizes: dict[Hashable, int] = {}
    for i, name in enumerate(names):
        mask = codes == i
        sizes[name] = int(mask.sum())
        pairs = counts[mask].sum()
        if pairs == 0:
            per_group[name] = float("nan")
            undefined[name] = "no point of this subgroup has another point of its class"
        else:
            per_group[name] = float(totals[mask].sum() / pairs)
    if counts.sum() == 0:
        overall = float("nan")
        undefined["overall"] = "every class has a single point: no positive pairs"
    else:
        overall = float(totals.sum() / counts.sum())
    return _summarise(f"alignment(alpha={alpha:g})", overall, per_group, sizes, undefined, False)


def _uniformity_kl(points: np.ndarray) -> tuple[float, str | None]:
    if points.shape[0] < 2:
        return float("nan"), "fewer than two points: no spectrum to compare"
    singular = np.linalg.svd(points, compute_uv=False)
    tolerance = singular.max() * max(points.shape) * np.finfo(float).eps
    if singular.max() == 0 or np.any(singular <= tolerance):
        rank = int(np.sum(singular > tolerance))
        return float("nan"), (
            f"embedding matrix is rank-deficient (rank {rank} < {singular.size}): a zero "
            "singular value makes KL(uniform || spectrum) infinite"
        )
    spectrum = singular / singular.sum()
    uniform = np.full(spectrum.size, 1.0 / spectrum.size)
    return float(stats.entropy(uniform, spectrum)), None


def uniformity(
    embeddings: ArrayLike,
    groups: ArrayLike | None = None,
    *,
    normalize: bool = True,
) -> SubgroupScores:
    """Uniformity ``U_KL`` overall and per subgroup (seed 001, Roth et al. 2020); lower is better.

    ``KL(U || S)`` where ``S`` is the singular values of the (subgroup's) embedding matrix
    normalised to sum to one and ``U`` the uniform distribution over the same number
    (``min(n, d)``) of values. Undefined, with a reason, for subgroups of one point and for
    rank-deficient matrices (the KL divergence is infinite).

    Parameters
    ----------
    embeddings : array_like, shape (n, d)
        One embedding per point.
    groups : array_like, shape (n,), optional
        Subgroup per point; each subgroup's spectrum uses its own points only.
    normalize : bool, default True
        L2-normalise the embeddings first.

    Returns
    -------
    SubgroupScores
        ``U_KL`` overall and per subgroup.

    Examples
    --------
    >>> uniformity([[1.0, 0.0], [0.0, 1.0]]).overall
    0.0
    """
    points = _prepare(embeddings, normalize)
    names, codes = _group_codes(groups, points.shape[0])
    undefined: dict[Hashable, str] = {}
    overall, reason = _uniformity_kl(points)
    if reason:
        undefined["overall"] = reason
    per_group: dict[Hashable, float] = {}
    sizes: dict[Hashable, int] = {}
    for i, name in enumerate(names):
        mask = codes == i
        sizes[name] = int(mask.sum())
        per_group[name], reason = _uniformity_kl(points[mask])
        if reason:
            undefined[name] = reason
    return _summarise("uniformity_kl", overall, per_group, sizes, undefined, False)


def cluster_nmi(
    embeddings: ArrayLike,
    labels: ArrayLike,
    groups: ArrayLike | None = None,
    *,
    n_clusters: int | None = None,
    seed: int = 0,
    n_init: int = 10,
    normalize: bool = True,
) -> SubgroupScores:
    """NMI between class labels and k-means clusters, overall and per subgroup (seed 001).

    k-means (``n_clusters`` defaults to the number of classes) runs once on all points with
    ``random_state=seed``; per subgroup the cluster labels are restricted to its points and
    compared with scikit-learn's ``normalized_mutual_info_score`` (arithmetic normalisation,
    Manning et al. 2008) [Manning2008]. scikit-learn returns 1.0 when both labelings are constant.

    Parameters
    ----------
    embeddings : array_like, shape (n, d)
        One embedding per point.
    labels : array_like, shape (n,)
        Class label per point.
    groups : array_like, shape (n,), optional
        Subgroup per point.
    n_clusters : int, optional
        Number of clusters; default the number of distinct labels.
    seed : int, default 0
        k-means random state.
    n_init : int, default 10
        k-means restarts.
    normalize : bool, default True
        L2-normalise the embeddings first.

    Returns
    -------
    SubgroupScores
        NMI overall and per subgroup, in [0, 1].

    Examples
    --------
    >>> x = [[0.0, 1.0], [0.1, 1.0], [1.0, 0.0], [1.0, 0.1]]
    >>> cluster_nmi(x, [0, 0, 1, 1]).overall
    1.0
    """
    label_values = np.asarray(labels)
    points = _prepare(embeddings, normalize, label_values.shape[0])
    clusters_wanted = n_clusters or int(np.unique(label_values).size)
    if not 1 <= clusters_wanted <= points.shape[0]:
        raise ValueError("n_clusters must lie in [1, n_points]")
    clusters = KMeans(n_clusters=clusters_wanted, random_state=seed, n_init=n_init).fit_predict(points)
    names, codes = _group_codes(groups, points.shape[0])
    per_group = {
        name: float(normalized_mutual_info_score(label_values[codes == i], clusters[codes == i]))
        for i, name in enumerate(names)
    }
    sizes = {name: int(np.sum(codes == i)) for i, name in enumerate(names)}
    overall = float(normalized_mutual_info_score(label_values, clusters))
    return _summarise("cluster_nmi", overall, per_group, sizes, {}, True)


def embedding_fairness(
    embeddings: ArrayLike,
    labels: ArrayLike,
    groups: ArrayLike,
    *,
    k: int = 1,
    seed: int = 0,
    normalize: bool = True,
) -> EmbeddingFairness:
    """Seed 001's subgroup metrics of an embedding: recall@k, alignment, uniformity, NMI.

    Parameters
    ----------
    embeddings : array_like, shape (n, d)
        One embedding per point.
    labels : array_like, shape (n,)
        Class label per point.
    groups : array_like, shape (n,)
        Subgroup (e.g. skin-tone band) per point.
    k : int, default 1
        Neighbours for recall@k.
    seed : int, default 0
        k-means random state.
    normalize : bool, default True
        L2-normalise the embeddings first.

    Returns
    -------
    EmbeddingFairness
        One :class:`SubgroupScores` per metric, each with its gaps.

    Examples
    --------
    >>> x = [[0.0, 1.0], [0.1, 1.0], [1.0, 0.0], [1.0, 0.1]]
    >>> embedding_fairness(x, [0, 0, 1, 1], ["a", "b", "a", "b"]).recall_at_k.gap
    0.0
    """
    return EmbeddingFairness(
        recall_at_k=recall_at_k(embeddings, labels, groups, k=k, normalize=normalize),
        alignment=alignment(embeddings, labels, groups, normalize=normalize),
        uniformity=uniformity(embeddings, groups, normalize=normalize),
        cluster_nmi=cluster_nmi(embeddings, labels, groups, seed=seed, normalize=normalize),
    )
