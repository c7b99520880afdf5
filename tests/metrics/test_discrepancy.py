"""Tests for metrics.discrepancy (seed 002 fairness discrepancy, CLEAM correction)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.stats import wasserstein_distance

from metrics.discrepancy import (
    METRICS,
    cleam_correct,
    fairness_discrepancy,
    max_discrepancy,
)

distributions = arrays(float, st.integers(2, 16), elements=st.floats(0, 100, allow_nan=False)).filter(
    lambda a: a.sum() > 1e-6
)
ORDER_FREE = [m for m in METRICS if m != "wd_ordinal"]


def test_seed_002_worked_example():
    # Seed 002, "Scale": k = 2, p = [0.9, 0.1]: f* = 0.565, f*_max = 0.707, normalised 0.799
    # (the paper divides the rounded figures; the exact value is 0.8).
    assert fairness_discrepancy([0.9, 0.1], "l2", normalize=False) == pytest.approx(0.566, abs=1e-3)
    assert max_discrepancy(2, "l2") == pytest.approx(0.707, abs=1e-3)
    assert fairness_discrepancy([0.9, 0.1], "l2") == pytest.approx(0.8, abs=1e-9)
    assert fairness_discrepancy([90, 10], "l2") == pytest.approx(0.8, abs=1e-9)


def test_seed_002_maximum_for_k_4():
    assert max_discrepancy(4, "l2") == pytest.approx(0.866, abs=1e-3)


def test_specificity_normalisation_factor_is_one_for_every_k():
    # Seed 002: "Specificity ... N_factor = 1 regardless of the size of k".
    for k in (2, 4, 8, 16):
        assert max_discrepancy(k, "specificity") == pytest.approx(1.0)


def _authors_reference(props):
    """Seed 002 authors' fairness_discrepancy (CLEAM_code PseudoGAN/src/metrics.py), transcribed."""
    props = np.array(props, dtype=float)
    k = props.size
    truth = 1.0 / k
    l2 = np.sqrt(((props - truth) ** 2).sum())
    l1 = abs(props - truth).sum()
    rank = np.linspace(1, k - 1, k - 1)
    rank[::-1].sort()
    perc = np.array([i / np.sum(rank) for i in rank])
    props[::-1].sort()
    specificity = abs(props[0] - np.sum(props[1:] * perc))
    info_spec = (l1 + specificity) / 2
    wd = wasserstein_distance(props, np.ones(len(props)) * truth)
    return {"l2": l2, "l1": l1, "is": info_spec, "specificity": specificity, "wd": wd}


@settings(max_examples=40, deadline=None)
@given(distributions)
def test_raw_scores_match_authors_code_and_scipy(counts):
    p = counts / counts.sum()
    reference = _authors_reference(p)
    for metric, expected in reference.items():
        assert fairness_discrepancy(p, metric, normalize=False) == pytest.approx(expected, abs=1e-9), metric
    k = p.size
    ordinal = wasserstein_distance(np.arange(k), np.arange(k), p, np.full(k, 1 / k))
    assert fairness_discrepancy(p, "wd_ordinal", normalize=False) == pytest.approx(ordinal)


@settings(max_examples=40, deadline=None)
@given(distributions, st.randoms(use_true_random=False))
def test_normalised_scores_in_unit_interval_and_order_free(counts, rnd):
    shuffled = list(counts)
    rnd.shuffle(shuffled)
    for metric in METRICS:
        value = fairness_discrepancy(counts, metric)
        assert 0.0 <= value <= 1.0, metric
        if metric in ORDER_FREE:
            assert fairness_discrepancy(shuffled, metric) == pytest.approx(value, abs=1e-9)


@pytest.mark.parametrize("metric", METRICS)
@pytest.mark.parametrize("k", [2, 3, 5, 10])
def test_extreme_points(metric, k):
    assert fairness_discrepancy(np.ones(k), metric) == pytest.approx(0.0, abs=1e-12)
    one_hot = np.zeros(k)
    one_hot[0] = 1
    assert fairness_discrepancy(one_hot, metric) == pytest.approx(1.0)


@settings(max_examples=50, deadline=None)
@given(distributions)
def test_normalised_wd_equals_normalised_l1(counts):
    # The authors' WD compares the k proportions, as a sample, with a point mass at 1/k: it is
    # L1 / k, hence identical once normalised (the paper: "generally identical ... 4 D.P.").
    assert fairness_discrepancy(counts, "wd") == pytest.approx(fairness_discrepancy(counts, "l1"), abs=1e-9)


def test_wd_ordinal_depends_on_category_order():
    assert fairness_discrepancy([0.5, 0, 0.5], "wd_ordinal") != pytest.approx(
        fairness_discrepancy([0, 0.5, 0.5], "wd_ordinal")
    )


@pytest.mark.parametrize("bad", [[1.0], [0.0, 0.0], [0.5, -0.1, 0.6]])
def test_invalid_distributions_raise(bad):
    with pytest.raises(ValueError):
        fairness_discrepancy(bad)


def test_unknown_metric_raises():
    with pytest.raises(ValueError, match="unknown metric"):
        fairness_discrepancy([0.5, 0.5], "kl")


# -- CLEAM ----------------------------------------------------------------------------------


def test_cleam_hand_worked_point_estimate():
    # alpha_0 = 0.9, alpha_1 = 0.8, p* = 0.7: p_hat = 0.7 * 0.9 + 0.3 * 0.2 = 0.69.
    estimate = cleam_correct(0.69, 0.9, 0.8)
    assert estimate.p_star == pytest.approx(0.7)
    assert estimate.interval is None and estimate.method == "point"


def test_cleam_from_confusion_matrix():
    # rows: true class, columns: predicted. alpha_0 = 90/100, alpha_1 = 160/200.
    confusion = [[90, 10], [40, 160]]
    estimate = cleam_correct(0.69, confusion=confusion)
    assert (estimate.alpha_0, estimate.alpha_1) == pytest.approx((0.9, 0.8))
    assert estimate.p_star == pytest.approx(0.7)


@pytest.mark.parametrize("p_star", [0.1, 0.5, 0.9, 1.0])
def test_cleam_inverts_the_forward_model(p_star):
    a0, a1 = 0.97, 0.93
    p_hat = p_star * a0 + (1 - p_star) * (1 - a1)
    assert cleam_correct(p_hat, a0, a1).p_star == pytest.approx(p_star)


def test_cleam_batch_interval_covers_truth_where_the_raw_estimate_does_not():
    # Simulate the paper's setting: S = 30 batches of N = 1000 classified samples from a
    # generator with p* = 0.9 and a classifier with accuracies (0.95, 0.90).
    rng = np.random.default_rng(7)
    p_star, a0, a1, n, s = 0.9, 0.95, 0.90, 1000, 30
    true_zero = rng.binomial(n, p_star, size=s)
    seen_zero = rng.binomial(true_zero, a0) + rng.binomial(n - true_zero, 1 - a1)
    estimate = cleam_correct(seen_zero / n, a0, a1)
    assert estimate.method == "cleam-batches"
    low, high = estimate.interval
    assert low <= p_star <= high
    assert abs(estimate.p_hat - p_star) > 0.03  # uncorrected: biased by ~0.045
    assert abs(estimate.p_star - p_star) < 0.01
    corrected = fairness_discrepancy(estimate.distribution, "l2")
    assert corrected == pytest.approx(0.8, abs=0.02)


def test_cleam_single_proportion_wald_interval():
    estimate = cleam_correct(0.69, 0.9, 0.8, n_samples=400)
    low, high = estimate.interval
    assert low < 0.7 < high
    half = 1.959964 * np.sqrt(0.69 * 0.31 / 400) / 0.7
    assert high - low == pytest.approx(2 * half, rel=1e-5)


def test_cleam_clips_impossible_observations_but_keeps_raw():
    estimate = cleam_correct(0.99, 0.9, 0.8)  # above alpha_0: the classifier cannot give it
    assert estimate.p_star == 1.0 and estimate.p_star_raw > 1.0


def test_cleam_undefined_for_chance_level_classifier():
    with pytest.raises(ValueError, match="chance"):
        cleam_correct(0.5, 0.5, 0.5)
