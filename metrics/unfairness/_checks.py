"""Input checks shared by the unfairness scores."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


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
