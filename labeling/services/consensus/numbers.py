"""Thresholds of the consensus statistics and JSON-safe numbers (``None`` plus a reason instead of ``NaN``)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

#: Agreement statistics over fewer images than this (with 2+ valid labels) are not shown.
MIN_IMAGES = 5
#: An image is flagged when its labels span this many tones or more. This project's
#: choice: seed 000 gives no such threshold (issue 12).
WIDE_RANGE = 3
#: Bootstrap resamples of the alpha confidence interval.
N_RESAMPLES = 1000
CONFIDENCE = 0.95
#: A tone is "under-represented" when its share of labels is below this fraction
#: of an even share (1 / n_tones).
UNDER_REPRESENTED = 0.5


def num(x: Any, digits: int = 6) -> float | None:
    """A finite float rounded to ``digits``, or ``None`` (never NaN in JSON)."""
    if x is None:
        return None
    x = float(x)
    return None if not math.isfinite(x) else round(x, digits)


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def too_little(n_images: int, what: str = "with 2+ labels", need: int = MIN_IMAGES) -> str:
    """The reason shown instead of a number computed from too few images."""
    return f"too little data: {plural(n_images, 'image')} {what} (needs {need})"


def stat(value: float, reason: str | None = None, **extra: Any) -> dict:
    """``{"value": x, "reason": None}`` or ``{"value": None, "reason": why}``."""
    number = num(value)
    if reason is not None:
        number = None
    elif number is None:
        reason = "undefined: no disagreement is possible (every label has the same value)"
    return {"value": number, "reason": reason, **extra}


def json_clean(obj: Any) -> Any:
    """NumPy scalars to Python, NaN to None, recursively."""
    if isinstance(obj, dict):
        return {str(k): json_clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_clean(v) for v in obj]
    if isinstance(obj, np.bool_ | bool):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, float | np.floating):
        return num(obj)
    return obj
