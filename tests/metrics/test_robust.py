"""Issue 20: the inference under the verdicts, checked against references and on seeded nulls.

* CR2 and its Bell-McCaffrey degrees of freedom against a direct computation with dense matrices
  (``scipy.linalg.sqrtm`` of each cluster's block, the Gram matrix of ``(I - H) p_c``), and HC2 against
  statsmodels;
* the wild bootstrap's closed form against resamples built sample by sample;
* permutations that move whole clusters keep the clustering;
* nulls with several photos per person stay at the nominal rate with clusters (and do not without).
"""

import numpy as np
import pytest
from scipy import stats
from scipy.linalg import sqrtm

# statsmodels.api would also import its formula, time-series and graphics modules: 0.8 s a test process.
from statsmodels.regression.linear_model import OLS
from statsmodels.tools.tools import add_constant

from metrics.unfairness import (
    band_unfairness,
    categorical_unfairness,
    cluster_codes,
    cluster_permutations,
    contrast_max_t,
    design_effect,
    grid_unfairness,
    group_disparity,
    mean_interval,
    robust_slope,
)
from metrics.unfairness.disparity import pairwise_contrasts
from metrics.unfairness.robust import _weights

ALPHA = 0.05


def _acceptance_high(n_sims: int, rate: float = ALPHA) -> int:
    return int(stats.binom.interval(0.999, n_sims, rate)[1])


def _people(rng, n_people, photos, person_sd=0.4):
    person = np.repeat(np.arange(n_people), photos)
    errors = 1.0 + rng.normal(0, person_sd, n_people)[person] + rng.normal(0, 0.3, person.size)
    return person, errors


def test_hc2_equals_statsmodels_and_cr2_equals_the_dense_computation():
    rng = np.random.default_rng(1)
    n = 80
    x = rng.uniform(1, 10, n)
    y = 1 + 0.05 * x + rng.normal(0, 0.5, n) * (1 + 0.1 * x)
    fit = robust_slope(y, x)
    reference = OLS(y, add_constant(x)).fit(cov_type="HC2")
    assert fit.se == pytest.approx(reference.bse[1], rel=1e-10)
    assert fit.slope == pytest.approx(reference.params[1], rel=1e-12)

    cluster = rng.integers(0, 23, n)
    fit = robust_slope(y, x, clusters=cluster)
    design = add_constant(x)
    bread = np.linalg.inv(design.T @ design)
    residual = y - design @ (bread @ design.T @ y)
    meat = np.zeros((2, 2))
    rows_p = []
    hat = design @ bread @ design.T
    for c in np.unique(cluster):
        idx = np.flatnonzero(cluster == c)
        xc = design[idx]
        a_c = np.linalg.inv(sqrtm(np.eye(idx.size) - xc @ bread @ xc.T)).real
        v = xc.T @ a_c @ residual[idx]
        meat += np.outer(v, v)
        p_c = np.zeros(n)
        p_c[idx] = a_c @ xc @ bread[1]
        rows_p.append((np.eye(n) - hat) @ p_c)
    variance = (bread @ meat @ bread)[1, 1]
    gram = np.array(rows_p) @ np.array(rows_p).T
    assert fit.se == pytest.approx(np.sqrt(variance), rel=1e-9)
    assert fit.df == pytest.approx(np.trace(gram) ** 2 / np.sum(gram**2), rel=1e-9)
    assert fit.n_clusters == np.unique(cluster).size


def test_wild_bootstrap_closed_form_equals_resamples_built_sample_by_sample():
    rng = np.random.default_rng(2)
    n, k = 70, 3
    group = rng.integers(0, k, n)
    cluster = rng.integers(0, 30, n)
    y = rng.normal(1, 0.5, n) + 0.2 * (group == 2)
    matrix = pairwise_contrasts(np.arange(k), np.bincount(group, minlength=k))
    test = contrast_max_t(y, group, k, matrix, clusters=cluster, n_boot=6, seed=5)
    codes, g = cluster_codes(cluster, n)
    sizes = np.bincount(group, minlength=k)
    people = np.array([np.unique(codes[group == j]).size for j in range(k)])
    factor = people / (people - 1)

    # Groups of fewer than 30 people: each contrast's variance is at least what the pooled spread implies.
    observed_e = y - np.array([y[group == j].mean() for j in range(k)])[group]
    pooled = observed_e @ observed_e / (n - k)
    deff = design_effect(observed_e, cluster)["design_effect"]
    floor = (matrix**2) @ (pooled * max(deff, 1.0) / sizes)

    def largest_t(values):
        means = np.array([values[group == j].mean() for j in range(k)])
        e = values - means[group]
        t = []
        for row, least in zip(matrix, floor, strict=True):
            share = np.bincount(codes, weights=np.sqrt(factor[group]) * row[group] / sizes[group] * e, minlength=g)
            t.append(row @ means / np.sqrt(max(share @ share, least)))
        return np.abs(t)

    assert np.abs(test.t) == pytest.approx(largest_t(y), rel=1e-10)
    weights = _weights(np.random.default_rng(5), (g, 6))
    grand = y.mean()
    null = [largest_t(grand + weights[codes, b] * (y - grand)).max() for b in range(6)]
    expected = [(1 + sum(m >= abs(t) * (1 - 1e-12) for m in null)) / 7 for t in test.t]
    assert test.p_adjusted.tolist() == pytest.approx(expected)


def test_group_se_without_clusters_is_welch_and_mean_interval_is_the_t_interval():
    rng = np.random.default_rng(3)
    group = np.repeat([0, 1], [40, 60])
    y = rng.normal(1, 0.5, 100)
    test = contrast_max_t(y, group, 2, [[1.0, -1.0]], n_boot=9)
    for j in (0, 1):
        values = y[group == j]
        assert test.groups[j].se == pytest.approx(values.std(ddof=1) / np.sqrt(values.size))
    m = mean_interval(y)
    low, high = stats.t.interval(0.95, 99, loc=y.mean(), scale=stats.sem(y))
    assert (m.ci_low, m.ci_high) == pytest.approx((low, high))


def test_cluster_permutations_move_whole_clusters_onto_clusters_of_their_size():
    rng = np.random.default_rng(4)
    person = np.repeat(np.arange(30), rng.integers(1, 4, 30))
    for perm in cluster_permutations(person, person.size, 20, rng):
        assert sorted(perm.tolist()) == list(range(person.size))
        for p in np.unique(person):
            sources = person[perm[person == p]]
            assert np.unique(sources).size == 1  # one person's samples come from one person
            assert np.count_nonzero(person == sources[0]) == np.count_nonzero(person == p)


def test_design_effect_grows_with_the_correlation_within_people():
    rng = np.random.default_rng(5)
    person, errors = _people(rng, 400, 4, person_sd=0.6)
    assert design_effect(errors, person)["design_effect"] > 2.5
    assert design_effect(rng.normal(0, 1, 1600), person)["design_effect"] == pytest.approx(1.0, abs=0.25)


@pytest.mark.slow  # a seeded simulation over many datasets: CI runs it, bin/test --fast skips it
@pytest.mark.parametrize("photos", [2, 4])
def test_nulls_with_repeated_people_keep_the_nominal_rate_only_with_clusters(photos):
    # Issue 20: with 2 and 4 photos per person, skin tone was "significant" 23% and 47% of the time.
    n_sims = 150
    hits = {"bands": 0, "bands_naive": 0, "trend": 0, "gender": 0, "ks": 0}
    for seed in range(n_sims):
        rng = np.random.default_rng(100 * photos + seed)
        person, errors = _people(rng, 600 // photos, photos)
        tone = np.clip(rng.integers(1, 11, person.max() + 1)[person] + rng.integers(-1, 2, person.size), 1, 10)
        sex = rng.choice(["f", "m"], person.max() + 1)[person]
        hits["bands"] += band_unfairness(
            errors, tone, threshold=2.0, n_permutations=99, seed=seed, clusters=person
        ).gap_significant
        hits["bands_naive"] += band_unfairness(
            errors, tone, threshold=2.0, n_permutations=99, seed=seed
        ).gap_significant
        hits["trend"] += robust_slope(errors, tone, clusters=person).p_value < ALPHA
        hits["gender"] += group_disparity(errors, sex, threshold=2.0, clusters=person, n_boot=99, seed=seed).significant
        hits["ks"] += categorical_unfairness(errors, sex, clusters=person, n_permutations=99, seed=seed).significant
    high = _acceptance_high(n_sims)
    assert hits["bands"] <= high and hits["trend"] <= high and hits["gender"] <= high and hits["ks"] <= high, hits
    assert hits["bands_naive"] > high, hits  # ignoring the clustering over-rejects (the design is a real test)


def test_grid_finds_a_four_percent_region_and_stays_quiet_without_one():
    found = false_alarms = 0
    for seed in range(20):
        rng = np.random.default_rng(seed)
        tone = rng.choice(["1-2", "3-4", "5-6", "7-8", "9-10"], 1000)
        body = rng.choice(["b1", "b2", "b3", "b4", "b5"], 1000)
        errors = np.abs(rng.normal(1.0, 0.4, 1000))
        planted = errors + 1.5 * ((tone == "9-10") & (body == "b5"))
        grid = grid_unfairness(planted, {"skin_tone": tone, "body_shape": body}, threshold=2.0, n_boot=199, seed=seed)
        found += [c.description for c in grid.flagged] == ["skin_tone 9-10, body_shape b5"]
        null = grid_unfairness(errors, {"skin_tone": tone, "body_shape": body}, threshold=2.0, n_boot=199, seed=seed)
        false_alarms += null.significant
        assert null.significant or not null.flagged  # no region named under a non-significant result
    assert found >= 19 and false_alarms <= 3
