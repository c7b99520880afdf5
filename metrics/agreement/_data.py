"""Shared input handling of :mod:`metrics.agreement`: reliability data, value codes, counts.

Private to the package: the public functions take ``reliability_data``
(labelers x items, ``NaN`` for missing) and turn it into an items x values count
matrix here.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import numpy.typing as npt
import pandas as pd

LevelOfMeasurement = Literal["nominal", "ordinal", "interval", "ratio"]
_LEVELS = ("nominal", "ordinal", "interval", "ratio")


def _check_level(level: str) -> None:
    if level not in _LEVELS:
        raise ValueError(f"level_of_measurement must be one of {_LEVELS}, got {level!r}.")


def _as_reliability_data(reliability_data: npt.ArrayLike) -> np.ndarray:
    data = np.asarray(reliability_data, dtype=np.float64)
    if data.size == 0:
        return data.reshape(0, 0) if data.ndim != 2 else data
    if data.ndim != 2:
        raise ValueError(f"reliability_data must be a 2-D labelers x items array, got {data.ndim} dimension(s).")
    return data


def _value_codes(data: np.ndarray, value_domain: npt.ArrayLike | None) -> tuple[np.ndarray, np.ndarray]:
    """Map labels to column indices of the value domain.

    Returns the domain and a labelers x items ``intp`` array of column indices,
    with ``len(domain)`` for a missing label.
    """
    finite = ~np.isnan(data)
    observed = _distinct(data[finite])
    if value_domain is None:
        domain = observed
    else:
        domain = np.asarray(value_domain, dtype=np.float64).ravel()
        if np.unique(domain).size != domain.size:
            raise ValueError("value_domain must not contain duplicates.")
        if not np.isin(observed, domain).all():
            raise ValueError("The reliability data contains out-of-domain values.")
    n_values = domain.size
    if observed.size == 0:
        return domain, np.full(data.shape, n_values, dtype=np.intp)
    # The domain order is kept as given (it defines the ordinal ranks), so find
    # each observed value's column through a sorted copy.
    sorter = np.argsort(domain, kind="stable")
    observed_column = sorter[np.searchsorted(domain[sorter], observed)]
    # Fast path: labels on a grid of whole or half (or quarter, tenth) steps map
    # through a lookup table, which is several times faster than a binary
    # search per label. All labels are in `observed`, so no check is needed.
    grid_scales = (1, 2, 4, 10) if np.isfinite(observed[[0, -1]]).all() else ()
    for scale in grid_scales:
        scaled = observed * scale
        if not np.array_equal(scaled, np.round(scaled)):
            continue
        low, span = int(scaled[0]), int(scaled[-1] - scaled[0])
        if span > 1_000_000:
            break
        table = np.full(span + 2, n_values, dtype=np.intp)
        table[scaled.astype(np.int64) - low] = observed_column
        offsets = np.where(finite, data * scale - low, span + 1)
        return domain, table[offsets.astype(np.intp)]
    position = np.searchsorted(observed, np.where(finite, data, observed[0]))
    return domain, np.where(finite, observed_column[position], n_values)


def _distinct(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)`` for finite floats: the distinct values, sorted (a hash instead of a sort of
    every value: labels take few distinct values, and at 400,000 labels this is about 3x faster)."""
    return np.sort(pd.unique(values.ravel()))


def _counts_from_codes(codes: np.ndarray, n_values: int) -> np.ndarray:
    """Items x values count matrix from labelers x items column indices."""
    n_items = codes.shape[1]
    # Missing labels (code ``n_values``) are left out before counting, so the counts come out items x
    # values without a column of missing labels to cut off and copy (the same whole numbers).
    flat = (codes + (np.arange(n_items, dtype=np.intp) * n_values)[None, :])[codes < n_values]
    return np.bincount(flat, minlength=n_items * n_values).reshape(n_items, n_values)


def _domain(data: np.ndarray, value_domain: npt.ArrayLike | None) -> tuple[np.ndarray, np.ndarray]:
    """Return the value domain and the items x values count matrix."""
    if data.size == 0:
        domain = np.zeros(0) if value_domain is None else np.asarray(value_domain, dtype=np.float64).ravel()
        n_items = data.shape[1] if data.ndim == 2 else 0
        return domain, np.zeros((n_items, domain.size), dtype=np.int64)
    domain, codes = _value_codes(data, value_domain)
    return domain, _counts_from_codes(codes, domain.size)


def _unit_codes(clusters: npt.ArrayLike) -> tuple[np.ndarray, int]:
    """Each item's unit as a code ``0..G-1`` (in the order of the units' values) and ``G``.

    The same codes as ``np.unique(clusters, return_inverse=True)``; when the units are already small
    non-negative integers (the consensus service's subject codes) by a count instead of a sort or hash.
    """
    group = np.asarray(clusters).ravel()
    if group.dtype.kind in "iu" and group.size and int(group.min()) >= 0 and int(group.max()) < 2 * group.size + 16:
        present = np.bincount(group) > 0
        code = np.cumsum(present) - 1
        return code[group].astype(np.intp), int(code[-1]) + 1
    keys, index = np.unique(group, return_inverse=True)
    return index.ravel().astype(np.intp), int(keys.size)
