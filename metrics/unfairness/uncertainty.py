"""Label-uncertainty check: does the skin-tone verdict survive the labelers' disagreement?

A skin-tone label is a judgement: four labelers may give an image 6, 7, 7 and 8. The verdict
of :func:`metrics.unfairness.continuous_verdict` is computed on one tone per image (e.g. the
released final tone). This check recomputes it

* with each image's tone drawn uniformly within its labelers' range (``tone_min`` to
  ``tone_max``; whole steps when both ends are whole), many times, and
* with each labeler's own labels alone, on the images that labeler labelled,

and reports in what fraction of draws the conclusion (significant or not, severity level,
worse end) is the same as with the given tones. Pure NumPy: the CLI report and the web app
call it with arrays.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from metrics.intervals import wilson_interval

from .bands import band_unfairness
from .robust import robust_slope
from .verdict import continuous_verdict

__all__ = ["LabelUncertainty", "conclusion_of", "label_uncertainty"]

#: The conclusion is called robust when it survives at least this fraction of draws.
ROBUST_FRACTION = 0.9


@dataclass(frozen=True)
class LabelUncertainty:
    """How the skin-tone conclusion moves with the labels.

    Attributes
    ----------
    conclusion : str
        The conclusion with the given tones, e.g. ``"significant, severe, high end worse"``
        or ``"not significant"``.
    n_draws : int
        Draws of tones within the labelers' range.
    n_same : int
        Draws giving the same conclusion.
    fraction_same : float
        ``n_same / n_draws``.
    fraction_same_ci : tuple of float
        Wilson 95% interval of that fraction.
    fraction_significant, fraction_significant_ci
        Fraction of draws in which the verdict is significant, with its Wilson interval.
    conclusions : dict[str, Any] of str to int
        How many draws reached each conclusion.
    robust : bool
        ``fraction_same >= 0.9``.
    per_labeler : dict[str, Any]
        Labeler -> ``{"n": images, "conclusion": str, "same": bool}`` (empty when no
        per-labeler labels were given; ``conclusion`` says why when too few images).
    """

    conclusion: str
    n_draws: int
    n_same: int
    fraction_same: float
    fraction_same_ci: tuple[float, float]
    fraction_significant: float
    fraction_significant_ci: tuple[float, float]
    conclusions: dict[str, Any]
    robust: bool
    per_labeler: dict[str, Any] = field(default_factory=dict[str, Any])


def _conclusion(
    errors: np.ndarray,
    tone: np.ndarray,
    threshold: float,
    alpha: float,
    n_bands: int,
    n_permutations: int,
    levels: int | None,
    seed: int,
    clusters: np.ndarray | None = None,
) -> str:
    trend = robust_slope(errors, tone, clusters=clusters, alpha=alpha)
    bands = band_unfairness(
        errors,
        tone,
        threshold=threshold,
        alpha=alpha,
        n_bands=n_bands,
        n_permutations=n_permutations,
        seed=seed,
        clusters=clusters,
        levels=levels,
    )
    return conclusion_of(continuous_verdict(trend, bands))


def conclusion_of(verdict: Any) -> str:
    """A skin-tone verdict in the words the check compares: ``"significant, moderate, high end worse"``."""
    if not verdict.significant:
        return "not significant"
    end = f", {verdict.worse_end} end worse" if verdict.worse_end else ""
    return f"significant, {verdict.level}{end}"


def label_uncertainty(
    errors: Sequence[float] | np.ndarray,
    tone: Sequence[float] | np.ndarray,
    tone_min: Sequence[float] | np.ndarray,
    tone_max: Sequence[float] | np.ndarray,
    *,
    threshold: float,
    labeler_tones: Mapping[str, Sequence[float] | np.ndarray] | None = None,
    alpha: float = 0.05,
    n_draws: int = 100,
    n_bands: int = 5,
    n_permutations: int = 199,
    seed: int = 0,
    clusters: Sequence[object] | np.ndarray | None = None,
    levels: int | None = None,
    conclusion: str | None = None,
    labeler_permutations: int | None = None,
) -> LabelUncertainty:
    """Recompute the skin-tone verdict with tones drawn within each image's label range.

    Parameters
    ----------
    errors : array-like of float, shape (n,)
        Per-sample error.
    tone : array-like of float, shape (n,)
        The tone the report used (e.g. the final label).
    tone_min, tone_max : array-like of float, shape (n,)
        Smallest and largest label each image received.
    threshold : float
        Error threshold.
    labeler_tones : mapping of str to array-like, optional
        Per labeler, the tone of each image (NaN where that labeler gave none).
    alpha : float, default 0.05
        Significance level.
    n_draws : int, default 100
        Draws of tones within the ranges.
    n_bands : int, default 5
        Bands of the verdict.
    n_permutations : int, default 199
        Bootstrap resamples of the band test per draw (fewer than the report's 999: each draw is a
        whole re-scoring).
    seed : int, default 0
        Seed of the draws and of the band tests.
    clusters : array-like, shape (n,), optional
        Person of each sample, passed to every re-scoring.
    levels : int, optional
        Tones of the scale (bands on the scale; drawn tones are kept within 1..levels).
    conclusion : str, optional
        The conclusion with the given tones when already known (the report passes its verdict's,
        :func:`conclusion_of`, computed with more resamples than each draw's); None: computed here.
    labeler_permutations : int, optional
        Resamples of each labeler's re-scoring (few of them: the report gives them the verdict's count,
        so a labeler whose tones are the given ones reaches exactly the verdict); None: ``n_permutations``.

    Returns
    -------
    LabelUncertainty
        The conclusion, how often it survives (with an interval) and per labeler.

    Raises
    ------
    ValueError
        Length mismatch, NaN values, or ``tone_min > tone_max`` somewhere.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> tone = rng.integers(1, 11, 600).astype(float)
    >>> errors = 1.0 + 1.5 * (tone >= 9) + rng.normal(0, 0.3, 600)
    >>> check = label_uncertainty(errors, tone, np.maximum(tone - 1, 1), np.minimum(tone + 1, 10),
    ...                           threshold=2.0, n_draws=20)
    >>> check.conclusion, check.n_draws
    ('significant, moderate, high end worse', 20)
    """
    values = np.asarray(errors, dtype=np.float64)
    arrays = [np.asarray(a, dtype=np.float64) for a in (tone, tone_min, tone_max)]
    for name, a in zip(("tone", "tone_min", "tone_max"), arrays, strict=True):
        if a.shape != values.shape:
            raise ValueError(f"errors and {name} differ in length: {values.size} vs {a.size}")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{name} contains NaN or infinite values")
    tone, low, high = arrays
    if np.any(low > high):
        raise ValueError(f"tone_min > tone_max for {int(np.sum(low > high))} image(s)")
    if n_draws < 1:
        raise ValueError(f"n_draws must be at least 1, got {n_draws}")
    people = None if clusters is None else np.asarray(clusters, dtype=object)
    settings = (threshold, alpha, n_bands, n_permutations, levels)
    baseline = conclusion if conclusion is not None else _conclusion(values, tone, *settings, seed, people)
    rng = np.random.default_rng(seed)
    whole = bool(np.all(low == np.round(low)) and np.all(high == np.round(high)))
    counts: dict[str, int] = {}
    n_significant = 0
    for draw in range(n_draws):
        if whole:
            drawn = low + np.floor(rng.random(values.size) * (high - low + 1))
        else:
            drawn = rng.uniform(low, high)
        if levels is not None:
            drawn = np.clip(drawn, 1, levels)  # a range reaching beyond the scale stays on it
        if np.all(drawn == drawn[0]):
            found = "not significant"
        else:
            found = _conclusion(values, drawn, *settings, seed + 1 + draw, people)
        counts[found] = counts.get(found, 0) + 1
        n_significant += found != "not significant"
    same = counts.get(baseline, 0)
    per_labeler = {}
    for name, labels in (labeler_tones or {}).items():
        labels = np.asarray(labels, dtype=np.float64)
        if labels.shape != values.shape:
            raise ValueError(f"labeler {name!r}: {labels.size} tones for {values.size} samples")
        rows = np.isfinite(labels)
        try:
            found = _conclusion(values[rows], labels[rows], *settings, seed, None if people is None else people[rows])
            per_labeler[str(name)] = {"n": int(rows.sum()), "conclusion": found, "same": found == baseline}
        except ValueError as exc:
            per_labeler[str(name)] = {"n": int(rows.sum()), "conclusion": f"not computed: {exc}", "same": None}
    return LabelUncertainty(
        conclusion=baseline,
        n_draws=int(n_draws),
        n_same=int(same),
        fraction_same=same / n_draws,
        fraction_same_ci=wilson_interval(same, n_draws),
        fraction_significant=n_significant / n_draws,
        fraction_significant_ci=wilson_interval(n_significant, n_draws),
        conclusions=dict(sorted(counts.items(), key=lambda kv: -kv[1])),
        robust=bool(same / n_draws >= ROBUST_FRACTION),
        per_labeler=per_labeler,
    )
