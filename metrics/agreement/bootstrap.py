"""Krippendorff's alpha and the kappas with a BCa bootstrap confidence interval over items.

The interval is the bias-corrected and accelerated (BCa) bootstrap interval (Efron 1987 [Efron1987]; Efron and
Tibshirani 1993 [EfronTibshirani1993], ch. 14) over items (images), not the plain percentile interval: a coefficient's
bootstrap distribution is skewed and biased (alpha is bounded above by 1 and its bootstrap
distribution sits below the estimate when agreement is high), and the percentile interval of a
skewed statistic can even leave out the estimate. BCa corrects the median bias (``z0``, from the
share of resamples below the estimate) and the skewness (the acceleration ``a``, from the item
jackknife). One guard on top: if BCa's endpoints (quantiles of finitely many resamples) still miss
the estimate, the interval is widened to it, so the estimate is always inside. ``bench/
bench_agreement_coverage.py`` measures the coverage on planted data.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from ._data import LevelOfMeasurement, _as_reliability_data, _check_level, _domain
from .kappa import _category_positions, _disagreement_weights, fleiss_kappa
from .krippendorff import _distance_matrix, interpret_alpha

__all__ = [
    "AlphaBootstrap",
    "CoefficientInterval",
    "bootstrap_alpha",
    "bootstrap_alpha_levels",
    "bootstrap_cohen_kappa",
    "bootstrap_fleiss_kappa",
    "kappa_matrix_intervals",
]

#: Name of the interval method, for the pages and the data card.
INTERVAL_METHOD = "BCa bootstrap over images"


@dataclass(frozen=True)
class AlphaBootstrap:
    """Krippendorff's alpha with an item-bootstrap BCa interval.

    Attributes
    ----------
    estimate : float
        Alpha on the full data (NaN if undefined).
    low, high : float
        BCa confidence interval (NaN if no resample gave a defined alpha); always contains
        ``estimate`` when both are defined.
    confidence : float
        Confidence level of ``[low, high]``.
    n_resamples : int
        Number of resamples drawn.
    n_valid_resamples : int
        Resamples whose alpha is defined (the interval uses these only).
    n_items : int
        Pairable items (items with two or more labels): the units resampled.
    n_pairable : int
        Pairable values (labels on pairable items).
    level_of_measurement : str
    resampled : ndarray, shape (n_resamples,)
        Alpha of each resample (NaN where undefined), e.g. for a histogram.
        Not part of equality or ``repr``.
    method : str
        ``"BCa"``.
    percentile_low, percentile_high : float
        The plain percentile interval of the same resamples, for comparison only (it may leave out
        the estimate).
    """

    estimate: float
    low: float
    high: float
    confidence: float
    n_resamples: int
    n_valid_resamples: int
    n_items: int
    n_pairable: int
    level_of_measurement: str
    resampled: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False, compare=False)
    method: str = "BCa"
    percentile_low: float = math.nan
    percentile_high: float = math.nan

    @property
    def interpretation(self) -> str:
        """``interpret_alpha(self.estimate)``."""
        return interpret_alpha(self.estimate)


def _count_patterns(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of an items x values count matrix and their frequencies."""
    n_values = counts.shape[1]
    integral = np.issubdtype(counts.dtype, np.integer) or np.array_equal(counts, np.round(counts))
    base = int(counts.max()) + 1 if counts.size else 1
    if integral and counts.min(initial=0) >= 0 and base**n_values < 2**62:
        # One integer key per row: much faster than np.unique(axis=0), which
        # sorts rows lexicographically (0.9 s for 100,000 x 19).
        powers = base ** np.arange(n_values, dtype=np.int64)
        keys = counts.astype(np.int64) @ powers
        _, first, frequency = np.unique(keys, return_index=True, return_counts=True)
        return counts[first], frequency
    return np.unique(counts, axis=0, return_counts=True)


def _alpha_batch(o_upper: np.ndarray, values: np.ndarray, level: str) -> np.ndarray:
    """Alpha for a batch of coincidence matrices given by their upper triangles."""
    n_values = values.size
    rows, cols = np.triu_indices(n_values)
    o = np.empty((o_upper.shape[0], n_values, n_values))
    o[:, rows, cols] = o_upper
    o[:, cols, rows] = o_upper
    n_v = o.sum(axis=1)
    n = n_v.sum(axis=1)
    if level == "ordinal":
        d = _distance_matrix(values, n_v, level)  # batch x V x V
        observed = np.einsum("bij,bij->b", o, d)
        expected = np.einsum("bi,bij,bj->b", n_v, d, n_v)
    else:
        d = _distance_matrix(values, n_v, level)
        observed = o.reshape(o.shape[0], -1) @ d.ravel()
        expected = np.einsum("bi,ij,bj->b", n_v, d, n_v)
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = expected / (n - 1)
        alpha = 1.0 - observed / expected
    alpha[~(expected > 0) | ~(n > 1)] = np.nan
    return np.asarray(alpha)


@dataclass(frozen=True)
class CoefficientInterval:
    """An agreement coefficient (kappa) with its item-bootstrap BCa interval.

    Attributes
    ----------
    estimate : float
        The coefficient on the full data (NaN if undefined).
    low, high : float
        BCa confidence interval, NaN if no resample was defined; contains ``estimate``.
    confidence : float
    n_resamples, n_valid_resamples : int
    n_units : int
        Units resampled (items, or clusters of items).
    method : str
        ``"BCa"``.
    percentile_low, percentile_high : float
        The plain percentile interval of the same resamples (comparison only).
    """

    estimate: float
    low: float
    high: float
    confidence: float
    n_resamples: int
    n_valid_resamples: int
    n_units: int
    method: str = "BCa"
    percentile_low: float = math.nan
    percentile_high: float = math.nan


def _bca_endpoints(
    estimate: float,
    resampled: np.ndarray,
    jackknife: np.ndarray,
    jackknife_weights: np.ndarray,
    confidence: float,
) -> tuple[float, float, float, float]:
    """BCa interval ``(low, high)`` and the percentile interval of the same resamples.

    ``jackknife[k]`` is the statistic without one unit of kind ``k``, and ``jackknife_weights[k]`` how
    many units are of that kind (the acceleration is the usual item-jackknife skewness, with
    identical units grouped). The BCa endpoints are widened to the estimate if they miss it.
    """
    valid = resampled[np.isfinite(resampled)]
    if valid.size == 0 or not math.isfinite(estimate):
        return math.nan, math.nan, math.nan, math.nan
    tail = (1 - confidence) / 2
    pct_low, pct_high = (float(q) for q in np.quantile(valid, [tail, 1 - tail]))
    n = valid.size
    # Resamples equal to the estimate (to rounding) count half: a discrete statistic (alpha = 1 on
    # every resample of perfect agreement) then gets no bias correction.
    scale = max(1.0, abs(estimate))
    below = np.count_nonzero(valid < estimate - 1e-12 * scale)
    equal = np.count_nonzero(np.abs(valid - estimate) <= 1e-12 * scale)
    share_below = min(max((below + 0.5 * equal) / n, 0.5 / n), 1 - 0.5 / n)
    normal = NormalDist()  # the standard library's: importing scipy.special costs ~12 MB per process
    z0 = normal.inv_cdf(share_below)
    finite = np.isfinite(jackknife) & (jackknife_weights > 0)
    acceleration = 0.0
    if finite.any():
        w, theta = jackknife_weights[finite].astype(np.float64), jackknife[finite]
        d = (w @ theta) / w.sum() - theta
        spread = w @ d**2
        if spread > 0:
            acceleration = float((w @ d**3) / (6 * spread**1.5))
    z = np.array([normal.inv_cdf(tail), normal.inv_cdf(1 - tail)])
    denominator = 1 - acceleration * (z0 + z)
    if np.all(denominator > 0):
        levels = [normal.cdf(float(v)) for v in z0 + (z0 + z) / denominator]
    else:  # an extreme acceleration: bias correction only
        levels = [normal.cdf(float(v)) for v in 2 * z0 + z]
    low, high = (float(q) for q in np.quantile(valid, levels))
    return min(low, estimate), max(high, estimate), pct_low, pct_high


# Resamples per block of draws; bounds memory to chunk x n_patterns x 8 bytes.
_BOOTSTRAP_CHUNK = 250
# The item route holds at most this many drawn units at once (rows x units).
_ITEM_BLOCK = 2_000_000
# The sparse sums hold at most this many products at once (8 bytes each: 8 MB, and as much again for the
# gather; 4,000,000 held 90 MB at the data card's subject bootstrap of 250,000 images). The block changes no
# number: each resample's sums are the same whatever rows share a block.
_SPARSE_BLOCK = 1_000_000
# Identical clusters are found from this many items' contributions at a time (see _cluster_kinds).
_CLUSTER_BLOCK_ITEMS = 4_000
# The Poisson route lowers the expected total by this many standard deviations (see _multinomial_rows).
_POISSON_MARGIN = 3.0


def _multinomial_rows(rng: np.random.Generator, frequency: np.ndarray, n_rows: int) -> np.ndarray:
    """``n_rows`` independent draws of Multinomial(N, frequency / N), N = ``frequency.sum()``.

    Each row is one bootstrap resample of the N units: how many of the drawn units are of each kind.
    Three exact samplers, chosen by cost (the choice depends on N and K only, so a seed still gives one
    result):

    * few units for the kinds (N <= 2K): the units themselves, N uniform draws per row, counted;
    * many kinds (K > sqrt(N)): a Poisson process split by kind. Draw ``X_k ~ Poisson(s f_k)``
      independently, with ``s = (N - 3 sqrt(N)) / N``; given their sum S, X is Multinomial(S, f / N).
      A row with S > N (about 0.1%) is drawn again, which keeps it multinomial given S, and the
      N - S missing units are drawn one by one from the N units: Multinomial(S) plus N - S more
      independent units is Multinomial(N). One Poisson variate per kind costs about half of
      the conditional binomial that NumPy's multinomial draws per kind (0.10 s against 0.18 s for
      1,000 rows of 2,127 kinds), and the ~950 extra units per row are cheap;
    * otherwise NumPy's ``Generator.multinomial`` (K conditional binomials per row).

    Returns an int64 array of shape (n_rows, K) whose rows sum to N.
    """
    frequency = np.asarray(frequency, dtype=np.int64)
    n_kinds = frequency.size
    n_units = int(frequency.sum())
    if n_units <= 2 * n_kinds:
        kind_of_unit = np.repeat(np.arange(n_kinds), frequency)
        out = np.empty((n_rows, n_kinds), dtype=np.int64)
        step = max(1, _ITEM_BLOCK // max(n_units, 1))
        for start in range(0, n_rows, step):
            stop = min(start + step, n_rows)
            picks = kind_of_unit[rng.integers(0, n_units, size=(stop - start, n_units))]
            picks += (np.arange(stop - start) * n_kinds)[:, None]
            out[start:stop] = np.bincount(picks.ravel(), minlength=(stop - start) * n_kinds).reshape(-1, n_kinds)
        return out
    margin = _POISSON_MARGIN * math.sqrt(n_units)
    if n_kinds * n_kinds <= n_units or n_units <= 4 * margin:
        return rng.multinomial(n_units, frequency / n_units, size=n_rows)
    rates = frequency * ((n_units - margin) / n_units)
    out = rng.poisson(rates, size=(n_rows, n_kinds))
    totals = out.sum(axis=1)
    over = np.flatnonzero(totals > n_units)
    while over.size:
        out[over] = rng.poisson(rates, size=(over.size, n_kinds))
        totals[over] = out[over].sum(axis=1)
        over = over[totals[over] > n_units]
    missing = n_units - totals
    kind_of_unit = np.repeat(np.arange(n_kinds), frequency)
    extra = kind_of_unit[rng.integers(0, n_units, size=int(missing.sum()))]
    extra += np.repeat(np.arange(n_rows) * n_kinds, missing)
    out += np.bincount(extra, minlength=n_rows * n_kinds).reshape(n_rows, n_kinds)
    return out


class _Contributions:
    """The kinds' contributions (kinds x columns), summed over a resample's kinds without BLAS.

    ``sums(weights)`` is ``weights @ contributions``. A kind of alpha has at most 10 nonzero cells of
    190 (4 labels), a kind of kappa one: the product goes over the nonzero entries only (a gather and
    ``np.add.reduceat``), about as fast as one BLAS thread, and never through OpenBLAS's threads, which
    wait for each other on a busy machine (a 1,000 x 260 x 361 product once took 0.4 s of wall time
    for 0.01 s of work). Dense contributions use the matrix product.
    """

    def __init__(self, dense: np.ndarray) -> None:
        self.dense: np.ndarray | None = np.asarray(dense, dtype=np.float64)
        self.shape = self.dense.shape
        n_kinds, n_columns = self.shape
        column, kind = np.nonzero(self.dense.T)
        self.sparse = column.size <= 0.25 * n_kinds * n_columns
        if self.sparse:
            self._sparse_set(kind, column, self.dense.T[column, kind])

    @classmethod
    def from_entries(
        cls, kind: np.ndarray, column: np.ndarray, value: np.ndarray, shape: tuple[int, int]
    ) -> _Contributions:
        """The contributions given by their nonzero entries, ordered by column then kind (as
        ``np.nonzero(dense.T)`` orders them): the same object as ``_Contributions(dense)``, without the dense
        matrix when it is sparse (50,000 subjects x 190 cells: 76 MB)."""
        self = cls.__new__(cls)
        self.shape = (int(shape[0]), int(shape[1]))
        self.sparse = column.size <= 0.25 * self.shape[0] * self.shape[1]
        if self.sparse:
            self.dense = None
            self._sparse_set(kind, column, value)
        else:
            self.dense = np.zeros(self.shape)
            self.dense[kind, column] = value
        return self

    def _sparse_set(self, kind: np.ndarray, column: np.ndarray, value: np.ndarray) -> None:
        self.kind = kind
        self.value = np.asarray(value, dtype=np.float64)[:, None]
        first = np.ones(column.size, dtype=bool)
        first[1:] = column[1:] != column[:-1]
        self.starts = np.flatnonzero(first)
        self.columns = column[self.starts]
        self._column = column

    def rows(self, start: int, stop: int) -> np.ndarray:
        """The kinds ``start:stop`` as dense rows."""
        if self.dense is not None:
            return self.dense[start:stop]
        out = np.zeros((stop - start, self.shape[1]))
        here = (self.kind >= start) & (self.kind < stop)
        out[self.kind[here] - start, self._column[here]] = self.value[here, 0]
        return out

    def total(self, frequency: np.ndarray) -> np.ndarray:
        """``frequency @ contributions``: with sparse contributions, summed kind by kind in one fixed order
        (the same numbers however the contributions were given)."""
        if self.sparse:
            return np.asarray(self.sums(np.asarray(frequency, dtype=np.int64)[None, :])[0])
        assert self.dense is not None
        return np.asarray(np.asarray(frequency).astype(np.float64) @ self.dense)

    def sums(self, weights: np.ndarray) -> np.ndarray:
        if not self.sparse:
            assert self.dense is not None
            return np.asarray(weights.astype(np.float64) @ self.dense)
        out = np.zeros((weights.shape[0], self.shape[1]))
        if self.starts.size:
            # The gathered products are (nonzero entries x rows): a block of rows at a time keeps them
            # under _SPARSE_BLOCK values (50,000 subjects' contributions x 250 resamples were 3 GB at once).
            step = max(1, _SPARSE_BLOCK // self.kind.size)
            for start in range(0, weights.shape[0], step):
                block = np.ascontiguousarray(weights[start : start + step].T)
                products = block[self.kind] * self.value
                out[start : start + step, self.columns] = np.add.reduceat(products, self.starts, axis=0).T
        return out


def _cluster_kinds(
    cluster_index: np.ndarray, n_columns: int, item_rows: Callable[[np.ndarray], np.ndarray]
) -> tuple[_Contributions, np.ndarray]:
    """The distinct clusters' contributions and how many clusters share each, without a clusters x columns matrix.

    Cluster ``c``'s contribution is the sum of its items' rows (``item_rows(items)``: the rows of those items,
    dense), added one item at a time in item order from zero, as ``np.add.at(per_cluster, cluster_index,
    rows)`` adds them; identical clusters are one kind, the kinds in the order of ``np.unique(per_cluster,
    axis=0, return_counts=True)`` (rows compared column by column) with its counts. So the kinds, their
    frequencies and every bit of their contributions are that matrix's (``tests/metrics/
    test_agreement_cluster_kinds.py`` keeps it as the reference), but the clusters' sums are made a block of
    items at a time and kept as their nonzero entries: 50,000 subjects x 190 cells were 76 MB as a matrix, and
    ``np.unique`` sorted copies of it (the data card's subject bootstrap peaked 300 MB above its imports).
    The rows are sorted column by column from the last (a stable sort of each column's nonzero entries: the
    contributions of counts are never negative, so zeros come first), then equal neighbours are grouped.
    """
    cluster_index = np.asarray(cluster_index).ravel()
    n_clusters = int(cluster_index.max()) + 1 if cluster_index.size else 0
    if n_clusters == 0:
        return _Contributions(np.zeros((0, n_columns))), np.zeros(0, dtype=np.int64)
    # Items by cluster, in item order within each (a stable sort): each cluster adds its items in that order.
    order = np.argsort(cluster_index, kind="stable")
    bounds = np.concatenate(([0], np.cumsum(np.bincount(cluster_index, minlength=n_clusters))))
    clusters_of, columns_of, values_of = [], [], []
    first = 0
    while first < n_clusters:
        last = int(np.searchsorted(bounds, bounds[first] + _CLUSTER_BLOCK_ITEMS, side="right")) - 1
        last = min(max(last, first + 1), n_clusters)
        items = order[bounds[first] : bounds[last]]
        block = np.zeros((last - first, n_columns))
        np.add.at(block, cluster_index[items] - first, item_rows(items))
        row, column = np.nonzero(block)
        clusters_of.append((row + first).astype(np.int64))
        columns_of.append(column.astype(np.int32))
        values_of.append(block[row, column])
        first = last
    del order, block, items
    cluster = np.concatenate(clusters_of)  # entries by cluster, then column
    column = np.concatenate(columns_of)
    value = np.concatenate(values_of)
    del clusters_of, columns_of, values_of
    row_length = np.bincount(cluster, minlength=n_clusters)
    row_start = np.concatenate(([0], np.cumsum(row_length)[:-1]))

    # Lexicographic order of the rows: stable sorts by each column, the last column first.
    by_column = np.argsort(column, kind="stable")
    column_bounds = np.searchsorted(column[by_column], np.arange(n_columns + 1))
    non_negative = value.size == 0 or bool(value.min() >= 0)
    perm = np.arange(n_clusters)
    dense_column = np.zeros(n_clusters)
    for j in range(n_columns - 1, -1, -1):
        entries = by_column[column_bounds[j] : column_bounds[j + 1]]
        if entries.size == 0:
            continue
        dense_column[cluster[entries]] = value[entries]
        key = dense_column[perm]
        if non_negative:
            nonzero = key != 0
            perm = np.concatenate((perm[~nonzero], perm[nonzero][np.argsort(key[nonzero], kind="stable")]))
        else:
            perm = perm[np.argsort(key, kind="stable")]
        dense_column[cluster[entries]] = 0.0
    del by_column, dense_column

    def entries_of(rows: np.ndarray) -> np.ndarray:
        """Positions of the entries of ``rows``, row after row."""
        lengths = row_length[rows]
        offsets = np.repeat(np.cumsum(lengths) - lengths, lengths)
        return np.asarray(np.repeat(row_start[rows], lengths) + (np.arange(int(lengths.sum())) - offsets))

    # Neighbours in that order are the same kind when their entries are equal, column and value.
    later, earlier = perm[1:], perm[:-1]
    same = row_length[later] == row_length[earlier]
    check = np.flatnonzero(same & (row_length[later] > 0))
    if check.size:
        in_later, in_earlier = entries_of(later[check]), entries_of(earlier[check])
        differ = (column[in_later] != column[in_earlier]) | (value[in_later] != value[in_earlier])
        pair = np.repeat(np.arange(check.size), row_length[later[check]])
        same[check[np.bincount(pair, weights=differ, minlength=check.size) > 0]] = False
        del in_later, in_earlier, differ, pair
    starts = np.flatnonzero(np.concatenate(([True], ~same)))
    frequency = np.diff(np.append(starts, n_clusters)).astype(np.int64)
    representative = perm[starts]
    # The kinds' entries, ordered by column then kind (as _Contributions reads a dense matrix).
    taken = entries_of(representative)
    kind = np.repeat(np.arange(starts.size), row_length[representative])
    by_column_kind = np.lexsort((kind, column[taken]))
    parts = _Contributions.from_entries(
        kind[by_column_kind],
        column[taken][by_column_kind].astype(np.intp),
        value[taken][by_column_kind],
        (starts.size, n_columns),
    )
    return parts, frequency


def _pattern_bootstrap_many(
    contributions: np.ndarray | _Contributions,
    frequency: np.ndarray,
    statistics: Sequence[Callable[[np.ndarray], np.ndarray]],
    n_resamples: int,
    confidence: float,
    seed: int | np.random.Generator | None,
) -> list[tuple[float, float, float, float, float, np.ndarray]]:
    """Item bootstrap of statistics of summed unit contributions, with their BCa intervals.

    Units of the same kind (pattern ``k``) have the same contribution ``contributions[k]``; each
    statistic is ``statistic(sum of the units' contributions)`` (batched: rows in, values out).
    Resampling ``N`` units with replacement is one multinomial draw over the kinds
    (:func:`_multinomial_rows`), and leaving one unit out (the jackknife) is ``total -
    contributions[k]``: the cost does not grow with ``N``. Every statistic is computed on the same
    resamples (ordinal and interval alpha draw once).

    Returns one ``(estimate, low, high, percentile_low, percentile_high, resampled)`` per statistic.
    """
    frequency = np.asarray(frequency)
    parts = contributions if isinstance(contributions, _Contributions) else _Contributions(contributions)
    total = parts.total(frequency)
    rng = np.random.default_rng(seed)
    resampled = np.empty((len(statistics), n_resamples))
    # Fewer resamples per block when the kinds are many (50,000 subjects: 40 rows, 16 MB of counts).
    chunk = max(1, min(_BOOTSTRAP_CHUNK, _ITEM_BLOCK // max(frequency.size, 1)))
    for start in range(0, n_resamples, chunk):
        size = min(chunk, n_resamples - start)
        sums = parts.sums(_multinomial_rows(rng, frequency, size))
        for i, statistic in enumerate(statistics):
            resampled[i, start : start + size] = statistic(sums)
    results = []
    for i, statistic in enumerate(statistics):
        estimate = float(statistic(total[None, :])[0])
        jackknife = np.empty(frequency.size)
        for start in range(0, frequency.size, 4 * _BOOTSTRAP_CHUNK):
            stop = min(start + 4 * _BOOTSTRAP_CHUNK, frequency.size)
            jackknife[start:stop] = statistic(total[None, :] - parts.rows(start, stop))
        low, high, pct_low, pct_high = _bca_endpoints(estimate, resampled[i], jackknife, frequency, confidence)
        results.append((estimate, low, high, pct_low, pct_high, resampled[i]))
    return results


def _pattern_bootstrap(
    contributions: np.ndarray | _Contributions,
    frequency: np.ndarray,
    statistic: Callable[[np.ndarray], np.ndarray],
    n_resamples: int,
    confidence: float,
    seed: int | np.random.Generator | None,
) -> tuple[float, float, float, float, float, np.ndarray]:
    """:func:`_pattern_bootstrap_many` of one statistic."""
    return _pattern_bootstrap_many(contributions, frequency, [statistic], n_resamples, confidence, seed)[0]


def _check_bootstrap_arguments(confidence: float, n_resamples: int) -> None:
    if not 0 < confidence < 1:
        raise ValueError("confidence must be in (0, 1).")
    if n_resamples < 1:
        raise ValueError("n_resamples must be at least 1.")


def bootstrap_alpha(
    reliability_data: npt.ArrayLike | None = None,
    level_of_measurement: LevelOfMeasurement = "ordinal",
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int | np.random.Generator | None = 0,
    value_domain: npt.ArrayLike | None = None,
    *,
    counts: npt.ArrayLike | None = None,
    clusters: npt.ArrayLike | None = None,
) -> AlphaBootstrap:
    """Krippendorff's alpha with a BCa bootstrap confidence interval over items (or clusters of items).

    Items (images) are resampled with replacement; the interval is BCa (see the module docstring),
    the jackknife over items gives its acceleration. Only pairable items (two or
    more labels) are resampled: the others add nothing to alpha, and including
    them would make the interval depend on how many unlabelled images the
    array happens to hold.

    Approach: an item contributes ``C_i = (c_i c_i^T - diag(c_i)) / (m_i - 1)``
    to the coincidence matrix, and a resample's coincidence matrix is
    ``sum_i w_i C_i`` with multinomial weights ``w``. Items with the same count
    vector have the same ``C_i``, and with a handful of labelers and 10-20
    values there are few distinct count vectors (patterns). Drawing ``N`` items
    uniformly with replacement is the same as drawing multinomial counts over
    patterns with probabilities ``pattern frequency / N``, so each resample is
    one multinomial draw over the K patterns and the (symmetric) coincidence
    matrices of a chunk of resamples are one (chunk x K) @ (K x V(V+1)/2)
    product. Cost is O(n_resamples * K * V^2), independent of the number of
    items: 1,000 resamples of 100,000 images x 4 labelers took 0.1-0.4 s with
    10 values and 0.8-1.5 s with 19 (half-steps) on a busy 2-core machine
    (``bench/bench_agreement.py``).

    Parameters
    ----------
    reliability_data : array_like, shape (n_labelers, n_items), optional
        Labels, ``NaN`` for missing. Give this or ``counts``.
    level_of_measurement : {"nominal", "ordinal", "interval", "ratio"}
    n_resamples : int
        Number of bootstrap resamples.
    confidence : float
        Confidence level of the interval, in (0, 1).
    seed : int, Generator or None
        Seed for ``numpy.random.default_rng``; the same seed gives the same result.
    value_domain : array_like, optional
        Values in rank order (see ``krippendorff_alpha``); with ``counts``, the
        value of each column (default ``0..V-1``).
    counts : array_like, shape (n_items, n_values), optional, keyword-only
        Items x values count matrix instead of ``reliability_data``.
    clusters : array_like, shape (n_items,), optional, keyword-only
        The unit each item belongs to (a subject: several photos of one person are not independent).
        Whole clusters are resampled, and the jackknife leaves out one cluster: the interval is over
        subjects, not images. Default: each item is its own unit. Either way the interval is
        conditional on the labelers who labelled (they are not resampled).

    Returns
    -------
    AlphaBootstrap
        ``estimate``, ``low``, ``high`` are NaN when alpha is undefined
        (``n_items`` tells whether there was too little data).

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> truth = rng.integers(1, 11, size=500)
    >>> data = np.clip(truth + rng.integers(-1, 2, size=(4, 500)), 1, 10)
    >>> result = bootstrap_alpha(data, n_resamples=200, seed=0)
    >>> bool(result.low < result.estimate < result.high), result.n_items
    (True, 500)
    """
    return bootstrap_alpha_levels(
        reliability_data,
        (level_of_measurement,),
        n_resamples,
        confidence,
        seed,
        value_domain,
        counts=counts,
        clusters=clusters,
    )[level_of_measurement]


def bootstrap_alpha_levels(
    reliability_data: npt.ArrayLike | None = None,
    levels: Sequence[LevelOfMeasurement] = ("ordinal", "interval"),
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int | np.random.Generator | None = 0,
    value_domain: npt.ArrayLike | None = None,
    *,
    counts: npt.ArrayLike | None = None,
    clusters: npt.ArrayLike | None = None,
) -> dict[str, AlphaBootstrap]:
    """:func:`bootstrap_alpha` at several levels of measurement from the same resamples.

    The resamples are drawn once and every level's alpha is computed on each (the dashboard shows
    ordinal and interval alpha): each level's result is the one ``bootstrap_alpha`` gives with the same
    arguments and seed, at the cost of one draw.

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> truth = rng.integers(1, 11, size=300)
    >>> data = np.clip(truth + rng.integers(-1, 2, size=(4, 300)), 1, 10)
    >>> both = bootstrap_alpha_levels(data, ("ordinal", "interval"), n_resamples=200)
    >>> both["interval"] == bootstrap_alpha(data, "interval", n_resamples=200)
    True
    """
    for level in levels:
        _check_level(level)
    if (reliability_data is None) == (counts is None):
        raise ValueError("Give either reliability_data or counts, not both.")
    _check_bootstrap_arguments(confidence, n_resamples)
    if counts is None:
        assert reliability_data is not None  # one of the two, checked above
        data = _as_reliability_data(reliability_data)
        if data.size == 0:
            values, count_matrix = np.zeros(0), np.zeros((0, 0))
        else:
            values, count_matrix = _domain(data, value_domain)
    else:
        count_matrix = np.asarray(counts)
        if count_matrix.ndim != 2:
            raise ValueError("counts must be a 2-D items x values array.")
        n_values = count_matrix.shape[1]
        values = (
            np.arange(n_values, dtype=np.float64)
            if value_domain is None
            else np.asarray(value_domain, dtype=np.float64).ravel()
        )
        if values.size != n_values:
            raise ValueError("value_domain must have one entry per column of counts.")

    m = count_matrix.sum(axis=1) if count_matrix.size else np.zeros(0)
    group: np.ndarray | None = None
    if clusters is not None:
        group = np.asarray(clusters).ravel()
        if group.size != count_matrix.shape[0]:
            raise ValueError("clusters must have one entry per item.")
        group = group[m >= 2] if m.size else group
    pairable = count_matrix[m >= 2] if count_matrix.size else count_matrix
    n_items = int(pairable.shape[0])
    n_pairable = int(m[m >= 2].sum()) if m.size else 0
    if n_items == 0 or values.size < 2:
        nan = math.nan
        return {
            level: AlphaBootstrap(nan, nan, nan, confidence, n_resamples, 0, n_items, n_pairable, level)
            for level in levels
        }

    rows, cols = np.triu_indices(values.size)

    def upper_contributions(item_counts: np.ndarray) -> np.ndarray:
        # Upper triangle of each row's (c c^T - diag(c)) / (m - 1): rows x V(V+1)/2.
        c = item_counts.astype(np.float64)
        upper = c[:, rows] * c[:, cols]
        upper[:, rows == cols] -= c
        upper /= (c.sum(axis=1) - 1)[:, None]
        return upper

    contributions: np.ndarray | _Contributions
    if group is None:
        patterns, frequency = _count_patterns(pairable)
        contributions = upper_contributions(patterns)
    else:
        # A cluster contributes the sum of its items' coincidences; identical clusters are one kind (found a
        # block of items at a time, with no clusters x cells matrix: _cluster_kinds).
        _, cluster_index = np.unique(group, return_inverse=True)
        contributions, frequency = _cluster_kinds(
            cluster_index.ravel(), rows.size, lambda items: upper_contributions(pairable[items])
        )
        del cluster_index
    results = _pattern_bootstrap_many(
        contributions,
        frequency,
        [functools.partial(_alpha_batch, values=values, level=level) for level in levels],
        n_resamples,
        confidence,
        seed,
    )
    out: dict[str, AlphaBootstrap] = {}
    for level, (estimate, low, high, pct_low, pct_high, alphas) in zip(levels, results, strict=True):
        n_valid = int(np.count_nonzero(~np.isnan(alphas)))
        out[level] = AlphaBootstrap(
            estimate,
            low,
            high,
            confidence,
            n_resamples,
            n_valid,
            n_items,
            n_pairable,
            level,
            alphas,
            "BCa",
            pct_low,
            pct_high,
        )
    return out


def _kappa_batch(observed: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Weighted Cohen's kappa of a batch of flattened k x k tables (rows: first labeler)."""
    k = w.shape[0]
    tables = observed.reshape(observed.shape[0], k, k)
    rows, cols = tables.sum(axis=2), tables.sum(axis=1)
    n = rows.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = np.einsum("bi,ij,bj->b", rows, w, cols) / n
        kappa = 1.0 - (observed @ w.ravel()) / expected
    kappa[~(expected > 0) | ~(n > 0)] = np.nan
    return np.asarray(kappa)


def bootstrap_cohen_kappa(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    *,
    categories: npt.ArrayLike,
    weights: Literal["linear", "quadratic"] | None = "quadratic",
    clusters: npt.ArrayLike | None = None,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int | np.random.Generator | None = 0,
) -> CoefficientInterval:
    """Weighted Cohen's kappa (as ``cohen_kappa_weighted``) with a BCa bootstrap interval over items.

    Parameters
    ----------
    a, b : array_like, shape (n_items,)
        Labels of the two labelers (or two rounds), ``NaN`` for missing; items missing in either
        are dropped.
    categories, weights
        As in ``cohen_kappa_weighted``.
    clusters : array_like, shape (n_items,), optional
        Cluster of each item (e.g. the image of each test-retest pair when several labelers'
        pairs are pooled): whole clusters are resampled. Default: each item is its own unit.
    n_resamples, confidence, seed
        As in ``bootstrap_alpha``.

    Returns
    -------
    CoefficientInterval
        ``n_units`` items (or clusters) with a label from both.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> truth = rng.integers(1, 11, size=200)
    >>> r = bootstrap_cohen_kappa(truth, np.clip(truth + rng.integers(-1, 2, 200), 1, 10),
    ...                           categories=range(1, 11), n_resamples=200)
    >>> bool(r.low <= r.estimate <= r.high), r.n_units
    (True, 200)
    """
    _check_bootstrap_arguments(confidence, n_resamples)
    x = np.asarray(a, dtype=np.float64).ravel()
    y = np.asarray(b, dtype=np.float64).ravel()
    if x.shape != y.shape:
        raise ValueError("a and b must have the same length.")
    both = ~np.isnan(x) & ~np.isnan(y)
    i, j, k = _category_positions(x[both], y[both], categories)
    w = _disagreement_weights(k, weights)
    cell = i * k + j
    contributions: np.ndarray | _Contributions
    if clusters is None:
        keys, frequency = np.unique(cell, return_counts=True)
        contributions = np.zeros((keys.size, k * k))
        contributions[np.arange(keys.size), keys] = 1.0
    else:
        group = np.asarray(clusters).ravel()
        if group.shape != x.shape:
            raise ValueError("clusters must have one entry per item.")
        _, unit = np.unique(group[both], return_inverse=True)

        def one_hot(items: np.ndarray) -> np.ndarray:
            out = np.zeros((items.size, k * k))
            out[np.arange(items.size), cell[items]] = 1.0
            return out

        # Identical units are one kind (_cluster_kinds: no units x cells matrix).
        contributions, frequency = (
            _cluster_kinds(unit.ravel(), k * k, one_hot)
            if unit.size and k
            else (np.zeros((0, k * k)), np.zeros(0, np.int64))
        )
    n_units = int(frequency.sum())
    if n_units == 0:
        return CoefficientInterval(math.nan, math.nan, math.nan, confidence, n_resamples, 0, 0)
    estimate, low, high, pct_low, pct_high, kappas = _pattern_bootstrap(
        contributions, frequency, lambda o: _kappa_batch(o, w), n_resamples, confidence, seed
    )
    n_valid = int(np.count_nonzero(~np.isnan(kappas)))
    return CoefficientInterval(estimate, low, high, confidence, n_resamples, n_valid, n_units, "BCa", pct_low, pct_high)


def _fleiss_batch(sums: np.ndarray) -> np.ndarray:
    """Fleiss' kappa of a batch of summed item contributions ``[1, observed agreement, counts per category]``."""
    observed = sums[:, 1] / sums[:, 0]
    shares = sums[:, 2:] / sums[:, 2:].sum(axis=1, keepdims=True)
    expected = (shares**2).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        kappa = (observed - expected) / (1 - expected)
    kappa[~(expected < 1 - 1e-15)] = np.nan
    return np.asarray(kappa)


def bootstrap_fleiss_kappa(
    counts: npt.ArrayLike,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int | np.random.Generator | None = 0,
) -> CoefficientInterval:
    """Fleiss' kappa (as ``fleiss_kappa``) with a BCa bootstrap interval over items.

    Parameters
    ----------
    counts : array_like, shape (n_items, n_categories)
        As in ``fleiss_kappa`` (every item the same number of ratings, else ``ValueError``).
    n_resamples, confidence, seed
        As in ``bootstrap_alpha``.

    Examples
    --------
    >>> r = bootstrap_fleiss_kappa([[2, 0], [0, 2], [1, 1]] * 10, n_resamples=200)
    >>> round(r.estimate, 4), bool(r.low <= r.estimate <= r.high)
    (0.3333, True)
    """
    _check_bootstrap_arguments(confidence, n_resamples)
    table = np.asarray(counts, dtype=np.float64)
    estimate = fleiss_kappa(table)  # validates
    n_items = int(table.shape[0])
    if n_items == 0 or math.isnan(estimate) and table[0].sum() < 2:
        return CoefficientInterval(estimate, math.nan, math.nan, confidence, n_resamples, 0, n_items)
    n = float(table[0].sum())
    patterns, frequency = _count_patterns(table)
    agreement_of_item = ((patterns**2).sum(axis=1) - n) / (n * (n - 1))
    # One item's contribution: [1, its observed agreement, its counts per category].
    contributions = np.column_stack([np.ones(len(patterns)), agreement_of_item, patterns])

    estimate, low, high, pct_low, pct_high, kappas = _pattern_bootstrap(
        contributions, frequency, _fleiss_batch, n_resamples, confidence, seed
    )
    n_valid = int(np.count_nonzero(~np.isnan(kappas)))
    return CoefficientInterval(estimate, low, high, confidence, n_resamples, n_valid, n_items, "BCa", pct_low, pct_high)


def kappa_matrix_intervals(
    reliability_data: npt.ArrayLike,
    categories: npt.ArrayLike,
    *,
    weights: Literal["linear", "quadratic"] | None = "quadratic",
    min_common: int = 2,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    clusters: npt.ArrayLike | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """BCa bootstrap intervals of ``kappa_matrix``'s pairwise kappas (items in common resampled, or
    whole ``clusters`` of items, e.g. one person's photos, when given: see :func:`bootstrap_cohen_kappa`).

    Returns
    -------
    low, high : ndarray, shape (n_labelers, n_labelers)
        Symmetric; NaN where ``kappa_matrix`` is NaN. The diagonal is NaN (a labeler with
        themself is not a measurement).
    """
    results = _pairwise_intervals(
        reliability_data,
        min_common,
        lambda first, second: bootstrap_cohen_kappa(
            first,
            second,
            categories=categories,
            weights=weights,
            n_resamples=n_resamples,
            confidence=confidence,
            seed=seed,
            clusters=clusters,
        ),
    )
    return _fill_pairs(results, "low"), _fill_pairs(results, "high")


def _pairwise_intervals(
    reliability_data: npt.ArrayLike, min_common: int, interval: Callable[[np.ndarray, np.ndarray], Any]
) -> tuple[int, dict[tuple[int, int], Any]]:
    """Each pair of labelers with at least ``min_common`` items in common, and ``interval(first row,
    second row)`` for it where its estimate is defined: the one pair loop of the kappa matrices (the
    bootstrap's and the delta method's). Returns the number of labelers and the results by pair."""
    data = _as_reliability_data(reliability_data)
    n_labelers = data.shape[0]
    present = ~np.isnan(data)
    results: dict[tuple[int, int], Any] = {}
    for first in range(n_labelers):
        for second in range(first + 1, n_labelers):
            if (present[first] & present[second]).sum() < min_common:
                continue
            result = interval(data[first], data[second])
            if not math.isnan(result.estimate):
                results[first, second] = result
    return n_labelers, results


def _fill_pairs(results: tuple[int, dict[tuple[int, int], Any]], name: str) -> np.ndarray:
    """A symmetric labelers x labelers matrix of one field of :func:`_pairwise_intervals`' results (NaN
    elsewhere)."""
    n_labelers, by_pair = results
    matrix = np.full((n_labelers, n_labelers), np.nan)
    for (first, second), result in by_pair.items():
        matrix[first, second] = matrix[second, first] = getattr(result, name)
    return matrix
