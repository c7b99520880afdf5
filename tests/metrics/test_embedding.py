"""Tests for metrics.embedding (seed 001: recall@k, alignment, uniformity, cluster NMI)."""

import numpy as np
import pytest
from scipy.spatial.distance import cdist
from scipy.stats import entropy
from sklearn.cluster import KMeans
from sklearn.metrics import normalized_mutual_info_score

from metrics.embedding import (
    alignment,
    cluster_nmi,
    embedding_fairness,
    recall_at_k,
    uniformity,
)


def _random_embedding(seed, n=60, d=5, n_classes=4, n_groups=3):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, n_classes, n)
    centres = rng.normal(size=(n_classes, d))
    points = centres[labels] + 0.8 * rng.normal(size=(n, d))
    groups = rng.choice(["light", "medium", "deep"][:n_groups], n)
    return points, labels, groups


def _brute_recall(points, labels, groups, k):
    unit = points / np.linalg.norm(points, axis=1, keepdims=True)
    distances = cdist(unit, unit)
    np.fill_diagonal(distances, np.inf)
    nearest = np.argsort(distances, axis=1)[:, :k]
    hits = np.array([labels[i] in labels[nearest[i]] for i in range(len(labels))])
    return hits.mean(), {g: hits[groups == g].mean() for g in np.unique(groups)}


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("k", [1, 4])
def test_recall_at_k_matches_brute_force(seed, k):
    points, labels, groups = _random_embedding(seed)
    result = recall_at_k(points, labels, groups, k=k)
    overall, per_group = _brute_recall(points, labels, groups, k)
    assert result.overall == pytest.approx(overall)
    for group, value in per_group.items():
        assert result.by_group[group] == pytest.approx(value)
    values = list(result.by_group.values())
    assert result.gap == pytest.approx(max(values) - min(values))
    for group, value in result.by_group.items():
        assert result.gap_to_overall[group] == pytest.approx(value - result.overall)


def test_recall_neighbours_are_searched_among_all_points():
    # Each "deep" point's only same-class neighbour is a "light" point. Seed 001: queries come
    # from the subgroup but neighbours from everyone, so deep recall@1 is 1 (restricting the
    # search to the subgroup would give 0).
    points = [[1.0, 0.0], [0.99, 0.1], [0.0, 1.0], [0.1, 0.99]]
    labels = [0, 0, 1, 1]
    groups = ["light", "deep", "light", "deep"]
    result = recall_at_k(points, labels, groups, k=1)
    assert result.by_group == {"deep": 1.0, "light": 1.0}


def test_recall_with_duplicate_points_excludes_only_the_query():
    points = [[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]
    result = recall_at_k(points, [0, 0, 1], None, k=1)
    assert result.overall == pytest.approx(2 / 3)


def _brute_alignment(points, labels, groups, alpha):
    unit = points / np.linalg.norm(points, axis=1, keepdims=True)
    per_group = {}
    for g in np.unique(groups):
        distances = [
            np.linalg.norm(unit[i] - unit[j]) ** alpha
            for i in np.flatnonzero(groups == g)
            for j in range(len(labels))
            if j != i and labels[j] == labels[i]
        ]
        per_group[g] = np.mean(distances)
    return per_group


@pytest.mark.parametrize("alpha", [2.0, 1.0])
def test_alignment_matches_brute_force(alpha):
    points, labels, groups = _random_embedding(3, n=40)
    result = alignment(points, labels, groups, alpha=alpha)
    for group, value in _brute_alignment(points, labels, groups, alpha).items():
        assert result.by_group[group] == pytest.approx(value)
    assert not result.higher_is_better


def test_alignment_undefined_subgroup_has_a_reason():
    # The "deep" point is alone in its class: no positive pair.
    result = alignment([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]], [0, 0, 1], ["a", "a", "deep"])
    assert np.isnan(result.by_group["deep"])
    assert "no point" in result.undefined["deep"]
    assert result.by_group["a"] == pytest.approx(
        np.linalg.norm(np.array([1, 0]) - np.array([0.9, 0.1]) / np.hypot(0.9, 0.1)) ** 2
    )


def test_uniformity_against_scipy_entropy_of_known_spectrum():
    # diag(3, 1) has singular values (3, 1) -> normalised (0.75, 0.25).
    result = uniformity([[3.0, 0.0], [0.0, 1.0]], normalize=False)
    assert result.overall == pytest.approx(entropy([0.5, 0.5], [0.75, 0.25]))
    # Equal singular values: perfectly uniform spectrum.
    assert uniformity(np.eye(4)).overall == pytest.approx(0.0, abs=1e-12)


def test_uniformity_per_subgroup_uses_only_its_points():
    rng = np.random.default_rng(5)
    points = rng.normal(size=(30, 4))
    groups = np.array(["a"] * 15 + ["b"] * 15)
    result = uniformity(points, groups)
    unit = points / np.linalg.norm(points, axis=1, keepdims=True)
    for g in ("a", "b"):
        s = np.linalg.svd(unit[groups == g], compute_uv=False)
        assert result.by_group[g] == pytest.approx(entropy(np.full(4, 0.25), s / s.sum()))


def test_uniformity_rank_deficient_subgroup_is_undefined_not_infinite():
    points = [[1.0, 0.0], [2.0, 0.0], [0.0, 1.0], [0.6, 0.8]]
    result = uniformity(points, ["flat", "flat", "ok", "ok"])
    assert np.isnan(result.by_group["flat"]) and "rank-deficient" in result.undefined["flat"]
    assert np.isfinite(result.by_group["ok"])
    assert np.isnan(result.gap)  # one defined subgroup only


def test_cluster_nmi_matches_sklearn_kmeans_and_nmi():
    points, labels, groups = _random_embedding(4, n=80)
    result = cluster_nmi(points, labels, groups, seed=3)
    unit = points / np.linalg.norm(points, axis=1, keepdims=True)
    clusters = KMeans(n_clusters=4, random_state=3, n_init=10).fit_predict(unit)
    assert result.overall == pytest.approx(normalized_mutual_info_score(labels, clusters))
    for g in np.unique(groups):
        mask = groups == g
        assert result.by_group[g] == pytest.approx(normalized_mutual_info_score(labels[mask], clusters[mask]))


def test_embedding_fairness_bundles_all_metrics_and_finds_worst_group():
    rng = np.random.default_rng(6)
    labels = np.repeat([0, 1, 2], 20)
    centres = np.eye(3) * 4
    groups = np.tile(["light", "deep"], 30)
    noise = np.where(groups == "deep", 3.0, 0.1)[:, None]
    points = centres[labels] + noise * rng.normal(size=(60, 3))
    report = embedding_fairness(points, labels, groups, k=1, seed=0)
    assert report.recall_at_k.worst_group == "deep"
    assert report.alignment.worst_group == "deep"
    assert report.recall_at_k.gap > 0
