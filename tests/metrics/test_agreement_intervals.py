"""Issue 12: alpha's and the kappas' BCa intervals cover the true value on planted data, and always hold the
estimate.

A few seeded replications of ``bench/sim_alpha_coverage.py`` (which runs hundreds and prints the coverage
with Wilson intervals). The data are seeded, so the figures are fixed; the bounds are loose enough for
another seed and tight enough that a wrong interval fails (a 50% interval does, see the last test).
"""

import importlib.util
import math
import sys
from pathlib import Path

import krippendorff
import numpy as np
import pytest

from metrics.agreement import (
    bootstrap_alpha,
    bootstrap_cohen_kappa,
    bootstrap_fleiss_kappa,
    cohen_kappa_weighted,
    fleiss_kappa,
    kappa_matrix,
    kappa_matrix_intervals,
    krippendorff_alpha,
    value_counts,
)

_BENCH = Path(__file__).resolve().parents[2] / "bench" / "sim_alpha_coverage.py"
_spec = importlib.util.spec_from_file_location("sim_alpha_coverage", _BENCH)
sim = sys.modules.setdefault("sim_alpha_coverage", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(sim)

#: True reliabilities of the planted data (labeler error sd in tones): alpha about .91, .64, .44.
SDS = (0.6, 1.6, 2.4)
RUNS = 20
RESAMPLES = 400


def test_true_alpha_of_the_model_matches_a_large_sample():
    # The exact population alpha of the planted model against alpha on 100,000 images of it (sampling
    # error about 0.002; ``krippendorff_alpha`` is the package's alpha, checked in test_agreement.py).
    rng = np.random.default_rng(3)
    for sd in (0.6, 2.4):
        true_alpha, true_kappa = sim.true_coefficients(sd)
        labels = sim.planted_labels(rng, 100_000, sd)
        assert krippendorff_alpha(labels) == pytest.approx(true_alpha, abs=0.006)
        both = ~np.isnan(labels[0]) & ~np.isnan(labels[1])
        kappa = cohen_kappa_weighted(labels[0][both], labels[1][both], categories=range(1, 11))
        assert kappa == pytest.approx(true_kappa, abs=0.006)


@pytest.mark.slow  # a seeded simulation over many datasets (pytest.ini): CI runs it, bin/test --fast skips it
def test_alpha_bca_interval_covers_the_true_alpha_and_holds_the_estimate():
    covered = runs = 0
    for sd in SDS:
        true_alpha, _ = sim.true_coefficients(sd)
        rng = np.random.default_rng(int(sd * 100))
        for n_images in (30, 200):
            for run in range(RUNS):
                labels = sim.planted_labels(rng, n_images, sd)
                boot = bootstrap_alpha(labels, n_resamples=RESAMPLES, seed=run)
                # Alpha itself is the ``krippendorff`` package's.
                assert boot.estimate == pytest.approx(
                    krippendorff.alpha(labels, level_of_measurement="ordinal"), abs=1e-9
                )
                assert boot.low <= boot.estimate <= boot.high
                assert boot.method == "BCa" and boot.percentile_low < boot.percentile_high
                covered += boot.low <= true_alpha <= boot.high
                runs += 1
    # 120 intervals at 95%: about 114 cover; fewer than 102 would be a broken interval (5 sd below).
    assert 0.85 <= covered / runs <= 0.995, covered


@pytest.mark.slow  # a seeded simulation over many datasets (pytest.ini): CI runs it, bin/test --fast skips it
def test_kappa_bca_interval_covers_the_true_kappa_and_holds_the_estimate():
    covered = runs = 0
    for sd in SDS:
        _, true_kappa = sim.true_coefficients(sd)
        rng = np.random.default_rng(int(sd * 100) + 1)
        for n_images in (30, 200):
            for run in range(RUNS):
                labels = sim.planted_labels(rng, n_images, sd)
                r = bootstrap_cohen_kappa(
                    labels[0], labels[1], categories=range(1, 11), n_resamples=RESAMPLES, seed=run
                )
                both = ~np.isnan(labels[0]) & ~np.isnan(labels[1])
                assert r.estimate == pytest.approx(
                    cohen_kappa_weighted(labels[0], labels[1], categories=range(1, 11)), abs=1e-12
                )
                assert r.n_units == both.sum()
                assert r.low <= r.estimate <= r.high
                covered += r.low <= true_kappa <= r.high
                runs += 1
    assert 0.85 <= covered / runs <= 0.995, covered


def test_a_50_percent_interval_fails_the_coverage_bound():
    # The bound above can fail: the same simulation with 50% intervals covers about half the time.
    covered = runs = 0
    sd = 1.0
    true_alpha, _ = sim.true_coefficients(sd)
    rng = np.random.default_rng(7)
    for run in range(40):
        boot = bootstrap_alpha(sim.planted_labels(rng, 60, sd), n_resamples=RESAMPLES, confidence=0.5, seed=run)
        covered += boot.low <= true_alpha <= boot.high
        runs += 1
    assert covered / runs < 0.85


def test_bca_holds_the_estimate_where_the_bootstrap_is_lopsided():
    # Near-perfect agreement on few images: most resamples give alpha = 1, the estimate is below; BCa
    # still holds the estimate, and so do the kappas.
    rng = np.random.default_rng(5)
    for run in range(30):
        n = int(rng.integers(5, 12))
        truth = rng.integers(1, 11, n).astype(float)
        labels = np.tile(truth, (4, 1))
        labels[rng.integers(4), rng.integers(n)] += rng.choice([-2.0, -1.0, 1.0, 2.0])
        labels = labels.clip(1, 10)
        boot = bootstrap_alpha(labels, n_resamples=300, seed=run)
        assert boot.low <= boot.estimate <= boot.high <= 1.0 + 1e-12
        kappa = bootstrap_cohen_kappa(labels[0], labels[1], categories=range(1, 11), n_resamples=300, seed=run)
        assert math.isnan(kappa.estimate) or kappa.low <= kappa.estimate <= kappa.high


def test_fleiss_and_kappa_matrix_intervals():
    rng = np.random.default_rng(9)
    labels = sim.planted_labels(rng, 80, 1.0)
    labels[np.isnan(labels)] = 5.0  # Fleiss needs every image labelled by all
    values, counts = value_counts(labels)
    fleiss = bootstrap_fleiss_kappa(counts, n_resamples=300)
    assert fleiss.estimate == pytest.approx(fleiss_kappa(counts), abs=1e-12)
    assert fleiss.low <= fleiss.estimate <= fleiss.high and fleiss.high - fleiss.low < 0.5
    matrix = kappa_matrix(labels, range(1, 11))
    low, high = kappa_matrix_intervals(labels, range(1, 11), n_resamples=200)
    off = ~np.eye(4, dtype=bool)
    assert np.all(low[off] <= matrix[off]) and np.all(matrix[off] <= high[off])
    np.testing.assert_array_equal(low, low.T)
    assert np.isnan(np.diag(low)).all()


def test_clustered_kappa_resamples_whole_clusters():
    # Pairs in clusters of 4 that are copies of each other: the clustered interval is wider than the
    # one that treats the 4 copies as independent pairs.
    rng = np.random.default_rng(2)
    first = rng.integers(1, 11, 40).astype(float)
    second = np.clip(first + rng.integers(-2, 3, 40), 1, 10)
    a, b, clusters = np.repeat(first, 4), np.repeat(second, 4), np.repeat(np.arange(40), 4)
    naive = bootstrap_cohen_kappa(a, b, categories=range(1, 11), n_resamples=500)
    clustered = bootstrap_cohen_kappa(a, b, categories=range(1, 11), clusters=clusters, n_resamples=500)
    assert clustered.estimate == naive.estimate and clustered.n_units == 40 and naive.n_units == 160
    assert clustered.high - clustered.low > 1.5 * (naive.high - naive.low)


@pytest.mark.slow  # a seeded simulation over many datasets (pytest.ini): CI runs it, bin/test --fast skips it
@pytest.mark.parametrize(
    "frequency",
    [
        np.array([3, 1, 1, 2, 1, 1, 1]),  # few units for the kinds: the units themselves are drawn
        np.r_[np.full(150, 1), np.full(60, 4), np.full(20, 25), [400, 900]],  # many kinds: the Poisson route
        np.array([500, 300, 150, 40, 9, 1]),  # few kinds: NumPy's multinomial
    ],
)
def test_resampled_pattern_counts_are_multinomial(frequency):
    from metrics.agreement.bootstrap import _multinomial_rows

    n, p = int(frequency.sum()), frequency / frequency.sum()
    draws = _multinomial_rows(np.random.default_rng(3), frequency, 40_000)
    assert draws.shape == (40_000, frequency.size) and (draws >= 0).all()
    assert (draws.sum(axis=1) == n).all()
    assert np.array_equal(draws[:50], _multinomial_rows(np.random.default_rng(3), frequency, 40_000)[:50])
    # Multinomial(n, p): mean n p, variance n p (1 - p), covariance -n p_i p_j (5 standard errors).
    se = np.sqrt(n * p * (1 - p) / draws.shape[0])
    assert np.all(np.abs(draws.mean(axis=0) - n * p) <= 5 * se + 1e-12)
    variance = draws.var(axis=0)
    assert np.allclose(variance, n * p * (1 - p), rtol=0.05)
    big = np.argsort(-frequency)[:2]
    covariance = np.cov(draws[:, big[0]], draws[:, big[1]])[0, 1]
    assert covariance == pytest.approx(-n * p[big[0]] * p[big[1]], rel=0.06)
    # A null: the same moments fail for draws with a planted bias (a kind drawn 10% too often).
    planted = np.random.default_rng(3).multinomial(n, (p * np.r_[1.1, np.ones(p.size - 1)]) / (1 + 0.1 * p[0]), 40_000)
    assert not np.all(np.abs(planted.mean(axis=0) - n * p) <= 5 * se + 1e-12)
