"""Issue 24 (the dashboard's first computation): the consensus service's faster paths against the code they
replaced, to the last bit.

* the labels come from PostgreSQL as one bytea of fixed-width big-endian rows (``loading._BYTES_SQL``);
  its parser is held against rows packed independently with ``struct``, and, on PostgreSQL, the query's
  columns against the ORM's on labels with every column at its extremes;
* the label shares count each image's labels per value once (``summary._per_image_value_counts``); the
  reference is the previous code, one ``(values == value).sum(axis=1)`` per value, kept verbatim below;
* alpha without each labeler takes the other labelers' counts off the panel's
  (``agreement.value_counts_without_each``); the reference is the previous path from the reliability data
  without the labeler (forced by giving the panel no counts).
"""

import itertools
import math
import struct
from unittest import mock

import numpy as np
import pytest
from django.db import connection
from hypothesis import given, settings
from hypothesis import strategies as st

from labeling.models import Label, Phase, Scale
from labeling.services.consensus import labelers, loading, summary
from labeling.services.consensus.numbers import clustered_share
from labeling.services.projects import project_create
from labeling.services.scales import scales_ensure_builtin
from metrics import agreement
from tests.factories import UserFactory, make_image, make_labelers


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.integers(1, 2**62),
            st.integers(1, 2**62),
            st.integers(0, 32767),
            st.integers(0, 32767),
            st.integers(0, 1),
            st.integers(0, 1),
            st.integers(0, 2**31 - 1),
        ),
        max_size=30,
    )
)
def test_label_bytes_parse_to_the_columns(rows):
    # Two int8 ids, then tone_low (bits 48-62), tone_high (33-47), uncertain (32), is_repeat (31), ms (0-30).
    payload = b"".join(
        struct.pack(">qqq", image, labeler, low << 48 | high << 33 | uncertain << 32 | repeat << 31 | ms)
        for image, labeler, low, high, uncertain, repeat, ms in rows
    )
    columns = loading._bytes_columns(payload)
    assert len(columns) == 7
    for position, column in enumerate(columns):
        assert column.dtype == np.int64
        assert column.tolist() == [row[position] for row in rows]


def test_no_label_bytes_give_empty_columns_and_a_cut_row_is_refused():
    assert [c.size for c in loading._bytes_columns(None)] == [0] * 7
    with pytest.raises(ValueError):
        loading._bytes_columns(struct.pack(">qqq", 1, 2, 3)[:-1])


@pytest.mark.django_db
@pytest.mark.skipif(connection.vendor != "postgresql", reason="the packed query is PostgreSQL's (CI stage 2)")
def test_the_packed_label_query_answers_the_orm_columns_at_every_extreme():
    scales_ensure_builtin()
    lead = UserFactory()
    project = project_create(
        name="packed", scale=Scale.objects.get(kind=Scale.Kind.MONK, is_builtin=True), created_by=lead
    )
    phase = project.phases.get(kind=Phase.Kind.MAIN)
    team = make_labelers(project)
    images = [make_image(project, colour=(100 + i, 90, 80)) for i in range(3)]
    # Every column at its smallest and largest stored value (tones are checked non-negative smallints,
    # the time a non-negative integer), skips (no tone), repeats and uncertain answers.
    extremes = [
        (None, None, False, False, 0),
        (32767, 32767, True, True, 2**31 - 1),
        (1, None, True, False, 1),
        (0, 32767, False, True, 2**30),
        (10, 9, False, False, 123_456),
    ]
    Label.objects.bulk_create(
        Label(
            phase=phase,
            image=image,
            labeler=labeler,
            tone_low=low,
            tone_high=high,
            uncertain=unc,
            is_repeat=rep,
            time_spent_ms=ms,
        )
        for (image, labeler), (low, high, unc, rep, ms) in zip(
            itertools.product(images, team), itertools.cycle(extremes), strict=False
        )
    )

    def rows(columns):
        return sorted(zip(*(c.tolist() for c in columns), strict=True))

    packed = loading._label_columns(phase)
    assert len(rows(packed)) == 12
    assert rows(packed) == rows(loading._orm_columns(phase))


def _values(seed, n_images, n_labelers, missing, half, n_tones=10):
    rng = np.random.default_rng(seed)
    truth = rng.integers(1, n_tones + 1, size=n_images)
    values = np.clip(truth[:, None] + rng.integers(-2, 3, size=(n_images, n_labelers)), 1, n_tones).astype(float)
    if half:
        values = values + 0.5 * ((rng.random(values.shape) < 0.25) & (values < n_tones))
    values[rng.random(values.shape) < missing] = np.nan
    return values


def _reference_share_intervals(result, values, categories, n_tones):
    """``summary._add_share_intervals`` before issue 24 (commit 53e5535), verbatim."""
    present = ~np.isnan(values)
    per_image = present.sum(axis=1).astype(np.float64)
    result["shares"] = [
        clustered_share((values == value).sum(axis=1), per_image, unit="images with a valid label", of_labels=True)
        for value in categories
    ]
    tone_shares = []
    for tone in range(1, n_tones + 1):
        whole = (values == tone).sum(axis=1)
        halves = ((values == tone - 0.5) | (values == tone + 0.5)).sum(axis=1)
        tone_shares.append(
            clustered_share(whole + halves / 2, per_image, unit="images with a valid label", of_labels=True)
        )
    result["tone_share_intervals"] = tone_shares


def _equal(a, b):
    """Nested dicts and lists equal, floats bit for bit (NaN equal to NaN)."""
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            _equal(a[key], b[key])
    elif isinstance(a, list | tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _equal(x, y)
    elif isinstance(a, float) and math.isnan(a):
        assert isinstance(b, float) and math.isnan(b)
    else:
        assert type(a) is type(b) and a == b, (a, b)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n_images=st.integers(1, 80),
    n_labelers=st.integers(1, 5),
    missing=st.sampled_from([0.0, 0.3, 1.0]),
    half=st.booleans(),
    n_tones=st.sampled_from([6, 10]),
)
def test_share_intervals_equal_the_previous_code(seed, n_images, n_labelers, missing, half, n_tones):
    values = _values(seed, n_images, n_labelers, missing, half, n_tones)
    categories = loading.value_categories(n_tones, half)
    new, old = {}, {}
    summary._add_share_intervals(new, values, categories, n_tones)
    _reference_share_intervals(old, values, categories, n_tones)
    _equal(new, old)


def _phase_labels(values, seed):
    rng = np.random.default_rng(seed)
    n_images, n_labelers = values.shape
    labelled = ~np.isnan(values) | (rng.random(values.shape) < 0.1)
    first = np.floor(values)
    second = np.where(values % 1 > 0, np.ceil(values), np.nan)
    labeler_ids = np.arange(11, 11 + n_labelers)
    rows = np.flatnonzero(labelled.ravel())
    return loading.PhaseLabels(
        image_ids=np.arange(1, n_images + 1),
        labeler_ids=labeler_ids,
        first=first,
        second=second,
        uncertain=rng.random(values.shape) < 0.1,
        labelled=labelled,
        row_labeler=labeler_ids[rows % n_labelers],
        row_skip=np.isnan(first.ravel()[rows]),
        row_uncertain=rng.random(rows.size) < 0.1,
        row_repeat=np.zeros(rows.size, dtype=bool),
        row_seconds=rng.random(rows.size) * 30,
    )


@pytest.mark.parametrize(
    ("n_images", "missing", "clustered_by", "seed"),
    # The BCa bootstrap (below DELTA_MIN_UNITS units), the delta method (above), with and without subjects,
    # and a labeler whose values nobody else gave.
    [(60, 0.1, None, 1), (400, 0.2, 2, 2), (2600, 0.1, None, 3), (4500, 0.15, 2, 4), (90, 0.6, None, 5)],
)
def test_labeler_rows_equal_the_previous_path(n_images, missing, clustered_by, seed):
    values = _values(seed, n_images, 4, missing, True)
    if seed == 5:
        values[0, 0] = 9.5  # only labeler 0 gave 9.5
        values[1:, 0] = np.where(values[1:, 0] == 9.5, 9.0, values[1:, 0])
        values[:, 1:] = np.where(values[:, 1:] == 9.5, 9.0, values[:, 1:])
    data = _phase_labels(values, seed)
    categories = loading.value_categories(10, True)
    invalid = np.zeros(values.shape, dtype=bool)
    clusters = None if clustered_by is None else np.arange(n_images) // clustered_by
    new = labelers.labelers_statistics(data, data.values, categories, invalid, None, clusters=clusters)
    with mock.patch.object(agreement, "value_counts_without_each", lambda reliability: None):
        old = labelers.labelers_statistics(data, data.values, categories, invalid, None, clusters=clusters)
    _equal(new, old)
    assert any(row["alpha_without"]["low"] is not None for row in new)  # an interval was compared
