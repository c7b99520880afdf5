"""Fairness discrepancy of an attribute distribution against uniform (seed 002) and CLEAM.

Seed 002 is Teo and Cheung, "Measuring Fairness in Generative Models" (ICML 2021 workshop [Seed002],
arXiv:2107.07754). The paper text in the seed omits the formulas; they are taken from the
authors' published code (``Bearwithchris/CLEAM_code``, ``PseudoGAN/src/metrics.py``,
function ``fairness_discrepancy``), where ``u = 1/k`` is the uniform reference:

- ``l1``: ``sum_i |p_i - u|``.
- ``l2``: ``sqrt(sum_i (p_i - u)**2)`` (the measure of Choi et al. 2020).
- ``specificity``: sort ``p`` in decreasing order; with rank weights ``w_j = (k - j) / sum``
  for ``j = 1..k-1`` (largest weight on the second-largest class),
  ``|p_(0) - sum_j w_j p_(j)|``.
- ``is`` (information specificity): ``(l1 + specificity) / 2``.
- ``wd``: ``scipy.stats.wasserstein_distance(p, [u] * k)``: the authors treat the *k
  proportions themselves* as a sample and compare them with a point mass at ``u``, which
  equals ``l1 / k`` exactly, so normalised ``wd`` always equals normalised ``l1`` (the paper
  reports them "generally identical ... to 4 D.P."). ``wd_ordinal`` is our addition for
  ordinal scales (skin tone): the earth mover's distance between ``p`` and uniform over the
  category indices ``0..k-1``; unlike the others it depends on the category order.

Normalisation (seed 002, "Scale"): each score is divided by its value at a one-hot
distribution (the "absolutely biased" extreme point), so scores lie in [0, 1]. For every
metric but ``wd_ordinal`` all one-hot distributions give the same value; for ``wd_ordinal``
the largest, an end category, is used. (The authors' commented-out ``metric_max`` returns the
L2 maximum for ``l1``, a bug we do not reproduce.)

CLEAM is Teo, Abdollahzadeh and Cheung, "On Measuring Fairness in Generative Models"
(NeurIPS 2023), see :func:`cleam_correct`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

__all__ = [
    "METRICS",
    "CleamEstimate",
    "cleam_correct",
    "fairness_discrepancy",
    "max_discrepancy",
]

Metric = Literal["l1", "l2", "is", "specificity", "wd", "wd_ordinal"]
METRICS: tuple[str, ...] = ("l1", "l2", "is", "specificity", "wd", "wd_ordinal")


def _as_distribution(p: ArrayLike) -> np.ndarray:
    values = np.asarray(p, dtype=float)
    if values.ndim != 1 or values.size < 2:
        raise ValueError("p must be a 1-D distribution over at least two categories")
    if not np.all(np.isfinite(values)) or np.any(values < 0):
        raise ValueError("p must hold finite, non-negative counts or proportions")
    total = values.sum()
    if total <= 0:
        raise ValueError("p is empty (all zero): the discrepancy is undefined")
    return np.asarray(values / total)


def _specificity(p: np.ndarray) -> float:
    k = p.size
    ordered = np.sort(p)[::-1]
    ranks = np.arange(k - 1, 0, -1, dtype=float)
    weights = ranks / ranks.sum()
    return float(abs(ordered[0] - np.sum(ordered[1:] * weights)))


def _raw(p: np.ndarray, metric: str) -> float:
    k = p.size
    uniform = np.full(k, 1.0 / k)
    if metric == "l1":
        return float(np.abs(p - uniform).sum())
    if metric == "l2":
        return float(np.sqrt(((p - uniform) ** 2).sum()))
    if metric == "specificity":
        return _specificity(p)
    if metric == "is":
        return (float(np.abs(p - uniform).sum()) + _specificity(p)) / 2.0
    if metric == "wd":
        return float(stats.wasserstein_distance(p, uniform))
    if metric == "wd_ordinal":
        support = np.arange(k, dtype=float)
        return float(stats.wasserstein_distance(support, support, p, uniform))
    raise ValueError(f"unknown metric {metric!r}; choose one of {METRICS}")


def max_discrepancy(k: int, metric: Metric = "l2") -> float:
    """Value of a discrepancy at a one-hot distribution over ``k`` categories (its maximum).

    This is seed 002's normalisation factor ``f*_max`` (``k = 2``: L2 0.707; ``k = 4``: 0.866).

    Parameters
    ----------
    k : int
        Number of categories, at least 2.
    metric : {"l1", "l2", "is", "specificity", "wd", "wd_ordinal"}
        Discrepancy measure.

    Returns
    -------
    float
        The unnormalised score of the most biased distribution.

    Examples
    --------
    >>> round(max_discrepancy(2, "l2"), 3), round(max_discrepancy(4, "l2"), 3)
    (0.707, 0.866)
    """
    if k < 2:
        raise ValueError("k must be at least 2")
    one_hot = np.zeros(k)
    one_hot[0] = 1.0
    return _raw(one_hot, metric)


def fairness_discrepancy(p: ArrayLike, metric: Metric = "l2", normalize: bool = True) -> float:
    """Fairness discrepancy of a distribution against the uniform distribution (seed 002).

    Parameters
    ----------
    p : array_like, shape (k,)
        Counts or proportions per category, with zeros for empty categories (the full category
        list: ``k`` sets the uniform reference). Normalised to sum to one.
    metric : {"l1", "l2", "is", "specificity", "wd", "wd_ordinal"}
        Discrepancy measure, as defined in the module docstring.
    normalize : bool, default True
        Divide by the value at a one-hot distribution (:func:`max_discrepancy`) so that the score
        lies in [0, 1]: 0 uniform, 1 all mass on one category.

    Returns
    -------
    float
        The discrepancy score.

    Examples
    --------
    Seed 002's worked example (k = 2, p = [0.9, 0.1]): L2 0.566, maximum 0.707, normalised 0.8.

    >>> round(fairness_discrepancy([0.9, 0.1], "l2", normalize=False), 3)
    0.566
    >>> round(fairness_discrepancy([0.9, 0.1], "l2"), 3)
    0.8
    >>> round(fairness_discrepancy([5, 5, 5, 5], "specificity"), 12)
    0.0
    """
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; choose one of {METRICS}")
    distribution = _as_distribution(p)
    score = _raw(distribution, metric)
    if not normalize:
        return score
    # Clip rounding noise (e.g. 1.0000000000000002 at a one-hot distribution).
    return min(max(score / max_discrepancy(distribution.size, metric), 0.0), 1.0)


@dataclass(frozen=True)
class CleamEstimate:
    """Result of :func:`cleam_correct` for a binary attribute.

    Attributes
    ----------
    p_star : float
        Point estimate of the true proportion of class 0, clipped to [0, 1].
    p_star_raw : float
        The same before clipping (outside [0, 1] when the observed proportion is outside the
        range the classifier can produce, ``[1 - alpha_1, alpha_0]``).
    interval : tuple of float, or None
        Interval estimate of the true proportion of class 0 (clipped to [0, 1]); None when a
        single observed proportion was given without ``n_samples``.
    p_hat : float
        Mean observed proportion of class 0.
    alpha_0, alpha_1 : float
        Per-class accuracies used: ``P(pred 0 | true 0)`` and ``P(pred 1 | true 1)``.
    ci : float
        Confidence level of ``interval``.
    method : str
        ``"cleam-batches"`` (the paper's interval from S batch proportions),
        ``"wald-binomial"`` (our extension for one batch of ``n_samples``) or ``"point"``.
    """

    p_star: float
    p_star_raw: float
    interval: tuple[float, float] | None
    p_hat: float
    alpha_0: float
    alpha_1: float
    ci: float
    method: str

    @property
    def distribution(self) -> np.ndarray:
        """Corrected distribution ``[p*, 1 - p*]``, ready for :func:`fairness_discrepancy`."""
        return np.array([self.p_star, 1.0 - self.p_star])


def _accuracies(alpha_0: float | None, alpha_1: float | None, confusion: ArrayLike | None) -> tuple[float, float]:
    if confusion is not None:
        if alpha_0 is not None or alpha_1 is not None:
            raise ValueError("give either alpha_0/alpha_1 or confusion, not both")
        matrix = np.asarray(confusion, dtype=float)
        if matrix.shape != (2, 2) or np.any(matrix < 0):
            raise ValueError("confusion must be a non-negative 2x2 matrix [true, predicted]")
        rows = matrix.sum(axis=1)
        if np.any(rows <= 0):
            raise ValueError("confusion has a class with no true samples: accuracy undefined")
        return float(matrix[0, 0] / rows[0]), float(matrix[1, 1] / rows[1])
    if alpha_0 is None or alpha_1 is None:
        raise ValueError("give alpha_0 and alpha_1, or a confusion matrix")
    return float(alpha_0), float(alpha_1)


def cleam_correct(
    p_hat: float | ArrayLike,
    alpha_0: float | None = None,
    alpha_1: float | None = None,
    *,
    confusion: ArrayLike | None = None,
    n_samples: int | None = None,
    ci: float = 0.95,
) -> CleamEstimate:
    """Correct an observed binary attribute proportion for a known classifier error (CLEAM).

    CLEAM (Teo, Abdollahzadeh and Cheung, "On Measuring Fairness in Generative Models",
    NeurIPS 2023; code ``Bearwithchris/CLEAM_code``, ``PseudoGAN/src/CLEAM.py``) models the
    classifier's output: with true proportion ``p*`` of class 0 and per-class accuracies
    ``alpha_0 = P(pred 0 | true 0)``, ``alpha_1 = P(pred 1 | true 1)``, the expected observed
    proportion is ``E[p_hat] = p* alpha_0 + (1 - p*)(1 - alpha_1)``. Solving for ``p*`` gives
    the point estimate ``p* = (p_hat - (1 - alpha_1)) / (alpha_0 + alpha_1 - 1)``.

    Interval estimate, as in the paper: with ``S >= 2`` batch proportions ``p_hat_1..p_hat_S``
    (e.g. S batches of generated or labelled samples), mean ``mu`` and population standard
    deviation ``sigma`` (``ddof=0``, as in the authors' code), the bounds
    ``mu -/+ z sigma / sqrt(S)`` are mapped through the same linear inversion
    (``z = 1.96`` for ``ci = 0.95``). Our extension for a single proportion measured on
    ``n_samples`` samples: a Wald binomial interval ``p_hat -/+ z sqrt(p_hat(1-p_hat)/n)``, mapped
    the same way. Only ``k = 2`` is implemented (the paper's closed form); the accuracies are
    treated as exactly known.

    Parameters
    ----------
    p_hat : float or array_like
        Observed proportion of class 0, or one proportion per batch.
    alpha_0, alpha_1 : float, optional
        Per-class accuracies of the attribute classifier.
    confusion : array_like, shape (2, 2), optional
        Instead of the accuracies: the classifier's confusion matrix on labelled validation
        data, rows true class, columns predicted class (scikit-learn's convention).
    n_samples : int, optional
        Number of samples behind a single ``p_hat`` (enables the Wald interval).
    ci : float, default 0.95
        Confidence level of the interval.

    Returns
    -------
    CleamEstimate
        Point estimate, interval and the inputs used.

    Raises
    ------
    ValueError
        If ``alpha_0 + alpha_1 <= 1`` (a classifier no better than chance cannot be inverted).

    Examples
    --------
    A classifier with accuracies 0.9 and 0.8 sees 69% of class 0 when the truth is 70%:
    ``0.7 * 0.9 + 0.3 * (1 - 0.8) = 0.69``.

    >>> round(cleam_correct(0.69, 0.9, 0.8).p_star, 6)
    0.7
    """
    a0, a1 = _accuracies(alpha_0, alpha_1, confusion)
    if not (0.0 <= a0 <= 1.0 and 0.0 <= a1 <= 1.0):
        raise ValueError("accuracies must lie in [0, 1]")
    slope = a0 + a1 - 1.0
    if slope <= 0:
        raise ValueError(
            "CLEAM is undefined when alpha_0 + alpha_1 <= 1: the classifier is no better than "
            "chance, so its output carries no information about the true proportion"
        )
    if not 0.0 < ci < 1.0:
        raise ValueError("ci must lie in (0, 1)")
    observed = np.atleast_1d(np.asarray(p_hat, dtype=float))
    if observed.ndim != 1 or observed.size == 0 or np.any((observed < 0) | (observed > 1)):
        raise ValueError("p_hat must be proportions in [0, 1]")

    def invert(value: float) -> float:
        return (value - (1.0 - a1)) / slope

    z = float(stats.norm.ppf(0.5 + ci / 2.0))
    mean = float(observed.mean())
    interval: tuple[float, float] | None = None
    method = "point"
    if observed.size >= 2:
        half = z * float(observed.std()) / np.sqrt(observed.size)
        method = "cleam-batches"
    elif n_samples is not None:
        if n_samples < 1:
            raise ValueError("n_samples must be positive")
        half = z * float(np.sqrt(mean * (1.0 - mean) / n_samples))
        method = "wald-binomial"
    if method != "point":
        low, high = invert(mean - half), invert(mean + half)
        interval = (float(np.clip(low, 0.0, 1.0)), float(np.clip(high, 0.0, 1.0)))
    raw = invert(mean)
    return CleamEstimate(
        p_star=float(np.clip(raw, 0.0, 1.0)),
        p_star_raw=float(raw),
        interval=interval,
        p_hat=mean,
        alpha_0=a0,
        alpha_1=a1,
        ci=ci,
        method=method,
    )
