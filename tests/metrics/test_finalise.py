"""Tests for metrics.finalise.final_tones (no database).

The property tests compare every field, image by image, with a plain Python
computation: NumPy statistics on the image's valid values and
``metrics.agreement.image_consensus`` on its selections, so that a change of a
consensus rule there (e.g. of ``n_connected_groups``) shows up here.
"""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metrics.agreement import image_consensus
from metrics.finalise import AGGREGATIONS, TIE_RULES, final_tones
from metrics.rounding import round_half_up

FLOAT_FIELDS = ("mean", "median", "mode", "std", "min", "max", "final_value")
INT_FIELDS = (
    "n_labels",
    "n_valid",
    "n_skipped",
    "n_uncertain",
    "mode_count",
    "final_tone",
    "n_unique_values",
    "n_connected_groups",
)
BOOL_FIELDS = (
    "complete_consensus",
    "overlap_consensus",
    "near_consensus",
    "any_uncertainty",
    "has_invalid_annotation",
)
CONSENSUS_FIELDS = (*BOOL_FIELDS, "n_unique_values", "n_connected_groups")


def selection(low: int, high: int):
    """The label as ``image_consensus`` takes it."""
    if low == 0:
        return None
    return low if high == 0 else (low, high)


def reference_image(lows, highs, flags, aggregation, tie):
    """One image's fields, computed the plain way."""
    result = image_consensus([selection(lo, hi) for lo, hi in zip(lows, highs)], uncertain=list(flags))
    values = [lo if hi == 0 else lo + 0.5 for lo, hi in zip(lows, highs) if lo > 0 and (hi == 0 or hi == lo + 1)]
    expected = {name: getattr(result, name) for name in CONSENSUS_FIELDS}
    expected["n_labels"] = sum(1 for lo in lows if lo > 0)
    expected["n_valid"] = len(values)
    expected["n_skipped"] = sum(1 for lo in lows if lo == 0)
    expected["n_uncertain"] = sum(1 for lo, flag in zip(lows, flags) if lo > 0 and flag)
    if not values:
        expected.update(dict.fromkeys(("mean", "median", "mode", "std", "min", "max", "final_value"), np.nan))
        expected.update(mode_count=0, final_tone=-1)
        return expected
    array = np.array(values)
    counts = {value: values.count(value) for value in set(values)}
    top = max(counts.values())
    tied = sorted(value for value, n in counts.items() if n == top)
    exact_mean = Fraction(sum(Fraction(v) for v in values), len(values))
    mode = {
        "lower": tied[0],
        "higher": tied[-1],
        "nearest_mean": min(tied, key=lambda v: (abs(Fraction(v) - exact_mean), v)),
    }[tie]
    expected.update(
        mean=float(np.mean(array)),
        median=float(np.median(array)),
        std=float(np.std(array)),
        min=min(values),
        max=max(values),
        mode=mode,
        mode_count=top,
    )
    expected["final_value"] = expected[aggregation]
    expected["final_tone"] = round_half_up(expected["final_value"])
    return expected


def check_against_reference(image_index, low, high, uncertain, n_images, aggregation, tie):
    result = final_tones(image_index, low, high, uncertain, n_images=n_images, aggregation=aggregation, tie=tie)
    assert set(result) == {*FLOAT_FIELDS, *INT_FIELDS, *BOOL_FIELDS}
    for name, array in result.items():
        assert array.shape == (n_images,), name
    for name in FLOAT_FIELDS:
        assert result[name].dtype == np.float64, name
    for name in INT_FIELDS:
        assert result[name].dtype == np.int64, name
    for name in BOOL_FIELDS:
        assert result[name].dtype == np.bool_, name
    image_index, low, high, uncertain = map(np.asarray, (image_index, low, high, uncertain))
    rows = []
    for image in range(n_images):
        mine = image_index == image
        rows.append(reference_image(low[mine], high[mine], uncertain[mine], aggregation, tie))
    # One comparison per field over every image (a call per image and field was most of this test's time);
    # a mismatch names its first image.
    for name in (*INT_FIELDS, *BOOL_FIELDS):
        expected = np.array([row[name] for row in rows], dtype=result[name].dtype)
        wrong = np.flatnonzero(result[name] != expected)
        assert wrong.size == 0, (int(wrong[0]), name, result[name][wrong[0]], expected[wrong[0]])
    for name in FLOAT_FIELDS:
        expected = np.array([row[name] for row in rows], dtype=np.float64)
        np.testing.assert_allclose(result[name], expected, rtol=1e-12, equal_nan=True, err_msg=name)
        if name in ("mean", "median", "mode", "min", "max"):
            # Values that are sums of halves divided once are exact, like NumPy's.
            wrong = np.flatnonzero(~np.isnan(expected) & (result[name] != expected))
            assert wrong.size == 0, (int(wrong[0]), name, result[name][wrong[0]], expected[wrong[0]])


@st.composite
def label_arrays(draw):
    n_images = draw(st.integers(0, 6))
    if n_images == 0:
        return [], [], [], [], 0
    labels = draw(
        st.lists(
            st.tuples(
                st.integers(0, n_images - 1),
                st.integers(0, 7),  # 0: skip
                st.sampled_from(["single", "pair", "invalid"]),
                st.integers(2, 5),  # gap of an invalid pair
                st.booleans(),
            ),
            max_size=25,
        )
    )
    image_index, low, high, uncertain = [], [], [], []
    for image, tone, kind, gap, flag in labels:
        image_index.append(image)
        low.append(tone)
        high.append(0 if tone == 0 or kind == "single" else tone + (1 if kind == "pair" else gap))
        uncertain.append(flag)
    return image_index, low, high, uncertain, n_images


@settings(max_examples=300, deadline=None)
@given(arrays=label_arrays(), aggregation=st.sampled_from(AGGREGATIONS), tie=st.sampled_from(TIE_RULES))
def test_every_field_is_the_per_image_computation(arrays, aggregation, tie):
    check_against_reference(*arrays, aggregation=aggregation, tie=tie)


@pytest.mark.parametrize("tie", TIE_RULES)
@pytest.mark.parametrize("aggregation", AGGREGATIONS)
def test_seeded_random_release_matches_per_image_computation(aggregation, tie):
    rng = np.random.default_rng(2024)
    n_labels, n_images = 3000, 700  # some images get no label
    image_index = rng.integers(0, n_images, n_labels)
    low = rng.choice(np.arange(0, 11), n_labels, p=[0.1] + [0.09] * 10)
    kind = rng.choice(3, n_labels, p=[0.6, 0.3, 0.1])
    high = np.where(kind == 0, 0, low + np.where(kind == 1, 1, rng.integers(2, 6, n_labels)))
    high = np.where(low == 0, 0, high)
    uncertain = rng.random(n_labels) < 0.2
    check_against_reference(image_index, low, high, uncertain, n_images, aggregation, tie)


def test_typical_data_card_example():
    # [mid-deep+deep, mid-deep+deep, mid-deep, mid-deep] with mid-deep = 4, deep = 5.
    result = final_tones([0, 0, 0, 0], [4, 4, 4, 4], [5, 5, 0, 0], [False, False, False, False], n_images=1)
    fields = {name: array[0] for name, array in result.items()}
    assert fields["n_labels"] == fields["n_valid"] == 4
    assert fields["mean"] == 4.25
    assert fields["std"] == 0.25
    assert fields["mode"] == 4.0 and fields["mode_count"] == 2  # 4 and 4.5 tie twice each: the lower
    assert fields["final_tone"] == 4
    assert fields["overlap_consensus"] and fields["near_consensus"] and not fields["complete_consensus"]
    assert fields["n_unique_values"] == 2
    assert fields["n_connected_groups"] == 1
    assert not fields["has_invalid_annotation"] and not fields["any_uncertainty"]


def test_atypical_data_card_example():
    # [light+deep (invalid), mid-light+medium, light] with light = 1, ..., deep = 5.
    result = final_tones([0, 0, 0], [1, 2, 1], [5, 3, 0], [False, False, False], n_images=1)
    fields = {name: array[0] for name, array in result.items()}
    assert fields["n_labels"] == 3 and fields["n_valid"] == 2
    assert fields["mean"] == 1.75  # the card's 0.75 on its 0-based scale
    assert fields["min"] == 1.0 and fields["max"] == 2.5
    assert not fields["complete_consensus"] and not fields["overlap_consensus"] and not fields["near_consensus"]
    assert fields["has_invalid_annotation"]
    # The card says 2 connected groups: the invalid pair's tones count ({1, 2, 3} and {5}).
    expected = image_consensus([(1, 5), (2, 3), 1])
    assert fields["n_connected_groups"] == expected.n_connected_groups == 2


def test_tie_rules_on_constructed_ties():
    # Image 0: 1, 1, 2, 2, 5, 5 (mean 2.67): lower 1, higher 5, nearest the mean 2.
    # Image 1: 2, 2, 4, 4, 3 (mean 3): 2 and 4 equally near, so the lower.
    # Image 2: 3, 3.5 (mean 3.25): equally near; higher is the half step.
    image_index = [0] * 6 + [1] * 5 + [2] * 2
    low = [1, 1, 2, 2, 5, 5, 2, 2, 4, 4, 3, 3, 3]
    high = [0] * 12 + [4]
    flags = [False] * 13
    modes = {
        tie: final_tones(image_index, low, high, flags, n_images=3, aggregation="mode", tie=tie) for tie in TIE_RULES
    }
    assert modes["lower"]["mode"].tolist() == [1.0, 2.0, 3.0]
    assert modes["higher"]["mode"].tolist() == [5.0, 4.0, 3.5]
    assert modes["nearest_mean"]["mode"].tolist() == [2.0, 2.0, 3.0]
    assert modes["higher"]["final_tone"].tolist() == [5, 4, 4]  # 3.5 rounds half up
    for result in modes.values():
        assert result["mode_count"].tolist() == [2, 2, 1]
        np.testing.assert_array_equal(result["final_value"], result["mode"])


def test_aggregations_and_half_up_rounding():
    # Values 2, 3 (mean and median 2.5 -> 3) and an image with only a skip and an invalid pair.
    result = {
        aggregation: final_tones(
            [0, 0, 1, 1], [2, 3, 0, 1], [0, 0, 0, 4], [0, 0, 1, 0], n_images=2, aggregation=aggregation
        )
        for aggregation in AGGREGATIONS
    }
    assert result["mean"]["final_tone"].tolist() == [3, -1]
    assert result["median"]["final_tone"].tolist() == [3, -1]
    assert result["mode"]["final_tone"].tolist() == [2, -1]
    empty = {name: array[1] for name, array in result["mean"].items()}
    assert np.isnan(empty["final_value"]) and np.isnan(empty["std"])
    assert empty["n_labels"] == 1 and empty["n_valid"] == 0 and empty["n_skipped"] == 1
    assert empty["has_invalid_annotation"] and empty["any_uncertainty"] and empty["n_uncertain"] == 0
    assert empty["n_unique_values"] == 0
    assert empty["n_connected_groups"] == 2  # the invalid pair's tones 1 and 4 (issue 12)


def test_inputs_are_not_modified():
    image_index, low, high = np.array([1, 0, 1]), np.array([3, 2, 3]), np.array([4, 0, 0])
    uncertain = np.array([True, False, False])
    copies = [a.copy() for a in (image_index, low, high, uncertain)]
    final_tones(image_index, low, high, uncertain, n_images=2, aggregation="mode", tie="nearest_mean")
    for before, after in zip(copies, (image_index, low, high, uncertain)):
        np.testing.assert_array_equal(before, after)


@pytest.mark.parametrize(
    ("arguments", "options", "message"),
    [
        (([0, 0], [1], [0], [False]), {}, "same length"),
        (([[0]], [1], [0], [False]), {}, "1-D"),
        (([0], [1.5], [0], [False]), {}, "integers"),
        (([0], [1], [0], [2]), {}, "booleans"),
        (([1], [1], [0], [False]), {}, "image_index"),
        (([-1], [1], [0], [False]), {}, "image_index"),
        (([0], [-1], [0], [False]), {}, ">= 0"),
        (([0], [0], [3], [False]), {}, "skipped"),
        (([0], [3], [2], [False]), {}, "greater than low"),
        (([0], [3], [3], [False]), {}, "greater than low"),
        (([0], [2**21], [0], [False]), {}, "not supported"),
        (([0], [1], [0], [False]), {"aggregation": "max"}, "aggregation"),
        (([0], [1], [0], [False]), {"tie": "random"}, "tie"),
        (([0], [1], [0], [False]), {"n_images": -1}, "n_images"),
        (([0], [1], [0], [False]), {"n_images": 1.5}, "n_images"),
    ],
)
def test_bad_inputs_raise(arguments, options, message):
    with pytest.raises(ValueError, match=message):
        final_tones(*arguments, **{"n_images": 1, **options})


@pytest.mark.slow  # one million labels: CI runs it, bin/test --fast skips it
def test_one_million_labels():
    rng = np.random.default_rng(7)
    n_labels, n_images = 1_000_000, 250_000
    image_index = rng.permutation(np.repeat(np.arange(n_images), 4))
    low = rng.integers(0, 11, n_labels)
    high = np.where((low > 0) & (rng.random(n_labels) < 0.3), low + rng.integers(1, 3, n_labels), 0)
    uncertain = rng.random(n_labels) < 0.1
    for tie in TIE_RULES:
        result = final_tones(image_index, low, high, uncertain, n_images=n_images, aggregation="mode", tie=tie)
        assert (result["n_labels"] + result["n_skipped"] == 4).all()
        assert result["n_valid"].sum() == ((low > 0) & ((high == 0) | (high == low + 1))).sum()
        has = result["n_valid"] > 0
        assert (result["final_tone"][has] >= 1).all() and (result["final_tone"][~has] == -1).all()
