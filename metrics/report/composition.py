"""The composition of the evaluated dataset along the skin-tone scale (representational bias).

Seed 003's NSD (normalised standard deviation of the group distribution) and seed 002's normalised
fairness discrepancy against the uniform distribution, on the counts per whole tone (labels rounded
half up), with every tone's share and its Wilson interval, so that an under-represented tone is
named next to the fairness scores it weakens.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["REPRESENTATION_RULE", "representation_reading", "tone_composition"]


#: A tone is under-represented below this fraction of an even share (1 / levels).
UNDER_REPRESENTED_FRACTION = 0.5
#: The rule in words (report, data card).
REPRESENTATION_RULE = (
    "a tone is under-represented when its share's 95% upper bound is below half an even share (1/levels); "
    "below half an even share (not conclusive) when only its share is; absent with no image"
)


def representation_reading(k: int, n: int, ci_high: float, levels: int) -> str:
    """How one tone is represented among ``n`` samples: the single rule of the report and the data card.

    Returns ``"absent"`` (no sample), ``"under-represented"`` (the share's upper bound is below half an
    even share), ``"below half an even share"`` (the share is, its interval is not), or
    ``"not under-represented"``.

    Examples
    --------
    >>> representation_reading(0, 20, 0.161, 10), representation_reading(1, 200, 0.028, 10)
    ('absent', 'under-represented')
    >>> representation_reading(1, 40, 0.129, 10), representation_reading(30, 200, 0.2, 10)
    ('below half an even share', 'not under-represented')
    """
    if levels < 2:
        raise ValueError("a scale needs at least two tones")
    limit = UNDER_REPRESENTED_FRACTION / levels
    if k == 0:
        return "absent"
    if ci_high < limit:
        return "under-represented"
    if n and k / n < limit:
        return "below half an even share"
    return "not under-represented"


def tone_composition(
    tones: ArrayLike, levels: int | None = None, *, confidence: float = 0.95, clusters: ArrayLike | None = None
) -> dict[str, Any]:
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
    clusters : array-like, optional
        Person of each sample (several photos of one person): each share's interval is then clustered by
        person (:func:`metrics.agreement.clustered_proportion`) instead of Wilson's over samples.

    Returns
    -------
    dict
        ``levels``, ``levels_source``, ``n``, ``tones`` (one row per tone: ``tone``, ``n``, ``share``,
        ``ci_low``, ``ci_high``, ``reading``), ``nsd`` (equal to the normalised L2 discrepancy from
        uniform, ``discrepancy_l2``, stated once), ``absent``, ``under_represented``, ``below_half``,
        ``least_represented``.

    Raises
    ------
    ValueError
        No finite tone, a tone below 1 or above ``levels``.

    Examples
    --------
    >>> part = tone_composition([1, 2, 2, 3, 3, 3], levels=3)
    >>> [row["n"] for row in part["tones"]], part["least_represented"]
    ([1, 2, 3], 1)
    >>> tone_composition([1] * 10 + [2] * 10, levels=3)["absent"]
    [3]
    """
    from metrics.dataset_bias import nsd
    from metrics.discrepancy import fairness_discrepancy
    from metrics.intervals import wilson_interval
    from metrics.rounding import round_half_up

    values = np.asarray(tones, dtype=np.float64)
    keep = np.isfinite(values)
    values = values[keep]
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
    people = None
    if clusters is not None:
        from metrics.unfairness.robust import cluster_codes

        people, g = cluster_codes(np.asarray(clusters, dtype=object)[keep], n)
        trials = np.bincount(people, minlength=g)
    rows = []
    for tone, k in enumerate(counts.tolist(), start=1):
        if people is None:
            low, high = wilson_interval(k, n, confidence)
        else:
            from metrics.agreement import clustered_proportion

            share = clustered_proportion(
                np.bincount(people, weights=(whole == tone).astype(float), minlength=g), trials, confidence
            )
            low, high = share.low, share.high
            if not np.isfinite(high):
                low, high = wilson_interval(k, n, confidence)
        rows.append(
            {
                "tone": tone,
                "n": k,
                "share": k / n,
                "ci_low": low,
                "ci_high": high,
                "reading": representation_reading(k, n, high, levels),
            }
        )
    return {
        "levels": int(levels),
        "levels_source": source,
        "n": n,
        "clustered": people is not None,
        "tones": rows,
        "nsd": float(nsd(counts)),
        "discrepancy_l2": float(fairness_discrepancy(counts, "l2")),
        "absent": [r["tone"] for r in rows if r["reading"] == "absent"],
        "under_represented": [r["tone"] for r in rows if r["reading"] == "under-represented"],
        "below_half": [r["tone"] for r in rows if r["reading"] == "below half an even share"],
        "least_represented": int(np.argmin(counts) + 1),
        "rule": REPRESENTATION_RULE,
    }
