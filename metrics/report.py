"""Fairness report: seed 000's four unfairness scores from two tables, as JSON and HTML.

Used by ``python -m metrics report``. Inputs are read by extension (``.csv``,
``.jsonl``/``.ndjson``, ``.parquet``), joined on an id column, validated (every
problem is collected as one line of :class:`ReportInputError`), scored with
:mod:`metrics.unfairness`, and written as ``report.json`` and a self-contained
``report.html`` (figures embedded as base64 PNG; no external URL).
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = [
    "ReportInputError",
    "ReportOptions",
    "build_report",
    "load_table",
    "write_report",
]

_MAX_EXAMPLES = 5
# Above this many rows the DBSCAN ensemble takes seconds: show a progress bar.
_PROGRESS_ROWS = 5_000


class ReportInputError(Exception):
    """Invalid report input; ``problems`` holds one human-readable line per problem."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass
class ReportOptions:
    """Options of the report (the command-line flags)."""

    attributes: Path
    predictions: Path
    out: Path
    on: str = "image_id"
    error: str = "error"
    skin_tone: str | None = None
    gender: str | None = None
    body_shape: str | None = None
    threshold: float = 2.0
    alpha: float = 0.05
    cluster_error_threshold: float = 1.7
    min_samples: int = 10
    min_cluster_size: int = 10
    min_fraction: float = 0.7
    allow_unmatched: bool = False
    progress: bool | None = None
    groups: list[str] = field(default_factory=list)


def load_table(path: Path, id_column: str):
    """Read a CSV, JSON Lines or Parquet file into a DataFrame, ids as strings.

    Parameters
    ----------
    path : Path
        File; the format comes from the extension.
    id_column : str
        Column read as text so that ids compare equal across formats.

    Returns
    -------
    pandas.DataFrame
        The table.

    Raises
    ------
    ReportInputError
        Missing file, unknown extension or unreadable content.
    """
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise ReportInputError([f"{path}: file not found"])
    suffix = path.suffix.lower()
    try:
        if suffix == ".csv":
            table = pd.read_csv(path, dtype={id_column: str})
        elif suffix in {".jsonl", ".ndjson"}:
            table = pd.read_json(path, lines=True, dtype=False)
        elif suffix in {".parquet", ".pq"}:
            table = pd.read_parquet(path)
        else:
            raise ReportInputError([f"{path}: unknown extension {suffix!r} (use .csv, .jsonl or .parquet)"])
    except ReportInputError:
        raise
    except Exception as exc:  # noqa: BLE001 - pandas raises many types for bad files
        raise ReportInputError([f"{path}: cannot read ({type(exc).__name__}: {exc})"]) from None
    if id_column in table.columns:
        ids = table[id_column]
        table[id_column] = ids.where(ids.isna(), ids.astype(str))
    return table


def _join(options: ReportOptions):
    attributes = load_table(options.attributes, options.on)
    predictions = load_table(options.predictions, options.on)
    problems = []
    wanted_attributes = [c for c in (options.gender, options.skin_tone, options.body_shape) if c] + list(options.groups)
    for name, table, columns in (
        (options.attributes, attributes, [options.on, *wanted_attributes]),
        (options.predictions, predictions, [options.on, options.error]),
    ):
        missing = [c for c in columns if c not in table.columns]
        if missing:
            problems.append(
                f"{name}: missing column(s) {', '.join(missing)}; available: {', '.join(map(str, table.columns))}"
            )
    if not (options.gender or options.skin_tone or options.body_shape):
        problems.append("nothing to evaluate: give --gender, --skin-tone and/or --body-shape")
    if problems:
        raise ReportInputError(problems)

    for name, table in (
        (options.attributes, attributes),
        (options.predictions, predictions),
    ):
        ids = table[options.on]
        if ids.isna().any():
            rows = (np.flatnonzero(ids.isna().to_numpy()) + 1)[:_MAX_EXAMPLES].tolist()
            problems.append(f"{name}: {int(ids.isna().sum())} empty id(s), data rows {rows}")
        duplicated = ids[ids.duplicated(keep=False) & ids.notna()].unique()
        if duplicated.size:
            problems.append(
                f"{name}: {duplicated.size} duplicate id(s) in column {options.on!r}, "
                f"e.g. {', '.join(map(str, duplicated[:_MAX_EXAMPLES]))}"
            )
    if problems:
        raise ReportInputError(problems)

    attr_ids = set(attributes[options.on])
    pred_ids = set(predictions[options.on])
    only_pred = sorted(pred_ids - attr_ids)
    only_attr = sorted(attr_ids - pred_ids)
    unmatched = {
        "only_in_predictions": len(only_pred),
        "only_in_attributes": len(only_attr),
    }
    if (only_pred or only_attr) and not options.allow_unmatched:
        if only_pred:
            problems.append(
                f"{len(only_pred)} id(s) in {options.predictions} are not in "
                f"{options.attributes}, e.g. {', '.join(only_pred[:_MAX_EXAMPLES])}"
            )
        if only_attr:
            problems.append(
                f"{len(only_attr)} id(s) in {options.attributes} are not in "
                f"{options.predictions}, e.g. {', '.join(only_attr[:_MAX_EXAMPLES])} "
                "(use --allow-unmatched to score the ids present in both)"
            )
        raise ReportInputError(problems)

    merged = predictions[[options.on, options.error]].merge(
        attributes[[options.on, *dict.fromkeys(wanted_attributes)]],
        on=options.on,
        how="inner",
    )
    numeric_columns = [(options.error, "error")] + [
        (c, flag)
        for c, flag in (
            (options.skin_tone, "skin tone"),
            (options.body_shape, "body shape"),
        )
        if c
    ]
    import pandas as pd

    for column, what in numeric_columns:
        as_number = pd.to_numeric(merged[column], errors="coerce")
        bad = ~np.isfinite(as_number.to_numpy(dtype=np.float64))
        if bad.any():
            ids = merged.loc[bad, options.on].tolist()[:_MAX_EXAMPLES]
            raw = merged.loc[bad, column].tolist()[:_MAX_EXAMPLES]
            problems.append(
                f"column {column!r} ({what}): {int(bad.sum())} non-numeric or missing "
                f"value(s), at {options.on} {', '.join(map(str, ids))} "
                f"(values {', '.join(map(repr, raw))})"
            )
        else:
            merged[column] = as_number.astype(np.float64)
    if options.gender:
        missing_gender = merged[options.gender].isna()
        if missing_gender.any():
            ids = merged.loc[missing_gender, options.on].tolist()[:_MAX_EXAMPLES]
            problems.append(
                f"column {options.gender!r} (gender): {int(missing_gender.sum())} missing "
                f"value(s), at {options.on} {', '.join(map(str, ids))}"
            )
    if len(merged) < 3:
        problems.append(f"too few samples: {len(merged)} matched row(s), need at least 3")
    if problems:
        raise ReportInputError(problems)
    return merged, unmatched


def build_report(options: ReportOptions) -> dict:
    """Compute the report as a JSON-serialisable dict (figures not included).

    Parameters
    ----------
    options : ReportOptions
        Inputs and settings.

    Returns
    -------
    dict
        Keys ``inputs``, ``settings``, ``gender``, ``skin_tone``, ``body_shape``,
        ``intersectional`` (``None`` when not requested), ``summary`` (sentences) and
        ``groups``.

    Raises
    ------
    ReportInputError
        Invalid inputs or too few samples for a score.
    """
    from metrics import unfairness

    merged, unmatched = _join(options)
    errors = merged[options.error].to_numpy(dtype=np.float64)
    report: dict = {
        "inputs": {
            "attributes": str(options.attributes),
            "predictions": str(options.predictions),
            "id_column": options.on,
            "n_samples": len(merged),
            **unmatched,
        },
        "settings": {
            "error_column": options.error,
            "threshold": options.threshold,
            "alpha": options.alpha,
            "severity_rule": "ratio = |score| / threshold; <0.5 negligible, <1 moderate, >=1 severe",
            "cluster_error_threshold": options.cluster_error_threshold,
            "min_samples": options.min_samples,
            "min_cluster_size": options.min_cluster_size,
            "min_fraction": options.min_fraction,
        },
        "gender": None,
        "skin_tone": None,
        "body_shape": None,
        "intersectional": None,
    }
    problems = []
    results: dict = {}
    if options.gender:
        try:
            result = unfairness.categorical_unfairness(
                errors,
                merged[options.gender].astype(str).to_numpy(),
                alpha=options.alpha,
            )
            results["gender"] = result
            report["gender"] = _categorical_json(result, options)
        except ValueError as exc:
            problems.append(f"gender ({options.gender}): {exc}")
    for key, column in (
        ("skin_tone", options.skin_tone),
        ("body_shape", options.body_shape),
    ):
        if not column:
            continue
        try:
            result = unfairness.continuous_unfairness(
                errors, merged[column].to_numpy(dtype=np.float64), alpha=options.alpha
            )
            results[key] = result
            report[key] = _continuous_json(result, column, options)
        except ValueError as exc:
            problems.append(f"{key.replace('_', ' ')} ({column}): {exc}")
    if problems:
        raise ReportInputError(problems)
    if options.skin_tone and options.body_shape:
        progress = options.progress
        if progress is None:
            progress = len(merged) >= _PROGRESS_ROWS
        features = merged[[options.body_shape, options.skin_tone]].to_numpy(dtype=np.float64)
        result = unfairness.intersectional_unfairness(
            errors,
            features,
            min_samples=options.min_samples,
            min_cluster_size=options.min_cluster_size,
            error_threshold=options.cluster_error_threshold,
            min_fraction=options.min_fraction,
            progress=bool(progress),
        )
        results["intersectional"] = result
        ids = merged[options.on].to_numpy()
        report["intersectional"] = {
            "score": result.n_customers,
            "n_customers": result.n_customers,
            "fraction": result.fraction,
            "members": [str(i) for i in ids[result.members]],
            "features": [options.body_shape, options.skin_tone],
            "eps_with_underperforming_clusters": [
                {
                    "exponent": c.exponent,
                    "eps": c.eps,
                    "n_clusters": c.n_clusters,
                    "underperforming_sizes": [int(m.size) for m in c.underperforming],
                    "fractions": list(c.fractions),
                }
                for c in result.clusters
                if c.underperforming
            ],
            "n_eps": len(result.clusters),
        }
    report["summary"] = _summary(report, options)
    report["groups"] = _groups_section(options, merged)
    report["_results"] = results
    report["_merged"] = merged
    return report


def _categorical_json(result, options: ReportOptions) -> dict:
    from metrics.unfairness import severity

    sev = severity(result.score, options.threshold)
    return {
        "column": options.gender,
        "test": "two-sample Kolmogorov-Smirnov",
        "statistic": result.statistic,
        "p_value": result.p_value,
        "significant": result.significant,
        "score": result.score,
        "higher_error_group": str(result.worst_pair.higher_error_group),
        "lower_error_group": str(result.worst_pair.lower_error_group),
        "severity": sev.level,
        "severity_ratio": sev.ratio,
        "group_means": {str(k): v for k, v in result.group_means.items()},
        "group_sizes": {str(k): v for k, v in result.group_sizes.items()},
        "pairs": [
            {
                "higher_error_group": str(p.higher_error_group),
                "lower_error_group": str(p.lower_error_group),
                "statistic": p.statistic,
                "p_value": p.p_value,
                "significant": p.significant,
                "score": p.score,
            }
            for p in result.pairs
        ],
    }


def _continuous_json(result, column: str, options: ReportOptions) -> dict:
    from metrics.unfairness import severity

    sev = severity(result.score, options.threshold)
    return {
        "column": column,
        "test": "least-squares slope, t-test",
        "slope": result.slope,
        "intercept": result.intercept,
        "p_value": result.p_value,
        "significant": result.significant,
        "score": result.score,
        "percentiles": list(result.percentiles),
        "attribute_range": list(result.attribute_range),
        "severity": sev.level,
        "severity_ratio": sev.ratio,
    }


def _summary(report: dict, options: ReportOptions) -> list[str]:
    lines = []
    unit_threshold = f"the error threshold {options.threshold:g}"
    for key, label in (
        ("gender", "Gender"),
        ("body_shape", "Body shape"),
        ("skin_tone", "Skin tone"),
    ):
        part = report[key]
        if part is None:
            continue
        if part["significant"]:
            lines.append(
                f"{label} unfairness is significant (p = {part['p_value']:.3g} < "
                f"{options.alpha:g}); score {part['score']:.3g} is {part['severity']} "
                f"({part['severity_ratio']:.0%} of {unit_threshold})."
            )
        else:
            lines.append(
                f"{label} unfairness is not significant (p = {part['p_value']:.3g} >= "
                f"{options.alpha:g}); the score {part['score']:.3g} would be "
                f"{part['severity']} ({part['severity_ratio']:.0%} of {unit_threshold})."
            )
    inter = report["intersectional"]
    if inter is not None:
        if inter["n_customers"]:
            lines.append(
                f"Intersectional: {inter['n_customers']} customer(s) "
                f"({inter['fraction']:.1%}) are in underperforming clusters "
                f"({len(inter['eps_with_underperforming_clusters'])} of {inter['n_eps']} "
                "DBSCAN runs found at least one)."
            )
        else:
            lines.append("Intersectional: no underperforming cluster in any DBSCAN run.")
    return lines


def _groups_section(options: ReportOptions, merged=None) -> dict | str:
    """Mean error disaggregated by each ``--groups`` column and by their intersection.

    Uses :class:`metrics.groups.MetricFrame` (Fairlearn's semantics) with a seeded
    bootstrap interval, small-group flags and explicit reasons for undefined values.
    """
    import warnings

    from .groups import MetricFrame, SmallGroupWarning, mean_error

    if not options.groups:
        return "not requested (use --groups col1,col2)"
    if merged is None:
        return "not computed"
    sections = {}
    combos = [[c] for c in options.groups]
    if len(options.groups) > 1:
        combos.append(list(options.groups))
    errors = merged[options.error].to_numpy(dtype=float)
    for columns in combos:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SmallGroupWarning)
            frame = MetricFrame(
                metrics={"mean_error": mean_error},
                y_true=np.zeros_like(errors),
                y_pred=errors,
                sensitive_features=merged[columns].astype(str),
                n_boot=200,
                seed=0,
            )
        groups = {}
        for key, value in frame.values("mean_error").items():
            name = " & ".join(map(str, key)) if isinstance(key, tuple) else str(key)
            groups[name] = {
                "mean_error": value.value,
                "ci_low": value.ci_low,
                "ci_high": value.ci_high,
                "reason": value.reason,
            }
        difference = frame.difference()["mean_error"]
        ratio = frame.ratio()["mean_error"]
        sections[" x ".join(columns)] = {
            "by_group": groups,
            "difference_between_groups": difference.value,
            "difference_reason": difference.reason,
            "ratio_between_groups": ratio.value,
            "ratio_reason": ratio.reason,
            "small_groups": [" & ".join(map(str, g)) if isinstance(g, tuple) else str(g) for g in frame.small_groups],
            "min_group_size": frame.min_group_size,
        }
    return sections


# ---------------------------------------------------------------------- figures


def _png(fig) -> str:
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=80)
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _figures(report: dict, options: ReportOptions) -> list[tuple[str, str]]:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    merged = report["_merged"]
    results = report["_results"]
    errors = merged[options.error].to_numpy(dtype=np.float64)
    figures = []
    if "gender" in results:
        fig, ax = plt.subplots(figsize=(6, 4))
        groups = merged[options.gender].astype(str).to_numpy()
        bins = np.histogram_bin_edges(errors, bins=40)
        for name in sorted(set(groups)):
            ax.hist(
                errors[groups == name],
                bins=bins,
                histtype="step",
                density=True,
                label=name,
            )
        ax.axvline(options.threshold, color="grey", linestyle="--", label="threshold")
        ax.set_xlabel(options.error)
        ax.set_ylabel("density")
        ax.set_title("Error distribution by gender")
        ax.legend()
        figures.append(("Error distributions by gender", _png(fig)))
    for key, column in (
        ("skin_tone", options.skin_tone),
        ("body_shape", options.body_shape),
    ):
        if key not in results:
            continue
        result = results[key]
        x = merged[column].to_numpy(dtype=np.float64)
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.scatter(x, errors, s=4, alpha=0.3)
        grid = np.linspace(x.min(), x.max(), 50)
        ax.plot(
            grid,
            result.intercept + result.slope * grid,
            color="C3",
            label="least squares",
        )
        for value in result.attribute_range:
            ax.axvline(value, color="grey", linestyle=":")
        ax.set_xlabel(column)
        ax.set_ylabel(options.error)
        ax.set_title(f"Error against {key.replace('_', ' ')} (p = {result.p_value:.3g})")
        ax.legend()
        figures.append((f"Error against {key.replace('_', ' ')}", _png(fig)))
    if "intersectional" in results:
        result = results["intersectional"]
        z = result.standardised
        fig, ax = plt.subplots(figsize=(6, 5))
        points = ax.scatter(z[:, 0], z[:, 1], c=errors, s=6, cmap="viridis")
        fig.colorbar(points, ax=ax, label=options.error)
        if result.n_customers:
            ax.scatter(
                z[result.members, 0],
                z[result.members, 1],
                s=30,
                facecolors="none",
                edgecolors="red",
                label="in an underperforming cluster",
            )
            ax.legend()
        ax.set_xlabel(f"{options.body_shape} (standardised)")
        ax.set_ylabel(f"{options.skin_tone} (standardised)")
        ax.set_title("Intersectional map")
        figures.append(("Intersectional map (body shape x skin tone)", _png(fig)))
    return figures


def _json_ready(report: dict) -> dict:
    def clean(value):
        if isinstance(value, dict):
            return {str(k): clean(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [clean(v) for v in value]
        if isinstance(value, np.generic):
            value = value.item()
        if isinstance(value, float) and not math.isfinite(value):
            return None
        return value

    return clean({k: v for k, v in report.items() if not k.startswith("_")})


_STYLE = (
    "<style>body{font-family:sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}"
    "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.3rem .6rem}"
    "img{max-width:100%}</style></head><body>"
)


def _html(report: dict, figures: list[tuple[str, str]]) -> str:
    esc = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>Fairness report</title>",
        _STYLE,
        "<h1>Fairness report</h1>",
        (
            f"<p>{report['inputs']['n_samples']} samples; error column "
            f"<code>{esc(report['settings']['error_column'])}</code>; threshold "
            f"{report['settings']['threshold']:g}; alpha {report['settings']['alpha']:g}.</p>"
        ),
        "<h2>Summary</h2><ul>",
        *(f"<li>{esc(line)}</li>" for line in report["summary"]),
        (
            "</ul><h2>Scores</h2><table><tr><th>Attribute</th><th>Test</th><th>p</th>"
            "<th>Significant</th><th>Score</th><th>Severity</th></tr>"
        ),
    ]
    for key in ("gender", "body_shape", "skin_tone"):
        part = report[key]
        if part is None:
            continue
        parts.append(
            f"<tr><td>{esc(key.replace('_', ' '))} ({esc(str(part['column']))})</td>"
            f"<td>{esc(part['test'])}</td><td>{part['p_value']:.3g}</td>"
            f"<td>{'yes' if part['significant'] else 'no'}</td><td>{part['score']:.3g}</td>"
            f"<td>{esc(part['severity'])}</td></tr>"
        )
    if report["intersectional"] is not None:
        inter = report["intersectional"]
        parts.append(
            "<tr><td>intersectional</td><td>DBSCAN ensemble</td><td></td><td></td>"
            f"<td>{inter['n_customers']} customers</td><td>{inter['fraction']:.1%} of samples</td></tr>"
        )
    parts.append("</table>")
    if isinstance(report["groups"], str):
        parts.append(f"<p><em>Groups: {esc(report['groups'])}</em></p>")
    else:
        parts.append("<h2>Mean error by group</h2>")
        for title, section in report["groups"].items():
            parts.append(
                f"<h3>{esc(title)}</h3><table><tr><th>group</th><th>mean error</th><th>95% CI</th><th>note</th></tr>"
            )
            for name, row in section["by_group"].items():
                value = "undefined" if row["mean_error"] is None else f"{row['mean_error']:.3f}"
                ci = "" if row["ci_low"] is None else f"{row['ci_low']:.3f} to {row['ci_high']:.3f}"
                note = row["reason"] or ("small group" if name in section["small_groups"] else "")
                parts.append(f"<tr><td>{esc(name)}</td><td>{value}</td><td>{ci}</td><td>{esc(note)}</td></tr>")
            diff = section["difference_between_groups"]
            parts.append(
                "</table><p>Largest difference between groups: "
                + ("undefined (" + esc(section["difference_reason"] or "") + ")" if diff is None else f"{diff:.3f}")
                + "</p>"
            )
    parts.append("<h2>Figures</h2>")
    for title, png in figures:
        parts.append(
            f'<figure><img alt="{esc(title)}" src="data:image/png;base64,{png}">'
            f"<figcaption>{esc(title)}</figcaption></figure>"
        )
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(options: ReportOptions) -> dict:
    """Compute the report and write ``report.json`` and ``report.html`` in ``options.out``.

    Parameters
    ----------
    options : ReportOptions
        Inputs and settings.

    Returns
    -------
    dict
        The JSON content written.

    Raises
    ------
    ReportInputError
        Invalid inputs.
    """
    report = build_report(options)
    figures = _figures(report, options)
    content = _json_ready(report)
    out = Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(content, indent=2), encoding="utf-8")
    (out / "report.html").write_text(_html(content, figures), encoding="utf-8")
    return content
