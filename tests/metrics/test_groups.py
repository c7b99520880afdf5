"""Tests for metrics.groups (disaggregated metrics with Fairlearn MetricFrame semantics)."""

import dataclasses
import warnings

import numpy as np
import pandas as pd
import pytest
import sklearn.metrics as skm
from fairlearn.metrics import MetricFrame as FairlearnFrame
from fairlearn.metrics import false_positive_rate as fl_fpr
from fairlearn.metrics import selection_rate as fl_selection_rate
from hypothesis import given, settings
from hypothesis import strategies as st

from metrics.groups import (
    MetricFrame,
    MetricValue,
    SmallGroupWarning,
    accuracy,
    false_positive_rate,
    mean_absolute_error,
    mean_error,
    precision,
    recall,
    selection_rate,
)


def frame(**kwargs):
    kwargs.setdefault("min_group_size", 0)
    return MetricFrame(**kwargs)


def test_fairlearn_user_guide_example():
    # Fairlearn user guide, "Assessment / Metrics with Grouping" (v0.5 onwards):
    # overall recall 0.5; by group {'a': 0.0, 'b': 0.5, 'c': 0.75, 'd': 0.0}.
    y_true = [0, 1, 1, 1, 1, 0, 1, 0, 1, 0, 0, 0, 1, 1, 1, 1]
    y_pred = [0, 0, 1, 0, 1, 1, 1, 0, 0, 1, 1, 1, 1, 0, 0, 1]
    groups = [
        "d",
        "a",
        "c",
        "b",
        "b",
        "c",
        "c",
        "c",
        "b",
        "d",
        "c",
        "a",
        "b",
        "d",
        "c",
        "c",
    ]
    result = frame(
        metrics=skm.recall_score,
        y_true=y_true,
        y_pred=y_pred,
        sensitive_features=groups,
    )
    assert result.overall["recall_score"].value == 0.5
    assert result.by_group["recall_score"].to_dict() == {
        "a": 0.0,
        "b": 0.5,
        "c": 0.75,
        "d": 0.0,
    }
    assert result.group_min()["recall_score"].value == 0.0
    assert result.group_max()["recall_score"].value == 0.75
    assert result.difference()["recall_score"].value == 0.75
    assert result.ratio()["recall_score"].value == 0.0
    # The built-in recall agrees with scikit-learn's.
    builtin = frame(metrics=recall, y_true=y_true, y_pred=y_pred, sensitive_features=groups)
    assert builtin.by_group["recall"].to_dict() == {
        "a": 0.0,
        "b": 0.5,
        "c": 0.75,
        "d": 0.0,
    }


def _random_data(seed, n=400):
    rng = np.random.default_rng(seed)
    y_true = rng.integers(0, 2, n)
    y_pred = np.where(rng.random(n) < 0.7, y_true, 1 - y_true)
    tone = rng.choice(["light", "medium", "deep"], n, p=[0.5, 0.3, 0.2])
    sex = rng.choice(["f", "m"], n)
    return y_true, y_pred, tone, sex


PAIRS = {
    "accuracy": (accuracy, skm.accuracy_score),
    "recall": (recall, skm.recall_score),
    "precision": (precision, skm.precision_score),
    "false_positive_rate": (false_positive_rate, fl_fpr),
    "selection_rate": (selection_rate, fl_selection_rate),
}


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("intersectional", [False, True])
def test_matches_fairlearn_metricframe_on_random_data(seed, intersectional):
    y_true, y_pred, tone, sex = _random_data(seed)
    features = {"tone": tone, "sex": sex} if intersectional else {"tone": tone}
    ours = frame(
        metrics={name: pair[0] for name, pair in PAIRS.items()},
        y_true=y_true,
        y_pred=y_pred,
        sensitive_features=features,
    )
    theirs = FairlearnFrame(
        metrics={name: pair[1] for name, pair in PAIRS.items()},
        y_true=y_true,
        y_pred=y_pred,
        sensitive_features=pd.DataFrame(features),
    )
    expected_by_group = theirs.by_group
    got_by_group = ours.by_group
    for name in PAIRS:
        for key, value in expected_by_group[name].items():
            assert got_by_group.loc[key, name] == pytest.approx(value), (name, key)
        assert ours.overall[name].value == pytest.approx(theirs.overall[name])
        for method in ("between_groups", "to_overall"):
            assert ours.difference(method)[name].value == pytest.approx(theirs.difference(method=method)[name]), (
                name,
                method,
            )
            assert ours.ratio(method)[name].value == pytest.approx(theirs.ratio(method=method)[name]), (name, method)
        assert ours.group_min()[name].value == pytest.approx(theirs.group_min()[name])
        assert ours.group_max()[name].value == pytest.approx(theirs.group_max()[name])


def test_intersections_include_empty_combinations_with_a_reason():
    y = [1, 0, 1, 1]
    features = {"tone": ["light", "light", "deep", "deep"], "sex": ["f", "m", "f", "f"]}
    result = frame(metrics="accuracy", y_true=y, y_pred=y, sensitive_features=features)
    table = result.by_group
    assert list(table.index) == [
        ("deep", "f"),
        ("deep", "m"),
        ("light", "f"),
        ("light", "m"),
    ]
    assert np.isnan(table.loc[("deep", "m"), "accuracy"])
    assert table.loc[("deep", "m"), "accuracy_reason"] == "empty group: no samples"
    assert result.empty_groups == (("deep", "m"),)
    # Every NaN in a value column has a reason next to it.
    assert (table["accuracy"].isna() == table["accuracy_reason"].notna()).all()


def test_unobserved_categorical_levels_are_empty_groups():
    tone = pd.Categorical(["MST1", "MST1"], categories=["MST1", "MST5", "MST10"])
    result = frame(metrics="accuracy", y_true=[1, 0], y_pred=[1, 1], sensitive_features=tone)
    assert result.group_sizes == {"MST1": 2, "MST5": 0, "MST10": 0}
    assert result.values("accuracy")["MST10"] == MetricValue.undefined("empty group: no samples")


@pytest.mark.parametrize(
    ("metric", "y_true", "y_pred", "fragment"),
    [
        (recall, [0, 0, 0], [0, 1, 0], "no positives"),
        (precision, [1, 0, 1], [0, 0, 0], "no predicted positives"),
        (false_positive_rate, [1, 1], [1, 0], "no negatives"),
    ],
)
def test_zero_denominators_are_undefined_with_reason(metric, y_true, y_pred, fragment):
    value = metric(y_true, y_pred)
    assert value.value is None and fragment in value.reason
    assert np.isnan(float(value))


def test_sklearn_zero_division_fallback_becomes_undefined():
    # recall_score returns 0.0 with an UndefinedMetricWarning when a group has no positives;
    # that 0.0 must not pass for a measurement.
    result = frame(
        metrics=skm.recall_score,
        y_true=[1, 1, 0, 0],
        y_pred=[1, 0, 0, 1],
        sensitive_features=["a", "a", "b", "b"],
    )
    b = result.values("recall_score")["b"]
    assert not b.defined and "Recall is ill-defined" in b.reason
    # The undefined group is left out of the difference (one defined group remains).
    assert "fewer than two" in result.difference()["recall_score"].reason


def test_user_function_nan_and_errors_become_undefined():
    def always_nan(y_true, y_pred):
        return float("nan")

    def divides(y_true, y_pred):
        return 1 / (np.sum(y_true) - np.sum(y_true))

    def bad_value(y_true, y_pred):
        raise ValueError("needs two classes")

    result = frame(
        metrics=[always_nan, bad_value],
        y_true=[1, 0],
        y_pred=[1, 0],
        sensitive_features=["a", "b"],
    )
    assert result.overall["always_nan"].reason == "always_nan returned NaN"
    assert "ValueError: needs two classes" in result.overall["bad_value"].reason
    with np.errstate(divide="raise"):
        value = frame(metrics=divides, y_true=[1.0], y_pred=[1.0], sensitive_features=["a"]).overall["divides"]
    assert "FloatingPointError" in value.reason


def test_ratio_undefined_cases():
    zero = frame(
        metrics="selection_rate",
        y_true=[0, 0, 0, 0],
        y_pred=[0, 0, 0, 0],
        sensitive_features=["a", "a", "b", "b"],
    )
    assert "0/0" in zero.ratio()["selection_rate"].reason
    assert "overall value is 0" in zero.ratio("to_overall")["selection_rate"].reason
    signed = frame(
        metrics=mean_error,
        y_true=[1.0, 1.0, 1.0, 1.0],
        y_pred=[0.0, 1.5, 2.0, 3.0],
        sensitive_features=["a", "a", "b", "b"],
    )
    assert "non-negative" in signed.ratio()["mean_error"].reason
    assert signed.difference()["mean_error"].value == pytest.approx(1.5 - (-0.25))


def test_mean_error_and_absolute_error():
    assert mean_error([1.0, 2.0], [2.0, 1.0]).value == 0.0
    assert mean_absolute_error([1.0, 2.0], [2.0, 1.0]).value == 1.0
    assert mean_absolute_error([], []).reason == "empty group: no samples"


def test_pos_label_can_be_changed():
    yes_recall = dataclasses.replace(recall, pos_label="yes")
    assert yes_recall(["yes", "no", "yes"], ["yes", "yes", "no"]).value == 0.5


def test_small_groups_are_listed_and_warned_about():
    with pytest.warns(SmallGroupWarning, match="'b' \\(n=2\\)"):
        result = MetricFrame(
            metrics="accuracy",
            y_true=[1] * 12,
            y_pred=[1] * 12,
            sensitive_features=["a"] * 10 + ["b"] * 2,
            min_group_size=5,
        )
    assert result.small_groups == ("b",)
    assert result.by_group["small_group"].to_dict() == {"a": False, "b": True}


def test_no_warning_when_all_groups_are_large_enough():
    with warnings.catch_warnings():
        warnings.simplefilter("error", SmallGroupWarning)
        result = MetricFrame(
            metrics="accuracy",
            y_true=[1] * 60,
            y_pred=[1] * 60,
            sensitive_features=["a", "b"] * 30,
        )
    assert result.small_groups == ()


def test_missing_sensitive_values_are_rejected():
    with pytest.raises(ValueError, match="missing values"):
        frame(
            metrics="accuracy",
            y_true=[1, 1],
            y_pred=[1, 1],
            sensitive_features=["a", None],
        )


# -- bootstrap --------------------------------------------------------------------------------


def test_bootstrap_is_seeded_and_brackets_the_estimate():
    y_true, y_pred, tone, _ = _random_data(3, n=600)
    kwargs = {
        "metrics": ["accuracy", "recall"],
        "y_true": y_true,
        "y_pred": y_pred,
        "sensitive_features": tone,
        "n_boot": 300,
        "seed": 11,
    }
    first, second = frame(**kwargs), frame(**kwargs)
    pd.testing.assert_frame_equal(first.by_group, second.by_group)
    for name in ("accuracy", "recall"):
        for value in first.values(name).values():
            assert value.ci_low <= value.value <= value.ci_high
            assert value.n_boot_defined == 300
        diff = first.difference()[name]
        assert diff.ci_low <= diff.value <= diff.ci_high
    other = frame(**{**kwargs, "seed": 12})
    assert other.by_group["accuracy_ci_low"].tolist() != first.by_group["accuracy_ci_low"].tolist()


def test_bootstrap_interval_width_matches_binomial_standard_error():
    # Accuracy of a group of n = 400 with p = 0.7: a 95% interval is about
    # 2 * 1.96 * sqrt(0.21 / 400) = 0.0898 wide (normal approximation of the binomial).
    y_true = np.ones(400, dtype=int)
    y_pred = np.r_[np.ones(280, dtype=int), np.zeros(120, dtype=int)]
    result = frame(
        metrics="accuracy",
        y_true=y_true,
        y_pred=y_pred,
        sensitive_features=["g"] * 400,
        n_boot=2000,
        seed=0,
    )
    value = result.values("accuracy")["g"]
    assert value.ci_high - value.ci_low == pytest.approx(0.0898, rel=0.12)


def test_bootstrap_generic_callable_agrees_with_builtin_path():
    y_true, y_pred, tone, _ = _random_data(4, n=300)
    common = {
        "y_true": y_true,
        "y_pred": y_pred,
        "sensitive_features": tone,
        "n_boot": 100,
        "seed": 5,
    }
    fast = frame(metrics="accuracy", **common).values("accuracy")
    slow = frame(metrics={"accuracy": skm.accuracy_score}, **common).values("accuracy")
    for group in fast:
        # Same seed, same resamples: the two code paths give identical intervals.
        assert fast[group].ci_low == pytest.approx(slow[group].ci_low)
        assert fast[group].ci_high == pytest.approx(slow[group].ci_high)


@settings(max_examples=15, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 1), st.integers(0, 1), st.sampled_from(["a", "b", "c"])),
        min_size=1,
        max_size=40,
    ),
    st.randoms(use_true_random=False),
)
def test_never_crashes_and_is_invariant_to_group_label_order(rows, rnd):
    y_true, y_pred, groups = (list(c) for c in zip(*rows))
    metrics = [
        "accuracy",
        "recall",
        "precision",
        "false_positive_rate",
        "selection_rate",
    ]
    base = frame(metrics=metrics, y_true=y_true, y_pred=y_pred, sensitive_features=groups)
    relabel = dict(zip("abc", rnd.sample(["x", "y", "z"], 3)))
    renamed = frame(
        metrics=metrics,
        y_true=y_true,
        y_pred=y_pred,
        sensitive_features=[relabel[g] for g in groups],
    )
    for name in metrics:
        for method in ("between_groups", "to_overall"):
            for left, right in (
                (base.difference(method)[name], renamed.difference(method)[name]),
                (base.ratio(method)[name], renamed.ratio(method)[name]),
            ):
                assert left.reason == right.reason
                assert float(left) == pytest.approx(float(right), nan_ok=True)
                if left.defined:
                    assert left.value >= 0
        table = base.by_group
        assert (table[name].isna() == table[f"{name}_reason"].notna()).all()
