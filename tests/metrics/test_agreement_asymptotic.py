"""The delta-method intervals of alpha and the kappas (metrics.agreement.asymptotic), against the bootstrap.

Seeded simulations with several photos per person (a person's photos share their tone and a 'look' every
labeler sees, so they are not independent): the delta method's interval, clustered by person, covers the
population alpha about 95% of the time at the switch point (ASYMPTOTIC_MIN_UNITS people), as the BCa
bootstrap does, and the two intervals agree there; the same interval without the clusters covers far less
(the test can fail).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from metrics.agreement import (
    ASYMPTOTIC_MIN_UNITS,
    AlphaBootstrap,
    DeltaInterval,
    agreement_by_band,
    alpha_intervals,
    bootstrap_alpha_levels,
    bootstrap_cohen_kappa,
    bootstrap_fleiss_kappa,
    cohen_kappa_interval,
    cohen_kappa_weighted,
    delta_alpha_levels,
    delta_cohen_kappa,
    delta_fleiss_kappa,
    fleiss_kappa_interval,
    interval_q,
    krippendorff_alpha,
)

OFFSETS = np.array([-0.3, 0.0, 0.2, 0.4])
TONES = np.arange(1, 11)
TONE_WEIGHTS = np.linspace(2, 0.5, 10) / np.linspace(2, 0.5, 10).sum()


def study(
    rng: np.random.Generator, n_subjects: int, *, missing: float = 0.1, photos_mean: float = 1.5
) -> tuple[np.ndarray, np.ndarray]:
    """4 labelers x images (half steps, 10% missing) of ``n_subjects`` people with 1 + Poisson(1.5) photos each."""
    photos = 1 + rng.poisson(photos_mean, n_subjects)
    tone = rng.choice(TONES, size=n_subjects, p=TONE_WEIGHTS)
    subject = np.repeat(np.arange(n_subjects), photos)
    truth = tone[subject] + rng.normal(0, 0.5, n_subjects)[subject]
    values = truth[None, :] + OFFSETS[:, None] + rng.normal(0, 0.8, (4, subject.size))
    values = np.clip(np.round(values * 2) / 2, 1, 10)
    values[rng.random(values.shape) < missing] = np.nan
    return values, subject


@pytest.fixture(scope="module")
def population_alpha() -> float:
    """Ordinal alpha of 300,000 people (standard error about 0.0003, a tenth of a sample's at 2,000)."""
    values, subject = study(np.random.default_rng(0), 300_000)
    return delta_alpha_levels(values, ("ordinal",), clusters=subject)["ordinal"].estimate


def test_delta_alpha_is_alpha_and_agrees_with_the_bootstrap_at_the_switch_point() -> None:
    for seed in range(3):
        values, subject = study(np.random.default_rng(100 + seed), ASYMPTOTIC_MIN_UNITS)
        delta = delta_alpha_levels(values, ("ordinal", "interval"), clusters=subject)
        boot = bootstrap_alpha_levels(values, ("ordinal", "interval"), n_resamples=1000, clusters=subject)
        for level in ("ordinal", "interval"):
            d, b = delta[level], boot[level]
            assert d.estimate == pytest.approx(krippendorff_alpha(values, level), abs=1e-12)
            assert d.estimate == pytest.approx(b.estimate, abs=1e-12)
            width = b.high - b.low
            # Endpoints within a tenth of the interval's width (measured: 2-6%; Monte Carlo error included).
            assert abs(d.low - b.low) < 0.1 * width, (level, d, b)
            assert abs(d.high - b.high) < 0.1 * width, (level, d, b)
            assert d.n_units == np.unique(subject[(~np.isnan(values)).sum(axis=0) >= 2]).size


def test_alpha_intervals_switch_at_the_threshold() -> None:
    values, subject = study(np.random.default_rng(7), 60)
    n_people = np.unique(subject[(~np.isnan(values)).sum(axis=0) >= 2]).size
    below = alpha_intervals(values, ("ordinal",), n_resamples=200, clusters=subject, min_units=n_people + 1)
    at = alpha_intervals(values, ("ordinal",), n_resamples=200, clusters=subject, min_units=n_people)
    assert isinstance(below["ordinal"], AlphaBootstrap)
    assert isinstance(at["ordinal"], DeltaInterval)
    assert at["ordinal"].n_units == n_people
    assert at["ordinal"].estimate == pytest.approx(below["ordinal"].estimate, abs=1e-12)


@pytest.mark.slow
def test_delta_alpha_covers_95_percent_with_several_photos_per_person(population_alpha: float) -> None:
    reps, clustered, naive = 200, 0, 0
    for rep in range(reps):
        values, subject = study(np.random.default_rng(1000 + rep), ASYMPTOTIC_MIN_UNITS)
        d = delta_alpha_levels(values, ("ordinal",), clusters=subject)["ordinal"]
        n = delta_alpha_levels(values, ("ordinal",))["ordinal"]
        clustered += d.low <= population_alpha <= d.high
        naive += n.low <= population_alpha <= n.high
    # 95% +- 3 binomial standard errors (1.5 points at 200 replicates).
    assert 0.905 <= clustered / reps <= 0.99, clustered / reps
    # Photos as if independent: the same interval too narrow (measured 84%).
    assert naive / reps < 0.9, naive / reps


@pytest.mark.slow
def test_bootstrap_alpha_covers_95_percent_at_the_switch_point(population_alpha: float) -> None:
    reps, covered = 80, 0
    for rep in range(reps):
        values, subject = study(np.random.default_rng(5000 + rep), ASYMPTOTIC_MIN_UNITS)
        b = bootstrap_alpha_levels(values, ("ordinal",), n_resamples=250, clusters=subject)["ordinal"]
        covered += b.low <= population_alpha <= b.high
    assert 0.87 <= covered / reps, covered / reps


@pytest.mark.slow
def test_delta_kappas_cover_95_percent() -> None:
    # Cohen's weighted kappa of two labelers, clustered by person; the population value from 300,000 people.
    big, big_subject = study(np.random.default_rng(1), 300_000, missing=0.0)
    categories = np.arange(1, 10.5, 0.5)
    kappa_true = cohen_kappa_weighted(big[0], big[3], categories=categories)
    fleiss_true = delta_fleiss_kappa(_fleiss_counts(big)).estimate
    reps, kappa_hits, fleiss_hits = 200, 0, 0
    for rep in range(reps):
        values, subject = study(np.random.default_rng(9000 + rep), ASYMPTOTIC_MIN_UNITS, missing=0.0)
        k = delta_cohen_kappa(values[0], values[3], categories=categories, clusters=subject)
        kappa_hits += k.low <= kappa_true <= k.high
        # Fleiss' kappa over images with one photo per person (its interval resamples images).
        single, _ = study(np.random.default_rng(20000 + rep), ASYMPTOTIC_MIN_UNITS, missing=0.0, photos_mean=0.0)
        f = delta_fleiss_kappa(_fleiss_counts(single))
        fleiss_hits += f.low <= fleiss_true <= f.high
    assert 0.905 <= kappa_hits / reps <= 0.99, kappa_hits / reps
    assert 0.905 <= fleiss_hits / reps <= 0.99, fleiss_hits / reps


def _fleiss_counts(values: np.ndarray) -> np.ndarray:
    domain = np.arange(1, 10.5, 0.5)
    return (values[:, :, None] == domain[None, None, :]).sum(axis=0)


def test_delta_kappas_agree_with_the_bootstrap() -> None:
    values, subject = study(np.random.default_rng(3), ASYMPTOTIC_MIN_UNITS, missing=0.0)
    categories = np.arange(1, 10.5, 0.5)
    d = delta_cohen_kappa(values[0], values[1], categories=categories, clusters=subject)
    b = bootstrap_cohen_kappa(values[0], values[1], categories=categories, clusters=subject, n_resamples=1000)
    assert d.estimate == pytest.approx(b.estimate, abs=1e-12)
    assert abs(d.low - b.low) < 0.1 * (b.high - b.low) and abs(d.high - b.high) < 0.1 * (b.high - b.low)
    counts = _fleiss_counts(values)
    df, bf = delta_fleiss_kappa(counts), bootstrap_fleiss_kappa(counts, n_resamples=1000)
    assert df.estimate == pytest.approx(bf.estimate, abs=1e-12)
    assert abs(df.low - bf.low) < 0.1 * (bf.high - bf.low) and abs(df.high - bf.high) < 0.1 * (bf.high - bf.low)
    # The choosers: the delta method from min_units on, the bootstrap below.
    assert isinstance(cohen_kappa_interval(values[0], values[1], categories=categories, min_units=10), DeltaInterval)
    assert not isinstance(
        cohen_kappa_interval(values[0], values[1], categories=categories, min_units=10**9, n_resamples=50),
        DeltaInterval,
    )
    assert isinstance(fleiss_kappa_interval(counts, min_units=10), DeltaInterval)


def test_interval_q_is_the_normal_tail_under_the_delta_method() -> None:
    d = DeltaInterval(0.7, 0.68, 0.72, 0.01, 0.95, 5000)
    assert interval_q(d, 0.7) == pytest.approx(0.5)
    assert interval_q(d, 0.667) == pytest.approx(0.000483, abs=1e-5)
    assert math.isnan(interval_q(DeltaInterval(math.nan, math.nan, math.nan, math.nan, 0.95, 0), 0.667))


def test_bands_use_the_delta_method_from_the_threshold_only() -> None:
    values, subject = study(np.random.default_rng(11), 1500)
    result = agreement_by_band(values, n_tones=10, clusters=subject, alpha_min_units=30, asymptotic_min_units=300)
    kinds = {band.name: type(band.alpha).__name__ for band in result.bands if band.alpha is not None}
    assert set(kinds.values()) == {"DeltaInterval", "AlphaBootstrap"}, kinds
    for band in result.bands:
        if band.alpha is not None:
            assert isinstance(band.alpha, DeltaInterval) == (band.n_units >= 300)
            assert band.alpha.low <= band.alpha.estimate <= band.alpha.high
