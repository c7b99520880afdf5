"""Pairwise agreement: percent exact / within one tone, Fleiss' [Fleiss1971] and weighted Cohen's kappa [Cohen1968]."""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import numpy.typing as npt

from ._data import _as_reliability_data, _domain

__all__ = ["cohen_kappa_weighted", "fleiss_kappa", "kappa_matrix", "percent_exact", "percent_within_one"]


def _pairwise_fraction(reliability_data: npt.ArrayLike, tolerance: float) -> float:
    data = _as_reliability_data(reliability_data)
    if data.size == 0:
        return math.nan
    values, counts = _domain(data, None)
    counts = counts.astype(np.float64)
    m = counts.sum(axis=1)
    total_pairs = (m * (m - 1) / 2).sum()
    if total_pairs == 0:
        return math.nan
    close = (np.abs(np.subtract.outer(values, values)) <= tolerance).astype(np.float64)
    # sum_{v,w} c_v close_vw c_w counts ordered pairs plus self-pairs (close_vv = 1)
    agreeing = (np.einsum("iv,vw,iw->", counts, close, counts) - m.sum()) / 2
    return float(agreeing / total_pairs)


def percent_exact(reliability_data: npt.ArrayLike) -> float:
    """Fraction of labeler pairs that gave exactly the same value to an item.

    Pooled over all pairs: every item labelled by ``m`` labelers contributes its
    ``m (m - 1) / 2`` pairs, so items with more labels weigh more.

    Parameters
    ----------
    reliability_data : array_like, shape (n_labelers, n_items)
        Labels, ``NaN`` for missing.

    Returns
    -------
    float
        A fraction in [0, 1] (multiply by 100 for %), ``NaN`` if no item has two
        labels.

    Examples
    --------
    Item 1: 3 of 3 pairs agree, item 2 (2, 3, 2): 1 of 3, item 3: 1 of 1.

    >>> round(percent_exact([[1, 2, 3], [1, 3, np.nan], [1, 2, 3]]), 4)
    0.7143
    """
    return _pairwise_fraction(reliability_data, 0.0)


def percent_within_one(reliability_data: npt.ArrayLike) -> float:
    """Fraction of labeler pairs whose values differ by at most one tone.

    Pooled over pairs as in ``percent_exact``. 3 and 4.5 differ by 1.5, so they
    are not within one.

    Parameters
    ----------
    reliability_data : array_like, shape (n_labelers, n_items)
        Labels, ``NaN`` for missing.

    Returns
    -------
    float
        A fraction in [0, 1], ``NaN`` if no item has two labels.

    Examples
    --------
    Item 1 (1, 2, 1): 3 of 3 pairs, item 2 (2, 4, 2): 1 of 3, item 3: 1 of 1.

    >>> round(percent_within_one([[1, 2, 3], [2, 4, np.nan], [1, 2, 3]]), 4)
    0.7143
    """
    return _pairwise_fraction(reliability_data, 1.0)


def fleiss_kappa(counts: npt.ArrayLike) -> float:
    """Fleiss' kappa (nominal) from an items x categories count matrix.

    Parameters
    ----------
    counts : array_like, shape (n_items, n_categories)
        Number of labelers who chose each category for each item. Every item
        must have the same number of ratings.

    Returns
    -------
    float
        Kappa, ``NaN`` if there are no items, fewer than two ratings per item,
        or no disagreement is possible (all ratings in one category).

    Raises
    ------
    ValueError
        If the items do not all have the same number of ratings (use
        ``krippendorff_alpha``, which handles missing labels).

    Examples
    --------
    >>> round(fleiss_kappa([[2, 0], [0, 2], [1, 1]]), 4)
    0.3333
    """
    table = np.asarray(counts, dtype=np.float64)
    if table.ndim != 2:
        raise ValueError("counts must be a 2-D items x categories array.")
    if table.shape[0] == 0:
        return math.nan
    ratings = table.sum(axis=1)
    if not np.all(ratings == ratings[0]):
        raise ValueError(
            "Fleiss' kappa needs the same number of ratings for every item, got "
            f"between {ratings.min():g} and {ratings.max():g}; use "
            "krippendorff_alpha for incomplete data."
        )
    n = ratings[0]
    if n < 2:
        return math.nan
    p_category = table.sum(axis=0) / table.sum()
    p_item = ((table**2).sum(axis=1) - n) / (n * (n - 1))
    p_observed = p_item.mean()
    p_expected = (p_category**2).sum()
    if p_expected >= 1:
        return math.nan
    return float((p_observed - p_expected) / (1 - p_expected))


def _category_positions(x: np.ndarray, y: np.ndarray, categories: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray, int]:
    """Positions of two labelers' (present) labels in ``categories``, and the number of categories."""
    cats = np.asarray(categories, dtype=np.float64).ravel()
    if cats.size == 0 or np.unique(cats).size != cats.size:
        raise ValueError("categories must be non-empty and without duplicates.")
    sorter = np.argsort(cats, kind="stable")
    sorted_cats = cats[sorter]
    grid = _category_grid(sorted_cats, sorter)

    def positions(labels: np.ndarray) -> np.ndarray:
        if grid is not None and labels.size:
            # Categories on a grid of whole, half or quarter steps: a table lookup gives the same
            # positions as the binary search below, several times faster (scaling by a power of two is
            # exact, so only a label equal to a category lands on its cell).
            scale, low, table = grid
            offset = labels * scale - low
            if np.all((offset >= 0) & (offset < table.size)):  # finite and in the table (NaN: False)
                cell = offset.astype(np.intp)
                found = table[cell]
                if np.array_equal(cell, offset) and np.all(found >= 0):
                    return found
        pos = np.minimum(np.searchsorted(sorted_cats, labels), cats.size - 1)
        if not np.array_equal(sorted_cats[pos], labels):
            raise ValueError("Labels outside categories.")
        return sorter[pos]

    return positions(x), positions(y), int(cats.size)


def _category_grid(sorted_cats: np.ndarray, sorter: np.ndarray) -> tuple[float, float, np.ndarray] | None:
    """``(scale, low, table)`` when the categories times ``scale`` (1, 2 or 4) are whole numbers over a
    short span: ``table[label * scale - low]`` is the label's position in the categories (-1: none)."""
    if not np.all(np.isfinite(sorted_cats[[0, -1]])):
        return None
    for scale in (1.0, 2.0, 4.0):
        scaled = sorted_cats * scale
        if not np.array_equal(scaled, np.round(scaled)):
            continue
        low, span = float(scaled[0]), float(scaled[-1] - scaled[0])
        if span > 100_000:
            return None
        table = np.full(int(span) + 1, -1, dtype=np.intp)
        table[(scaled - low).astype(np.intp)] = sorter
        return scale, low, table
    return None


def _disagreement_weights(k: int, weights: Literal["linear", "quadratic"] | None) -> np.ndarray:
    """The k x k disagreement weights of a (weighted) kappa."""
    ranks = np.arange(k)
    if weights is None:
        return 1.0 - np.eye(k)
    if weights == "linear":
        return np.abs(np.subtract.outer(ranks, ranks)).astype(float)
    if weights == "quadratic":
        return np.subtract.outer(ranks, ranks).astype(float) ** 2
    raise ValueError("weights must be 'linear', 'quadratic' or None.")


def cohen_kappa_weighted(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    *,
    categories: npt.ArrayLike,
    weights: Literal["linear", "quadratic"] | None = "quadratic",
) -> float:
    """Weighted Cohen's kappa between two labelers over their common items.

    Same definition as ``sklearn.metrics.cohen_kappa_score(a, b,
    labels=categories, weights=weights)``: the disagreement weight of two
    labels is ``|i - j|`` or ``(i - j) ** 2`` of their positions in
    ``categories``. Pass the full label range (e.g. 1..10, or 1, 1.5, ..., 10
    with half-steps) so that unused values do not shrink the distances.

    Parameters
    ----------
    a, b : array_like, shape (n_items,)
        Labels of the two labelers, ``NaN`` for missing; items missing in either
        are dropped.
    categories : array_like
        All possible labels, in order (keyword-only).
    weights : {"quadratic", "linear", None}
        ``None`` gives unweighted kappa.

    Returns
    -------
    float
        Kappa, ``NaN`` if there is no common item or no disagreement is
        possible (both labelers always used a single and the same label).

    Raises
    ------
    ValueError
        If a label is not in ``categories``.

    Examples
    --------
    >>> round(cohen_kappa_weighted([1, 2, 3, 4], [1, 2, 4, 4],
    ...                            categories=[1, 2, 3, 4, 5]), 4)
    0.9167
    """
    x = np.asarray(a, dtype=np.float64).ravel()
    y = np.asarray(b, dtype=np.float64).ravel()
    if x.shape != y.shape:
        raise ValueError("a and b must have the same length.")
    both = ~np.isnan(x) & ~np.isnan(y)
    x, y = x[both], y[both]
    i, j, k = _category_positions(x, y, categories)
    if x.size == 0:
        return math.nan
    observed = np.bincount(i * k + j, minlength=k * k).reshape(k, k).astype(float)
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0)) / observed.sum()
    w = _disagreement_weights(k, weights)
    disagreement_expected = (w * expected).sum()
    if disagreement_expected == 0:
        return math.nan
    return float(1.0 - (w * observed).sum() / disagreement_expected)


def kappa_matrix(
    reliability_data: npt.ArrayLike,
    categories: npt.ArrayLike,
    *,
    weights: Literal["linear", "quadratic"] | None = "quadratic",
    min_common: int = 2,
) -> np.ndarray:
    """Pairwise weighted Cohen's kappa, labeler x labeler.

    Parameters
    ----------
    reliability_data : array_like, shape (n_labelers, n_items)
        Labels, ``NaN`` for missing.
    categories : array_like
        All possible labels, in order (see ``cohen_kappa_weighted``).
    weights : {"quadratic", "linear", None}
    min_common : int
        Pairs of labelers with fewer common items than this get ``NaN``.

    Returns
    -------
    ndarray, shape (n_labelers, n_labelers)
        Symmetric; ``NaN`` where two labelers share fewer than ``min_common``
        items or kappa is undefined. The diagonal is a labeler's kappa with
        itself (1.0 unless undefined).

    Examples
    --------
    >>> kappa_matrix([[1, 2, 3], [1, 2, 3], [1, np.nan, np.nan]], [1, 2, 3])
    array([[ 1.,  1., nan],
           [ 1.,  1., nan],
           [nan, nan, nan]])
    """
    data = _as_reliability_data(reliability_data)
    n_labelers = data.shape[0]
    matrix = np.full((n_labelers, n_labelers), np.nan)
    present = ~np.isnan(data)
    for first in range(n_labelers):
        for second in range(first, n_labelers):
            if (present[first] & present[second]).sum() < min_common:
                continue
            kappa = cohen_kappa_weighted(data[first], data[second], categories=categories, weights=weights)
            matrix[first, second] = matrix[second, first] = kappa
    return matrix
