"""Tests for metrics.dataset_bias (seed 003: NSD, NMI, NPMI, ID, OD)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.stats import entropy
from sklearn.metrics import mutual_info_score

from metrics.dataset_bias import intraclass_disparity, nmi, npmi, nsd, overall_disparity
from metrics.discrepancy import fairness_discrepancy

counts_1d = arrays(float, st.integers(2, 10), elements=st.floats(0, 1000, allow_nan=False)).filter(
    lambda a: a.sum() > 1e-6
)
tables = arrays(
    float,
    st.tuples(st.integers(1, 6), st.integers(1, 6)),
    elements=st.integers(0, 50).map(float),
).filter(lambda a: a.sum() > 0 and (a > 0).sum() >= 2)


# -- NSD -----------------------------------------------------------------------------------


def test_nsd_bounds_at_extreme_points():
    assert nsd([7, 7, 7, 7]) == pytest.approx(0.0, abs=1e-12)
    assert nsd([0, 0, 12, 0]) == pytest.approx(1.0)


def test_nsd_reproduces_seed_003_gender_figure():
    # Seed 003, Table 1: Affectnet "49.7% of the training data classified as male", NSD(2) =
    # 0.0057. The percentage is rounded, so the published NSD must lie between the values at
    # 49.65% and 49.75%; a sample std (ddof=1) or a missing normalisation falls outside.
    low, high = nsd([0.4975, 0.5025]), nsd([0.4965, 0.5035])
    assert low <= 0.0057 <= high


def test_nsd_counts_empty_groups_of_the_full_category_list():
    assert nsd([10, 10]) == pytest.approx(0.0, abs=1e-12)
    assert nsd([10, 10, 0]) == pytest.approx(0.5)  # population std 0.2357 * 3 / sqrt(2)


@pytest.mark.parametrize("bad", [[1.0], [0, 0, 0], [1, -1, 3], [[1, 2], [3, 4]]])
def test_nsd_rejects_invalid_distributions(bad):
    with pytest.raises(ValueError):
        nsd(bad)


@settings(max_examples=30, deadline=None)
@given(counts_1d)
def test_nsd_equals_normalised_l2_discrepancy(counts):
    # With a normalised distribution the mean is 1/k, so NSD's formula is the L2 distance to
    # uniform times sqrt(k/(k-1)) = L2 / L2(one-hot): exactly seed 002's normalised L2.
    assert nsd(counts) == pytest.approx(fairness_discrepancy(counts, "l2"), abs=1e-9)


@settings(max_examples=30, deadline=None)
@given(counts_1d, st.randoms(use_true_random=False))
def test_nsd_in_unit_interval_scale_and_permutation_invariant(counts, rnd):
    value = nsd(counts)
    assert 0.0 <= value <= 1.0
    shuffled = list(counts)
    rnd.shuffle(shuffled)
    assert nsd(shuffled) == pytest.approx(value, abs=1e-12)
    assert nsd(np.asarray(counts) * 3.5) == pytest.approx(value, abs=1e-12)


# -- NMI / NPMI ----------------------------------------------------------------------------


def _sklearn_nmi_joint(table):
    """Bouma's NMI from reference libraries: I(A;Y) (sklearn) / H(A,Y) (scipy)."""
    return mutual_info_score(None, None, contingency=table) / entropy(table.ravel())


@settings(max_examples=40, deadline=None)
@given(tables)
def test_nmi_matches_sklearn_mutual_information_over_scipy_joint_entropy(table):
    assert nmi(table) == pytest.approx(_sklearn_nmi_joint(table), abs=1e-9)


def test_nmi_extremes():
    independent = np.outer([1, 3, 6], [2, 2, 5]).astype(float)
    assert nmi(independent) == pytest.approx(0.0, abs=1e-12)
    assert nmi([[5, 0, 0], [0, 9, 0], [0, 0, 2]]) == pytest.approx(1.0)


def test_nmi_is_not_sklearns_arithmetic_normalisation():
    # Seed 003 divides by the joint entropy; sklearn's normalized_mutual_info_score divides
    # by the mean marginal entropy. They differ: guard against swapping one for the other.
    from sklearn.metrics import normalized_mutual_info_score

    groups = [0, 0, 0, 1, 1, 1]
    classes = [0, 0, 1, 1, 1, 1]
    table = np.array([[2, 1], [0, 3]])
    assert nmi(table) != pytest.approx(normalized_mutual_info_score(groups, classes), abs=1e-3)


def test_nmi_undefined_for_a_single_cell():
    with pytest.raises(ValueError, match="single"):
        nmi([[0, 0], [0, 7]])


@settings(max_examples=30, deadline=None)
@given(tables, st.randoms(use_true_random=False))
def test_nmi_and_npmi_invariant_to_group_and_class_order(table, rnd):
    rows = list(range(table.shape[0]))
    cols = list(range(table.shape[1]))
    rnd.shuffle(rows)
    rnd.shuffle(cols)
    permuted = table[np.ix_(rows, cols)]
    assert nmi(permuted) == pytest.approx(nmi(table), abs=1e-12)
    np.testing.assert_allclose(npmi(permuted), npmi(table)[np.ix_(rows, cols)], atol=1e-12)


def _npmi_authors(table):
    """Seed 003 authors' npmi (fer/metrics.py), transcribed for non-empty rows/columns."""
    real = table / table.sum()
    px = real.sum(axis=1, keepdims=True)
    py = real.sum(axis=0, keepdims=True)
    expected = px @ py
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log(real / expected) / -np.log(real)
    out[(real == 0) & (expected > 0)] = -1
    return out


@settings(max_examples=40, deadline=None)
@given(tables)
def test_npmi_matches_authors_code_and_bouma_alternative_form(table):
    result = npmi(table)
    assert np.all((result >= -1) | np.isnan(result)) and np.all((result <= 1) | np.isnan(result))
    reference = _npmi_authors(table)
    comparable = np.isfinite(reference)
    np.testing.assert_allclose(result[comparable], reference[comparable], atol=1e-9)
    # Bouma (2009): npmi = ln(p(x) p(y)) / ln p(x, y) - 1 for 0 < p(x, y) < 1.
    joint = table / table.sum()
    inside = (joint > 0) & (joint < 1)
    marg = joint.sum(axis=1, keepdims=True) * joint.sum(axis=0, keepdims=True)
    np.testing.assert_allclose(result[inside], np.log(marg[inside]) / np.log(joint[inside]) - 1, atol=1e-9)


def test_npmi_conventions_for_empty_cells_and_empty_groups():
    result = npmi([[4, 0], [0, 4], [0, 0]])
    np.testing.assert_allclose(result[:2], [[1, -1], [-1, 1]])
    assert np.all(np.isnan(result[2]))  # a group with no samples is undefined
    assert npmi([[0, 0], [0, 3]])[1, 1] == 1.0  # Bouma's convention at p(a, y) = 1


# -- ID / OD --------------------------------------------------------------------------------


def _od_authors(recall):
    """Seed 003 authors' od() (fer/metrics.py), in NumPy: their recall is [class, group]."""
    return ((1 - recall / recall.max(axis=1)[:, None]).sum(axis=1) / (recall.shape[1] - 1)).mean()


def test_id_bounds_from_the_seed():
    # One class (column), groups as rows.
    assert intraclass_disparity([[0.7], [0.7], [0.7]])[0] == 0.0
    assert intraclass_disparity([[0.0], [0.9], [0.0], [0.0]])[0] == pytest.approx(1.0)
    assert intraclass_disparity([[0.0], [0.0]])[0] == 0.0  # convention when the max is 0


def test_id_worked_example():
    # Class 0: best 0.8, relative [1, 0.5, 1] -> (0 + 0.5 + 0) / 2 = 0.25.
    # Class 1: best 0.6, relative [0.5, 1, 0] -> (0.5 + 0 + 1) / 2 = 0.75.
    recall = np.array([[0.8, 0.4, 0.8], [0.3, 0.6, 0.0]]).T  # rows: the three groups
    np.testing.assert_allclose(intraclass_disparity(recall), [0.25, 0.75])
    assert overall_disparity(recall) == pytest.approx(0.5)


@settings(max_examples=30, deadline=None)
@given(
    arrays(
        float,
        st.tuples(st.integers(1, 8), st.integers(2, 7)),
        elements=st.floats(0.01, 1.0, allow_nan=False),
    ),
    st.randoms(use_true_random=False),
)
def test_od_matches_authors_code_bounds_and_group_order(recall, rnd):
    # ``recall`` is drawn as the authors lay it out, [class, group]; ours takes [group, class].
    value = overall_disparity(recall.T)
    assert value == pytest.approx(_od_authors(recall), abs=1e-12)
    assert 0.0 <= value <= 1.0
    groups = list(range(recall.shape[1]))
    rnd.shuffle(groups)
    assert overall_disparity(recall.T[groups]) == pytest.approx(value, abs=1e-12)


def test_id_rejects_undefined_recall_naming_the_cell():
    with pytest.raises(ValueError, match=r"\(1, 0\)"):
        intraclass_disparity([[0.5, 0.4], [np.nan, 0.3]])


def test_id_needs_two_groups():
    with pytest.raises(ValueError, match="two"):
        overall_disparity([[0.5, 0.4]])
