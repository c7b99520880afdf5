"""Intersectional unfairness (seed 000): customers in underperforming clusters of a DBSCAN ensemble."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ._checks import _as_errors

__all__ = [
    "DEFAULT_EPS_EXPONENTS",
    "EpsClusters",
    "IntersectionalUnfairness",
    "intersectional_unfairness",
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
