"""Issue 24 (the dashboard's first computation): the faster paths against the code they replaced, bit for bit.

* ``pairwise_agreement_counts`` counts agreeing pairs labeler pair by labeler pair when labelers are few;
  the items x values count matrix it used before (still the path for many labelers) is the reference.
* ``value_counts_without_each`` takes each labeler off the panel's counts; the reference is
  ``value_counts`` of the data without that labeler, and alpha's intervals (delta method and BCa
  bootstrap) from either must be the same numbers.
* distinct values and count patterns are found by a hash (pandas ``unique`` / ``factorize``) instead of
  ``np.unique``'s sort; the reference is ``np.unique`` itself, and alpha's delta-method interval on the
  same data with ``np.unique`` put back.
"""

from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metrics import agreement
from metrics.agreement import clustered


def _panel(seed, n_labelers, n_items, missing, half, n_tones=10):
    rng = np.random.default_rng(seed)
    truth = rng.integers(1, n_tones + 1, size=n_items)
    data = np.clip(truth + rng.integers(-2, 3, size=(n_labelers, n_items)), 1, n_tones).astype(np.float64)
    if half:
        data = data + 0.5 * (rng.random(data.shape) < 0.2) * (data < n_tones)
    data[rng.random(data.shape) < missing] = np.nan
    return data


@settings(max_examples=80, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n_labelers=st.integers(1, 7),
    n_items=st.integers(1, 60),
    missing=st.sampled_from([0.0, 0.2, 0.6, 1.0]),
    half=st.booleans(),
    tolerance=st.sampled_from([0.0, 0.5, 1.0, 2.0, -1.0]),
)
def test_pairwise_counts_by_labeler_pair_equal_the_count_matrix(seed, n_labelers, n_items, missing, half, tolerance):
    data = _panel(seed, n_labelers, n_items, missing, half)
    fast = clustered.pairwise_agreement_counts(data, tolerance)
    with mock.patch.object(clustered, "_PAIRS_BY_LABELER_MAX", -1):  # the count matrix, as before
        reference = clustered.pairwise_agreement_counts(data, tolerance)
    for new, old in zip(fast, reference, strict=True):
        assert new.dtype == old.dtype and new.shape == old.shape
        assert np.array_equal(new, old)  # bit for bit (whole numbers)


def test_pairwise_counts_fast_path_is_taken_and_counts_pairs():
    data = np.array([[1, 2, 3, np.nan], [1, 3, 3, 4], [2, 2, np.nan, np.nan]])
    agreeing, pairs = clustered.pairwise_agreement_counts(data, 0.0)
    assert agreeing.tolist() == [1.0, 1.0, 1.0, 0.0] and pairs.tolist() == [3.0, 3.0, 1.0, 0.0]
    agreeing, _ = clustered.pairwise_agreement_counts(data, 1.0)
    assert agreeing.tolist() == [3.0, 3.0, 1.0, 0.0]


@settings(max_examples=80, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n_labelers=st.integers(1, 6),
    n_items=st.integers(1, 50),
    missing=st.sampled_from([0.0, 0.3, 0.7, 1.0]),
    half=st.booleans(),
)
def test_value_counts_without_each_equal_value_counts_of_the_others(seed, n_labelers, n_items, missing, half):
    data = _panel(seed, n_labelers, n_items, missing, half)
    got = agreement.value_counts_without_each(data)
    assert len(got) == n_labelers
    for position, (domain, counts) in enumerate(got):
        ref_domain, ref_counts = agreement.value_counts(np.delete(data, position, axis=0))
        assert domain.dtype == ref_domain.dtype and np.array_equal(domain, ref_domain)
        assert counts.dtype == ref_counts.dtype and counts.shape == ref_counts.shape
        assert np.array_equal(counts, ref_counts)


def test_a_value_only_the_removed_labeler_gave_leaves_the_domain():
    data = np.array([[1.0, 2.0, 9.0], [1.0, 2.0, 2.0], [1.0, np.nan, 2.0]])
    domain, counts = agreement.value_counts_without_each(data)[0]
    assert domain.tolist() == [1.0, 2.0] and counts.tolist() == [[2, 0], [0, 1], [0, 2]]


def _same(a, b):
    """Every field of two interval results equal (NaN equal to NaN), bit for bit."""
    assert type(a) is type(b)
    for field in ("estimate", "low", "high", "se", "n_units"):
        if hasattr(a, field):
            x, y = getattr(a, field), getattr(b, field)
            assert (x == y) or (x != x and y != y), (field, x, y)
    if hasattr(a, "resampled"):
        assert np.array_equal(a.resampled, b.resampled, equal_nan=True)


@pytest.mark.parametrize(
    ("n_items", "clustered_by"),
    [(40, None), (300, None), (300, 3), (2500, None), (2500, 2)],  # bootstrap below 2,000 units, delta above
)
def test_alpha_without_each_from_the_panel_counts_is_the_same_interval(n_items, clustered_by):
    data = _panel(n_items, 4, n_items, 0.15, True)
    clusters = None if clustered_by is None else np.arange(n_items) // clustered_by
    for position, (domain, counts) in enumerate(agreement.value_counts_without_each(data)):
        others = np.delete(data, position, axis=0)
        old = agreement.alpha_intervals(
            others, ("ordinal", "interval"), n_resamples=200, seed=0, clusters=clusters, min_units=2000
        )
        new = agreement.alpha_intervals(
            None,
            ("ordinal", "interval"),
            n_resamples=200,
            seed=0,
            value_domain=domain,
            counts=counts,
            clusters=clusters,
            min_units=2000,
        )
        for level in old:
            _same(new[level], old[level])


# --- kappa: category positions by table lookup (issue 24) against the binary search ----------------------


@settings(max_examples=120, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(0, 40),
    step=st.sampled_from([1.0, 0.5, 0.25, 0.1, 0.3]),
    start=st.sampled_from([-3.0, 0.0, 1.0, 7.5]),
    outside=st.booleans(),
    shuffled=st.booleans(),
)
def test_category_positions_by_lookup_equal_the_binary_search(seed, n, step, start, outside, shuffled):
    from metrics.agreement import kappa

    rng = np.random.default_rng(seed)
    cats = start + step * np.arange(int(rng.integers(1, 12)))
    if shuffled:
        cats = rng.permutation(cats)
    x = rng.choice(cats, size=n)
    y = rng.choice(cats, size=n)
    if outside and n:
        y[int(rng.integers(0, n))] = rng.choice([cats.max() + step, cats.min() + step / 3, 1e300, np.inf, np.nan])

    def run():
        try:
            return kappa._category_positions(x, y, cats)
        except ValueError as error:
            return str(error)

    fast = run()
    with mock.patch.object(kappa, "_category_grid", lambda sorted_cats, sorter: None):
        reference = run()
    if isinstance(reference, str):
        assert fast == reference
    else:
        for new, old in zip(fast, reference, strict=True):
            assert np.array_equal(new, old) and np.asarray(new).dtype.kind == np.asarray(old).dtype.kind


# --- bands: the consensus median by one sort ---------------------------------------------------------------


@settings(max_examples=120, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n_labelers=st.integers(1, 7),
    n_items=st.integers(0, 30),
    scale=st.sampled_from([1.0, 0.5, 1e-300, 1e300]),
    specials=st.booleans(),
)
def test_column_median_equals_nanmedian(seed, n_labelers, n_items, scale, specials):
    import warnings

    from metrics.agreement.bands import _column_nanmedian

    rng = np.random.default_rng(seed)
    data = np.round(rng.normal(size=(n_labelers, n_items)) * 4) * scale
    data[rng.random(data.shape) < 0.3] = np.nan
    if specials:
        data[rng.random(data.shape) < 0.1] = np.inf
        data[rng.random(data.shape) < 0.1] = -np.inf
    data = data[:, (~np.isnan(data)).any(axis=0)]  # agreement_by_band takes columns with values only
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        reference = np.nanmedian(data, axis=0) if data.shape[1] else np.zeros(0)
    # Equal values (a signed zero may come out either way; the consensus is only compared with band edges).
    assert np.array_equal(_column_nanmedian(data), reference, equal_nan=True)


# --- consensus_table: mode, complete and overlap consensus column by column ---------------------------------


@settings(max_examples=80, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n_images=st.integers(1, 40),
    n_labelers=st.integers(1, 6),
    missing=st.sampled_from([0.0, 0.3, 0.8]),
)
def test_consensus_table_flags_and_mode_per_image(seed, n_images, n_labelers, missing):
    rng = np.random.default_rng(seed)
    first = rng.integers(1, 11, size=(n_images, n_labelers)).astype(float)
    second = np.where(rng.random(first.shape) < 0.4, np.clip(first + rng.integers(-2, 3, first.shape), 1, 10), np.nan)
    first[rng.random(first.shape) < missing] = np.nan
    table = agreement.consensus_table(first, second)
    for image in range(n_images):
        lows, highs = [], []
        for a, b in zip(first[image], second[image], strict=True):
            if np.isnan(a):
                continue
            b = a if np.isnan(b) else b
            if abs(a - b) <= 1:
                lows.append(min(a, b))
                highs.append(max(a, b))
        values = [(lo + hi) / 2 for lo, hi in zip(lows, highs, strict=True)]
        row = table.iloc[image]
        several = len(values) >= 2
        assert row["complete_consensus"] == (several and len(set(lows)) == 1 and len(set(highs)) == 1)
        assert row["overlap_consensus"] == (several and max(lows) <= min(highs))
        if values:
            counts = {v: values.count(v) for v in values}
            best = max(counts.values())
            assert row["mode"] == min(v for v, c in counts.items() if c == best) and row["mode_count"] == best
        else:
            assert np.isnan(row["mode"]) and row["mode_count"] == 0


@settings(max_examples=80, deadline=None)
@given(
    values=st.lists(
        st.one_of(
            st.sampled_from([1.0, 1.5, 2.0, 10.0, 0.0, -0.0, np.inf, -np.inf]),
            st.floats(allow_nan=False, width=64),
        ),
        max_size=60,
    )
)
def test_distinct_values_by_hash_are_np_unique(values):
    from metrics.agreement._data import _distinct

    array = np.asarray(values, dtype=np.float64)
    assert np.array_equal(_distinct(array), np.unique(array))


def _np_unique_factorize(values, sort=True):
    """``pd.factorize`` as ``np.unique`` computes it (the code the hash replaced)."""
    distinct, codes = np.unique(values, return_inverse=True)
    return codes.ravel(), distinct


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n_labelers=st.integers(2, 6),
    n_items=st.integers(2, 80),
    missing=st.sampled_from([0.0, 0.3, 0.7]),
    half=st.booleans(),
    clustered_by=st.sampled_from([None, 2, 5]),
)
def test_delta_alpha_with_hashed_patterns_is_the_sorted_computation(
    seed, n_labelers, n_items, missing, half, clustered_by
):
    from metrics.agreement import asymptotic

    data = _panel(seed, n_labelers, n_items, missing, half)
    clusters = None if clustered_by is None else np.arange(n_items) // clustered_by
    hashed = agreement.delta_alpha_levels(data, ("ordinal", "interval"), clusters=clusters)
    with mock.patch.object(asymptotic.pd, "factorize", _np_unique_factorize):
        sorted_ = agreement.delta_alpha_levels(data, ("ordinal", "interval"), clusters=clusters)
    for level in ("ordinal", "interval"):
        a, b = hashed[level], sorted_[level]
        for field in ("estimate", "low", "high", "se"):
            x, y = getattr(a, field), getattr(b, field)
            assert (np.isnan(x) and np.isnan(y)) or x == y, (level, field, x, y)
        assert a.n_units == b.n_units
