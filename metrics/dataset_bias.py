"""Dataset and model bias for multi-class, multi-group problems (seed 003).

Definitions follow Dominguez-Catena, Paternain and Galar, "Assessing demographic bias transfer
from dataset to model: a case study in facial expression recognition" (AISafety workshop,
IJCAI-ECAI 2022 [Seed003]) and the authors' reference code (``irisdominguez/Dataset-Bias-Metrics``,
``fer/metrics.py``):

- NSD, representational bias: the normalised standard deviation of the group distribution.
- NMI and NPMI, stereotypical bias: the normalised (pointwise) mutual information between
  demographic group and class, with the normalisations of Bouma (2009) [Bouma2009], "Normalized (pointwise)
  mutual information in collocation extraction".
- ID and OD, model bias: per-class recall disparity across groups relative to the best group.

Natural logarithms throughout (the normalised scores do not depend on the base).

One axis convention for every table here: **rows are demographic groups, columns are classes**
(``contingency[g, c]`` for NMI/NPMI, ``recall[g, c]`` for ID/OD). The seed authors' code indexes recall
as ``[class, group]``; ID and OD here take the transpose of that, as the contingency tables are laid out.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["intraclass_disparity", "nmi", "npmi", "nsd", "overall_disparity"]


def _as_distribution(distribution: ArrayLike) -> np.ndarray:
    values = np.asarray(distribution, dtype=float)
    if values.ndim != 1:
        raise ValueError("distribution must be one-dimensional (one entry per group)")
    if values.size < 2:
        raise ValueError("NSD needs at least two groups (the full category list)")
    if not np.all(np.isfinite(values)) or np.any(values < 0):
        raise ValueError("distribution must hold finite, non-negative counts or proportions")
    total = values.sum()
    if total <= 0:
        raise ValueError("distribution is empty (all counts are zero): NSD is undefined")
    return np.asarray(values / total)


def nsd(distribution: ArrayLike) -> float:
    """Normalised standard deviation of a group distribution (representational bias).

    Seed 003, eq. 4: ``NSD(x) = sqrt(n) / sqrt(n - 1) * sqrt(sum_i (x_i - mean(x))**2)`` over the
    distribution normalised to sum to one, i.e. the population standard deviation times
    ``n / sqrt(n - 1)`` (the authors' code: ``np.std(dist) * n / np.sqrt(n - 1)``). It is 0 for a
    uniform distribution and 1 when every sample belongs to one group.

    Pass the *full* category list, with zeros for empty groups: the authors' wrapper builds the
    distribution with ``value_counts``, which silently drops empty groups and so under-reports
    bias. Because the distribution sums to one, NSD equals the L2 fairness discrepancy of
    seed 002 normalised by its one-hot value (see :func:`metrics.discrepancy.fairness_discrepancy`).

    Parameters
    ----------
    distribution : array_like, shape (n_groups,)
        Counts or proportions per group, ``n_groups >= 2``.

    Returns
    -------
    float
        NSD in [0, 1].

    Examples
    --------
    >>> nsd([10, 10, 10])
    0.0
    >>> round(nsd([0, 25, 0]), 12)
    1.0
    >>> round(nsd([0.9, 0.1]), 3)
    0.8
    """
    proportions = _as_distribution(distribution)
    n = proportions.size
    value = float(np.std(proportions) * n / np.sqrt(n - 1))
    # Rounding can push a one-hot distribution a hair above 1.
    return min(max(value, 0.0), 1.0)


def _joint(contingency: ArrayLike) -> np.ndarray:
    table = np.asarray(contingency, dtype=float)
    if table.ndim != 2:
        raise ValueError("contingency must be a 2-D table: rows are groups, columns are classes")
    if not np.all(np.isfinite(table)) or np.any(table < 0):
        raise ValueError("contingency must hold finite, non-negative counts or proportions")
    total = table.sum()
    if total <= 0:
        raise ValueError("contingency table is empty: NMI/NPMI are undefined")
    return np.asarray(table / total)


def nmi(contingency: ArrayLike) -> float:
    """Normalised mutual information between demographic group and class (stereotypical bias).

    Seed 003, eq. 6, after Bouma (2009) [Bouma2009]: the mutual information divided by the *joint* entropy,
    ``NMI = I(A; Y) / H(A, Y) = -sum p(a,y) ln(p(a)p(y)/p(a,y)) / -sum p(a,y) ln p(a,y)``.
    Note this is not scikit-learn's ``normalized_mutual_info_score`` (which divides by a mean of
    the marginal entropies); it is 0 for independence and 1 when group and class determine each
    other. Empty rows or columns (groups or classes without samples) contribute nothing.

    Parameters
    ----------
    contingency : array_like, shape (n_groups, n_classes)
        Counts (or joint proportions) of samples per (group, class).

    Returns
    -------
    float
        NMI in [0, 1].

    Raises
    ------
    ValueError
        If the table is empty, or if all samples fall in one cell (joint entropy 0: there is no
        variation to measure, NMI is 0/0).

    Examples
    --------
    >>> nmi([[10, 10], [10, 10]])
    0.0
    >>> nmi([[10, 0], [0, 30]])
    1.0
    """
    joint = _joint(contingency)
    p_group = joint.sum(axis=1, keepdims=True)
    p_class = joint.sum(axis=0, keepdims=True)
    cells = joint > 0
    p = joint[cells]
    expected = (p_group * p_class)[cells]
    joint_entropy = float(-np.sum(p * np.log(p)))
    if joint_entropy <= 0:
        raise ValueError(
            "NMI is undefined: all samples fall in a single (group, class) cell, so the joint entropy is zero"
        )
    mutual_information = float(np.sum(p * np.log(p / expected)))
    return min(max(mutual_information / joint_entropy, 0.0), 1.0)


def npmi(contingency: ArrayLike) -> np.ndarray:
    """Normalised pointwise mutual information per (group, class) (seed 003, eq. 5).

    ``NPMI(a, y) = ln(p(a, y) / (p(a) p(y))) / -ln p(a, y)`` (Bouma 2009) [Bouma2009]. 1 means the group only
    occurs with the class (over-representation), 0 independence, -1 never together
    (under-representation).

    Conventions (documented, because the formula is 0/0 or log 0 there):

    - ``p(a, y) = 0`` with both marginals positive: -1, the limit, as in the authors' code.
    - ``p(a, y) = 1`` (one group, one class): 1, Bouma's convention for complete co-occurrence
      (the authors' code gives NaN).
    - a group (row) or class (column) with no samples at all: NaN, *undefined*, because there
      is no observation of that group or class to compare; callers should report it as such.

    Parameters
    ----------
    contingency : array_like, shape (n_groups, n_classes)
        Counts (or joint proportions) of samples per (group, class).

    Returns
    -------
    numpy.ndarray, shape (n_groups, n_classes)
        NPMI per (group, class), in [-1, 1], NaN only for empty groups/classes.

    Examples
    --------
    >>> npmi([[10, 10], [10, 10]])
    array([[0., 0.],
           [0., 0.]])
    >>> npmi([[10, 0], [0, 10]])
    array([[ 1., -1.],
           [-1.,  1.]])
    """
    joint = _joint(contingency)
    p_group = joint.sum(axis=1, keepdims=True)
    p_class = joint.sum(axis=0, keepdims=True)
    expected = p_group * p_class
    result = np.full(joint.shape, np.nan)
    positive = joint > 0
    certain = positive & (joint >= 1.0)
    regular = positive & ~certain
    result[regular] = np.log(joint[regular] / expected[regular]) / -np.log(joint[regular])
    result[certain] = 1.0
    result[(joint == 0) & (expected > 0)] = -1.0
    return np.asarray(np.clip(result, -1.0, 1.0))


def _recall_matrix(recall: ArrayLike) -> np.ndarray:
    """``recall[g, c]`` (rows groups, columns classes) checked, returned as ``[class, group]``."""
    matrix = np.asarray(recall, dtype=float)
    if matrix.ndim != 2:
        raise ValueError("recall must be a 2-D array: recall[g, c] for group g (rows) and class c (columns)")
    if matrix.shape[0] < 2:
        raise ValueError("ID/OD need at least two demographic groups (rows)")
    if np.any(np.isnan(matrix)):
        bad = [tuple(int(i) for i in idx) for idx in np.argwhere(np.isnan(matrix))]
        raise ValueError(
            f"recall is undefined (NaN) at (group, class) {bad}: a group has no samples of that "
            "class. Drop the group or the class, or measure it, before computing ID/OD"
        )
    if np.any((matrix < 0) | (matrix > 1)):
        raise ValueError("recall values must lie in [0, 1]")
    return matrix.T


def intraclass_disparity(recall: ArrayLike) -> np.ndarray:
    """Intraclass disparity ID(c) for each class (seed 003, eq. 8).

    ``ID(c) = 1 / (|G| - 1) * sum_g (1 - R(c, g) / max_g' R(c, g'))``, with ``ID(c) = 0`` when
    ``max_g' R(c, g') = 0`` (the paper's convention). 0: every group has the best group's
    recall; 1: every group but the best has recall 0.

    Parameters
    ----------
    recall : array_like, shape (n_groups, n_classes)
        ``recall[g, c]`` is the recall of class ``c`` measured on group ``g`` (rows groups, as in
        the contingency tables of :func:`nmi`). NaN entries (a group without samples of a class) are
        rejected with a ``ValueError`` naming them: the seed does not define ID for them.

    Returns
    -------
    numpy.ndarray, shape (n_classes,)
        ID per class, in [0, 1].

    Examples
    --------
    Three groups (rows) and three classes (columns):

    >>> intraclass_disparity([[0.8, 0.5, 0.0], [0.4, 0.5, 0.0], [0.8, 0.0, 0.0]])
    array([0.25, 0.5 , 0.  ])
    """
    matrix = _recall_matrix(recall)
    best = matrix.max(axis=1)
    n_groups = matrix.shape[1]
    result = np.zeros(matrix.shape[0])
    measured = best > 0
    relative = matrix[measured] / best[measured, None]
    result[measured] = (1.0 - relative).sum(axis=1) / (n_groups - 1)
    return result


def overall_disparity(recall: ArrayLike) -> float:
    """Overall disparity OD of a model: the mean of ID(c) over classes (seed 003, eq. 9).

    Parameters
    ----------
    recall : array_like, shape (n_groups, n_classes)
        ``recall[g, c]`` is the recall of class ``c`` measured on group ``g``.

    Returns
    -------
    float
        OD in [0, 1]; 0 means no recall disparity between groups.

    Examples
    --------
    >>> overall_disparity([[0.8, 0.5, 0.0], [0.4, 0.5, 0.0], [0.8, 0.0, 0.0]])
    0.25
    """
    return float(np.mean(intraclass_disparity(recall)))
