"""Inference that holds when photos of one person repeat and errors are noisier in some groups.

Seed 000 tests its scores as if every image were an independent sample and every group equally noisy.
Real evaluation sets break both: a person has a front and a side photo (or ten), and deep tones or
small groups are often noisier. Measured on seeded nulls (``bench/sim_verdicts.py``), treating two
photos per person as independent called skin tone "significant" about 23% of the time instead of 5%,
and the least-squares slope t-test alone said so 17% of the time when deep tones were only noisier.

Three tools, shared by every verdict of :mod:`metrics.unfairness`:

* :func:`contrast_max_t`: means of groups (tone bands, genders, grid cells) compared through linear
  contrasts (pairwise differences, a cell against the rest), each studentised with a cluster-robust
  standard error, and calibrated jointly by a **wild cluster bootstrap** of the largest |t| (Rademacher
  weights drawn once per cluster, residuals of the null "every group mean is equal";
  Cameron, Gelbach & Miller 2008) [CameronGelbachMiller2008]. The largest |t| gives single-step adjusted p-values
  (Westfall & Young 1993 [WestfallYoung1993]: family-wise error rate over every contrast) and the critical value of
  simultaneous intervals. Without clusters every sample is its own cluster, which makes it a wild
  bootstrap robust to unequal variances (a group's standard error is then Welch's ``s / sqrt(n)``).
* :func:`robust_slope`: the least-squares slope with the CR2 cluster-robust variance and Bell-McCaffrey
  degrees of freedom (Bell & McCaffrey 2002 [BellMcCaffrey2002]; Pustejovsky & Tipton 2018) [PustejovskyTipton2018]. With one sample per cluster it
  is HC2 with Satterthwaite degrees of freedom, which kept the nominal rate under unequal variances
  where HC3 with ``n - 2`` degrees of freedom and plain OLS did not (``bench/sim_verdicts.py``).
* :func:`cluster_permutations`: permutations that move whole clusters, for the tests of seed 000 that
  are permutation tests (the KS test's, the DBSCAN ensemble's): a cluster's samples go to a cluster of
  the same size, so the permuted data keep the clustering.

Everything takes ``clusters=None`` for independent samples; :func:`cluster_codes` turns any labels
(subject ids) into codes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "ContrastTest",
    "GroupMean",
    "RobustSlope",
    "cluster_codes",
    "cluster_permutations",
    "contrast_max_t",
    "design_effect",
    "mean_interval",
    "robust_slope",
]

#: Resamples of the wild bootstrap (p-value resolution 1/1000).
DEFAULT_BOOTSTRAPS = 999
# Weights drawn at once (bootstrap rows x clusters): about 32 MB of float64.
_BLOCK_CELLS = 4_000_000


def _weights(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    """Rademacher weights (+-1 with equal chances), one per cluster and resample.

    Webb's six-point [Webb2023] weights, often advised for few clusters, over-rejected here: 6.0% against 5.2% for
    Rademacher on the same 1,400 clustered null grids (25 cells of 5 to 15 people each); Cameron,
    Gelbach & Miller (2008) [CameronGelbachMiller2008] use Rademacher. Groups of fewer than 5 people are not tested in the grid,
    where 2^G sign patterns would be too few.
    """
    return 2.0 * rng.integers(0, 2, size=shape) - 1.0


#: z of 80% power, for the minimum detectable gap.
Z_POWER_80 = 0.8416212335729143
#: Groups with fewer clusters than this get a floor on their standard error (see :func:`contrast_max_t`).
SMALL_GROUP_CLUSTERS = 30


def cluster_codes(clusters: Sequence[object] | np.ndarray | None, n: int) -> tuple[np.ndarray, int]:
    """Integer codes ``0 .. G-1`` of each sample's cluster, and ``G``; ``None``: every sample alone.

    Missing labels (None, NaN, empty text) make their sample a cluster of its own.

    Examples
    --------
    >>> codes, g = cluster_codes(["s1", "s2", "s1", None], 4)
    >>> codes.tolist(), g
    ([0, 1, 0, 2], 3)
    """
    if clusters is None:
        return np.arange(n, dtype=np.intp), n
    labels = np.asarray(clusters, dtype=object)
    if labels.shape != (n,):
        raise ValueError(f"clusters must have one label per sample: {labels.size} for {n} samples")
    missing = np.array([v is None or (isinstance(v, float) and np.isnan(v)) or str(v).strip() == "" for v in labels])
    text = np.where(missing, "", labels.astype(str))
    _, codes = np.unique(text, return_inverse=True)
    codes = codes.astype(np.intp)
    if missing.any():
        # Each sample without a cluster label is alone: fresh codes after the labelled ones.
        base = int(codes[~missing].max()) + 1 if (~missing).any() else 0
        codes[missing] = base + np.arange(int(missing.sum()))
        _, codes = np.unique(codes, return_inverse=True)
    return codes.astype(np.intp), int(codes.max()) + 1 if n else 0


@dataclass(frozen=True)
class GroupMean:
    """The mean error of one group with its cluster-robust interval.

    Attributes
    ----------
    n, n_clusters : int
        Samples and distinct clusters (people) in the group.
    mean : float or None
        Mean error (None when empty).
    se : float or None
        Cluster-robust standard error (CR1: ``G / (G - 1)``); Welch's ``s / sqrt(n)`` without clusters.
        None with fewer than 2 clusters.
    ci_low, ci_high : float or None
        ``mean -+ t(G - 1) se`` at ``1 - alpha`` (not simultaneous).
    """

    n: int
    n_clusters: int
    mean: float | None
    se: float | None
    ci_low: float | None
    ci_high: float | None


@dataclass(frozen=True)
class ContrastTest:
    """Linear contrasts of group means, tested jointly by the wild cluster bootstrap of the largest |t|.

    Attributes
    ----------
    groups : tuple of GroupMean
        Every group, tested or not.
    tested : ndarray of int
        Groups that enter the contrasts (at least 2 clusters).
    estimates, se, t : ndarray
        Per contrast.
    p_adjusted : ndarray
        Single-step max-t adjusted p-values (family-wise over the contrasts).
    p_value : float
        p-value of "every group mean is equal" (the smallest adjusted p-value).
    critical : float
        The ``1 - alpha`` quantile of the bootstrap largest |t|: ``estimate -+ critical * se`` are
        simultaneous intervals; ``p_value < alpha`` exactly when some ``|t| > critical``.
    ci_low, ci_high : ndarray
        Those simultaneous intervals.
    n_boot, alpha
        Settings.
    n_clusters : int
        Clusters in all.
    clustered : bool
        Whether samples were clustered (False: every sample its own cluster).
    pooled_sd : float
        Pooled within-group standard deviation of the errors.
    design_effect : float
        Design effect of the clustering on the residuals (1 without clusters).
    """

    groups: tuple[GroupMean, ...]
    tested: np.ndarray
    estimates: np.ndarray
    se: np.ndarray
    t: np.ndarray
    p_adjusted: np.ndarray
    p_value: float
    critical: float
    ci_low: np.ndarray
    ci_high: np.ndarray
    n_boot: int
    alpha: float
    n_clusters: int
    clustered: bool
    pooled_sd: float = 0.0
    design_effect: float = 1.0


def _critical(null_max: np.ndarray, alpha: float) -> float:
    """The value that the observed largest |t| must exceed for ``p < alpha`` (p = (1 + #>=) / (1 + B))."""
    b = null_max.size
    allowed = int(np.ceil(alpha * (b + 1) - 1))  # at most allowed - 1 resamples may reach the statistic
    if allowed < 1:
        return float("inf")
    return float(np.sort(null_max)[::-1][allowed - 1])


def _group_sums(values: np.ndarray, group: np.ndarray, k: int, cluster: np.ndarray, g: int) -> tuple[Any, Any]:
    """Per (cluster, group): count and sum of ``values`` as dense (G x k) arrays when small, else sparse."""
    from scipy.sparse import csr_matrix

    counts = csr_matrix((np.ones(values.size), (cluster, group)), shape=(g, k))
    sums = csr_matrix((values, (cluster, group)), shape=(g, k))
    counts.sum_duplicates()
    sums.sum_duplicates()
    return counts, sums


def contrast_max_t(
    values: Sequence[float] | np.ndarray,
    group: Sequence[int] | np.ndarray,
    n_groups: int,
    contrasts: np.ndarray | Callable[[np.ndarray, np.ndarray], np.ndarray],
    *,
    clusters: Sequence[object] | np.ndarray | None = None,
    n_boot: int = DEFAULT_BOOTSTRAPS,
    alpha: float = 0.05,
    seed: int = 0,
    alternative: str = "two-sided",
) -> ContrastTest:
    """Test linear contrasts of group means jointly (wild cluster bootstrap of the largest |t|).

    Parameters
    ----------
    values : array-like of float, shape (n,)
        Per-sample error.
    group : array-like of int, shape (n,)
        Group index ``0 .. n_groups - 1`` of each sample.
    n_groups : int
        Number of groups (some may be empty).
    contrasts : callable or array-like
        Either a matrix ``(q, n_groups)`` whose rows sum to 0, or a function of the tested group indices
        (and the group sizes) returning one: the contrasts can only involve groups with at least 2
        clusters.

    Notes
    -----
    A group of few people can show errors that agree by chance, and its own standard error then says it
    is precise when it is not (four images once gave a simultaneous interval narrow enough to call a gap
    negligible). Each contrast's variance is therefore at least what the pooled within-group spread
    implies for its small groups (fewer than ``SMALL_GROUP_CLUSTERS`` people):
    ``sum_g A_jg^2 s^2 deff / n_g``, in the observed statistic and in every resample alike, so the test
    stays calibrated and only becomes more cautious about small groups.
    clusters : array-like, shape (n,), optional
        Cluster (person) of each sample; None: independent samples.
    n_boot : int, default 999
        Bootstrap resamples.
    alpha : float, default 0.05
        Level of the simultaneous intervals and each group's interval.
    seed : int, default 0
        Seed of the weights (the result is reproducible).
    alternative : str, default "two-sided"
        ``"greater"``: only contrasts above 0 count against the null (the largest t, not |t|; e.g. a
        cell whose error is higher than the rest's). The simultaneous intervals then take their lower
        bounds from the largest t of the resamples and their upper bounds from the largest -t.

    Returns
    -------
    ContrastTest
        Group means, contrasts, adjusted p-values and simultaneous intervals.

    Raises
    ------
    ValueError
        Length mismatch, non-finite values, or no contrast to test.

    Examples
    --------
    Two groups, a real difference of 1 and independent samples:

    >>> rng = np.random.default_rng(0)
    >>> g = np.repeat([0, 1], 100)
    >>> y = rng.normal(1.0, 0.3, 200) + g
    >>> test = contrast_max_t(y, g, 2, [[-1.0, 1.0]], n_boot=199)
    >>> round(float(test.estimates[0]), 1), test.p_value < 0.05
    (1.0, True)
    """
    from scipy.stats import t as student_t

    y = np.asarray(values, dtype=np.float64)
    index = np.asarray(group, dtype=np.intp)
    n = y.size
    if index.shape != y.shape:
        raise ValueError(f"values and group differ in length: {n} vs {index.size}")
    if not np.all(np.isfinite(y)):
        raise ValueError("values contain NaN or infinite values")
    if n and (index.min() < 0 or index.max() >= n_groups):
        raise ValueError(f"group indices must lie in 0..{n_groups - 1}")
    if n_boot < 1:
        raise ValueError(f"n_boot must be at least 1, got {n_boot}")
    cluster, g = cluster_codes(clusters, n)
    k = int(n_groups)
    sizes = np.bincount(index, minlength=k).astype(np.float64)
    sums = np.bincount(index, weights=y, minlength=k)
    means = np.divide(sums, sizes, out=np.zeros(k), where=sizes > 0)
    counts, _ = _group_sums(y, index, k, cluster, g)
    n_clusters = np.asarray((counts > 0).sum(axis=0)).ravel().astype(np.int64)
    # Residuals of the group means (the observed standard errors) and of the null's common mean (the bootstrap).
    grand = float(y.mean()) if n else 0.0
    _, s_unrestricted = _group_sums(y - means[index], index, k, cluster, g)
    _, s_restricted = _group_sums(y - grand, index, k, cluster, g)
    # CR1 per group: G / (G - 1) (Welch's n / (n - 1) when every sample is alone); 1 for a one-cluster group.
    factor = np.where(n_clusters >= 2, n_clusters / np.maximum(n_clusters - 1, 1), 1.0)
    tested = np.flatnonzero(n_clusters >= 2)

    var_group = np.full(k, np.nan)
    su_dense_sq = s_unrestricted.multiply(s_unrestricted)
    ss = np.asarray(su_dense_sq.sum(axis=0)).ravel()
    with np.errstate(invalid="ignore", divide="ignore"):
        var_group = np.where(sizes > 0, factor * ss / np.maximum(sizes, 1) ** 2, np.nan)
    groups = []
    for j in range(k):
        if sizes[j] == 0:
            groups.append(GroupMean(0, 0, None, None, None, None))
            continue
        if n_clusters[j] >= 2:
            se = float(np.sqrt(var_group[j]))
            half = float(student_t.ppf(1 - alpha / 2, n_clusters[j] - 1)) * se
            groups.append(
                GroupMean(int(sizes[j]), int(n_clusters[j]), float(means[j]), se, means[j] - half, means[j] + half)
            )
        else:
            groups.append(GroupMean(int(sizes[j]), int(n_clusters[j]), float(means[j]), None, None, None))

    residual = y - means[index]
    nonempty = int(np.count_nonzero(sizes))
    pooled_sd = float(np.sqrt(residual @ residual / max(n - nonempty, 1))) if n else 0.0
    deff = max(1.0, design_effect(residual, clusters)["design_effect"] or 1.0) if clusters is not None else 1.0
    planned_var = np.where(
        (n_clusters < SMALL_GROUP_CLUSTERS) & (sizes > 0), pooled_sd**2 * deff / np.maximum(sizes, 1), 0.0
    )
    matrix = contrasts(tested, sizes) if callable(contrasts) else contrasts
    a = np.atleast_2d(np.asarray(matrix, dtype=np.float64))
    if a.size == 0 or a.shape[0] == 0:
        raise ValueError(f"nothing to test: {tested.size} group(s) with at least 2 clusters")
    if a.shape[1] != k:
        raise ValueError(f"contrasts must have {k} columns, got {a.shape[1]}")
    q = a.shape[0]
    # Per cluster, its share of each contrast: r_cj = sum_g sqrt(f_g) A_jg / n_g * S_cg.
    scaled = a * np.sqrt(factor)[None, :] / np.maximum(sizes, 1)[None, :]  # (q x k)
    estimates = a @ means
    p_unr = s_unrestricted @ scaled.T  # (G x q), dense
    var = np.asarray(np.square(p_unr)).sum(axis=0)
    # A group of identical errors has variance 0; a floor keeps the t statistics finite.
    floor = (1e-12 * max(1.0, float(np.abs(y).max(initial=0.0)))) ** 2
    floor_var = np.maximum((a * a) @ planned_var, floor)
    var = np.maximum(var, floor_var)
    se = np.sqrt(var)
    t_obs = estimates / se

    if alternative not in ("two-sided", "greater"):
        raise ValueError(f"alternative must be 'two-sided' or 'greater', got {alternative!r}")
    null_up, null_down = _bootstrap_max_t(s_restricted, counts, scaled, a, sizes, g, n_boot, seed, floor_var)
    if alternative == "greater":
        null_max, observed = null_up, t_obs
    else:
        null_max, observed = np.maximum(null_up, null_down), np.abs(t_obs)
    tol = 1 - 1e-12
    exceed = null_max[None, :] >= np.where(observed > 0, observed * tol, observed / tol)[:, None]
    p_adjusted = (1 + np.count_nonzero(exceed, axis=1)) / (1 + n_boot)
    critical = _critical(null_max, alpha)
    critical_high = critical if alternative == "two-sided" else _critical(null_down, alpha)
    return ContrastTest(
        groups=tuple(groups),
        tested=tested,
        estimates=estimates,
        se=se,
        t=t_obs,
        p_adjusted=p_adjusted.astype(np.float64),
        p_value=float(p_adjusted.min()) if q else 1.0,
        critical=critical,
        ci_low=estimates - critical * se,
        ci_high=estimates + critical_high * se,
        n_boot=int(n_boot),
        alpha=float(alpha),
        n_clusters=int(g),
        clustered=clusters is not None,
        pooled_sd=pooled_sd,
        design_effect=float(deff),
    )


def _bootstrap_max_t(
    s_restricted: Any,
    counts: Any,
    scaled: np.ndarray,
    a: np.ndarray,
    sizes: np.ndarray,
    g: int,
    n_boot: int,
    seed: int | None,
    floor: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Largest t and largest -t of each wild-bootstrap resample (weights per cluster, the null's residuals).

    For resample ``b`` with cluster weights ``w``: ``y* = grand + w_c e_i`` (``e`` the residuals of the
    common mean), so each group's mean moves by ``delta_g = sum_c w_c S_cg / n_g`` and the residuals that
    its standard error uses are ``w_c e_i - delta_g``. Their per-cluster contrast shares
    ``r*_cj = w_c P_cj - sum_g M_cg delta_g A~_jg`` (``P = S A~^T``, ``M`` the counts) give
    ``sum_c r*_cj^2 = sum_c w_c^2 P_cj^2 - 2 sum_g delta_g A~_jg T_jg + delta^T (A~_j ... ) M^T M (...)``
    with ``T_jg = sum_c w_c P_cj M_cg``: every term a matrix product, no resample built sample by sample.
    """
    from scipy.sparse import csr_matrix

    rng = np.random.default_rng(seed)
    q, k = scaled.shape
    sizes_safe = np.maximum(sizes, 1)
    p_res = np.asarray(s_restricted @ scaled.T)  # (G x q)
    p_sq = np.square(p_res)
    s_csc = s_restricted.tocsc()
    m_coo = counts.tocoo()
    # Z[c, j * k + g] = P_cj M_cg: nonzero where cluster c has samples of group g.
    rows = np.repeat(m_coo.row, q)
    cols = (np.tile(np.arange(q), m_coo.nnz) * k) + np.repeat(m_coo.col, q)
    data = p_res[m_coo.row][:, :].ravel() * np.repeat(m_coo.data, q)
    z = csr_matrix((data, (rows, cols)), shape=(g, q * k)).T.tocsr()  # (qk x G)
    mtm = np.asarray((counts.T @ counts).todense())  # (k x k)
    st = s_csc.T.tocsr()  # (k x G)
    null_up = np.empty(n_boot)
    null_down = np.empty(n_boot)
    block = max(1, _BLOCK_CELLS // max(g, 1))
    for start in range(0, n_boot, block):
        stop = min(n_boot, start + block)
        w = _weights(rng, (g, stop - start))  # (G x B)
        delta = np.asarray(st @ w).T / sizes_safe[None, :]  # (B x k)
        term1 = np.square(w).T @ p_sq  # (B x q)
        t_jg = np.asarray(z @ w).T.reshape(stop - start, q, k)  # (B x q x k)
        weighted = delta[:, None, :] * scaled[None, :, :]  # (B x q x k): delta_g A~_jg
        term2 = np.einsum("bqk,bqk->bq", weighted, t_jg)
        term3 = np.einsum("bqk,kl,bql->bq", weighted, mtm, weighted)
        var = np.maximum(term1 - 2 * term2 + term3, floor[None, :])
        estimate = delta @ a.T  # (B x q): contrasts of the mean shifts (the common mean cancels)
        t = estimate / np.sqrt(var)
        null_up[start:stop] = np.max(t, axis=1)
        null_down[start:stop] = np.max(-t, axis=1)
    return null_up, null_down


@dataclass(frozen=True)
class RobustSlope:
    """Least-squares slope of error on an attribute with a cluster-robust test.

    Attributes
    ----------
    slope, intercept : float
        The least-squares line (the same as seed 000's).
    se : float
        CR2 standard error of the slope (HC2 with one sample per cluster).
    df : float
        Bell-McCaffrey (Satterthwaite) degrees of freedom of the t reference.
    p_value : float
        Two-sided p-value of ``slope == 0``.
    ci_low, ci_high : float
        ``1 - alpha`` interval of the slope.
    score, score_ci_low, score_ci_high : float
        ``slope * (P_high - P_low)`` (seed 000's score) with its interval.
    attribute_range : tuple of float
        The attribute's two percentiles.
    n, n_clusters : int
        Samples and clusters.
    method : str
        In words.
    """

    slope: float
    intercept: float
    se: float
    df: float
    p_value: float
    ci_low: float
    ci_high: float
    score: float
    score_ci_low: float
    score_ci_high: float
    attribute_range: tuple[float, float]
    n: int
    n_clusters: int
    method: str


def _inverse_sqrt(blocks: np.ndarray) -> np.ndarray:
    """Symmetric inverse square roots of a stack of symmetric positive semi-definite matrices."""
    w, v = np.linalg.eigh(blocks)
    # I - H_cc is singular only when one cluster determines the fit; leave such directions unscaled.
    inv = np.where(w > 1e-12, 1.0 / np.sqrt(np.maximum(w, 1e-12)), 0.0)
    return np.asarray(np.einsum("...ij,...j,...kj->...ik", v, inv, v))


def robust_slope(
    errors: Sequence[float] | np.ndarray,
    attribute: Sequence[float] | np.ndarray,
    *,
    clusters: Sequence[object] | np.ndarray | None = None,
    alpha: float = 0.05,
    percentiles: tuple[float, float] = (5, 95),
) -> RobustSlope:
    """The slope of error on an attribute, tested with CR2 and Bell-McCaffrey degrees of freedom.

    ``V = (X'X)^-1 sum_c X_c' A_c e_c e_c' A_c X_c (X'X)^-1`` with ``A_c = (I - H_cc)^(-1/2)``
    (Bell & McCaffrey 2002) [BellMcCaffrey2002]; the t reference has Satterthwaite degrees of freedom under working
    independence, ``nu = (sum_c ||q_c||^2)^2 / sum_(c,c') (q_c . q_c')^2`` with
    ``q_c = (I - H) p_c`` and ``p_c`` the cluster's row of the estimator (Pustejovsky & Tipton 2018 [PustejovskyTipton2018],
    section 3). With one sample per cluster this is HC2 with those degrees of freedom.

    Parameters
    ----------
    errors, attribute : array-like of float, shape (n,)
        Per-sample error and attribute (finite; the attribute not constant).
    clusters : array-like, shape (n,), optional
        Cluster of each sample.
    alpha : float, default 0.05
        Level of the intervals.
    percentiles : tuple of float, default (5, 95)
        Seed 000's score range.

    Returns
    -------
    RobustSlope
        Slope, its robust test and interval, and the score's interval.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x = rng.uniform(1, 10, 400)
    >>> fit = robust_slope(1 + 0.1 * x + rng.normal(0, 0.5, 400), x)
    >>> round(fit.slope, 2), fit.p_value < 0.05, fit.method.startswith("HC2")
    (0.1, True, True)
    """
    from scipy.stats import t as student_t

    y = np.asarray(errors, dtype=np.float64)
    x = np.asarray(attribute, dtype=np.float64)
    if x.shape != y.shape:
        raise ValueError(f"errors and attribute differ in length: {y.size} vs {x.size}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError("errors and attribute must be finite")
    if y.size < 3:
        raise ValueError(f"need at least 3 samples for a slope, got {y.size}")
    if np.all(x == x[0]):
        raise ValueError("the attribute is constant: no slope can be fitted")
    cluster, g = cluster_codes(clusters, y.size)
    if g < 3:
        raise ValueError(f"need at least 3 clusters for a cluster-robust slope, got {g}")
    design = np.column_stack([np.ones_like(x), x])
    bread = np.linalg.inv(design.T @ design)
    beta = bread @ design.T @ y
    residual = y - design @ beta
    contrast = bread[1]  # the slope's row of (X'X)^-1
    # Per cluster: p_c = A_c X_c (X'X)^-1 c on the cluster's rows; clusters of one size are done together.
    order = np.argsort(cluster, kind="stable")
    sizes = np.bincount(cluster, minlength=g)
    starts = np.r_[0, np.cumsum(sizes)[:-1]]
    p = np.empty(y.size)
    for size in np.unique(sizes):
        members = np.flatnonzero(sizes == size)
        idx = (starts[members][:, None] + np.arange(size)[None, :]).ravel()
        rows = order[idx].reshape(members.size, size)
        xc = design[rows]  # (m x size x 2)
        h = np.einsum("mia,ab,mjb->mij", xc, bread, xc)
        a_c = _inverse_sqrt(np.eye(size)[None] - h)
        p[rows] = np.einsum("mij,mjb,b->mi", a_c, xc, contrast)
    share = np.bincount(cluster, weights=p * residual, minlength=g)
    variance = float(np.sum(share**2))
    # Bell-McCaffrey degrees of freedom: Gram matrix of q_c = (I - H) p_c without building it.
    norm2 = np.bincount(cluster, weights=p * p, minlength=g)  # ||p_c||^2
    u = np.column_stack([np.bincount(cluster, weights=p * design[:, j], minlength=g) for j in range(2)])  # X'p_c
    umu = np.einsum("ca,ab,cb->c", u, bread, u)
    mutu = bread @ (u.T @ u)
    trace = float(norm2.sum() - np.trace(mutu))
    trace_sq = float(np.sum(norm2**2) - 2 * np.sum(norm2 * umu) + np.trace(mutu @ mutu))
    df = trace**2 / trace_sq if trace_sq > 0 else float(g - 1)
    se = float(np.sqrt(max(variance, 0.0)))
    slope = float(beta[1])
    if se > 0:
        p_value = float(2 * student_t.sf(abs(slope) / se, df))
    else:
        p_value = 0.0 if slope != 0 else 1.0
    half = float(student_t.ppf(1 - alpha / 2, df)) * se
    low_pct, high_pct = (float(v) for v in percentiles)
    low, high = np.percentile(x, [low_pct, high_pct])
    span = float(high - low)
    method = (
        f"CR2 cluster-robust slope over {g} clusters, Bell-McCaffrey degrees of freedom ({df:.1f})"
        if clusters is not None
        else f"HC2 robust slope, Satterthwaite (Bell-McCaffrey) degrees of freedom ({df:.1f})"
    )
    return RobustSlope(
        slope=slope,
        intercept=float(beta[0]),
        se=se,
        df=float(df),
        p_value=p_value,
        ci_low=slope - half,
        ci_high=slope + half,
        score=slope * span,
        score_ci_low=(slope - half) * span,
        score_ci_high=(slope + half) * span,
        attribute_range=(float(low), float(high)),
        n=int(y.size),
        n_clusters=int(g),
        method=method,
    )


def mean_interval(
    values: Sequence[float] | np.ndarray,
    clusters: Sequence[object] | np.ndarray | None = None,
    alpha: float = 0.05,
) -> GroupMean:
    """The mean with its cluster-robust t-interval (the same rule as each group's in :func:`contrast_max_t`).

    Examples
    --------
    >>> m = mean_interval([1.0, 2.0, 3.0, 4.0])
    >>> m.mean, round(m.se, 4), round(m.ci_low, 3), round(m.ci_high, 3)
    (2.5, 0.6455, 0.446, 4.554)
    """
    from scipy.stats import t as student_t

    y = np.asarray(values, dtype=np.float64)
    n = y.size
    cluster, g = cluster_codes(clusters, n)
    if n == 0:
        return GroupMean(0, 0, None, None, None, None)
    mean = float(y.mean())
    if g < 2:
        return GroupMean(n, g, mean, None, None, None)
    sums = np.bincount(cluster, weights=y - mean, minlength=g)
    se = float(np.sqrt(g / (g - 1) * np.sum(sums**2)) / n)
    half = float(student_t.ppf(1 - alpha / 2, g - 1)) * se
    return GroupMean(n, g, mean, se, mean - half, mean + half)


def design_effect(
    values: Sequence[float] | np.ndarray, clusters: Sequence[object] | np.ndarray | None
) -> dict[str, Any]:
    """How much the clustering widens the interval of the mean error (Kish's design effect).

    ``deff = var_CR1(mean) / (s^2 / n)``: 1 for independent samples, about ``1 + (m - 1) rho`` for
    clusters of ``m`` samples with intra-cluster correlation ``rho``; ``n / deff`` samples carry the
    information of independent ones.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> person = np.repeat(np.arange(300), 3)
    >>> y = rng.normal(0, 1, 300)[person] + rng.normal(0, 0.3, 900)
    >>> part = design_effect(y, person)
    >>> part["n_clusters"], 2.5 < part["design_effect"] < 3.2
    (300, True)
    """
    y = np.asarray(values, dtype=np.float64)
    cluster, g = cluster_codes(clusters, y.size)
    n = y.size
    if n < 2 or g < 2:
        return {"n": int(n), "n_clusters": int(g), "design_effect": None, "effective_n": None}
    residual = y - y.mean()
    iid = float(residual @ residual / (n - 1) / n)
    sums = np.bincount(cluster, weights=residual, minlength=g)
    clustered = float(g / (g - 1) * np.sum(sums**2) / n**2)
    deff = clustered / iid if iid > 0 else 1.0
    sizes = np.bincount(cluster, minlength=g)
    return {
        "n": int(n),
        "n_clusters": int(g),
        "mean_cluster_size": float(n / g),
        "largest_cluster": int(sizes.max()),
        "design_effect": float(deff),
        "effective_n": float(n / deff) if deff > 0 else None,
    }


def cluster_permutations(
    clusters: Sequence[object] | np.ndarray | None, n: int, n_permutations: int, rng: np.random.Generator
) -> Iterator[np.ndarray]:
    """Yield ``n_permutations`` index arrays that move whole clusters onto clusters of the same size.

    ``values[perm]`` gives every cluster the values of another cluster of its size (in the other
    cluster's order), so a permutation test keeps the data's clustering; without clusters each is a
    plain permutation of the samples.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> person = np.array([0, 0, 1, 1, 2])
    >>> perm = next(cluster_permutations(person, 5, 1, rng))
    >>> sorted(perm[:2].tolist()) in ([0, 1], [2, 3]), int(perm[4])
    (True, 4)
    """
    cluster, g = cluster_codes(clusters, n)
    if clusters is None:
        for _ in range(n_permutations):
            yield rng.permutation(n)
        return
    order = np.argsort(cluster, kind="stable")
    sizes = np.bincount(cluster, minlength=g)
    starts = np.r_[0, np.cumsum(sizes)[:-1]]
    strata = [np.flatnonzero(sizes == size) for size in np.unique(sizes)]
    for _ in range(n_permutations):
        perm = np.empty(n, dtype=np.intp)
        for members in strata:
            size = sizes[members[0]]
            targets = members
            sources = rng.permutation(members)
            offsets = np.arange(size)
            perm[order[(starts[targets][:, None] + offsets).ravel()]] = order[
                (starts[sources][:, None] + offsets).ravel()
            ]
        yield perm
