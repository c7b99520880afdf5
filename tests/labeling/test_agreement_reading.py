"""Agreement read from its interval, with a floor (issue 22): no coefficient below 30 units, a reading
only where the whole 95% interval supports it, a conclusive interval shown whatever its width."""

import numpy as np
import pytest

from labeling.services.consensus import numbers
from labeling.services.consensus.summary import alpha_block
from metrics.agreement import ALPHA_RELIABLE, alpha_q, read_alpha_interval, value_counts


def _panel(n_images: int, offsets, noise: float, seed: int = 0):
    """Four labelers with fixed personal offsets and noise on an MST-like 1-10 scale, 10% missing."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(2, 10, n_images)
    labels = np.clip(np.round(truth + np.asarray(offsets)[:, None] + rng.normal(0, noise, (4, n_images))), 1, 10)
    labels[rng.random(labels.shape) < 0.1] = np.nan
    domain, counts = value_counts(labels, np.arange(1, 11, dtype=float))
    n_2plus = int((counts.sum(axis=1) >= 2).sum())
    return counts, domain, n_2plus


def test_below_the_floor_only_counts_are_shown():
    counts, domain, n = _panel(12, [0, 0, 0, 0], 0.6)
    assert 5 <= n < numbers.COEFFICIENT_MIN_UNITS == 30
    block = alpha_block(counts, domain, n)
    for level in ("ordinal", "interval"):
        stat = block[level]
        assert stat["value"] is None and stat["low"] is None and stat["high"] is None
        assert stat["reason"].startswith(f"counts only: n={n} images with 2+ labels")
    assert block["ordinal"]["interpretation"] is None
    # The same rule for every coefficient (kappas, test-retest): nothing below the floor.
    kappa = numbers.coefficient_stat(0.95, 0.91, 0.98, 6, unit="repeated images")
    assert kappa["value"] is None and kappa["low"] is None and "counts only: n=6 repeated images" in kappa["reason"]


@pytest.mark.parametrize("seed", range(6))
def test_the_reading_comes_from_the_interval_never_from_the_point(seed):
    counts, domain, n = _panel(40, [0, 0.4, -0.4, 0.2], 0.7, seed=seed)
    assert n >= 30
    block = alpha_block(counts, domain, n)
    ordinal = block["ordinal"]
    assert ordinal["value"] is not None
    assert ordinal["interpretation"] == read_alpha_interval(ordinal["low"], ordinal["high"])
    if ordinal["interpretation"] == "reliable":
        assert ordinal["low"] >= ALPHA_RELIABLE
    # Hayes & Krippendorff's q is given beside it, and agrees with the interval's side.
    q = ordinal["q"]
    assert 0 <= q["tentative"] <= q["reliable"] <= 1
    if ordinal["low"] >= ALPHA_RELIABLE:
        assert q["reliable"] < 0.05


def test_a_point_above_800_with_a_low_interval_is_not_called_reliable():
    # alpha about .82 on 30-40 images: the point alone read "reliable" before.
    found = False
    for seed in range(40):
        counts, domain, n = _panel(34, [0, 0.3, -0.3, 0], 0.75, seed=seed)
        ordinal = alpha_block(counts, domain, n)["ordinal"]
        if ordinal["value"] is not None and ordinal["value"] >= ALPHA_RELIABLE and ordinal["low"] < ALPHA_RELIABLE:
            assert ordinal["interpretation"] != "reliable"
            found = True
            break
    assert found, "no seed gave a point above .800 with a lower bound below it"


def test_a_conclusive_interval_is_shown_whatever_its_width():
    wide_and_low = numbers.coefficient_stat(0.2, -0.3, 0.6, 40, conclusive_below=0.667)
    assert wide_and_low["value"] == 0.2 and not wide_and_low["too_wide"]
    assert read_alpha_interval(wide_and_low["low"], wide_and_low["high"]) == "not reliable"
    # The same interval reaching .667 is not conclusive: too little data, with its interval kept.
    wide = numbers.coefficient_stat(0.5, 0.1, 0.7, 40, conclusive_below=0.667)
    assert wide["value"] is None and wide["too_wide"] and (wide["low"], wide["high"]) == (0.1, 0.7)


def test_q_is_the_share_of_resamples_below_the_threshold():
    rng = np.random.default_rng(3)
    draws = rng.normal(0.7, 0.05, 4000)
    assert alpha_q(draws, 0.7) == pytest.approx(0.5, abs=0.03)
    assert alpha_q(draws, 0.8) == pytest.approx(0.977, abs=0.01)
    with pytest.raises(ValueError):
        read_alpha_interval(0.9, 0.8)
