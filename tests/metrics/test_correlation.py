"""Tests for metrics.correlation (no database): Spearman's rho with a bootstrap interval.

Cross-checked with scipy.stats.spearmanr / rankdata on the same resamples.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats

from metrics.correlation import resample_ranks, spearman_bootstrap


def test_rho_and_p_value_are_scipys():
    rng = np.random.default_rng(0)
    x = rng.normal(size=40)
    y = x + rng.normal(size=40)
    result = spearman_bootstrap(x, y, n_resamples=50)
    expected = scipy_stats.spearmanr(x, y)
    assert result["rho"] == pytest.approx(expected.statistic, abs=1e-12)
    assert result["p_value"] == pytest.approx(expected.pvalue, rel=1e-9)
    assert result["n"] == 40 and result["n_resamples"] == 50 and result["seed"] == 0
    assert result["confidence"] == 0.95


def test_interval_matches_a_direct_bootstrap_with_scipy():
    rng = np.random.default_rng(3)
    x = rng.integers(1, 6, size=25).astype(float)  # ordinal labels: many ties
    y = -8.0 * x + rng.normal(scale=6.0, size=25)
    result = spearman_bootstrap(x, y, n_resamples=400, seed=11)
    # The same resamples drawn by hand and scored with scipy.
    draws = np.random.default_rng(11).integers(0, 25, size=(400, 25))
    rhos = np.array([scipy_stats.spearmanr(x[i], y[i]).statistic for i in draws])
    low, high = np.quantile(rhos[np.isfinite(rhos)], [0.025, 0.975])
    assert result["ci_low"] == pytest.approx(low, abs=1e-12)
    assert result["ci_high"] == pytest.approx(high, abs=1e-12)


def test_interval_is_the_same_across_chunks():
    # 1,000,000 // 20,000 = 50 resamples per chunk: 120 resamples take three chunks.
    rng = np.random.default_rng(5)
    x = rng.normal(size=20_000)
    y = x + rng.normal(size=20_000)
    result = spearman_bootstrap(x, y, n_resamples=120, seed=2, bootstrap_max_n=None)
    generator = np.random.default_rng(2)
    draws = np.concatenate([generator.integers(0, x.size, size=(rows, x.size)) for rows in (50, 50, 20)])
    rhos = np.array([scipy_stats.spearmanr(x[i], y[i]).statistic for i in draws])
    low, high = np.quantile(rhos, [0.025, 0.975])
    assert result["ci_low"] == pytest.approx(low, abs=1e-10)
    assert result["ci_high"] == pytest.approx(high, abs=1e-10)


def test_seed_makes_it_reproducible_and_confidence_widens_it():
    rng = np.random.default_rng(8)
    x = rng.normal(size=30)
    y = x + rng.normal(size=30)
    first = spearman_bootstrap(x, y, n_resamples=300, seed=4)
    assert spearman_bootstrap(x, y, n_resamples=300, seed=4) == first
    wide = spearman_bootstrap(x, y, n_resamples=300, seed=4, confidence=0.99)
    assert wide["ci_low"] <= first["ci_low"] <= first["ci_high"] <= wide["ci_high"]


@pytest.mark.parametrize(
    ("x", "y"),
    [([], []), ([1, 2], [2, 1]), ([1, 1, 1, 1], [1, 2, 3, 4]), ([1, 2, 3, 4], [5, 5, 5, 5])],
)
def test_undefined_cases_give_none(x, y):
    result = spearman_bootstrap(x, y, n_resamples=10)
    assert result["n"] == len(x)
    assert result["rho"] is result["p_value"] is result["ci_low"] is result["ci_high"] is None


def test_constant_resamples_are_left_out_of_the_interval():
    # Three pairs: many resamples draw one item only (constant, rho undefined).
    result = spearman_bootstrap([1, 2, 3], [1, 2, 3], n_resamples=500, seed=1)
    assert result["rho"] == 1.0
    assert result["ci_low"] == result["ci_high"] == 1.0


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.integers(0, 4), min_size=1, max_size=12),
    data=st.data(),
)
def test_resample_ranks_are_scipys_rankdata_of_the_resample(values, data):
    values = np.asarray(values, dtype=float)
    counts = np.asarray(
        data.draw(st.lists(st.integers(0, 3), min_size=values.size, max_size=values.size)),
        dtype=float,
    )
    ranks = resample_ranks(values, counts[None, :])[0]
    resample = np.repeat(values, counts.astype(int))
    drawn = counts > 0
    if resample.size:
        expected = scipy_stats.rankdata(resample)
        # The copies of item j sit together in `resample`; all share one rank.
        positions = np.concatenate([[0], np.cumsum(counts.astype(int))[:-1]])
        assert ranks[drawn] == pytest.approx(expected[positions[drawn]])


@pytest.mark.slow  # a bootstrap of large samples: CI runs it, bin/test --fast skips it
def test_large_samples_get_fisher_z_interval_that_matches_the_bootstrap():
    """Above bootstrap_max_n the interval is Fisher's z (Bonett-Wright); on the same data (continuous,
    and heavily tied like mean labels of four labelers) it holds the bootstrap's interval, at most a
    little wider (Bonett-Wright is known to be conservative as |rho| nears 1)."""
    rng = np.random.default_rng(3)
    n = 6_000
    truth = rng.integers(1, 11, size=n)
    tied = np.round((truth[:, None] + rng.choice([-1, 0, 0, 1], size=(n, 4))).mean(axis=1) * 2) / 2
    continuous = 60 - 10 * truth + rng.normal(0, 8, size=n)
    for x in (tied, tied + rng.normal(0, 2, size=n), continuous + rng.normal(0, 3, size=n)):
        fast = spearman_bootstrap(x, continuous, bootstrap_max_n=5_000)
        slow = spearman_bootstrap(x, continuous, n_resamples=2000, seed=1, bootstrap_max_n=None)
        assert fast["interval_method"] == "fisher_z_bonett_wright" and slow["interval_method"] == "bootstrap"
        assert fast["rho"] == slow["rho"]
        width = slow["ci_high"] - slow["ci_low"]
        assert fast["ci_low"] <= slow["ci_low"] + 0.1 * width
        assert fast["ci_high"] >= slow["ci_high"] - 0.1 * width
        assert 0.9 <= (fast["ci_high"] - fast["ci_low"]) / width <= 1.6
        assert fast["ci_low"] < fast["rho"] < fast["ci_high"]


@pytest.mark.slow  # a seeded simulation over many datasets (pytest.ini): CI runs it, bin/test --fast skips it
def test_fisher_z_interval_covers_the_true_rho_at_the_nominal_rate():
    """Bivariate normal with Pearson r: Spearman's rho is (6 / pi) asin(r / 2). 400 seeded samples."""
    r = 0.6
    true_rho = 6 / np.pi * np.arcsin(r / 2)
    rng = np.random.default_rng(11)
    covered = 0
    trials = 400
    for _ in range(trials):
        xy = rng.multivariate_normal([0, 0], [[1, r], [r, 1]], size=6_000)
        result = spearman_bootstrap(xy[:, 0], xy[:, 1], bootstrap_max_n=5_000)
        covered += result["ci_low"] <= true_rho <= result["ci_high"]
    # 95% nominal; with 400 trials a binomial 99.9% band is about +-3.6 points.
    assert 0.91 <= covered / trials <= 0.985, covered / trials


def test_fisher_interval_is_scipys_normal_quantile_on_the_z_scale():
    from metrics.correlation import spearman_fisher_interval

    rho, n = -0.83, 40_000
    got = spearman_fisher_interval(rho, n, 0.9)
    half = scipy_stats.norm.ppf(0.95) * np.sqrt((1 + rho**2 / 2) / (n - 3))
    assert got["ci_low"] == pytest.approx(np.tanh(np.arctanh(rho) - half))
    assert got["ci_high"] == pytest.approx(np.tanh(np.arctanh(rho) + half))


def test_spearman_rho_is_scipy_s_to_the_last_bit():
    """``spearman_rho`` (no scipy.stats import: issue 25) gives scipy.stats.spearmanr's rho and p-value
    exactly, with ties, half steps, NaN and constant inputs."""
    import warnings

    from metrics.correlation import spearman_rho

    rng = np.random.default_rng(0)
    for i in range(400):
        n = int(rng.integers(2, 400))
        x = rng.integers(0, int(rng.integers(1, 20)), n).astype(float) / 2
        y = -x + rng.normal(0, 3 * rng.random(), n) if i % 2 else rng.integers(0, 5, n).astype(float)
        if i % 7 == 0:
            y = np.round(y)
        if i % 11 == 0:
            x[rng.integers(0, n)] = np.nan
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = scipy_stats.spearmanr(x, y)
        got = spearman_rho(x, y)
        for a, b in zip(got, (float(expected.statistic), float(expected.pvalue)), strict=True):
            assert (np.isnan(a) and np.isnan(b)) or a == b, (i, got, expected)
