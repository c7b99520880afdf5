"""``python -m metrics report`` on what a lead naturally has (issue 14): a categorical body shape and
groups too small to test (left out with a warning instead of a refusal)."""

import itertools
import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from metrics.__main__ import main
from metrics.report import ReportOptions, build_report
from metrics.unfairness import intersectional_unfairness

SHAPES = ["average", "heavy", "slim"]


def _tables(n=240, seed=0, shapes=SHAPES, heavy_gap=0.0):
    rng = np.random.default_rng(seed)
    ids = [f"img{i:04d}" for i in range(n)]
    shape = np.array(shapes, dtype=object)[np.arange(n) % len(shapes)]
    rng.shuffle(shape)
    attributes = pd.DataFrame(
        {
            "image_id": ids,
            "skin_tone": rng.integers(1, 11, n).astype(float),
            "gender": rng.choice(np.array(["female", "male"], dtype=object), n),
            "body_shape": shape,
        }
    )
    errors = rng.gamma(4.0, 0.25, n) + heavy_gap * (shape == "heavy")
    return attributes, pd.DataFrame({"image_id": ids, "error": errors})


def _run(tmp_path, attributes, predictions, *extra, skin_tone=True, gender=True, figures=False):
    attributes.to_csv(tmp_path / "attributes.csv", index=False)
    predictions.to_csv(tmp_path / "predictions.csv", index=False)
    argv = [
        "report",
        "--attributes",
        str(tmp_path / "attributes.csv"),
        "--predictions",
        str(tmp_path / "predictions.csv"),
        "--out",
        str(tmp_path / "out"),
        "--body-shape",
        "body_shape",
        "--no-progress",
        "--permutations",
        "19",
        "--band-permutations",
        "99",
        *([] if figures else ["--no-figures"]),
        *(["--skin-tone", "skin_tone", "--tone-levels", "10"] if skin_tone else []),
        *(["--gender", "gender"] if gender else []),
        *extra,
    ]
    return main(argv)


def _report(tmp_path):
    return json.loads((tmp_path / "out" / "report.json").read_text())


def _errors(capsys):
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines and all(line.startswith("error: ") for line in lines)
    assert "Traceback" not in "\n".join(lines)
    return lines


def test_categorical_body_shape_reports_per_shape_groups(tmp_path, capsys):
    attributes, predictions = _tables(heavy_gap=0.6)
    assert _run(tmp_path, attributes, predictions, figures=True) == 0
    out = capsys.readouterr().out
    assert "Body shape (body_shape) is treated as categorical" in out
    report = _report(tmp_path)
    part = report["body_shape"]
    assert part["treatment"] == "categorical"
    assert report["settings"]["body_shape_treatment"] == "categorical"
    assert {g["label"] for g in part["groups"]} == set(SHAPES) and part["left_out"] == []
    merged = attributes.merge(predictions, on="image_id")
    for group in part["groups"]:
        expected = merged.loc[merged.body_shape == group["label"], "error"]
        assert group["mean_error"] == pytest.approx(expected.mean()) and group["n"] == expected.size
        assert group["ci_low"] < group["mean_error"] < group["ci_high"]
    # Seed 000's pairwise KS tests and Holm correction, as for gender, reproduced beside the verdict.
    seed = part["seed_000"]
    assert seed["n_pairs"] == 3 and seed["correction"] == "Holm over 3 pairs"
    for pair in seed["pairs"]:
        a = merged.loc[merged.body_shape == pair["higher_error_group"], "error"]
        b = merged.loc[merged.body_shape == pair["lower_error_group"], "error"]
        assert pair["p_value"] == pytest.approx(stats.ks_2samp(a, b).pvalue)
    assert part["verdict"]["significant"] is True and part["verdict"]["worst_band"] == "heavy"
    assert seed["higher_error_group"] == "heavy"
    assert "bands" not in part and "trend" not in part
    # The clustering keeps body shapes apart and says how it encoded them.
    inter = report["intersectional"]["seed_000"]
    assert inter["body_shape_treatment"] == "categorical" and "one-hot" in inter["encoding"]
    assert inter["features"] == ["skin_tone"]
    page = (tmp_path / "out" / "report.html").read_text()
    assert "Body shape by group" in page and "treated as categorical" in page
    titles = [f["title"] for f in report["figures"]]
    assert "Error distributions by body shape" in titles and "Error against body shape" not in titles


def test_numeric_body_shape_stays_continuous(tmp_path):
    attributes, predictions = _tables()
    attributes["body_shape"] = np.random.default_rng(1).normal(0.3, 0.05, len(attributes))
    assert _run(tmp_path, attributes, predictions) == 0
    report = _report(tmp_path)
    assert report["body_shape"]["treatment"] == "continuous"
    assert "trend" in report["body_shape"] and "bands" in report["body_shape"]
    assert report["body_shape"]["bands"]["kind"] == "quantile"
    assert report["intersectional"]["seed_000"]["features"] == ["body_shape", "skin_tone"]
    assert report["intersectional"]["grid"]["factors"] == ["skin_tone", "body_shape"]
    assert any("treated as continuous" in line for line in report["summary"])


def test_numeric_codes_can_be_groups(tmp_path):
    attributes, predictions = _tables()
    attributes["body_shape"] = attributes["body_shape"].map({"slim": 1, "average": 2, "heavy": 3})
    assert _run(tmp_path, attributes, predictions, "--body-shape-kind", "categorical") == 0
    part = _report(tmp_path)["body_shape"]
    assert part["treatment"] == "categorical" and {g["label"] for g in part["groups"]} == {"1", "2", "3"}
    assert "--body-shape-kind categorical" in part["treatment_reason"]


def test_numbers_mixed_with_text_are_refused(tmp_path, capsys):
    attributes, predictions = _tables()
    attributes.loc[3, "body_shape"] = "0.31"
    assert _run(tmp_path, attributes, predictions) == 2
    line = _errors(capsys)[0]
    assert "body_shape" in line and "--body-shape-kind categorical" in line and "'0.31'" in line
    assert _run(tmp_path, attributes, predictions, "--body-shape-kind", "categorical") == 0


def test_group_of_one_is_warned_and_left_out(tmp_path, capsys):
    attributes, predictions = _tables(n=120)
    attributes.loc[7, "gender"] = "nonbinary"
    attributes.loc[11, "body_shape"] = "petite"
    assert _run(tmp_path, attributes, predictions) == 0
    out = capsys.readouterr().out
    assert "Warning: gender (gender): group 'nonbinary' has 1 row(s)" in out
    assert "group 'petite' has 1 row(s)" in out
    report = _report(tmp_path)
    assert len(report["warnings"]) == 2
    gender = report["gender"]
    assert {g["label"] for g in gender["groups"]} == {"female", "male"}
    assert gender["left_out"] == [
        {
            "group": "nonbinary",
            "n": 1,
            "mean_error": pytest.approx(predictions.loc[7, "error"]),
            "reason": "fewer than 2 rows: not tested",
        }
    ]
    merged = attributes.merge(predictions, on="image_id")
    female = merged.loc[merged.gender == "female", "error"]
    male = merged.loc[merged.gender == "male", "error"]
    assert gender["seed_000"]["p_value"] == pytest.approx(stats.ks_2samp(female, male).pvalue)
    assert "petite" not in {g["label"] for g in report["body_shape"]["groups"]}
    assert report["body_shape"]["left_out"][0]["group"] == "petite"
    # Every row stays in the other scores.
    assert report["inputs"]["n_samples"] == 120
    page = (tmp_path / "out" / "report.html").read_text()
    assert "Warnings" in page and "left out" in page


@pytest.mark.parametrize(
    "column,values",
    [("body_shape", ["slim"] * 29 + ["heavy"]), ("gender", ["female"] * 29 + ["other"])],
)
def test_nothing_left_to_test_is_a_clean_error(tmp_path, capsys, column, values):
    attributes, predictions = _tables(n=30)
    attributes[column] = values
    assert _run(tmp_path, attributes, predictions) == 2
    lines = _errors(capsys)
    assert len(lines) == 1
    assert "nothing left to test" in lines[0]
    assert f"'{values[-1]}' (1 row)" in lines[0] and f"'{values[0]}' (29 rows)" in lines[0]
    assert not (tmp_path / "out" / "report.json").exists()


def test_missing_attribute_values_are_left_out_of_that_attribute_only(tmp_path, capsys):
    # Issue 20: an evaluation failed outright when any image lacked gender or body shape.
    attributes, predictions = _tables()
    attributes.loc[4, "body_shape"] = None
    attributes.loc[[5, 6], "gender"] = ""
    attributes.loc[9, "skin_tone"] = np.nan
    assert _run(tmp_path, attributes, predictions) == 0
    report = _report(tmp_path)
    warned = " ".join(report["warnings"])
    assert "'body_shape': 1 of 240 row(s) have no value (e.g. image_id img0004)" in warned
    assert "'gender': 2 of 240" in warned and "'skin_tone': 1 of 240" in warned
    assert report["body_shape"]["n"] == 239 and report["gender"]["n"] == 238 and report["skin_tone"]["n"] == 239
    assert report["inputs"]["n_samples"] == 240 and report["performance"]["overall"]["n"] == 240
    assert report["intersectional"]["grid"]["n"] == 238
    # A value that is there but not a number is still refused, named.
    attributes["skin_tone"] = attributes["skin_tone"].astype(object)
    attributes.loc[9, "skin_tone"] = "dark"
    assert _run(tmp_path, attributes, predictions) == 2
    assert "'dark'" in _errors(capsys)[0]


def test_clustering_with_strata_equals_one_hot():
    """The strata shortcut gives exactly DBSCAN on standardised one-hot body shape plus skin tone
    (the one-hot path runs scikit-learn's DBSCAN: more than two features)."""
    rng = np.random.default_rng(5)
    n = 480
    shape = rng.choice(np.array(SHAPES + ["athletic"], dtype=object), n)
    tone = rng.integers(1, 11, n).astype(float)
    errors = np.where((shape == "heavy") & (tone >= 8), 2.5, 1.0) + rng.normal(0, 0.2, n)
    one_hot = pd.get_dummies(pd.Series(shape)).to_numpy(dtype=float)
    exponents = np.round(np.arange(-1.5, 0.0001, 0.1), 2)
    settings = {"eps_exponents": exponents, "error_threshold": 2.0, "min_samples": 5}
    strata = intersectional_unfairness(errors, tone[:, None], strata=shape, **settings)
    dummies = intersectional_unfairness(errors, np.column_stack([one_hot, tone]), **settings)
    assert strata.n_customers > 0
    assert strata.members.tolist() == dummies.members.tolist()
    assert [c.n_clusters for c in strata.clusters] == [c.n_clusters for c in dummies.clusters]
    assert set(shape[strata.members]) == {"heavy"}
    # An ordinal code (0..3) instead merges body shapes into one cluster at the largest eps.
    codes = pd.factorize(pd.Series(shape), sort=True)[0].astype(float)
    ordinal = intersectional_unfairness(errors, np.column_stack([codes, tone]), **settings)
    assert [c.n_clusters for c in ordinal.clusters] != [c.n_clusters for c in strata.clusters]


def test_planted_intersectional_region_is_one_body_shape(tmp_path):
    attributes, predictions = _tables(n=600, seed=2)
    dark_heavy = (attributes["body_shape"] == "heavy") & (attributes["skin_tone"] >= 8)
    predictions["error"] = np.where(dark_heavy, 2.6, 1.0) + np.random.default_rng(3).normal(0, 0.2, 600)
    assert _run(tmp_path, attributes, predictions, "--permutations", "99") == 0
    inter = _report(tmp_path)["intersectional"]["seed_000"]
    assert inter["significant"] is True and inter["findings"]
    for finding in inter["findings"]:
        assert finding["description"].startswith("body_shape heavy (100%; ")
        assert set(finding["members"]) <= set(attributes.loc[dark_heavy, "image_id"])


# Seeded simulations: the report's body-shape verdict on a categorical body shape.

SIM_SHAPES = ["athletic", "average", "curvy", "heavy", "slim"]
SIM_SIZES = [40, 50, 30, 40, 40]


def _simulated_verdict(tmp_path, seed: int, gap: float) -> dict:
    rng = np.random.default_rng(seed)
    shape = np.repeat(np.array(SIM_SHAPES, dtype=object), SIM_SIZES)
    shape = np.append(shape, "petite")  # a group of one, left out of the tests every time
    errors = rng.gamma(4.0, 0.25, shape.size) + gap * (shape == "heavy")  # mean 1, sd 0.5
    ids = [f"s{i}" for i in range(shape.size)]
    pd.DataFrame({"image_id": ids, "body_shape": shape}).to_csv(tmp_path / "a.csv", index=False)
    pd.DataFrame({"image_id": ids, "error": errors}).to_csv(tmp_path / "p.csv", index=False)
    options = ReportOptions(
        attributes=tmp_path / "a.csv", predictions=tmp_path / "p.csv", out=tmp_path, body_shape="body_shape"
    )
    report = build_report(options)
    assert report["body_shape"]["left_out"][0]["group"] == "petite"
    return report["body_shape"]


@pytest.mark.slow  # a seeded simulation over many datasets: CI runs it, bin/test --fast skips it
def test_simulation_planted_gap_for_one_body_shape_is_flagged(tmp_path):
    parts = [_simulated_verdict(tmp_path, seed, gap=0.5) for seed in range(40)]
    flagged = [p["verdict"]["significant"] and p["verdict"]["worst_band"] == "heavy" for p in parts]
    # Measured: 40 of 40 (a gap of one error sd, 40 images in the group).
    assert np.mean(flagged) >= 0.9


@pytest.mark.slow  # a seeded simulation over many datasets: CI runs it, bin/test --fast skips it
def test_simulation_no_gap_is_flagged_at_most_at_the_nominal_rate(tmp_path):
    parts = [_simulated_verdict(tmp_path, 1000 + seed, gap=0.0) for seed in range(100)]
    rate = np.mean([p["verdict"]["significant"] for p in parts])
    # 10 pairs uncorrected would flag far more often. Binomial(100, 0.05) exceeds 10 with probability
    # about 1%.
    assert rate <= 0.10
    uncorrected = np.mean([min(pair["p_value"] for pair in p["seed_000"]["pairs"]) < 0.05 for p in parts])
    assert uncorrected > rate  # the family-wise correction is what keeps the rate down
    assert all(len(p["pairs"]) == len(list(itertools.combinations(SIM_SHAPES, 2))) for p in parts)
