"""Intervals of pooled pair agreement that respect the clustering of pairs by image (issue 12).

The coverage tests are seeded simulations of labels: images with a true tone, 40% of them hard (labels
spread widely), 4 labelers (or 2 to 4). Pairs of labels on one image are then strongly alike, so a
Wilson interval over pairs is too narrow; the cluster-robust interval must cover the true rate about 95%
of the time.
"""

import math

import numpy as np
import pytest

from metrics import agreement
from metrics.agreement import (
    cluster_bootstrap_proportion,
    clustered_proportion,
    pairwise_agreement_counts,
    pairwise_agreement_interval,
    percent_exact,
    percent_within_one,
)
from metrics.intervals import wilson_interval, wilson_interval_effective


def simulate_labels(rng, n_images, n_labels=4, varying=False):
    """Images x labelers tones 1..10; hard images spread their labels widely."""
    truth = rng.uniform(1, 10, n_images)
    spread = np.where(rng.random(n_images) < 0.4, 1.6, 0.35)
    noise = rng.normal(0, 1, (n_images, n_labels)) * spread[:, None]
    labels = np.clip(np.round(truth[:, None] + noise), 1, 10)
    if varying:
        kept = rng.integers(2, n_labels + 1, n_images)
        labels = np.where(np.arange(n_labels)[None, :] < kept[:, None], labels, np.nan)
    return labels


def pair_counts(labels, tolerance):
    """Agreeing pairs and pairs per image, straight from the definition."""
    agreeing = np.zeros(labels.shape[0])
    pairs = np.zeros(labels.shape[0])
    for a in range(labels.shape[1]):
        for b in range(a + 1, labels.shape[1]):
            both = ~np.isnan(labels[:, a]) & ~np.isnan(labels[:, b])
            pairs += both
            agreeing += both & (np.abs(labels[:, a] - labels[:, b]) <= tolerance)
    return agreeing, pairs


def coverage(n_images, tolerance, *, varying=False, reps=1000, seed=0):
    rng = np.random.default_rng(seed)
    y, m = pair_counts(simulate_labels(rng, 400_000, varying=varying), tolerance)
    truth = y.sum() / m.sum()
    clustered = naive = 0
    for _ in range(reps):
        y, m = pair_counts(simulate_labels(rng, n_images, varying=varying), tolerance)
        result = clustered_proportion(y, m)
        clustered += result.low <= truth <= result.high
        low, high = wilson_interval(int(y.sum()), int(m.sum()))
        naive += low <= truth <= high
    return clustered / reps, naive / reps


@pytest.mark.slow  # a seeded simulation over many datasets (pytest.ini): CI runs it, bin/test --fast skips it
@pytest.mark.parametrize(
    ("n_images", "tolerance", "varying"),
    [(10, 0, False), (30, 0, False), (30, 1, False), (100, 1, True)],
)
def test_clustered_interval_covers_95_percent_and_wilson_on_pairs_does_not(n_images, tolerance, varying):
    clustered, naive = coverage(n_images, tolerance, varying=varying, seed=n_images + 7 * tolerance)
    # 1,000 replicates: a true 95% coverage lands in [0.93, 0.97] with probability > 99.7%.
    assert 0.93 <= clustered <= 0.975, clustered
    assert naive < 0.88, naive  # pairs of one image are not independent trials


def test_estimate_is_the_pooled_pair_agreement():
    rng = np.random.default_rng(3)
    labels = simulate_labels(rng, 50, varying=True)
    reliability = labels.T
    for tolerance, pooled in ((0.0, percent_exact), (1.0, percent_within_one)):
        agreeing, pairs = pairwise_agreement_counts(reliability, tolerance)
        expected_y, expected_m = pair_counts(labels, tolerance)
        assert agreeing.tolist() == expected_y.tolist() and pairs.tolist() == expected_m.tolist()
        result = pairwise_agreement_interval(reliability, tolerance)
        assert result.estimate == pytest.approx(pooled(reliability), abs=1e-12)
        assert result.low <= result.estimate <= result.high
        assert result.n_clusters == 50 and result.n_trials == pairs.sum()


def test_independent_trials_give_about_wilsons_interval():
    result = clustered_proportion([1] * 300 + [0] * 200, [1] * 500)
    low, high = wilson_interval(300, 500)
    assert result.low == pytest.approx(low, abs=0.002) and result.high == pytest.approx(high, abs=0.002)
    assert result.design_effect == pytest.approx(1.0, abs=0.01)


def test_clustering_widens_the_interval_beyond_wilson_on_pairs():
    # Images that agree completely or not at all: 6 pairs per image carry one image's worth of information.
    result = clustered_proportion([6] * 15 + [0] * 15, [6] * 30)
    low, high = wilson_interval(90, 180)
    assert result.estimate == 0.5
    assert result.high - result.low > 2 * (high - low)
    assert result.design_effect == pytest.approx(6.0, rel=0.05)


def test_no_trials_one_image_and_a_share_of_one():
    empty = clustered_proportion([], [])
    assert math.isnan(empty.estimate) and math.isnan(empty.low) and empty.n_clusters == 0
    single = clustered_proportion([3], [6])
    assert single.estimate == 0.5 and math.isnan(single.low) and math.isnan(single.high)
    # Every pair agrees: no variance to read; one independent trial per image is assumed.
    everything = clustered_proportion([6] * 8, [6] * 8)
    assert everything.estimate == 1.0 and everything.high == 1.0
    assert everything.low < wilson_interval(48, 48)[0]
    assert (
        everything.low == pytest.approx(wilson_interval_effective(1.0, everything.n_effective)[0], abs=1e-12)
        and everything.n_effective < 8
    )
    # Clusters without trials are ignored; bad counts are refused.
    assert clustered_proportion([1, 0], [2, 0]).n_clusters == 1
    with pytest.raises(ValueError):
        clustered_proportion([3], [2])


def test_bootstrap_agrees_with_the_analytic_interval_on_many_images():
    rng = np.random.default_rng(11)
    y, m = pair_counts(simulate_labels(rng, 2000), 0)
    analytic = clustered_proportion(y, m)
    low, high = cluster_bootstrap_proportion(y, m, n_resamples=2000, seed=1)
    assert low == pytest.approx(analytic.low, abs=0.006) and high == pytest.approx(analytic.high, abs=0.006)
    assert cluster_bootstrap_proportion(y, m, seed=1) == cluster_bootstrap_proportion(y, m, seed=1)


def _repeated_subjects(rng, n_subjects, photos, n_labelers=4):
    """Each subject's photos share the labelers' reading of that person (one draw per subject)."""
    truth = rng.integers(1, 11, size=n_subjects)
    per_subject = np.clip(truth + rng.integers(-2, 3, size=(n_labelers, n_subjects)), 1, 10).astype(float)
    data = np.repeat(per_subject, photos, axis=1)
    return data, np.repeat(np.arange(n_subjects), photos)


def test_bootstrap_alpha_with_one_item_per_cluster_is_the_item_bootstrap():
    rng = np.random.default_rng(3)
    data = np.clip(rng.integers(1, 11, size=60) + rng.integers(-1, 2, size=(4, 60)), 1, 10).astype(float)
    data[0, :5] = np.nan
    items = agreement.bootstrap_alpha(data, n_resamples=400, seed=1)
    clustered = agreement.bootstrap_alpha(data, n_resamples=400, seed=1, clusters=np.arange(60)[::-1])
    assert clustered.estimate == pytest.approx(items.estimate, abs=1e-12)
    assert clustered.n_items == items.n_items
    # Same units, possibly in another kind order: the intervals agree to resampling noise.
    assert clustered.low == pytest.approx(items.low, abs=0.03)
    assert clustered.high == pytest.approx(items.high, abs=0.03)


def test_bootstrap_alpha_resamples_subjects_when_they_repeat():
    """Five photos per person: the subject bootstrap is wider than the image bootstrap, and covers
    the alpha of fresh subjects about as often as it says (the image bootstrap covers it far less)."""
    rng = np.random.default_rng(7)
    widths_items, widths_subjects, cover_items, cover_subjects = [], [], 0, 0
    reference = agreement.krippendorff_alpha(_repeated_subjects(rng, 20000, 1)[0], "ordinal")
    runs = 60
    for _ in range(runs):
        data, subjects = _repeated_subjects(rng, 30, 5)
        items = agreement.bootstrap_alpha(data, n_resamples=300, seed=0)
        by_subject = agreement.bootstrap_alpha(data, n_resamples=300, seed=0, clusters=subjects)
        assert by_subject.estimate == pytest.approx(items.estimate, abs=1e-12)
        widths_items.append(items.high - items.low)
        widths_subjects.append(by_subject.high - by_subject.low)
        cover_items += items.low <= reference <= items.high
        cover_subjects += by_subject.low <= reference <= by_subject.high
    assert np.median(widths_subjects) > 1.8 * np.median(widths_items)
    assert cover_subjects >= 0.85 * runs
    assert cover_items <= 0.7 * runs


def test_bootstrap_alpha_clusters_must_match_items():
    with pytest.raises(ValueError, match="one entry per item"):
        agreement.bootstrap_alpha(np.ones((2, 4)), clusters=[0, 1])


def test_student_t_quantile_matches_scipy():
    from scipy.special import stdtrit

    from metrics.agreement.clustered import _student_t_quantile

    for df in [*range(1, 60), 99, 250, 999, 1000, 1001, 4321, 99_993, 10**6]:
        for confidence in (0.5, 0.9, 0.95, 0.99, 0.999):
            expected = float(stdtrit(df, 1 - (1 - confidence) / 2))
            assert _student_t_quantile(df, confidence) == pytest.approx(expected, rel=1e-12, abs=0)


@pytest.mark.slow  # starts a Python process (pytest.ini): CI runs it, bin/test --fast skips it
def test_clustered_interval_needs_no_scipy():
    # Importing scipy.special took 0.7 s of CPU of a fresh process's first consensus computation.
    import subprocess
    import sys

    code = (
        "import sys; from metrics.agreement import clustered_proportion as c; c([6, 6, 1], [6, 6, 6]);"
        "print(any(m.startswith('scipy') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
