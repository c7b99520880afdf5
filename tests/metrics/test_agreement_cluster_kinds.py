"""The lean grouping of identical clusters (issue 25) against the matrix it replaced, to the last bit.

``bootstrap._cluster_kinds`` finds the distinct clusters' contributions a block of items at a time, without
the clusters x cells matrix that ``bootstrap_alpha_levels`` and ``bootstrap_cohen_kappa`` built and gave to
``np.unique(axis=0)`` (76 MB at 50,000 subjects, and sorted copies of it). The reference below is that
code as it was (commit 298cd4f), kept verbatim: the kinds, their order, their frequencies and every bit of
their contributions must be its, and so must every number of the bootstraps that use them.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metrics import agreement
from metrics.agreement import bootstrap


def reference_kinds(cluster_index, n_columns, item_rows, block=2_000_000):
    """The clusters x cells matrix summed with np.add.at, item blocks in item order, then np.unique(axis=0)."""
    per_cluster = np.zeros((int(cluster_index.max()) + 1, n_columns))
    n_items = cluster_index.size
    step = max(1, block // max(n_columns, 1))
    for start in range(0, n_items, step):
        items = np.arange(start, min(start + step, n_items))
        np.add.at(per_cluster, cluster_index[start : start + step], item_rows(items))
    return np.unique(per_cluster, axis=0, return_counts=True)


def upper_rows(counts):
    """bootstrap_alpha_levels' upper_contributions of an items x values count matrix."""
    rows, cols = np.triu_indices(counts.shape[1])

    def item_rows(items):
        c = counts[items].astype(np.float64)
        upper = c[:, rows] * c[:, cols]
        upper[:, rows == cols] -= c
        upper /= (c.sum(axis=1) - 1)[:, None]
        return upper

    return item_rows, rows.size


def clustered_counts(rng, n_subjects, n_values, photos_max=6):
    """Items x values counts (2-4 labels each) in clusters: some subjects copied whole (identical clusters),
    some with the same photos in another order, the items shuffled (a cluster's items are not adjacent)."""
    photos = rng.integers(1, photos_max + 1, size=n_subjects)
    n_items = int(photos.sum())
    labels = rng.integers(2, 5, size=n_items)
    truth = np.repeat(rng.integers(0, n_values, size=n_subjects), photos)
    counts = np.zeros((n_items, n_values), dtype=np.int8)
    for i in range(n_items):
        values = np.clip(truth[i] + rng.integers(-1, 2, size=labels[i]), 0, n_values - 1)
        np.add.at(counts[i], values, 1)
    subject = np.repeat(np.arange(n_subjects), photos)
    # Copies of whole subjects (same rows, same order), and copies with their photos reversed.
    copied = rng.choice(n_subjects, size=max(1, n_subjects // 3), replace=True)
    extra_counts, extra_subject = [counts], [subject]
    for k, s in enumerate(copied):
        rows = counts[subject == s]
        extra_counts.append(rows[::-1] if k % 2 else rows)
        extra_subject.append(np.full(len(rows), n_subjects + k))
    counts, subject = np.concatenate(extra_counts), np.concatenate(extra_subject)
    order = rng.permutation(subject.size)
    return counts[order], subject[order]


def assert_same_kinds(parts, frequency, reference):
    ref_contributions, ref_frequency = reference
    assert frequency.dtype == ref_frequency.dtype
    np.testing.assert_array_equal(frequency, ref_frequency)
    dense = parts.rows(0, parts.shape[0])
    assert dense.shape == ref_contributions.shape
    # Bit for bit (a float compare would let -0.0 and 0.0 pass).
    np.testing.assert_array_equal(dense.view(np.int64), ref_contributions.view(np.int64))


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("block_items", [1, 7, 4_000])
def test_cluster_kinds_are_the_matrix_kinds_bit_for_bit(seed, block_items, monkeypatch):
    monkeypatch.setattr(bootstrap, "_CLUSTER_BLOCK_ITEMS", block_items)
    rng = np.random.default_rng(seed)
    counts, subject = clustered_counts(rng, int(rng.integers(1, 120)), int(rng.integers(2, 12)))
    _, cluster_index = np.unique(subject, return_inverse=True)
    item_rows, n_columns = upper_rows(counts)
    parts, frequency = bootstrap._cluster_kinds(cluster_index, n_columns, item_rows)
    assert_same_kinds(parts, frequency, reference_kinds(cluster_index, n_columns, item_rows))
    assert frequency.sum() == np.unique(subject).size
    # The copies are found: fewer kinds than clusters.
    assert parts.shape[0] < frequency.sum()


@settings(max_examples=60, deadline=None)
@given(
    data=st.lists(
        st.tuples(st.integers(0, 8), st.lists(st.integers(0, 4), min_size=2, max_size=5)), min_size=1, max_size=60
    ),
    n_values=st.integers(2, 5),
)
def test_cluster_kinds_on_any_clusters(data, n_values):
    """Any clusters of any items (values clipped to the domain), however the clusters interleave."""
    subject = np.array([s for s, _ in data])
    counts = np.zeros((len(data), n_values), dtype=np.int8)
    for i, (_, values) in enumerate(data):
        np.add.at(counts[i], np.minimum(values, n_values - 1), 1)
    _, cluster_index = np.unique(subject, return_inverse=True)
    item_rows, n_columns = upper_rows(counts)
    parts, frequency = bootstrap._cluster_kinds(cluster_index, n_columns, item_rows)
    assert_same_kinds(parts, frequency, reference_kinds(cluster_index, n_columns, item_rows))


def _with_reference_kinds(monkeypatch):
    """Make the bootstraps use the matrix and np.unique (the code before issue 25) for their kinds."""

    def kinds(cluster_index, n_columns, item_rows):
        return reference_kinds(cluster_index, n_columns, item_rows)

    monkeypatch.setattr(bootstrap, "_cluster_kinds", kinds)


@pytest.mark.parametrize("seed", range(6))
def test_subject_bootstrap_of_alpha_is_unchanged(seed, monkeypatch):
    """Every number of the subject bootstrap (estimate, BCa and percentile intervals, each resample) is
    the one the clusters x cells matrix gave, for ordinal and interval alpha; on data where many
    contributions are sparse (19 values) and where they are dense (3 values)."""
    rng = np.random.default_rng(100 + seed)
    n_values = (3, 19)[seed % 2]
    counts, subject = clustered_counts(rng, int(rng.integers(30, 200)), n_values)
    arguments = {"counts": counts, "levels": ("ordinal", "interval"), "n_resamples": 300, "seed": seed}
    lean = agreement.bootstrap_alpha_levels(**arguments, clusters=subject)
    with monkeypatch.context() as patch:
        _with_reference_kinds(patch)
        reference = agreement.bootstrap_alpha_levels(**arguments, clusters=subject)
    for level in ("ordinal", "interval"):
        a, b = lean[level], reference[level]
        assert a == b  # estimate, low, high, counts (the dataclass's compared fields)
        assert (a.percentile_low, a.percentile_high) == (b.percentile_low, b.percentile_high)
        np.testing.assert_array_equal(a.resampled, b.resampled)


@pytest.mark.parametrize("seed", range(4))
def test_clustered_kappa_is_unchanged(seed, monkeypatch):
    rng = np.random.default_rng(200 + seed)
    n = int(rng.integers(20, 300))
    first = rng.integers(1, 6, n).astype(float)
    second = np.clip(first + rng.integers(-1, 2, n), 1, 5)
    second[rng.random(n) < 0.05] = np.nan
    clusters = rng.integers(0, max(2, n // 3), n)
    arguments = {"categories": range(1, 6), "clusters": clusters, "n_resamples": 300, "seed": seed}
    lean = agreement.bootstrap_cohen_kappa(first, second, **arguments)
    with monkeypatch.context() as patch:
        _with_reference_kinds(patch)
        reference = agreement.bootstrap_cohen_kappa(first, second, **arguments)
    assert lean == reference


def test_sparse_contributions_from_entries_are_the_dense_ones():
    """_Contributions made from a matrix's nonzero entries holds the same sums, rows and total as made from
    the matrix (and keeps no matrix)."""
    rng = np.random.default_rng(5)
    dense = np.where(rng.random((400, 30)) < 0.05, rng.integers(1, 9, (400, 30)) / 3, 0.0)
    column, kind = np.nonzero(dense.T)
    lean = bootstrap._Contributions.from_entries(kind, column, dense.T[column, kind], dense.shape)
    full = bootstrap._Contributions(dense)
    assert lean.sparse and full.sparse and lean.dense is None
    weights = rng.integers(0, 4, size=(17, 400))
    np.testing.assert_array_equal(lean.sums(weights), full.sums(weights))
    np.testing.assert_array_equal(lean.rows(37, 212), dense[37:212])
    frequency = rng.integers(1, 5, size=400)
    np.testing.assert_array_equal(lean.total(frequency), full.total(frequency))
