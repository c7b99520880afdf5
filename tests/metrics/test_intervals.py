"""``metrics.intervals.wilson_interval`` against statsmodels' Wilson interval."""

import math

import numpy as np
import pytest
from statsmodels.stats.proportion import proportion_confint

from metrics.intervals import wilson_interval

CASES = [(0, 1), (1, 1), (0, 5), (5, 5), (1, 3), (18, 29), (81, 263), (3, 7), (12, 100), (500, 1000), (1, 100_000)]


@pytest.mark.parametrize("confidence", [0.8, 0.9, 0.95, 0.99])
@pytest.mark.parametrize(("k", "n"), CASES)
def test_matches_statsmodels(k, n, confidence):
    expected = proportion_confint(k, n, alpha=1 - confidence, method="wilson")
    assert wilson_interval(k, n, confidence) == pytest.approx(expected, abs=1e-12)


def test_bounds_stay_in_the_unit_interval_and_contain_the_estimate():
    for n in range(1, 40):
        for k in range(n + 1):
            low, high = wilson_interval(k, n)
            assert 0.0 <= low <= k / n <= high <= 1.0
    assert wilson_interval(0, 7)[0] == 0.0 and wilson_interval(7, 7)[1] == 1.0


def test_more_data_narrows_the_interval_and_more_confidence_widens_it():
    small, large = wilson_interval(18, 29), wilson_interval(1800, 2900)
    assert large[1] - large[0] < (small[1] - small[0]) / 5
    assert wilson_interval(18, 29, 0.99)[0] < small[0] < wilson_interval(18, 29, 0.9)[0]


def test_no_data_gives_no_interval():
    low, high = wilson_interval(0, 0)
    assert math.isnan(low) and math.isnan(high)


@pytest.mark.parametrize(
    ("k", "n", "confidence"), [(3, 2, 0.95), (-1, 5, 0.95), (1.5, 5, 0.95), (1, 5, 0.0), (1, 5, 1.0), (1, -1, 0.95)]
)
def test_bad_input_is_refused(k, n, confidence):
    with pytest.raises(ValueError):
        wilson_interval(k, n, confidence)


def test_proportion_difference_matches_newcombe_and_is_antisymmetric():
    from metrics.intervals import proportion_difference

    # Newcombe 1998 (Statistics in Medicine 17, 873-890), example (a), method 10.
    result = proportion_difference(56, 70, 48, 80)
    assert (round(result.low, 4), round(result.high, 4)) == (0.0524, 0.3339)
    reverse = proportion_difference(48, 80, 56, 70)
    assert (reverse.low, reverse.high) == (pytest.approx(-result.high), pytest.approx(-result.low))
    assert result.p_value == pytest.approx(reverse.p_value)
    same = proportion_difference(5, 10, 50, 100)
    assert same.low < 0 < same.high and not same.differs and same.p_value == pytest.approx(1.0)
    with pytest.raises(ValueError):
        proportion_difference(1, 0, 1, 2)


def test_fisher_exact_equals_scipy():
    from scipy.stats import fisher_exact

    from metrics.intervals import fisher_exact_two_sided

    rng = np.random.default_rng(0)
    cases = [(0, 1, 0, 1), (5, 5, 0, 5), (18, 29, 60, 100), (56, 70, 48, 80), (0, 30, 30, 30)]
    cases += [
        tuple(int(v) for v in (k1, n1, k2, n2))
        for n1, n2 in rng.integers(1, 60, (40, 2))
        for k1, k2 in [(rng.integers(0, n1 + 1), rng.integers(0, n2 + 1))]
    ]
    for k1, n1, k2, n2 in cases:
        expected = fisher_exact([[k1, n1 - k1], [k2, n2 - k2]]).pvalue
        assert fisher_exact_two_sided(k1, n1, k2, n2) == pytest.approx(expected, rel=1e-9, abs=1e-12), (k1, n1, k2, n2)
