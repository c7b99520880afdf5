"""Tests of metrics.unfairness against scipy.stats and scikit-learn's DBSCAN."""

import numpy as np
import pytest
from scipy import stats
from sklearn.cluster import DBSCAN
from sklearn.datasets import make_blobs, make_moons
from sklearn.preprocessing import StandardScaler

from metrics import _dbscan
from metrics.unfairness import (
    DEFAULT_EPS_EXPONENTS,
    categorical_unfairness,
    continuous_unfairness,
    intersectional_unfairness,
    severity,
    standardise,
)

# ------------------------------------------------------------------ categorical


def test_categorical_matches_ks_2samp_and_mean_difference():
    rng = np.random.default_rng(1)
    a, b = rng.normal(1.0, 0.3, 120), rng.normal(1.3, 0.3, 90)
    errors = np.r_[a, b]
    groups = ["female"] * a.size + ["male"] * b.size
    result = categorical_unfairness(errors, groups)
    ref = stats.ks_2samp(a, b)
    assert result.statistic == pytest.approx(ref.statistic)
    assert result.p_value == pytest.approx(ref.pvalue)
    assert result.significant == (ref.pvalue < 0.05)
    assert result.score == pytest.approx(abs(b.mean() - a.mean()))
    assert result.worst_pair.higher_error_group == ("male" if b.mean() > a.mean() else "female")


def test_categorical_invariant_to_label_renaming_and_order():
    rng = np.random.default_rng(2)
    errors = rng.normal(1.0, 0.5, 300)
    groups = rng.choice(["a", "b", "c"], 300)
    errors[groups == "c"] += 0.4
    first = categorical_unfairness(errors, groups)
    rename = {"a": "zz", "b": "yy", "c": "xx"}
    perm = rng.permutation(300)
    second = categorical_unfairness(errors[perm], [rename[g] for g in groups[perm]])
    assert second.score == pytest.approx(first.score)
    assert second.p_value == pytest.approx(first.p_value)
    assert second.statistic == pytest.approx(first.statistic)
    assert rename[first.worst_pair.higher_error_group] == second.worst_pair.higher_error_group


def test_categorical_worst_pair_is_largest_significant_score():
    rng = np.random.default_rng(3)
    errors = np.r_[rng.normal(1, 0.2, 80), rng.normal(1.3, 0.2, 80), rng.normal(2.0, 0.2, 80)]
    groups = np.repeat(["a", "b", "c"], 80)
    result = categorical_unfairness(errors, groups)
    assert len(result.pairs) == 3
    significant = [p for p in result.pairs if p.significant]
    assert result.score == max(p.score for p in significant)
    assert {
        result.worst_pair.higher_error_group,
        result.worst_pair.lower_error_group,
    } == {"a", "c"}
    for pair in result.pairs:
        hi = errors[groups == pair.higher_error_group]
        lo = errors[groups == pair.lower_error_group]
        assert pair.p_value == pytest.approx(stats.ks_2samp(hi, lo).pvalue)


def test_categorical_none_significant_reports_smallest_p():
    rng = np.random.default_rng(4)
    errors = rng.normal(1, 0.3, 90)
    groups = np.repeat(["a", "b", "c"], 30)
    result = categorical_unfairness(errors, groups, alpha=1e-9)
    assert not result.significant
    assert result.p_value == min(p.p_value for p in result.pairs)


@pytest.mark.parametrize(
    ("errors", "groups", "message"),
    [
        ([1.0, 2.0, 3.0], ["a", "a", "a"], "at least 2 groups"),
        ([1.0, 2.0, 3.0], ["a", "a", "b"], "at least 2 samples"),
        ([1.0, np.nan, 3.0, 4.0], ["a", "a", "b", "b"], "NaN"),
        ([1.0, 2.0, 3.0], ["a", "b"], "length"),
        ([1.0, 2.0, 3.0, 4.0], ["a", None, "b", "b"], "missing group"),
    ],
)
def test_categorical_errors(errors, groups, message):
    with pytest.raises(ValueError, match=message):
        categorical_unfairness(errors, groups)


# ------------------------------------------------------------------- continuous


def test_continuous_matches_linregress():
    rng = np.random.default_rng(5)
    tone = rng.integers(1, 11, 400).astype(float)
    errors = 1.0 + 0.05 * tone + rng.normal(0, 0.3, 400)
    result = continuous_unfairness(errors, tone)
    ref = stats.linregress(tone, errors)
    assert result.slope == pytest.approx(ref.slope)
    assert result.intercept == pytest.approx(ref.intercept)
    assert result.p_value == pytest.approx(ref.pvalue)
    assert result.significant == (ref.pvalue < 0.05)
    p5, p95 = np.percentile(tone, [5, 95])
    assert result.score == pytest.approx(ref.slope * (p95 - p5))


def test_continuous_score_sign_and_custom_percentiles():
    x = np.linspace(0, 1, 101)
    result = continuous_unfairness(2.0 - 3.0 * x, x, percentiles=(10, 90))
    assert result.score == pytest.approx(-3.0 * 0.8)
    assert result.significant


@pytest.mark.parametrize(
    ("errors", "attribute", "message"),
    [
        ([1.0, 2.0], [1.0, 2.0], "at least 3"),
        ([1.0, 2.0, 3.0], [1.0, 1.0, 1.0], "constant"),
        ([1.0, 2.0, 3.0], [1.0, np.nan, 2.0], "NaN"),
        ([1.0, 2.0, 3.0], [1.0, 2.0], "length"),
    ],
)
def test_continuous_errors(errors, attribute, message):
    with pytest.raises(ValueError, match=message):
        continuous_unfairness(errors, attribute)


# ------------------------------------------------------------------- severity


@pytest.mark.parametrize(
    ("score", "level"),
    [
        (0.0, "negligible"),
        (0.99, "negligible"),
        (1.0, "moderate"),
        (-1.5, "moderate"),
        (2.0, "severe"),
        (-7.0, "severe"),
    ],
)
def test_severity_levels(score, level):
    assert severity(score, 2.0).level == level
    assert severity(score, 2.0).ratio == pytest.approx(abs(score) / 2.0)


def test_severity_rejects_bad_threshold():
    with pytest.raises(ValueError):
        severity(1.0, 0.0)


# -------------------------------------------------------------- intersectional


def test_standardise_matches_standard_scaler():
    rng = np.random.default_rng(6)
    x = np.column_stack([rng.normal(3, 2, 50), np.full(50, 4.0)])
    np.testing.assert_allclose(standardise(x), StandardScaler().fit_transform(x), atol=1e-12)


def _datasets():
    rng = np.random.default_rng(7)
    yield "gaussian", rng.normal(size=(1500, 2)), 10
    tone = np.clip(np.round(rng.normal(5, 2, (1200, 4))), 1, 10).mean(axis=1)
    yield "discrete tone", np.column_stack([rng.lognormal(0, 0.25, 1200), tone]), 10
    grid = np.stack(np.meshgrid(np.arange(30), np.arange(25)), -1).reshape(-1, 2).astype(float)
    yield "grid (distance ties)", grid, 5
    yield "grid with duplicates", np.r_[grid, grid[::3]], 10
    blobs, _ = make_blobs(800, centers=6, cluster_std=0.3, random_state=8)
    yield "blobs", blobs, 10
    moons, _ = make_moons(600, noise=0.05, random_state=9)
    yield "moons", moons, 4


@pytest.mark.parametrize("path", ["spanning tree", "grid"])
@pytest.mark.parametrize(("name", "raw", "min_samples"), list(_datasets()))
def test_dbscan_labels_equal_sklearn(name, raw, min_samples, path, monkeypatch):
    if path == "grid":  # the path of more than _DENSE_MAX points, on these
        monkeypatch.setattr(_dbscan, "_DENSE_MAX", 0)
    points = standardise(raw)
    index = _dbscan.NeighbourIndex(points, min_samples)
    assert index.dense == (path == "spanning tree")
    for eps in np.power(10.0, DEFAULT_EPS_EXPONENTS[::10]):
        expected = DBSCAN(eps=eps, min_samples=min_samples).fit(points).labels_
        np.testing.assert_array_equal(index.labels(eps), expected, err_msg=f"{name} eps={eps}")


@pytest.mark.parametrize("path", ["spanning tree", "grid"])
def test_dbscan_a_border_point_between_two_clusters_does_not_join_them(path, monkeypatch):
    """Two tight groups 1 apart and one point halfway, within eps of both but with too few neighbours to be a
    core point: two clusters, the middle point a border point of the first (scikit-learn's order)."""
    if path == "grid":
        monkeypatch.setattr(_dbscan, "_DENSE_MAX", 0)
    angle = np.linspace(0, 2 * np.pi, 12, endpoint=False)
    ring = 0.05 * np.column_stack([np.cos(angle), np.sin(angle)])
    points = np.r_[ring, ring + [1.0, 0.0], [[0.5, 0.0]]]
    index = _dbscan.NeighbourIndex(points, 10)  # the middle point has 7 neighbours within 0.47, itself included
    labels = index.labels(0.47)
    np.testing.assert_array_equal(labels, DBSCAN(eps=0.47, min_samples=10).fit(points).labels_)
    assert labels[:12].tolist() == [0] * 12 and labels[12:24].tolist() == [1] * 12 and labels[24] == 0


@pytest.mark.parametrize("seed", range(6))
def test_dbscan_spanning_tree_in_any_eps_order_equals_sklearn(seed):
    """The spanning-tree path joins the tree's edges as eps rises; a smaller eps starts again: any order of
    eps gives scikit-learn's labels (ties and duplicate points included)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(12, 300))
    raw = np.round(rng.normal(size=(n, 2)) * 3) / 3 if seed % 2 else rng.normal(size=(n, 2))
    points = standardise(raw)
    min_samples = int(rng.integers(1, 12))
    index = _dbscan.NeighbourIndex(points, min_samples)
    assert index.dense
    for eps in rng.permutation(np.power(10.0, DEFAULT_EPS_EXPONENTS[::6])):
        expected = DBSCAN(eps=eps, min_samples=min_samples).fit(points).labels_
        np.testing.assert_array_equal(index.labels(eps), expected, err_msg=f"eps={eps}")


def test_dbscan_exact_fallback_path(monkeypatch):
    # Force the grid path, and the brute-force pair check to run on every undecided cell pair.
    monkeypatch.setattr(_dbscan, "_DENSE_MAX", 0)
    monkeypatch.setattr(_dbscan, "_PAIR_CHUNK", 7)
    rng = np.random.default_rng(10)
    points = standardise(np.r_[rng.normal(0, 1, (300, 2)), rng.normal(4, 0.2, (100, 2))])
    index = _dbscan.NeighbourIndex(points, 5)
    for eps in (0.05, 0.1, 0.2, 0.5, 1.0):
        expected = DBSCAN(eps=eps, min_samples=5).fit(points).labels_
        np.testing.assert_array_equal(index.labels(eps), expected)


EXPONENTS = DEFAULT_EPS_EXPONENTS[::3]


def _sklearn_members(errors, features):
    points = standardise(features)
    flagged = np.zeros(errors.size, dtype=bool)
    for eps in np.power(10.0, EXPONENTS):
        labels = DBSCAN(eps=eps, min_samples=10).fit(points).labels_
        for label in set(labels.tolist()) - {-1}:
            member = labels == label
            if member.sum() >= 10 and np.mean(errors[member] >= 1.7) >= 0.7:
                flagged |= member
    return np.flatnonzero(flagged)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_intersectional_members_equal_sklearn_loop(seed):
    rng = np.random.default_rng(seed)
    n = 400
    body = rng.normal(0.3, 0.05, n)
    tone = np.clip(np.round(rng.normal(5, 2, (n, 2))), 1, 10).mean(axis=1)
    # Errors near 1.7 so that the 70% rule is decided by a few border points.
    errors = 1.0 + 0.12 * tone + rng.normal(0, 0.3, n)
    features = np.column_stack([body, tone])
    result = intersectional_unfairness(errors, features, eps_exponents=EXPONENTS)
    expected = _sklearn_members(errors, features)
    assert expected.size > 0
    np.testing.assert_array_equal(result.members, expected)
    assert result.n_customers == expected.size
    assert len(result.clusters) == EXPONENTS.size


def test_default_ensemble_is_the_seed_eps_grid():
    assert DEFAULT_EPS_EXPONENTS.size == 151
    assert DEFAULT_EPS_EXPONENTS[0] == -1.5 and DEFAULT_EPS_EXPONENTS[-1] == 0.0
    result = intersectional_unfairness(np.ones(30), np.random.default_rng(0).normal(size=(30, 2)))
    assert [c.exponent for c in result.clusters] == DEFAULT_EPS_EXPONENTS.tolist()
    assert result.n_customers == 0


def test_intersectional_three_features_uses_sklearn():
    rng = np.random.default_rng(11)
    features = rng.normal(size=(200, 3))
    errors = np.where(features[:, 0] > 0.5, 2.0, 1.0)
    result = intersectional_unfairness(errors, features, eps_exponents=[-0.5, -0.3])
    points = standardise(features)
    expected = np.zeros(200, dtype=bool)
    for eps in (10**-0.5, 10**-0.3):
        labels = DBSCAN(eps=eps, min_samples=10).fit(points).labels_
        for label in set(labels.tolist()) - {-1}:
            member = labels == label
            if member.sum() >= 10 and np.mean(errors[member] >= 1.7) >= 0.7:
                expected |= member
    np.testing.assert_array_equal(result.members, np.flatnonzero(expected))


def test_intersectional_errors():
    with pytest.raises(ValueError, match="length"):
        intersectional_unfairness([1.0, 2.0], np.zeros((3, 2)))
    with pytest.raises(ValueError, match="NaN"):
        intersectional_unfairness([1.0, 2.0], [[0.0, np.nan], [1.0, 1.0]])
