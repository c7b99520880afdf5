"""Tests of ``python -m metrics report`` (inputs, validation errors, outputs)."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from metrics.__main__ import main

ROOT = Path(__file__).resolve().parents[2]


def _tables(n=200, seed=0):
    rng = np.random.default_rng(seed)
    ids = [f"img{i:04d}" for i in range(n)]
    tone = rng.integers(1, 11, n).astype(float)
    attributes = pd.DataFrame(
        {
            "image_id": ids,
            "skin_tone": tone,
            "body_shape": rng.normal(0.3, 0.05, n),
            "gender": rng.choice(["female", "male"], n),
        }
    )
    predictions = pd.DataFrame({"image_id": ids, "error": 1.0 + 0.1 * tone + rng.normal(0, 0.3, n)})
    return attributes, predictions


def _write(frame, path):
    if path.suffix == ".csv":
        frame.to_csv(path, index=False)
    elif path.suffix == ".jsonl":
        frame.to_json(path, orient="records", lines=True)
    else:
        frame.to_parquet(path)
    return path


def _run(tmp_path, attributes, predictions, *extra, fmt=(".csv", ".csv"), figures=False):
    """The command line on two tables; without figures unless the test reads them (``--no-figures``)."""
    attr = _write(attributes, tmp_path / f"attributes{fmt[0]}")
    pred = _write(predictions, tmp_path / f"predictions{fmt[1]}")
    argv = [
        "report",
        "--attributes",
        str(attr),
        "--predictions",
        str(pred),
        "--out",
        str(tmp_path / "out"),
        "--on",
        "image_id",
        "--skin-tone",
        "skin_tone",
        "--gender",
        "gender",
        "--body-shape",
        "body_shape",
        "--no-progress",
        *([] if figures else ["--no-figures"]),
        *extra,
    ]
    return main(argv)


@pytest.mark.parametrize("fmt", [(".csv", ".csv"), (".jsonl", ".parquet"), (".parquet", ".jsonl")])
def test_report_writes_json_and_html(tmp_path, fmt):
    attributes, predictions = _tables()
    assert _run(tmp_path, attributes, predictions, fmt=fmt, figures=fmt[0] == ".csv") == 0
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    for key in (
        "inputs",
        "settings",
        "gender",
        "skin_tone",
        "body_shape",
        "intersectional",
        "performance",
        "summary",
        "groups",
    ):
        assert key in report
    assert report["inputs"]["n_samples"] == 200
    ref = stats.linregress(attributes["skin_tone"], predictions["error"])
    assert report["skin_tone"]["seed_000"]["p_value"] == pytest.approx(ref.pvalue)
    assert report["skin_tone"]["seed_000"]["significant"] is True
    assert report["skin_tone"]["verdict"]["significant"] is True
    female = predictions["error"][attributes["gender"] == "female"]
    male = predictions["error"][attributes["gender"] == "male"]
    assert report["gender"]["seed_000"]["p_value"] == pytest.approx(stats.ks_2samp(female, male).pvalue)
    dbscan = report["intersectional"]["seed_000"]
    assert dbscan["n_customers"] == len(dbscan["members"])
    page = (tmp_path / "out" / "report.html").read_text()
    drawn = 5 if fmt[0] == ".csv" else 0  # the other formats run with --no-figures
    assert page.count("data:image/png;base64,") == len(report["figures"]) == drawn
    assert len(list((tmp_path / "out" / "figures").glob("*.png"))) == drawn
    assert "http://" not in page and "https://" not in page


def test_no_figures_writes_the_same_report_without_them(tmp_path, capsys):
    attributes, predictions = _tables()
    (tmp_path / "with").mkdir()
    (tmp_path / "without").mkdir()
    assert _run(tmp_path / "with", attributes, predictions, figures=True) == 0
    assert "and the figures in" in capsys.readouterr().out
    assert _run(tmp_path / "without", attributes, predictions) == 0
    assert "(no figures: --no-figures)" in capsys.readouterr().out
    drawn = json.loads((tmp_path / "with" / "out" / "report.json").read_text())
    bare = json.loads((tmp_path / "without" / "out" / "report.json").read_text())
    assert len(drawn.pop("figures")) == 5 and bare.pop("figures") == []
    for report, folder in ((drawn, "with"), (bare, "without")):  # the input paths differ by their folder
        for name in ("attributes", "predictions"):
            assert report["inputs"].pop(name).endswith(f"/{folder}/{name}.csv")
    assert bare == drawn
    assert "No figures were drawn" in (tmp_path / "without" / "out" / "report.html").read_text()
    assert not (tmp_path / "without" / "out" / "figures").exists()


def test_rows_joined_by_id_not_position(tmp_path):
    attributes, predictions = _tables()
    shuffled = predictions.sample(frac=1.0, random_state=1)
    assert _run(tmp_path, attributes, shuffled) == 0
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    ref = stats.linregress(attributes["skin_tone"], predictions["error"])
    assert report["skin_tone"]["seed_000"]["slope"] == pytest.approx(ref.slope)
    assert report["skin_tone"]["trend"]["slope"] == pytest.approx(ref.slope)


def _errors(capsys):
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines and all(line.startswith("error: ") for line in lines)
    assert "Traceback" not in "\n".join(lines)
    return lines


def test_missing_file(tmp_path, capsys):
    code = main(
        [
            "report",
            "--attributes",
            str(tmp_path / "no.csv"),
            "--predictions",
            str(tmp_path / "no2.csv"),
            "--out",
            str(tmp_path),
            "--gender",
            "g",
        ]
    )
    assert code == 2
    assert "file not found" in _errors(capsys)[0]


def test_missing_columns(tmp_path, capsys):
    attributes, predictions = _tables()
    assert _run(tmp_path, attributes.drop(columns="gender"), predictions, "--error", "err") == 2
    lines = _errors(capsys)
    assert len(lines) == 2
    assert "gender" in lines[0] and "err" in lines[1]


def test_mismatched_ids_counted_with_examples(tmp_path, capsys):
    attributes, predictions = _tables()
    predictions.loc[:2, "image_id"] = ["x1", "x2", "x3"]
    assert _run(tmp_path, attributes, predictions) == 2
    lines = _errors(capsys)
    assert any(line.startswith("error: 3 id(s)") and "x1" in line for line in lines)
    assert any("img0000" in line for line in lines)
    assert _run(tmp_path, attributes, predictions, "--allow-unmatched") == 0


def test_duplicate_ids(tmp_path, capsys):
    attributes, predictions = _tables()
    attributes.loc[5, "image_id"] = "img0004"
    assert _run(tmp_path, attributes, predictions) == 2
    line = _errors(capsys)[0]
    assert "duplicate" in line and "img0004" in line


def test_non_numeric_errors_name_rows(tmp_path, capsys):
    attributes, predictions = _tables()
    predictions["error"] = predictions["error"].astype(object)
    predictions.loc[7, "error"] = "n/a"
    assert _run(tmp_path, attributes, predictions) == 2
    line = _errors(capsys)[0]
    assert "non-numeric" in line and "img0007" in line


def test_too_few_samples(tmp_path, capsys):
    attributes, predictions = _tables(n=2)
    assert _run(tmp_path, attributes, predictions) == 2
    assert "too few samples" in _errors(capsys)[0]


def test_group_with_one_sample(tmp_path, capsys):
    attributes, predictions = _tables(n=20)
    attributes["gender"] = ["female"] * 19 + ["other"]
    assert _run(tmp_path, attributes, predictions) == 2
    assert "other" in _errors(capsys)[0]


@pytest.mark.slow  # starts a Python process (pytest.ini): CI runs it, bin/test --fast skips it
def test_module_entry_point_exit_code(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "metrics",
            "report",
            "--attributes",
            str(tmp_path / "a.csv"),
            "--predictions",
            str(tmp_path / "p.csv"),
            "--out",
            str(tmp_path),
            "--gender",
            "g",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert out.returncode == 2
    assert "Traceback" not in out.stderr and out.stderr.startswith("error: ")


def test_groups_disaggregate_mean_error_with_intervals(tmp_path):
    attributes, predictions = _tables(n=240, seed=3)
    attributes["site"] = np.where(np.arange(240) < 10, "rare", "common")
    assert _run(tmp_path, attributes, predictions, "--groups", "gender,site") == 0
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    groups = report["groups"]
    assert set(groups) == {"gender", "site", "gender x site"}
    merged = attributes.merge(predictions, on="image_id")
    for name, row in groups["gender"]["by_group"].items():
        expected = merged.loc[merged.gender == name, "error"].mean()
        assert row["mean_error"] == pytest.approx(expected)
        assert row["ci_low"] <= row["mean_error"] <= row["ci_high"]
    assert groups["site"]["small_groups"] == ["rare"]
    means = [r["mean_error"] for r in groups["gender"]["by_group"].values()]
    assert groups["gender"]["difference_between_groups"] == pytest.approx(max(means) - min(means))
    assert "Mean error by group" in (tmp_path / "out" / "report.html").read_text()
