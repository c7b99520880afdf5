"""Comparing two runs (paired permutation test and bootstrap), the composition section, derived errors
and the report's figure files."""

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from metrics.compare import compare_errors
from metrics.dataset_bias import nsd
from metrics.discrepancy import fairness_discrepancy
from metrics.report import derive_errors, tone_composition

from .test_report_cli import _run, _tables

FAST = ("--permutations", "9", "--band-permutations", "99", "--uncertainty-draws", "5")


def _pair(rng, n=300, planted=0.0):
    tone = rng.integers(1, 11, n).astype(float)
    gender = rng.choice(["f", "m", "x"], n)
    body = rng.normal(0, 1, n)
    base = rng.gamma(2, 0.5, n)
    a = base + rng.normal(0, 0.3, n)
    b = base + rng.normal(0, 0.3, n) + planted * (tone >= 9)
    return a, b, gender, tone, body


@pytest.mark.slow  # a seeded simulation over many datasets (pytest.ini): CI runs it, bin/test --fast skips it
def test_compare_holds_its_nominal_rate_under_no_difference():
    rng = np.random.default_rng(11)
    runs = 150
    fired = {}
    for r in range(runs):
        a, b, gender, tone, body = _pair(rng)
        for change in compare_errors(
            a, b, gender=gender, skin_tone=tone, body_shape=body, n_permutations=99, n_boot=99, seed=r
        ):
            fired[change.name] = fired.get(change.name, 0) + change.significant
    assert set(fired) == {
        "mean_error",
        "gender",
        "skin_tone",
        "skin_tone_band_gap",
        "body_shape",
        "body_shape_band_gap",
    }
    for name, count in fired.items():
        # 5% nominal: 150 runs -> expected 7.5; a binomial 99.9% upper bound is about 17.
        assert count <= 17, (name, count)
    assert sum(fired.values()) >= 10  # it does fire sometimes: the test is not dead


def test_compare_finds_a_planted_deep_end_change():
    rng = np.random.default_rng(3)
    found = {"skin_tone": 0, "skin_tone_band_gap": 0, "gender": 0}
    for r in range(20):
        a, b, gender, tone, body = _pair(rng, planted=1.0)
        for change in compare_errors(a, b, gender=gender, skin_tone=tone, n_permutations=99, n_boot=99, seed=r):
            if change.name in found:
                found[change.name] += change.significant
            if change.name == "skin_tone":
                assert change.ci_low < change.change < change.ci_high
                assert change.change > 0
    assert found["skin_tone"] >= 19 and found["skin_tone_band_gap"] >= 19
    assert found["gender"] <= 4  # gender was not touched


def test_compare_values_match_the_report_scores():
    from metrics.unfairness import categorical_unfairness, continuous_unfairness

    rng = np.random.default_rng(0)
    a, b, gender, tone, body = _pair(rng, planted=0.5)
    two = np.where(gender == "x", "f", gender)
    changes = {c.name: c for c in compare_errors(a, b, gender=two, skin_tone=tone, n_permutations=9, n_boot=9)}
    assert changes["skin_tone"].a == pytest.approx(abs(continuous_unfairness(a, tone).score))
    assert changes["skin_tone"].b == pytest.approx(abs(continuous_unfairness(b, tone).score))
    # A fit tilted the other way is as unfair: the size of the score is compared.
    flipped = {c.name: c for c in compare_errors(a, a[::-1].copy(), skin_tone=tone, n_permutations=9, n_boot=9)}
    assert flipped["skin_tone"].b >= 0
    assert changes["gender"].b == pytest.approx(categorical_unfairness(b, two).score)
    assert changes["mean_error"].change == pytest.approx(b.mean() - a.mean())


def test_compare_refuses_bad_input():
    with pytest.raises(ValueError, match="differ in shape"):
        compare_errors([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="finite"):
        compare_errors([1, 2, np.nan], [1, 2, 3])
    with pytest.raises(ValueError, match="constant"):
        compare_errors([1, 2, 3], [1, 2, 3], skin_tone=[2, 2, 2])


def test_composition_matches_the_seed_metrics_and_names_a_missing_tone():
    rng = np.random.default_rng(2)
    tones = np.concatenate([rng.integers(1, 9, 2000), rng.choice([9.0, 9.5], 10)])
    part = tone_composition(tones, levels=10)
    counts = np.bincount(np.floor(tones + 0.5).astype(int) - 1, minlength=10)
    assert [r["n"] for r in part["tones"]] == counts.tolist()
    assert part["nsd"] == pytest.approx(nsd(counts))
    assert part["discrepancy_l2"] == pytest.approx(fairness_discrepancy(counts, "l2"))
    assert part["under_represented"] == [9, 10]
    assert part["least_represented"] in (9, 10)
    for row in part["tones"]:
        assert row["ci_low"] <= row["share"] <= row["ci_high"]
    balanced = tone_composition(np.repeat(np.arange(1, 11), 50), levels=10)
    assert balanced["under_represented"] == [] and balanced["nsd"] == pytest.approx(0)
    # Issue 20: a tone with 0 of 20 images is named (absent), never "not clearly under-represented".
    few = tone_composition([1] * 10 + [2] * 10, levels=10)
    assert few["absent"] == list(range(3, 11)) and few["tones"][2]["reading"] == "absent"
    assert few["under_represented"] == []  # 20 images cannot show it (upper bound 16%)
    with pytest.raises(ValueError, match="1..10"):
        tone_composition([0, 3], levels=10)


def test_derive_errors():
    assert derive_errors([1, 4], [2, 2], "regression").tolist() == [1.0, 2.0]
    assert derive_errors([1, "b"], ["1", "a"], "classification").tolist() == [0.0, 1.0]
    with pytest.raises(ValueError, match="unknown error kind"):
        derive_errors([1], [1], "ranking")


def test_report_writes_figures_as_png_and_svg_and_composition(tmp_path):
    attributes, predictions = _tables()
    assert _run(tmp_path, attributes, predictions, "--tone-levels", "10", *FAST, figures=True) == 0
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert len(report["figures"]) == 5
    for figure in report["figures"]:
        png = (tmp_path / "out" / figure["png"]).read_bytes()
        svg = (tmp_path / "out" / figure["svg"]).read_text()
        assert png.startswith(b"\x89PNG") and "<svg" in svg
    counts = pd.Series(attributes["skin_tone"]).round().value_counts()
    assert report["composition"]["n"] == 200
    assert report["composition"]["tones"][0]["n"] == counts.get(1.0, 0)
    assert any(line.startswith("Composition:") for line in report["summary"])
    # The same inputs give the same SVG (no timestamps).
    first = (tmp_path / "out" / report["figures"][1]["svg"]).read_text()
    assert _run(tmp_path, attributes, predictions, "--tone-levels", "10", *FAST) == 0
    assert (tmp_path / "out" / report["figures"][1]["svg"]).read_text() == first
    ks = stats.ks_2samp(
        predictions["error"][attributes["gender"] == "female"], predictions["error"][attributes["gender"] == "male"]
    )
    assert report["gender"]["seed_000"]["p_value"] == pytest.approx(ks.pvalue)


def test_report_scores_each_labelers_tones_alone(tmp_path, capsys):
    attributes, predictions = _tables()
    attributes["tone_min"] = attributes["skin_tone"] - 1
    attributes["tone_max"] = attributes["skin_tone"] + 1
    attributes["rater_a"] = attributes["skin_tone"]
    attributes["rater_b"] = np.where(np.arange(200) % 2 == 0, attributes["skin_tone"], np.nan)
    extra = ("--tone-min", "tone_min", "--tone-max", "tone_max", "--labeler-columns", "rater_a,rater_b", *FAST)
    assert _run(tmp_path, attributes, predictions, *extra) == 0
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    per_labeler = report["label_uncertainty"]["per_labeler"]
    assert per_labeler["rater_a"]["n"] == 200 and per_labeler["rater_b"]["n"] == 100
    assert per_labeler["rater_a"]["same"] is True  # the same tones as the report's: the same conclusion
    attributes["rater_b"] = attributes["rater_b"].astype(object)
    attributes.loc[3, "rater_b"] = "seven"
    assert _run(tmp_path, attributes, predictions, *extra) == 2
    assert "a labeler's tones" in capsys.readouterr().err
