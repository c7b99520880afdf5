"""Distributions over items for the data card: "k of n agreed", distinct values per item."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pandas as pd

from ._data import _as_reliability_data

__all__ = ["k_of_n_agreement", "unique_values_distribution"]


def _sorted_items(reliability_data: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Items x labelers values sorted per item (NaN last) and label counts."""
    data = _as_reliability_data(reliability_data)
    if data.size == 0:
        return np.zeros((0, 0)), np.zeros(0, dtype=np.int64)
    ordered = np.sort(data.T, axis=1)
    return ordered, (~np.isnan(ordered)).sum(axis=1)


def _mode_counts(ordered: np.ndarray) -> np.ndarray:
    """Size of the largest group of equal values per row (NaN never equal)."""
    if ordered.shape[1] == 0:
        return np.zeros(ordered.shape[0], dtype=np.int64)
    equal = ordered[:, :, None] == ordered[:, None, :]
    return np.asarray(equal.sum(axis=2).max(axis=1))


def _unique_counts(ordered: np.ndarray) -> np.ndarray:
    if ordered.shape[1] == 0:
        return np.zeros(ordered.shape[0], dtype=np.int64)
    valid = ~np.isnan(ordered)
    new = valid.copy()
    new[:, 1:] &= ordered[:, 1:] != ordered[:, :-1]
    return np.asarray(new.sum(axis=1))


def k_of_n_agreement(reliability_data: npt.ArrayLike) -> pd.DataFrame:
    """Distribution of "k of n labelers agreed exactly" over items.

    For each item, ``n`` is its number of labels and ``k`` the size of the
    largest group of labelers who gave exactly the same value.

    Parameters
    ----------
    reliability_data : array_like, shape (n_labelers, n_items)
        Labels, ``NaN`` for missing.

    Returns
    -------
    pandas.DataFrame
        Columns ``n_labels``, ``k_agreed``, ``n_items`` and ``fraction``
        (share of the items with that ``n_labels``), one row per observed
        ``(n, k)``, sorted; items without labels are left out. Empty if no item
        has a label.

    Examples
    --------
    >>> k_of_n_agreement([[1, 2, 3, 1], [1, 3, 3, 2], [1, 4, 5, np.nan]])
       n_labels  k_agreed  n_items  fraction
    0         2         1        1  1.000000
    1         3         1        1  0.333333
    2         3         2        1  0.333333
    3         3         3        1  0.333333
    """
    ordered, n_labels = _sorted_items(reliability_data)
    k = _mode_counts(ordered)
    labelled = n_labels > 0
    frame = pd.DataFrame({"n_labels": n_labels[labelled], "k_agreed": k[labelled]})
    table = frame.value_counts().rename("n_items").sort_index().reset_index()
    table["fraction"] = table["n_items"] / table.groupby("n_labels")["n_items"].transform("sum")
    return table.astype({"n_labels": "int64", "k_agreed": "int64", "n_items": "int64"})


def unique_values_distribution(reliability_data: npt.ArrayLike, *, min_labels: int = 1) -> pd.DataFrame:
    """Distribution of the number of distinct values per item.

    Parameters
    ----------
    reliability_data : array_like, shape (n_labelers, n_items)
        Labels, ``NaN`` for missing.
    min_labels : int
        Only items with at least this many labels are counted.

    Returns
    -------
    pandas.DataFrame
        Columns ``n_unique_values``, ``n_items``, ``fraction`` (of the counted
        items), sorted by ``n_unique_values``. Empty if no item qualifies.

    Examples
    --------
    >>> unique_values_distribution([[1, 2, 3, 1], [1, 3, 3, 2], [1, 4, 5, 2]])
       n_unique_values  n_items  fraction
    0                1        1      0.25
    1                2        2      0.50
    2                3        1      0.25
    """
    ordered, n_labels = _sorted_items(reliability_data)
    unique = _unique_counts(ordered)[(n_labels >= max(min_labels, 1))]
    table = (
        pd.Series(unique, name="n_unique_values", dtype="int64")
        .value_counts()
        .rename("n_items")
        .sort_index()
        .reset_index()
    )
    table["fraction"] = table["n_items"] / table["n_items"].sum()
    return table.astype({"n_unique_values": "int64", "n_items": "int64"})
