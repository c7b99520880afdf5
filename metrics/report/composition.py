"""The composition of the evaluated dataset along the skin-tone scale (representational bias).

Seed 003's NSD (normalised standard deviation of the group distribution) and seed 002's normalised
fairness discrepancy against the uniform distribution, on the counts per whole tone (labels rounded
half up), with every tone's share and its Wilson interval, so that an under-represented tone is
named next to the fairness scores it weakens.
"""

from __future__ import annotations

import numpy as np

__all__ = ["tone_composition"]


def tone_composition(tones, levels: int | None = None, *, confidence: float = 0.95) -> dict:
    """Counts, shares and representational-bias scores of skin tones on a 1..``levels`` scale.

    Parameters
    ----------
    tones : array-like of float
        Each sample's tone (a final label: whole or half steps); rounded half up to whole tones.
    levels : int, optional
        Number of tones of the scale (10 for MST). Default: the largest rounded tone seen (say so:
        a scale whose deepest tones are absent entirely is then under-counted).
    confidence : float, default 0.95
        Level of the share intervals.

    Returns
    -------
    dict
        ``levels``, ``levels_source``, ``n``, ``tones`` (one row per tone: ``tone``, ``n``, ``share``,
        ``ci_low``, ``ci_high``), ``nsd``, ``discrepancy_l2``, ``under_represented`` (tones whose share's
        upper bound is below half the uniform share ``1 / levels``), ``least_represented``.

    Raises
    ------
    ValueError
        No finite tone, a tone below 1 or above ``levels``.

    Examples
    --------
    >>> part = tone_composition([1, 2, 2, 3, 3, 3], levels=3)
    >>> [row["n"] for row in part["tones"]], part["least_represented"]
    ([1, 2, 3], 1)
    """
    from metrics.dataset_bias import nsd
    from metrics.discrepancy import fairness_discrepancy
    from metrics.intervals import wilson_interval
    from metrics.rounding import round_half_up

    values = np.asarray(tones, dtype=np.float64)
    values = values[np.isfinite(values)]
    if values.size == 0:
        raise ValueError("no finite tone")
    whole = round_half_up(values).astype(np.int64)
    source = "given"
    if levels is None:
        levels = int(whole.max())
        source = "the deepest tone present (no scale size given)"
    if whole.min() < 1 or whole.max() > levels:
        raise ValueError(f"tones must lie in 1..{levels}, got {whole.min()}..{whole.max()}")
    if levels < 2:
        raise ValueError("a scale needs at least two tones")
    counts = np.bincount(whole - 1, minlength=levels)
    n = int(counts.sum())
    rows = []
    for tone, k in enumerate(counts.tolist(), start=1):
        low, high = wilson_interval(k, n, confidence)
        rows.append({"tone": tone, "n": k, "share": k / n, "ci_low": low, "ci_high": high})
    uniform = 1.0 / levels
    under = [r["tone"] for r in rows if r["ci_high"] < uniform / 2]
    return {
        "levels": int(levels),
        "levels_source": source,
        "n": n,
        "tones": rows,
        "nsd": float(nsd(counts)),
        "discrepancy_l2": float(fairness_discrepancy(counts, "l2")),
        "under_represented": under,
        "least_represented": int(np.argmin(counts) + 1),
        "rule": "under-represented: the share's 95% upper bound is below half the uniform share 1/levels",
    }
