"""Comparing two models on the same samples: each fairness score side by side, its change and a paired test.

Two evaluation runs on the same release share their samples: model A's error and model B's error on the
same image. For each score this module reports A, B, the change ``B - A``, a paired bootstrap interval of
the change (samples resampled with replacement, the same draw for both models) and a paired permutation
test: under "the two models are interchangeable" the two errors of a sample may be swapped, so the
p-value is the share of random swap patterns whose absolute change is at least the observed one
(``(1 + count) / (1 + n_permutations)``, which holds its nominal rate exactly under that null). With
``clusters`` (several photos of one person) the swaps and the bootstrap draw whole people: a person's
photos are swapped together and resampled together.

Scores (all in the error's units; each is a function of per-sample errors that the resampling reuses):

* ``mean_error``: the mean error over all shared samples;
* ``gender``: the largest difference between two groups' mean errors (seed 000's gender score when the
  worst pair is the extreme pair);
* ``skin_tone`` and ``body_shape``: the size of seed 000's score, ``|slope x (P95 - P5)|`` (a fit that
  tilts the other way is as unfair: smaller is better whatever the sign);
* ``skin_tone_band_gap`` and ``body_shape_band_gap``: the largest gap between two bands' mean errors,
  the bands of :func:`metrics.unfairness.attribute_bands`.

The intersectional count is not resampled here (a DBSCAN ensemble per resample is too costly); the
caller shows both runs' counts side by side without a test.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["ScoreChange", "compare_errors"]

_BATCH = 64


@dataclass(frozen=True)
class ScoreChange:
    """One score of two runs and its change.

    Attributes
    ----------
    name : str
        Score name (see the module docstring).
    a, b : float
        The score of run A and of run B on the shared samples.
    change : float
        ``b - a``.
    ci_low, ci_high : float
        Paired bootstrap percentile interval of the change (``1 - alpha``).
    p_value : float
        Paired permutation p-value (swaps of the two errors of a sample).
    significant : bool
        ``p_value < alpha``.
    """

    name: str
    a: float
    b: float
    change: float
    ci_low: float
    ci_high: float
    p_value: float
    significant: bool


def _one_hot(codes: np.ndarray) -> np.ndarray:
    matrix = np.zeros((codes.size, int(codes.max()) + 1))
    matrix[np.arange(codes.size), codes] = 1.0
    return matrix


class _Score:
    """A score as a function of a batch of error vectors (rows) under sample weights (rows)."""

    def __init__(self, name: str, kind: str, values: np.ndarray) -> None:
        self.name = name
        self.kind = kind
        if kind == "slope":
            x = values.astype(np.float64)
            if np.all(x == x[0]):
                raise ValueError(f"{name}: the attribute is constant")
            low, high = np.percentile(x, [5, 95])
            self.x = x
            self.range = float(high - low)
        elif kind == "gap":
            self.groups = _one_hot(values)

    def __call__(self, errors: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
        """Score of each row of ``errors`` (shape (m, n)), each row weighted by ``weights`` (m, n) or 1."""
        if self.kind == "mean":
            if weights is None:
                return np.asarray(errors.mean(axis=1))
            return np.asarray((errors * weights).sum(axis=1) / weights.sum(axis=1))
        if self.kind == "slope":
            x = self.x
            if weights is None:
                centred = x - x.mean()
                return np.asarray(np.abs(errors @ centred / (centred @ centred) * self.range))
            total = weights.sum(axis=1)
            mean_x = weights @ x / total
            mean_e = (weights * errors).sum(axis=1) / total
            sxe = (weights * errors) @ x - total * mean_x * mean_e
            sxx = weights @ (x * x) - total * mean_x**2
            with np.errstate(invalid="ignore", divide="ignore"):
                return np.asarray(np.abs(sxe / sxx * self.range))
        # Largest gap between group means (groups empty in a resample are left out).
        if weights is None:
            sums = errors @ self.groups
            counts = np.broadcast_to(self.groups.sum(axis=0), sums.shape)
        else:
            sums = (weights * errors) @ self.groups
            counts = weights @ self.groups
        with np.errstate(invalid="ignore", divide="ignore"):
            means = np.where(counts > 0, sums / np.where(counts > 0, counts, 1), np.nan)
        return np.asarray(np.nanmax(means, axis=1) - np.nanmin(means, axis=1))


def _codes(values: Sequence[Any] | np.ndarray, name: str, n: int) -> np.ndarray:
    labels = np.asarray(values, dtype=object)
    if labels.shape != (n,):
        raise ValueError(f"{name} has {labels.size} values for {n} samples")
    _, codes = np.unique(labels.astype(str), return_inverse=True)
    if codes.max(initial=0) < 1:
        raise ValueError(f"{name} needs at least two groups")
    return codes


def compare_errors(
    errors_a: Sequence[float] | np.ndarray,
    errors_b: Sequence[float] | np.ndarray,
    *,
    gender: Sequence[Any] | np.ndarray | None = None,
    skin_tone: Sequence[float] | np.ndarray | None = None,
    body_shape: Sequence[float] | np.ndarray | None = None,
    n_bands: int = 5,
    alpha: float = 0.05,
    n_permutations: int = 999,
    n_boot: int = 999,
    seed: int = 0,
    clusters: Sequence[Any] | np.ndarray | None = None,
    levels: int | None = None,
    tone_bands: int | None = None,
) -> list[ScoreChange]:
    """Each score of two runs on the same samples, its change, a paired interval and a paired test.

    Parameters
    ----------
    errors_a, errors_b : array-like of float, shape (n,)
        The two models' errors on the same samples, in the same order.
    gender : array-like, shape (n,), optional
        Group of each sample.
    skin_tone, body_shape : array-like of float, shape (n,), optional
        Attribute of each sample.
    n_bands : int, default 5
        Largest number of bands of a continuous attribute.
    alpha : float, default 0.05
        Significance level; the interval is ``1 - alpha``.
    n_permutations, n_boot : int, default 999
        Random swap patterns of the permutation test, resamples of the bootstrap.
    seed : int, default 0
        Seed of both.
    clusters : array-like, shape (n,), optional
        Person of each sample: swaps and resamples move whole people.
    levels : int, optional
        Tones of the skin-tone scale (its bands are cut on the scale, as in the report).
    tone_bands : int, optional
        Bands of the skin tone on its scale (default one per tone, as in the report; see
        :func:`metrics.unfairness.tone_band_count`). A band with fewer than 2 samples is left out of the gap.

    Returns
    -------
    list of ScoreChange
        ``mean_error`` first, then the scores whose attribute was given.

    Raises
    ------
    ValueError
        Lengths differ, non-finite errors, fewer than 3 samples, a constant attribute, fewer than two groups.

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> a = rng.normal(1, 0.1, 400)
    >>> changes = compare_errors(a, a + 0.5, n_permutations=99, n_boot=99)
    >>> changes[0].name, round(changes[0].change, 3), changes[0].significant
    ('mean_error', 0.5, True)
    """
    from metrics.unfairness import attribute_bands, cluster_codes, tone_band_count

    a = np.asarray(errors_a, dtype=np.float64)
    b = np.asarray(errors_b, dtype=np.float64)
    if a.ndim != 1 or a.shape != b.shape:
        raise ValueError(f"the two runs' errors differ in shape: {a.shape} vs {b.shape}")
    if a.size < 3:
        raise ValueError(f"need at least 3 shared samples, got {a.size}")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise ValueError("errors must be finite")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if n_permutations < 1 or n_boot < 1:
        raise ValueError("n_permutations and n_boot must be at least 1")
    n = a.size
    scores = [_Score("mean_error", "mean", np.zeros(n))]
    if gender is not None:
        scores.append(_Score("gender", "gap", _codes(gender, "gender", n)))
    for name, values in (("skin_tone", skin_tone), ("body_shape", body_shape)):
        if values is None:
            continue
        x = np.asarray(values, dtype=np.float64)
        if x.shape != (n,) or not np.all(np.isfinite(x)):
            raise ValueError(f"{name} must hold {n} finite values")
        scores.append(_Score(name, "slope", x))
        if name == "skin_tone":
            index, bands = attribute_bands(x, tone_band_count(levels, tone_bands, n_bands), levels)
        else:
            index, bands = attribute_bands(x, n_bands)
        gap = _Score(f"{name}_band_gap", "gap", index)
        # A band of one sample has no mean worth a gap (its whole error would be the gap).
        gap.groups[:, gap.groups.sum(axis=0) < 2] = 0.0
        if np.count_nonzero(gap.groups.sum(axis=0)) > 1:
            scores.append(gap)

    rng = np.random.default_rng(seed)
    person, n_people = cluster_codes(clusters, n)
    pair = np.vstack([a, b])
    observed = [(float(s(pair)[0]), float(s(pair)[1])) for s in scores]
    exceed = np.zeros(len(scores))
    done = 0
    while done < n_permutations:
        m = min(_BATCH, n_permutations - done)
        swap = (rng.random((m, n_people)) < 0.5)[:, person]
        perm_a = np.where(swap, b, a)
        perm_b = np.where(swap, a, b)
        for k, score in enumerate(scores):
            change = score(perm_b) - score(perm_a)
            exceed[k] += np.count_nonzero(np.abs(change) >= abs(observed[k][1] - observed[k][0]) - 1e-12)
        done += m
    changes: list[list[np.ndarray]] = [[] for _ in scores]
    done = 0
    while done < n_boot:
        m = min(_BATCH, n_boot - done)
        # Each person drawn with replacement; their samples come with them.
        weights = rng.multinomial(n_people, np.full(n_people, 1.0 / n_people), size=m).astype(np.float64)[:, person]
        for k, score in enumerate(scores):
            changes[k].append(score(np.broadcast_to(b, (m, n)), weights) - score(np.broadcast_to(a, (m, n)), weights))
        done += m
    results = []
    for k, score in enumerate(scores):
        draws = np.concatenate(changes[k])
        draws = draws[np.isfinite(draws)]
        low, high = np.percentile(draws, [100 * alpha / 2, 100 * (1 - alpha / 2)]) if draws.size else (np.nan,) * 2
        p_value = float((1 + exceed[k]) / (1 + n_permutations))
        value_a, value_b = observed[k]
        results.append(
            ScoreChange(
                name=score.name,
                a=value_a,
                b=value_b,
                change=value_b - value_a,
                ci_low=float(low),
                ci_high=float(high),
                p_value=p_value,
                significant=bool(p_value < alpha),
            )
        )
    return results
