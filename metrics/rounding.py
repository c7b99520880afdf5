"""Rounding of tone values: halves go up (2.5 -> 3), not to even as in :func:`round`.

A label is a tone or the midpoint of two adjacent tones, so a median of labels
is often exactly a half; Python's ``round`` and ``numpy.round`` would send
2.5 to 2 and 3.5 to 4. This is the one rounding rule for a "consensus tone" or
a tone band in the project.
"""

from __future__ import annotations

import math
from typing import overload

import numpy as np
import numpy.typing as npt

__all__ = ["round_half_up"]


@overload
def round_half_up(value: float) -> int: ...


@overload
def round_half_up(value: np.ndarray) -> np.ndarray: ...


def round_half_up(value: float | npt.ArrayLike) -> int | np.ndarray:
    """Round to the nearest whole number, halves towards +infinity.

    ``floor(value + 0.5)``: 2.5 -> 3, 3.5 -> 4, -2.5 -> -2.

    Parameters
    ----------
    value : float or array_like
        A number, or an array of numbers (``NaN`` allowed in an array).

    Returns
    -------
    int or numpy.ndarray
        An ``int`` for a scalar (a tone number); a float array of the same
        shape for an array (so that ``NaN`` stays ``NaN``).

    Raises
    ------
    ValueError
        For a scalar ``NaN`` (no whole number to return).

    Examples
    --------
    >>> round_half_up(2.5), round_half_up(3.5), round_half_up(-2.5), round(2.5)
    (3, 4, -2, 2)
    >>> round_half_up(np.array([0.5, 1.49, np.nan]))
    array([ 1.,  1., nan])
    """
    if np.ndim(value) == 0 and not isinstance(value, np.ndarray):
        number = float(value)  # type: ignore[arg-type]  # a 0-d number (checked above)
        if math.isnan(number):
            raise ValueError("cannot round NaN to a whole number")
        return math.floor(number + 0.5)
    return np.floor(np.asarray(value, dtype=np.float64) + 0.5)
