"""Tests for metrics.agreement.

Expected values come from Krippendorff (2011) and from reference libraries
(``krippendorff``, ``statsmodels``, ``scikit-learn``) or from naive
re-implementations of the definitions, never from our own outputs.
"""

from __future__ import annotations

import itertools
import statistics
import warnings
from collections import Counter

import krippendorff
import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

from metrics import agreement
from metrics.agreement import (
    agreement_by_band,
    alpha_from_counts,
    alpha_leave_one_out,
    bootstrap_alpha,
    cohen_kappa_weighted,
    consensus_table,
    fleiss_kappa,
    image_consensus,
    interpret_alpha,
    k_of_n_agreement,
    kappa_matrix,
    krippendorff_alpha,
    labeler_bias,
    percent_exact,
    percent_within_one,
    selection_values,
    selections_to_arrays,
    unique_values_distribution,
    value_counts,
)

LEVELS = ("nominal", "ordinal", "interval", "ratio")
nan = np.nan

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", 4 observers
# x 12 units (DOMAIN.md section 4).
KRIPPENDORFF_2011 = np.array(
    [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
        [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan],
    ]
)
# The same data as the paper's "values by units" table (counts of values 1..5).
KRIPPENDORFF_2011_COUNTS = np.array(
    [
        [3, 0, 0, 0, 0],
        [0, 3, 1, 0, 0],
        [0, 0, 4, 0, 0],
        [0, 0, 4, 0, 0],
        [0, 4, 0, 0, 0],
        [1, 1, 1, 1, 0],
        [0, 0, 0, 4, 0],
        [3, 1, 0, 0, 0],
        [0, 4, 0, 0, 0],
        [0, 0, 0, 0, 3],
        [2, 0, 0, 0, 0],
        [0, 0, 1, 0, 0],
    ]
)
PUBLISHED_ALPHA = {
    "nominal": 0.743,
    "ordinal": 0.815,
    "interval": 0.849,
    "ratio": 0.797,
}


def random_reliability_data(
    rng: np.random.Generator,
    n_labelers: int,
    n_items: int,
    *,
    half_steps: bool = False,
    missing: float = 0.3,
    n_tones: int = 10,
) -> np.ndarray:
    """Noisy labels around a per-item truth, with missing labels."""
    truth = rng.integers(1, n_tones + 1, size=n_items)
    data = np.clip(truth + rng.integers(-2, 3, size=(n_labelers, n_items)), 1, n_tones)
    data = data.astype(float)
    if half_steps:
        pairs = rng.random(data.shape) < 0.25
        data[pairs & (data < n_tones)] += 0.5
    data[rng.random(data.shape) < missing] = nan
    return data


def reference_alpha(data: np.ndarray, level: str, value_domain=None) -> float:
    return float(krippendorff.alpha(data, level_of_measurement=level, value_domain=value_domain))


@pytest.fixture
def no_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


# --------------------------------------------------------------------------
# Krippendorff's alpha
# --------------------------------------------------------------------------


@pytest.mark.parametrize("level", LEVELS)
def test_alpha_krippendorff_2011_published_values(level):
    assert round(krippendorff_alpha(KRIPPENDORFF_2011, level), 3) == PUBLISHED_ALPHA[level]


@pytest.mark.parametrize("level", LEVELS)
def test_alpha_from_counts_krippendorff_2011_table(level):
    alpha = alpha_from_counts(KRIPPENDORFF_2011_COUNTS, [1, 2, 3, 4, 5], level)
    assert round(alpha, 3) == PUBLISHED_ALPHA[level]


def test_value_counts_match_published_table():
    values, counts = value_counts(KRIPPENDORFF_2011)
    assert values.tolist() == [1, 2, 3, 4, 5]
    np.testing.assert_array_equal(counts, KRIPPENDORFF_2011_COUNTS)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("half_steps", [False, True])
def test_alpha_matches_krippendorff_package(level, half_steps):
    rng = np.random.default_rng(42)
    full_scale = np.arange(1, 10.5, 0.5) if half_steps else np.arange(1.0, 11.0)
    for _ in range(15):
        n_labelers = int(rng.integers(2, 7))
        n_items = int(rng.integers(5, 80))
        data = random_reliability_data(rng, n_labelers, n_items, half_steps=half_steps)
        expected = reference_alpha(data, level)
        assert krippendorff_alpha(data, level) == pytest.approx(expected, abs=1e-9)
        expected_domain = reference_alpha(data, level, full_scale)
        ours_domain = krippendorff_alpha(data, level, value_domain=full_scale)
        assert ours_domain == pytest.approx(expected_domain, abs=1e-9)


@pytest.mark.parametrize("level", LEVELS)
def test_alpha_unsorted_value_domain_matches_package(level):
    # The domain order defines the ordinal ranks, as in the package.
    rng = np.random.default_rng(7)
    data = random_reliability_data(rng, 4, 40, n_tones=5)
    domain = [3, 1, 5, 2, 4]
    expected = reference_alpha(data, level, domain)
    assert krippendorff_alpha(data, level, domain) == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize("level", LEVELS)
def test_alpha_from_counts_matches_package_value_counts(level):
    rng = np.random.default_rng(3)
    counts = rng.multinomial(4, np.full(6, 1 / 6), size=50)
    counts[rng.random(50) < 0.2] //= 2  # some items with fewer labels
    values = np.array([1, 2, 3, 5, 8, 9.5])
    expected = krippendorff.alpha(value_counts=counts, value_domain=values, level_of_measurement=level)
    assert alpha_from_counts(counts, values, level) == pytest.approx(expected, abs=1e-9)


def test_alpha_out_of_domain_raises():
    with pytest.raises(ValueError, match="out-of-domain"):
        krippendorff_alpha([[1, 2, 3], [1, 2, 7]], value_domain=[1, 2, 3, 4])


def test_alpha_rejects_unknown_level():
    with pytest.raises(ValueError, match="level_of_measurement"):
        krippendorff_alpha(KRIPPENDORFF_2011, "cardinal")


@pytest.mark.parametrize(
    "data",
    [
        pytest.param([[1, nan, 3], [nan, 2, nan]], id="one-label-per-image"),
        pytest.param([[2, 2, 2], [2, 2, nan]], id="all-identical"),
        pytest.param([[1, 2, 3, 4]], id="one-labeler"),
        pytest.param([], id="empty-list"),
        pytest.param(np.empty((4, 0)), id="no-items"),
        pytest.param(np.full((3, 5), nan), id="all-missing"),
    ],
)
@pytest.mark.parametrize("level", LEVELS)
def test_alpha_degenerate_is_nan_without_warnings(data, level, no_warnings):
    assert np.isnan(krippendorff_alpha(data, level))
    result = bootstrap_alpha(data, level, n_resamples=20)
    assert np.isnan(result.estimate) and np.isnan(result.low) and np.isnan(result.high)


def test_alpha_identical_labels_with_full_domain_is_nan(no_warnings):
    # Expected disagreement is 0 whatever the domain: undefined.
    assert np.isnan(krippendorff_alpha([[2, 2, 2], [2, 2, 2]], value_domain=range(1, 11)))


def test_alpha_single_unit_pairable_is_defined():
    # One unit with two different values: alpha is defined (0 here).
    data = [[1.0], [2.0]]
    assert krippendorff_alpha(data, "interval") == pytest.approx(
        reference_alpha(np.asarray(data), "interval"), abs=1e-12
    )


@pytest.mark.parametrize(
    ("alpha", "reading"),
    [
        (0.9, "reliable"),
        (0.800, "reliable"),
        (0.7999, "tentative"),
        (0.667, "tentative"),
        (0.6669, "not reliable"),
        (-0.2, "not reliable"),
        (nan, "undefined"),
    ],
)
def test_interpret_alpha(alpha, reading):
    assert interpret_alpha(alpha) == reading


# --------------------------------------------------------------------------
# Bootstrap
# --------------------------------------------------------------------------


def test_bootstrap_interval_contains_estimate_and_is_reproducible():
    rng = np.random.default_rng(11)
    data = random_reliability_data(rng, 4, 300, half_steps=True)
    first = bootstrap_alpha(data, n_resamples=300, seed=5)
    again = bootstrap_alpha(data, n_resamples=300, seed=5)
    other = bootstrap_alpha(data, n_resamples=300, seed=6)
    assert first == again
    np.testing.assert_array_equal(first.resampled, again.resampled)
    assert (first.low, first.high) != (other.low, other.high)
    assert first.low < first.estimate < first.high
    assert first.estimate == pytest.approx(reference_alpha(data, "ordinal"), abs=1e-9)
    pairable = (~np.isnan(data)).sum(axis=0) >= 2
    assert first.n_items == pairable.sum()
    assert first.n_pairable == (~np.isnan(data[:, pairable])).sum()
    assert first.n_resamples == first.n_valid_resamples == 300


def test_bootstrap_from_counts_equals_from_reliability_data():
    rng = np.random.default_rng(12)
    data = random_reliability_data(rng, 3, 120)
    values, counts = value_counts(data)
    from_data = bootstrap_alpha(data, "interval", n_resamples=100, seed=1)
    from_counts = bootstrap_alpha(None, "interval", n_resamples=100, seed=1, value_domain=values, counts=counts)
    assert from_data == from_counts


def test_bootstrap_distribution_matches_naive_item_resampling():
    # Pattern-multinomial resampling must have the same distribution as
    # resampling items one by one. Compare the two seeded distributions, at the
    # ordinal level, whose distances also change with each resample.
    level = "ordinal"
    rng = np.random.default_rng(21)
    data = random_reliability_data(rng, 4, 60, missing=0.25)
    values, counts = value_counts(data)
    pairable = counts[counts.sum(axis=1) >= 2]
    n_resamples = 3000
    naive = np.empty(n_resamples)
    naive_rng = np.random.default_rng(99)
    for b in range(n_resamples):
        idx = naive_rng.integers(0, len(pairable), size=len(pairable))
        naive[b] = alpha_from_counts(pairable[idx], values, level)
    fast = bootstrap_alpha(data, level, n_resamples=n_resamples, seed=0).resampled
    assert fast.shape == (n_resamples,)
    # Standard errors of the differences with 3,000 resamples: mean 0.026 sd,
    # relative sd 1.8%; the tolerances are about 4 standard errors.
    sd = naive.std()
    assert fast.mean() == pytest.approx(naive.mean(), abs=0.1 * sd)
    assert fast.std() == pytest.approx(sd, rel=0.08)
    for q in (0.05, 0.5, 0.95):  # quantiles are noisier: SE about 0.1 sd
        assert np.quantile(fast, q) == pytest.approx(np.quantile(naive, q), abs=0.5 * sd)


def test_bootstrap_rejects_bad_arguments():
    with pytest.raises(ValueError):
        bootstrap_alpha(KRIPPENDORFF_2011, confidence=1.5)
    with pytest.raises(ValueError):
        bootstrap_alpha(KRIPPENDORFF_2011, counts=KRIPPENDORFF_2011_COUNTS)


# --------------------------------------------------------------------------
# Pairwise agreement and kappas
# --------------------------------------------------------------------------


def naive_pair_fraction(data: np.ndarray, tolerance: float) -> float:
    agree = total = 0
    for item in data.T:
        labels = item[~np.isnan(item)]
        for a, b in itertools.combinations(labels, 2):
            total += 1
            agree += abs(a - b) <= tolerance
    return agree / total if total else nan


def test_percent_exact_and_within_one_match_pairwise_definition():
    rng = np.random.default_rng(5)
    for half_steps in (False, True):
        data = random_reliability_data(rng, 5, 70, half_steps=half_steps)
        assert percent_exact(data) == pytest.approx(naive_pair_fraction(data, 0))
        assert percent_within_one(data) == pytest.approx(naive_pair_fraction(data, 1))


def test_percent_agreement_too_little_data(no_warnings):
    assert np.isnan(percent_exact([[1, nan], [nan, 2]]))
    assert np.isnan(percent_within_one([]))


def test_fleiss_kappa_matches_statsmodels():
    rng = np.random.default_rng(8)
    for n_raters in (2, 4, 7):
        table = rng.multinomial(n_raters, [0.5, 0.2, 0.2, 0.1], size=40)
        assert fleiss_kappa(table) == pytest.approx(sm_fleiss_kappa(table), abs=1e-12)


def test_fleiss_kappa_needs_complete_data():
    with pytest.raises(ValueError, match="same number of ratings"):
        fleiss_kappa([[2, 1], [1, 1]])


def test_fleiss_kappa_degenerate(no_warnings):
    assert np.isnan(fleiss_kappa([[3, 0], [3, 0]]))
    assert np.isnan(fleiss_kappa([[1, 0], [0, 1]]))
    assert np.isnan(fleiss_kappa(np.zeros((0, 3))))


@pytest.mark.parametrize("weights", ["quadratic", "linear", None])
def test_cohen_kappa_weighted_matches_sklearn(weights):
    rng = np.random.default_rng(9)
    categories = np.arange(1, 10.5, 0.5)  # full scale with half-steps
    data = random_reliability_data(rng, 2, 200, half_steps=True, missing=0.2)
    both = ~np.isnan(data).any(axis=0)
    expected = cohen_kappa_score(
        data[0, both].astype(str),
        data[1, both].astype(str),
        labels=categories.astype(str),
        weights=weights,
    )
    ours = cohen_kappa_weighted(data[0], data[1], categories=categories, weights=weights)
    assert ours == pytest.approx(expected, abs=1e-12)


def test_cohen_kappa_full_range_differs_from_observed_range():
    # Unused categories change the quadratic distances (the reason to pass them).
    a, b = [1, 2, 3, 5, 5, 1], [1, 3, 3, 5, 2, 2]
    full = cohen_kappa_weighted(a, b, categories=range(1, 11))
    assert full == pytest.approx(cohen_kappa_score(a, b, labels=list(range(1, 11)), weights="quadratic"))
    observed = cohen_kappa_weighted(a, b, categories=[1, 2, 3, 5])
    assert observed == pytest.approx(cohen_kappa_score(a, b, weights="quadratic"))
    assert full != pytest.approx(observed)


def test_cohen_kappa_rejects_labels_outside_categories():
    with pytest.raises(ValueError, match="outside categories"):
        cohen_kappa_weighted([1, 2], [1, 12], categories=range(1, 11))


def test_kappa_matrix_matches_sklearn_pairs():
    rng = np.random.default_rng(10)
    data = random_reliability_data(rng, 4, 60)
    data[3, 1:] = nan  # labeler 3 shares at most one item with the others
    categories = np.arange(1.0, 11.0)
    matrix = kappa_matrix(data, categories)
    assert matrix.shape == (4, 4)
    np.testing.assert_allclose(matrix, matrix.T, equal_nan=True)
    for i, j in itertools.combinations(range(3), 2):
        both = ~np.isnan(data[i]) & ~np.isnan(data[j])
        expected = cohen_kappa_score(data[i, both], data[j, both], labels=categories, weights="quadratic")
        assert matrix[i, j] == pytest.approx(expected, abs=1e-12)
    assert np.isnan(matrix[3]).all()


# --------------------------------------------------------------------------
# Data-card distributions
# --------------------------------------------------------------------------


def test_k_of_n_agreement_matches_counter():
    rng = np.random.default_rng(13)
    data = random_reliability_data(rng, 4, 150, half_steps=True, n_tones=5)
    table = k_of_n_agreement(data)
    expected = Counter()
    for item in data.T:
        labels = item[~np.isnan(item)]
        if labels.size:
            expected[(labels.size, max(Counter(labels).values()))] += 1
    got = {(r.n_labels, r.k_agreed): r.n_items for r in table.itertuples()}
    assert got == dict(expected)
    for n_labels, group in table.groupby("n_labels"):
        assert group["fraction"].sum() == pytest.approx(1.0)
        total = sum(v for (n, _), v in expected.items() if n == n_labels)
        np.testing.assert_allclose(group["fraction"], group["n_items"] / total)


def test_unique_values_distribution_matches_counter():
    rng = np.random.default_rng(14)
    data = random_reliability_data(rng, 4, 150, half_steps=True, n_tones=5)
    table = unique_values_distribution(data, min_labels=2)
    expected = Counter(len(set(item[~np.isnan(item)])) for item in data.T if (~np.isnan(item)).sum() >= 2)
    assert dict(zip(table["n_unique_values"], table["n_items"], strict=True)) == dict(expected)
    assert table["fraction"].sum() == pytest.approx(1.0)


def test_distributions_empty(no_warnings):
    assert k_of_n_agreement(np.full((3, 4), nan)).empty
    assert unique_values_distribution([]).empty


# --------------------------------------------------------------------------
# Test-retest, labeler bias, leave-one-out
# --------------------------------------------------------------------------


def test_test_retest_against_references():
    rng = np.random.default_rng(15)
    round1 = rng.integers(1, 11, size=30).astype(float)
    round2 = np.clip(round1 + rng.integers(-1, 3, size=30), 1, 10)
    round2[[3, 7]] = nan
    result = agreement.test_retest(round1, round2, categories=range(1, 11))
    keep = ~np.isnan(round2)
    a, b = round1[keep], round2[keep]
    assert result.n == 28
    assert result.exact == pytest.approx(np.mean(a == b))
    assert result.within_one == pytest.approx(np.mean(np.abs(a - b) <= 1))
    assert result.mean_shift == pytest.approx(np.mean(b - a))
    assert result.mean_shift > 0  # the simulated drift is towards deeper tones
    assert result.weighted_kappa == pytest.approx(
        cohen_kappa_score(a, b, labels=list(range(1, 11)), weights="quadratic")
    )
    assert result.alpha == pytest.approx(reference_alpha(np.vstack([round1, round2]), "ordinal"), abs=1e-9)


def test_test_retest_too_little_data(no_warnings):
    result = agreement.test_retest([1, nan], [nan, 2], categories=range(1, 6))
    assert result.n == 0 and np.isnan(result.exact) and np.isnan(result.alpha)
    single = agreement.test_retest([3], [4], categories=range(1, 6))
    assert single.n == 1 and single.mean_shift == 1


def test_labeler_bias_matches_naive_definition():
    """Against the others' mean, item by item, as written out by hand."""
    rng = np.random.default_rng(16)
    data = random_reliability_data(rng, 4, 80, half_steps=True)
    data[2] = np.clip(data[2] + 1, 1, 10.5)  # labeler 2 labels deeper
    overall = labeler_bias(data, labelers=["a", "b", "c", "d"])
    for position, name in enumerate("abcd"):
        mine = []
        for item in range(data.shape[1]):
            own = data[position, item]
            others = [data[o, item] for o in range(4) if o != position and not np.isnan(data[o, item])]
            if not np.isnan(own) and others:
                mine.append(own - statistics.mean(others))
        assert overall.loc[name, "n"] == overall.loc[name, "n_units"] == len(mine)
        assert overall.loc[name, "mean_diff"] == pytest.approx(np.mean(mine))
        assert overall.loc[name, "mean_abs_diff"] == pytest.approx(np.mean(np.abs(mine)))
        # Without clusters: the one-sample t interval of the differences (scipy as the reference).
        low, high = stats.t.interval(0.95, len(mine) - 1, loc=np.mean(mine), scale=stats.sem(mine))
        assert (overall.loc[name, "low"], overall.loc[name, "high"]) == pytest.approx((low, high))
    assert overall["mean_diff"].idxmax() == "c"
    assert overall.loc["c", "low"] > 0  # the deeper labeler's interval excludes 0


def test_test_retest_mean_shift_interval_matches_statsmodels_clustered_by_person():
    """The mean shift's interval: a one-sample t interval without clusters (scipy), the CR1 cluster-robust
    one with them (statsmodels), and the same mean either way."""
    import statsmodels.api as sm

    rng = np.random.default_rng(31)
    people = np.repeat(np.arange(12), 3)
    first = np.clip(np.round(rng.normal(5, 2, 12)[people] + rng.normal(0, 0.5, people.size)), 1, 10)
    second = np.clip(first + np.round(rng.normal(0.3, 1, 12))[people], 1, 10)  # each person's shift shared
    second[4] = nan
    plain = agreement.test_retest(first, second, categories=range(1, 11))
    shift = (second - first)[~np.isnan(second)]
    low, high = stats.t.interval(0.95, shift.size - 1, loc=shift.mean(), scale=stats.sem(shift))
    assert (plain.mean_shift, plain.n_units) == (pytest.approx(shift.mean()), shift.size)
    assert (plain.mean_shift_low, plain.mean_shift_high) == pytest.approx((low, high))
    clustered = agreement.test_retest(first, second, categories=range(1, 11), clusters=people)
    groups = people[~np.isnan(second)]
    fit = sm.OLS(shift, np.ones(shift.size)).fit(cov_type="cluster", cov_kwds={"groups": groups})
    half = stats.t.ppf(0.975, 11) * fit.bse[0]
    assert clustered.n_units == 12 and clustered.mean_shift == pytest.approx(plain.mean_shift)
    assert (clustered.mean_shift_low, clustered.mean_shift_high) == pytest.approx(
        (fit.params[0] - half, fit.params[0] + half)
    )
    assert clustered.mean_shift_high - clustered.mean_shift_low > plain.mean_shift_high - plain.mean_shift_low


def _two_phases(seed, n_people, photos, drift):
    """Two phases on different people (several photos each, a labeler's reading of a person shared by
    the person's photos); labeler 1 is biased +0.4 in both, labeler 2 by ``drift`` more in the second."""
    rng = np.random.default_rng(seed)
    phases = []
    for phase in range(2):
        people = np.repeat(np.arange(n_people), photos)
        truth = rng.uniform(1, 10, n_people)[people]
        reading = rng.normal(0, 0.4, (4, n_people))[:, people]
        labels = truth + reading + rng.normal(0, 0.6, (4, people.size))
        labels[1] += 0.4
        labels[2] += drift * phase
        labels = np.clip(np.round(labels), 1, 10)
        labels[rng.random(labels.shape) < 0.1] = nan
        phases.append(labeler_bias(labels, clusters=people))
    return phases


def _change(before, after, labeler):
    return agreement.bias_change(
        tuple(before.loc[labeler, ["mean_diff", "se", "df"]]), tuple(after.loc[labeler, ["mean_diff", "se", "df"]])
    )


@pytest.mark.slow  # a seeded simulation over many datasets (pytest.ini): CI runs it, bin/test --fast skips it
def test_bias_change_fires_at_about_the_nominal_rate_when_no_one_drifts():
    """Seeded null: constant biases (one labeler +0.4 in both phases), 2 photos per person, 40 people per
    phase: the change's 95% interval excludes 0 in about 5% of (labeler, study) cells."""
    flagged = cells = 0
    for seed in range(150):
        before, after = _two_phases(seed, 40, 2, drift=0.0)
        for labeler in range(4):
            _, low, high = _change(before, after, labeler)
            flagged += low > 0 or high < 0
            cells += 1
    assert 0.025 <= flagged / cells <= 0.08


def test_bias_change_finds_a_planted_drift_where_it_is():
    found = elsewhere = 0
    for seed in range(40):
        before, after = _two_phases(1000 + seed, 40, 2, drift=0.6)
        _, low, _ = _change(before, after, 2)
        found += low > 0
        elsewhere += sum(_change(before, after, k)[1] > 0 for k in (0, 1, 3))
    assert found >= 32  # power about 92% at +0.6 tones (measured over 100 studies)
    # The others' bias moves the other way by a third of the drift (against the others' mean): rarely flagged.
    assert elsewhere <= 12


def test_bias_change_is_welch_on_the_two_biases():
    change, low, high = agreement.bias_change((0.2, 0.1, 9), (0.5, 0.2, 19))
    var = 0.1**2 + 0.2**2
    df = var**2 / (0.1**4 / 9 + 0.2**4 / 19)
    half = stats.t.ppf(0.975, df) * np.sqrt(var)
    assert (change, low, high) == pytest.approx((0.3, 0.3 - half, 0.3 + half))
    assert np.isnan(agreement.bias_change((0.2, nan, nan), (0.5, 0.2, 19))[1])


def test_labeler_bias_clustered_interval_matches_statsmodels():
    """With several photos per person the interval is the CR1 cluster-robust one (statsmodels' OLS of the
    differences on a constant with ``cov_type="cluster"``), t with G - 1 degrees of freedom."""
    import statsmodels.api as sm

    rng = np.random.default_rng(23)
    subjects = np.repeat(np.arange(30), 4)
    person = rng.normal(0, 1, 30)[subjects]  # each person's photos share an error: clustering matters
    data = np.clip(np.round(5 + person + rng.normal(0, 0.7, (4, subjects.size))), 1, 10)
    data[rng.random(data.shape) < 0.15] = nan
    table = labeler_bias(data, clusters=subjects)
    present = ~np.isnan(data)
    for position in range(4):
        usable = present[position] & (present.sum(axis=0) >= 2)
        others = np.nanmean(np.where(np.arange(4)[:, None] == position, nan, data)[:, usable], axis=0)
        diff = data[position, usable] - others
        fit = sm.OLS(diff, np.ones(diff.size)).fit(cov_type="cluster", cov_kwds={"groups": subjects[usable]})
        g = np.unique(subjects[usable]).size
        half = stats.t.ppf(0.975, g - 1) * fit.bse[0]
        assert table.loc[position, "n_units"] == g
        assert table.loc[position, "mean_diff"] == pytest.approx(fit.params[0])
        assert (table.loc[position, "low"], table.loc[position, "high"]) == pytest.approx(
            (fit.params[0] - half, fit.params[0] + half)
        )


@pytest.mark.parametrize("seed", range(6))
def test_labeler_bias_is_the_bias_of_one_band_over_the_whole_scale(seed):
    """One rule: the overall bias and a band's bias (``agreement_by_band``) are the same numbers when the
    band is the whole scale, on random panels with missing labels, half steps and repeated people."""
    rng = np.random.default_rng(seed)
    n_labelers, n_items = int(rng.integers(2, 7)), int(rng.integers(1, 120))
    data = random_reliability_data(rng, n_labelers, n_items, half_steps=True)
    clusters = rng.integers(0, max(1, n_items // 2), n_items) if seed % 2 else None
    overall = labeler_bias(data, clusters=clusters)
    band = agreement_by_band(data, n_tones=11, bands=[(1, 11)], clusters=clusters, with_alpha=False).bands[0]
    for row in band.bias:
        got = overall.loc[row.labeler]
        assert (got["n"], got["n_units"]) == (row.n, row.n_units)
        for name in ("mean_diff", "low", "high"):
            assert got[name] == pytest.approx(getattr(row, name), nan_ok=True)


def test_labeler_bias_too_little_data(no_warnings):
    table = labeler_bias([[1, nan], [nan, 2]])
    assert table["n"].tolist() == [0, 0]
    assert table["mean_diff"].isna().all()


def test_alpha_leave_one_out_matches_package():
    rng = np.random.default_rng(17)
    data = random_reliability_data(rng, 4, 50)
    frame = alpha_leave_one_out(data, "interval")
    everyone = reference_alpha(data, "interval")
    for labeler in range(4):
        expected = reference_alpha(np.delete(data, labeler, axis=0), "interval")
        assert frame.loc[labeler, "alpha_without"] == pytest.approx(expected, abs=1e-9)
        assert frame.loc[labeler, "change"] == pytest.approx(expected - everyone, abs=1e-9)


def test_alpha_leave_one_out_two_labelers_is_nan(no_warnings):
    assert alpha_leave_one_out([[1, 2, 3], [1, 2, 4]])["alpha_without"].isna().all()


# --------------------------------------------------------------------------
# Per-image consensus
# --------------------------------------------------------------------------


def test_image_consensus_data_card_adjacent_pair_midpoint():
    # Data card: mid-deep (3) + deep (4) on the 0-based 5-tone scale = 3.5.
    result = image_consensus([(3, 4), 4, 3, 4], uncertain=[True, False, False, False])
    assert result.values == (3.5, 4.0, 3.0, 4.0)
    assert result.mean == pytest.approx(statistics.fmean([3.5, 4, 3, 4]))
    assert result.std == pytest.approx(statistics.pstdev([3.5, 4, 3, 4]))
    assert result.median == statistics.median([3.5, 4, 3, 4])
    assert (result.mode, result.mode_count) == (4.0, 2)
    assert result.near_consensus and not result.complete_consensus
    assert not result.overlap_consensus  # the single 3 and the single 4 share no tone
    assert result.n_unique_values == 3
    assert result.n_connected_groups == 1
    assert result.any_uncertainty and not result.has_invalid_annotation
    assert result.flags == ()


def test_image_consensus_non_adjacent_pair_is_invalid():
    result = image_consensus([(1, 3), 2, 2])
    assert np.isnan(result.values[0])
    assert result.valid_values == (2.0, 2.0)
    assert result.has_invalid_annotation and "invalid" in result.flags
    assert result.complete_consensus  # over the valid selections
    assert result.n_labels == 3 and result.n_valid == 2


def test_image_consensus_overlap_and_groups():
    result = image_consensus([(2, 3), (3, 4), 3])
    assert result.overlap_consensus and not result.complete_consensus
    assert result.n_connected_groups == 1
    split = image_consensus([1, (2, 3), 6, 8, None])
    assert split.n_connected_groups == 3  # {1, 2, 3}, {6}, {8}
    assert split.range == 7 and split.wide_range and split.flags == ("wide_range",)
    assert not image_consensus([1, 3], wide_range=3).wide_range
    assert image_consensus([1, 3], wide_range=2).wide_range


# The public data card's two worked examples (DOMAIN.md section 2; 5-tone scale, 0-based:
# light 0, mid-light 1, medium 2, mid-deep 3, deep 4). Issue 12: the atypical one has 2 groups.
DATA_CARD_EXAMPLES = [
    pytest.param(
        [(3, 4), (3, 4), 3, 3],
        dict(
            valid_values=(3.5, 3.5, 3.0, 3.0),
            mean=3.25,
            std=0.25,
            overlap_consensus=True,
            near_consensus=True,
            complete_consensus=False,
            n_connected_groups=1,
            has_invalid_annotation=False,
        ),
        id="typical",
    ),
    pytest.param(
        [(0, 4), (1, 2), 0],
        dict(
            valid_values=(1.5, 0.0),
            mean=0.75,
            overlap_consensus=False,
            near_consensus=False,
            complete_consensus=False,
            n_connected_groups=2,
            has_invalid_annotation=True,
        ),
        id="atypical",
    ),
]


@pytest.mark.parametrize(("selections", "expected"), DATA_CARD_EXAMPLES)
def test_data_card_worked_examples(selections, expected):
    result = image_consensus(selections)
    for name, value in expected.items():
        assert getattr(result, name) == pytest.approx(value), name
    first, second = selections_to_arrays([selections])
    row = consensus_table(first, second).iloc[0]
    for name in ("mean", "overlap_consensus", "near_consensus", "n_connected_groups", "has_invalid_annotation"):
        assert row[name] == pytest.approx(expected[name]), name


def test_connected_groups_count_what_the_labelers_pointed_at():
    # An invalid pair contributes its two tones, not those between them.
    assert image_consensus([(1, 5)]).n_connected_groups == 2
    assert image_consensus([(1, 5), 3]).n_connected_groups == 3
    assert image_consensus([(1, 3), 2]).n_connected_groups == 1
    assert image_consensus([None, ()]).n_connected_groups == 0


def test_image_consensus_mode_ties_go_to_lowest():
    result = image_consensus([5, 2, 5, 2, 9])
    assert (result.mode, result.mode_count) == (2.0, 2)


def test_image_consensus_needs_two_labels_for_consensus(no_warnings):
    one = image_consensus([4, None, ()])
    assert not (one.complete_consensus or one.overlap_consensus or one.near_consensus)
    assert one.mean == 4 and one.std == 0 and one.n_connected_groups == 1
    none = image_consensus([None, None])
    assert np.isnan(none.mean) and none.mode_count == 0 and none.n_connected_groups == 0


def random_selections(rng: np.random.Generator, n_images: int, n_labelers: int):
    selections = []
    for _ in range(n_images):
        row = []
        for _ in range(n_labelers):
            kind = rng.random()
            tone = int(rng.integers(1, 11))
            if kind < 0.15:
                row.append(None)
            elif kind < 0.35:
                row.append((tone, tone + 1))
            elif kind < 0.42:
                row.append((tone, tone + int(rng.integers(2, 5))))  # invalid
            else:
                row.append(tone)
        selections.append(row)
    return selections


def test_consensus_table_matches_image_consensus():
    rng = np.random.default_rng(18)
    selections = random_selections(rng, 300, 4)
    uncertain = rng.random((300, 4)) < 0.1
    first, second = selections_to_arrays(selections)
    table = consensus_table(first, second, uncertain, wide_range=2.5)
    values = selection_values(first, second)
    for image, row in enumerate(selections):
        expected = image_consensus(row, uncertain[image], wide_range=2.5)
        np.testing.assert_array_equal(values[image], np.array(expected.values))
        got = table.iloc[image]
        for field in ("mean", "std", "median", "mode", "min", "max", "range"):
            assert got[field] == pytest.approx(getattr(expected, field), nan_ok=True), field
        for field in (
            "n_labels",
            "n_valid",
            "mode_count",
            "complete_consensus",
            "overlap_consensus",
            "near_consensus",
            "n_unique_values",
            "n_connected_groups",
            "any_uncertainty",
            "has_invalid_annotation",
            "wide_range",
        ):
            assert got[field] == getattr(expected, field), (image, field)
        assert got["invalid"] == ("invalid" in expected.flags)


def test_consensus_table_statistics_match_numpy():
    rng = np.random.default_rng(19)
    first, second = selections_to_arrays(random_selections(rng, 200, 5))
    values = selection_values(first, second)
    table = consensus_table(first, second)
    for image, row in enumerate(values):
        valid = row[~np.isnan(row)]
        if valid.size == 0:
            assert np.isnan(table["mean"].iloc[image])
            continue
        assert table["std"].iloc[image] == pytest.approx(np.std(valid, ddof=0))
        assert table["median"].iloc[image] == pytest.approx(np.median(valid))
        assert table["mode"].iloc[image] == min(statistics.multimode(valid.tolist()))


def test_consensus_table_all_skipped(no_warnings):
    table = consensus_table(np.full((3, 4), nan))
    assert table["mean"].isna().all() and (table["n_connected_groups"] == 0).all()
    assert not table["near_consensus"].any()
