"""Tests for metrics.agreement.outlier_labels (the review rule) and metrics.rounding (no database)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metrics.agreement import OUTLIER_DISTANCE, outlier_labels
from metrics.rounding import round_half_up


def far_from_every_other(values, distance):
    """The rule as labeling/services/review.py wrote it before it moved to metrics."""
    result = []
    for position, value in enumerate(values):
        others = [w for j, w in enumerate(values) if j != position]
        result.append(bool(others) and min(abs(value - w) for w in others) >= distance)
    return result


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.sampled_from([1, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 9, 10]), max_size=8),
    distance=st.sampled_from([0.5, 1.0, 2.0, 3.0]),
)
def test_outlier_labels_is_the_review_rule(values, distance):
    assert outlier_labels(values, distance=distance).tolist() == far_from_every_other(values, distance)


def test_outlier_labels_examples():
    assert OUTLIER_DISTANCE == 2.0
    assert outlier_labels([]).tolist() == []
    assert outlier_labels([5]).tolist() == [False]
    assert outlier_labels([3, 5]).tolist() == [True, True]  # two labels 2 tones apart: both flagged
    assert outlier_labels([3, 4.5]).tolist() == [False, False]
    assert outlier_labels([2, 7, 7]).tolist() == [True, False, False]
    assert outlier_labels([2, 3, 3, 7], distance=5).tolist() == [False, False, False, False]


def test_outlier_labels_ignores_missing_values():
    assert outlier_labels([np.nan, 2, np.nan, 6]).tolist() == [False, True, False, True]
    assert outlier_labels([np.nan, 2]).tolist() == [False, False]
    with pytest.raises(ValueError, match="1-D"):
        outlier_labels([[1, 2], [3, 4]])


@pytest.mark.parametrize(
    ("value", "expected"),
    [(2.5, 3), (3.5, 4), (2.49, 2), (-2.5, -2), (-2.51, -3), (0.0, 0), (7, 7), (np.float64(4.5), 5)],
)
def test_round_half_up_scalars(value, expected):
    result = round_half_up(value)
    assert result == expected and type(result) is int


def test_round_half_up_arrays_keep_nan_and_shape():
    result = round_half_up(np.array([[0.5, 1.5], [np.nan, -0.5]]))
    assert result.dtype == np.float64 and result.shape == (2, 2)
    assert np.array_equal(result, [[1.0, 2.0], [np.nan, 0.0]], equal_nan=True)
    assert round_half_up([2.5, 3.5]).tolist() == [3.0, 4.0]
    with pytest.raises(ValueError, match="NaN"):
        round_half_up(math.nan)


@given(st.floats(-1e6, 1e6, allow_nan=False).map(lambda v: round(v * 4) / 4))  # quarter steps, as tone values
def test_round_half_up_matches_floor_of_value_plus_half(value):
    assert round_half_up(value) == math.floor(value + 0.5) == int(round_half_up(np.array([value]))[0])
