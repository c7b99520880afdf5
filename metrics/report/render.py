"""Rendering the report: figures (matplotlib; PNG and SVG files under ``figures/``, the PNG also embedded
in the HTML), ``report.json`` and ``report.html``."""

from __future__ import annotations

import base64
import html
import io
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from .inputs import ReportOptions
from .scores import build_report

__all__ = ["write_report"]


def _slug(title: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in title.lower()).strip("_")


def _render(fig: Any, title: str) -> dict[str, Any]:
    """PNG (bytes) and SVG (text) of a figure, then close it."""
    import matplotlib.pyplot as plt

    png, svg = io.BytesIO(), io.StringIO()
    fig.savefig(png, format="png", dpi=80)
    # No date or renderer stamp: the same report gives the same SVG.
    fig.savefig(svg, format="svg", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    return {"title": title, "slug": _slug(title), "png": png.getvalue(), "svg": svg.getvalue()}


def _band_means(ax: Any, part: dict[str, Any] | None) -> None:
    """Per-band mean error with its interval, drawn at each band's middle (seed Fig. 3B/3C plus the bands)."""
    if not part or "bands" not in part:
        return
    rows = [b for b in part["bands"]["bands"] if b["mean_error"] is not None]
    if not rows:
        return
    middle = np.array([(b["low"] + b["high"]) / 2 for b in rows])
    mean = np.array([b["mean_error"] for b in rows])
    low = np.array([b["ci_low"] if b["ci_low"] is not None else m for b, m in zip(rows, mean, strict=True)])
    high = np.array([b["ci_high"] if b["ci_high"] is not None else m for b, m in zip(rows, mean, strict=True)])
    ax.errorbar(
        middle,
        mean,
        yerr=[mean - low, high - mean],
        fmt="s",
        color="black",
        capsize=4,
        label="band mean (95% CI)",
        zorder=5,
    )


def _figures(report: dict[str, Any], options: ReportOptions) -> list[dict[str, Any]]:
    import matplotlib

    matplotlib.use("Agg", force=True)
    # Fixed ids in the SVG (otherwise random per run): the same report gives the same files.
    matplotlib.rcParams["svg.hashsalt"] = "fairtone-report"
    import matplotlib.pyplot as plt

    merged = report["_merged"]
    results = report["_results"]
    errors = merged[options.error].to_numpy(dtype=np.float64)
    figures = []
    for key, column in (("gender", options.gender), ("body_shape", options.body_shape)):
        part = report.get(key)
        if part is None or part.get("treatment") != "categorical":
            continue
        what = key.replace("_", " ")
        fig, ax = plt.subplots(figsize=(6, 4))
        groups = merged[column].astype(str).to_numpy()
        bins = np.histogram_bin_edges(errors, bins=40).tolist()
        for name in part["groups_tested"]:
            ax.hist(errors[groups == name], bins=bins, histtype="step", density=True, label=name)
        ax.axvline(options.threshold, color="grey", linestyle="--", label="threshold")
        ax.set_xlabel(options.error)
        ax.set_ylabel("density")
        ax.set_title(f"Error distribution by {what} (group-gap p = {part['verdict']['p_value']:.3g})")
        ax.legend()
        figures.append(_render(fig, f"Error distributions by {what}"))
    for key, column in (("skin_tone", options.skin_tone), ("body_shape", options.body_shape)):
        part = report.get(key)
        if part is None or part.get("treatment") != "continuous":
            continue
        trend = results[f"{key}_trend"]
        rows = np.isfinite(merged[column].to_numpy(dtype=np.float64))
        x = merged[column].to_numpy(dtype=np.float64)[rows]
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.scatter(x, errors[rows], s=4, alpha=0.3, label="samples")
        grid = np.linspace(x.min(), x.max(), 50)
        fitted = trend.intercept + trend.slope * grid
        ax.plot(grid, fitted, color="C3", label="least squares")
        centre = x.mean()
        spread = 1.96 * trend.se * np.abs(grid - centre)
        ax.fill_between(grid, fitted - spread, fitted + spread, color="C3", alpha=0.15, label="robust slope 95% band")
        for value, mark in zip(trend.attribute_range, ("P5", "P95"), strict=True):
            ax.axvline(value, color="grey", linestyle=":")
            ax.annotate(mark, (value, 1), xycoords=("data", "axes fraction"), ha="center", va="bottom", fontsize=8)
        _band_means(ax, part)
        ax.axhline(options.threshold, color="grey", linestyle="--", linewidth=0.8)
        ax.set_xlabel(str(column))
        ax.set_ylabel(options.error)
        ax.set_title(f"Error against {key.replace('_', ' ')} (robust trend p = {trend.p_value:.3g})", pad=14)
        ax.legend(fontsize=7)
        figures.append(_render(fig, f"Error against {key.replace('_', ' ')}"))
    inter = report.get("intersectional") or {}
    grid_part = inter.get("grid")
    if grid_part and len(grid_part["factors"]) == 2:
        figures.append(_grid_figure(plt, grid_part, options))
    if results.get("intersectional") is not None:
        result, rows = results["intersectional"]
        sub = merged.loc[rows]
        y = errors[rows]
        fig, ax = plt.subplots(figsize=(6, 5))
        if inter["seed_000"].get("body_shape_treatment") == "categorical":
            shapes = sub[options.body_shape].astype(str).to_numpy()
            names, codes = np.unique(shapes, return_inverse=True)
            jitter = np.random.default_rng(0).uniform(-0.3, 0.3, codes.size)
            z = np.column_stack([codes + jitter, result.standardised[:, 0]])
            ax.set_xticks(range(names.size), names.tolist())
            x_label = f"{options.body_shape} (categorical)"
        else:
            z = result.standardised
            x_label = f"{options.body_shape} (standardised)"
        points = ax.scatter(z[:, 0], z[:, 1], c=y, s=6, cmap="viridis")
        fig.colorbar(points, ax=ax, label=options.error)
        if result.n_customers and result.significant:
            ax.scatter(
                z[result.members, 0],
                z[result.members, 1],
                s=30,
                facecolors="none",
                edgecolors="red",
                label="in an underperforming cluster",
            )
            ax.legend()
        ax.set_xlabel(x_label)
        ax.set_ylabel(f"{options.skin_tone} (standardised)")
        ax.set_title("Seed 000's DBSCAN map" + ("" if result.significant else " (not significant: no region)"))
        figures.append(_render(fig, "Intersectional map (body shape x skin tone)"))
    return figures


def _grid_figure(plt: Any, grid: dict[str, Any], options: ReportOptions) -> dict[str, Any]:
    """Mean error per grid cell (rows: the first factor), flagged cells outlined in red."""
    first, second = grid["factors"]
    rows = list(dict.fromkeys(c["labels"][first] for c in grid["cells"]))
    cols = list(dict.fromkeys(c["labels"][second] for c in grid["cells"]))
    rows.sort(key=_band_key)
    cols.sort(key=_band_key)
    values = np.full((len(rows), len(cols)), np.nan)
    for cell in grid["cells"]:
        values[rows.index(cell["labels"][first]), cols.index(cell["labels"][second])] = cell["mean_error"]
    fig, ax = plt.subplots(figsize=(6, 4.5))
    image = ax.imshow(values, cmap="magma_r", aspect="auto")
    fig.colorbar(image, ax=ax, label=f"mean {options.error}")
    for cell in grid["cells"]:
        i, j = rows.index(cell["labels"][first]), cols.index(cell["labels"][second])
        ax.text(j, i, f"{cell['n']}", ha="center", va="center", fontsize=7, color="white" if cell["tested"] else "grey")
        if cell["flagged"]:
            ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=2))
    ax.set_xticks(range(len(cols)), cols, rotation=30, ha="right", fontsize=7)
    ax.set_yticks(range(len(rows)), rows, fontsize=7)
    ax.set_xlabel(second)
    ax.set_ylabel(first)
    ax.set_title(f"Grid: mean error per cell (n shown; flagged in red; max-t p = {grid['p_value']:.3g})", fontsize=9)
    return _render(fig, f"Intersectional grid ({first} x {second})")


def _band_key(label: str) -> Any:
    head = label.split("-")[0]
    try:
        return (0, float(head), label)
    except ValueError:
        return (1, 0.0, label)


def _json_ready(report: dict[str, Any]) -> dict[str, Any]:
    def clean(value: Any) -> Any:
        if isinstance(value, dict):
            return {str(k): clean(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [clean(v) for v in value]
        if isinstance(value, np.generic):
            value = value.item()
        if isinstance(value, float) and not math.isfinite(value):
            return None
        return value

    cleaned: dict[str, Any] = clean({k: v for k, v in report.items() if not k.startswith("_")})
    return cleaned


_STYLE = (
    "<style>body{font-family:sans-serif;max-width:64rem;margin:2rem auto;padding:0 1rem}"
    "table{border-collapse:collapse;margin:.4rem 0}td,th{border:1px solid #ccc;padding:.3rem .6rem}"
    "td.ci{white-space:nowrap}"
    ".severe,.above{color:#a00;font-weight:600}.moderate,.inconclusive{color:#8a5a00;font-weight:600}"
    "img{max-width:100%}</style></head><body>"
)


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


def _num(value: Any, digits: str = ".3f") -> str:
    return "" if value is None else format(value, digits)


def _ci_cell(low: Any, high: Any) -> str:
    return "" if low is None else f"{low:.3f} to {high:.3f}"


def _verdict_row(name: str, test: str, verdict: dict[str, Any], where: str) -> str:
    esc = html.escape
    return (
        f"<tr><td>{esc(name)}</td><td>{esc(test)}</td><td>{verdict['p_value']:.3g}</td>"
        f"<td>{'yes' if verdict['significant'] else 'no'}</td><td>{verdict['gap']:.3f} "
        f'({_ci_cell(*verdict["gap_ci"])})</td><td class="{esc(verdict["level"])}">{esc(verdict["level"])}</td>'
        f"<td>{esc(where)}</td></tr>"
    )


def _html(report: dict[str, Any], figures: list[dict[str, Any]]) -> str:
    esc = html.escape
    settings = report["settings"]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>Fairness report</title>",
        _STYLE,
        "<h1>Fairness report</h1>",
        (
            f"<p>{report['inputs']['n_samples']} samples; error column "
            f"<code>{esc(settings['error_column'])}</code>; threshold "
            f"{settings['threshold']:g}; alpha {settings['alpha']:g}"
            + (
                f"; clustered by <code>{esc(str(settings['cluster']))}</code> ({esc(str(settings['cluster_source']))})"
                if settings.get("cluster")
                else "; samples treated as independent"
            )
            + ".</p>"
        ),
        *(
            [
                "<h2>Warnings</h2><ul>",
                *(f"<li><strong>{esc(line)}</strong></li>" for line in report.get("warnings", [])),
                "</ul>",
            ]
            if report.get("warnings")
            else []
        ),
        "<h2>Summary</h2><ul>",
        # The warnings lead the summary; the HTML shows them above it instead.
        *(f"<li>{esc(line)}</li>" for line in report["headline"] if not line.startswith("Warning: ")),
        "</ul><details><summary>Every sentence of the summary</summary><ul>",
        *(f"<li>{esc(line)}</li>" for line in report["summary"] if not line.startswith("Warning: ")),
        "</ul></details><h2>Disparity verdicts</h2>",
        f"<p class=small>{esc(_sentence(settings['disparity_rule']))}. {esc(_sentence(settings['significance_rule']))}.</p>",
        "<table><tr><th>Attribute</th><th>Test</th><th>p</th><th>Significant</th><th>Largest gap (95% CI)</th>"
        "<th>Level</th><th>Where</th></tr>",
    ]
    for key in ("gender", "body_shape", "skin_tone"):
        part = report[key]
        if part is None:
            continue
        verdict = part["verdict"]
        test = "trend + band gap, Holm" if part["treatment"] == "continuous" else "group gaps, max-t"
        where = f"{verdict['worst_band']} worst" if verdict["significant"] else "no band or group shown worse"
        if verdict.get("worse_end"):
            where += f"; the {verdict['worse_end']} end is worse"
        parts.append(_verdict_row(f"{key.replace('_', ' ')} ({part['column']})", test, verdict, where))
    inter = report.get("intersectional") or {}
    if inter.get("verdict"):
        verdict = inter["verdict"]
        where = "; ".join(verdict["regions"][:3]) if verdict["significant"] else "no region"
        parts.append(_verdict_row("intersectional grid", "cells vs rest, max-t", verdict, where))
    parts.append("</table>")
    perf = report.get("performance")
    if perf:
        overall = perf["overall"]
        parts.append(
            "<h2>Performance</h2>"
            f"<p class=small>{esc(_sentence(perf['rule']))}.</p><p>Overall mean error {_num(overall['mean_error'])} "
            f"(95% CI {_ci_cell(overall['ci_low'], overall['ci_high'])}): "
            f'<span class="{"above" if overall["reading"] == "above the threshold" else ""}">{esc(overall["reading"])}</span>'
            + (f". Above the threshold in: {esc(', '.join(perf['above']))}" if perf["above"] else "")
            + ".</p>"
        )
    for key in ("gender", "body_shape", "skin_tone"):
        part = report[key]
        if part is None:
            continue
        title = key.replace("_", " ").capitalize()
        continuous = part["treatment"] == "continuous"
        rows = part["bands"]["bands"] if continuous else part["groups"]
        parts.append(
            f"<h2>{esc(title)} by {'band' if continuous else 'group'}</h2>"
            f"<p>Verdict: {'significant' if part['verdict']['significant'] else 'not significant'} "
            f"(p {part['verdict']['p_value']:.3g}); {esc(part['verdict']['reading'])}. "
            + (
                f"Bands cut {'on the scale (tones 1-' + str(part['bands']['levels']) + ')' if part['bands']['kind'] == 'scale' else 'at the quantiles'}. "
                f"Band-gap test: {esc(part['bands']['test'])}. Trend test: {esc(part['trend']['method'])}, slope "
                f"{part['trend']['slope']:.3g} (95% CI {part['trend']['ci_low']:.3g} to {part['trend']['ci_high']:.3g})."
                if continuous
                else f"Group-gap test: {esc(part['test'])}."
            )
            + "</p><table><tr><th>"
            + ("band" if continuous else "group")
            + "</th><th>n</th><th>people</th><th>mean error</th><th>95% CI</th><th>min. detectable gap</th>"
            "<th>reading</th><th>performance</th></tr>"
        )
        for row in rows:
            parts.append(
                f"<tr><td>{esc(row['label'])}</td><td>{row['n']}</td><td>{row['n_clusters']}</td>"
                f"<td>{_num(row['mean_error'])}</td><td>{_ci_cell(row['ci_low'], row['ci_high'])}</td>"
                f"<td>{_num(row['min_detectable_gap'])}</td><td>{esc(row['reading'])}</td>"
                f'<td class="{"above" if row["performance"] == "above the threshold" else ""}">{esc(row["performance"])}</td></tr>'
            )
        for row in part.get("left_out", []):
            parts.append(
                f"<tr><td>{esc(row['group'])}</td><td>{row['n']}</td><td></td><td>{row['mean_error']:.3f}</td>"
                f"<td></td><td></td><td>left out: {esc(row['reason'])}</td><td></td></tr>"
            )
        parts.append("</table>")
        seed = part["seed_000"]
        if continuous:
            parts.append(
                f"<p class=small>Seed 000 reproduction: {esc(seed['test'])}, p {seed['p_value']:.3g}, score "
                f"{seed['score']:.3g} ({seed['score_ratio']:.0%} of the threshold; a point estimate, not a level).</p>"
            )
        else:
            parts.append(
                f"<p class=small>Seed 000 reproduction: {esc(seed['test'])} ({esc(seed['p_value_method'])}), p "
                f"{seed['p_value']:.3g}{'' if seed['n_pairs'] == 1 else ', ' + esc(seed['correction']) + ' adjusted ' + format(seed['p_value_adjusted'], '.3g')}; "
                f"score {seed['score']:.3g} ({esc(seed['higher_error_group'])} worse than {esc(seed['lower_error_group'])}).</p>"
            )
    grid = inter.get("grid")
    if grid:
        parts.append(
            f"<h2>Intersectional grid</h2><p>{esc(' x '.join(grid['factors']))}: {grid['n_tested']} of "
            f"{grid['n_cells']} cells tested ({esc(grid['test'])}); max-t p {grid['p_value']:.3g}.</p>"
        )
        if grid["flagged"]:
            parts.append(
                "<table><tr><th>region</th><th>n</th><th>mean error</th><th>elsewhere</th><th>gap (simultaneous 95% CI)</th>"
                "<th>level</th></tr>"
            )
            for cell in grid["flagged"]:
                parts.append(
                    f"<tr><td>{esc(cell['description'])}</td><td>{cell['n']}</td><td>{cell['mean_error']:.3f}</td>"
                    f"<td>{cell['rest_mean_error']:.3f}</td><td>{cell['gap']:.3f} ({_ci_cell(cell['ci_low'], cell['ci_high'])})</td>"
                    f'<td class="{esc(cell["level"])}">{esc(cell["level"])}</td></tr>'
                )
            parts.append("</table>")
        else:
            parts.append("<p>No cell is shown to differ from the rest: no region is named.</p>")
    elif inter.get("grid_error"):
        parts.append(f"<h2>Intersectional grid</h2><p>Not computed: {esc(inter['grid_error'])}.</p>")
    seed = inter.get("seed_000")
    if seed is not None:
        parts.append(
            f"<h3>Seed 000 reproduction: DBSCAN ensemble</h3><p>{seed['n_customers']} sample(s) in underperforming "
            f"clusters; {esc(seed['test'])}; p "
            + ("not computed" if seed["p_value"] is None else f"{seed['p_value']:.3g}")
            + ".</p>"
        )
        if seed["findings"]:
            parts.append("<table><tr><th>region</th><th>samples</th><th>flagged at eps</th><th>mean error</th></tr>")
            for finding in seed["findings"]:
                parts.append(
                    f"<tr><td>{esc(finding['description'])}</td><td>{finding['n_customers']}</td>"
                    f"<td>{finding['n_eps']} of {seed['n_eps']}</td><td>{finding['mean_error']:.3f}</td></tr>"
                )
            parts.append("</table>")
        sweep = ", ".join(f"{s['min_samples']}: {s['n_customers']}" for s in seed.get("min_samples_sweep", []))
        parts.append(f"<p class=small>Flagged samples by DBSCAN min_samples (not given by seed 000): {esc(sweep)}.</p>")
    composition = report.get("composition")
    if composition is not None:
        parts.append(
            f"<h2>Composition by skin tone</h2><p>NSD {composition['nsd']:.3g} (equal to the normalised L2 "
            f"discrepancy from uniform); {composition['levels']} tones ({esc(composition['levels_source'])}); "
            f"{esc(composition['rule'])}.</p><table><tr><th>tone</th><th>n</th><th>share</th>"
            "<th>95% CI</th><th>reading</th></tr>"
        )
        for row in composition["tones"]:
            parts.append(
                f"<tr><td>{row['tone']}</td><td>{row['n']}</td><td>{row['share']:.1%}</td>"
                f"<td>{row['ci_low']:.1%} to {row['ci_high']:.1%}</td><td>{esc(row['reading'])}</td></tr>"
            )
        parts.append("</table>")
    check = report.get("label_uncertainty")
    if check is not None:
        parts.append(
            "<h2>Label uncertainty</h2>"
            f"<p>Conclusion with the given tones: {esc(check['conclusion'])}. Same conclusion in "
            f"{check['n_same']} of {check['n_draws']} draws within the labelers' range "
            f"(95% CI {check['fraction_same_ci'][0]:.0%} to {check['fraction_same_ci'][1]:.0%}).</p>"
        )
        if check.get("per_labeler"):
            parts.append("<table><tr><th>each labeler's labels alone</th><th>images</th><th>conclusion</th></tr>")
            for name, row in check["per_labeler"].items():
                parts.append(
                    f"<tr><td>{esc(name)}</td><td>{row['n']}</td><td>{esc(row['conclusion'])}"
                    f"{'' if row['same'] else ' (differs)'}</td></tr>"
                )
            parts.append("</table>")
    if isinstance(report["groups"], str):
        parts.append(f"<p><em>Groups: {esc(report['groups'])}</em></p>")
    else:
        parts.append("<h2>Mean error by group</h2>")
        for title, section in report["groups"].items():
            parts.append(
                f"<h3>{esc(title)}</h3><table><tr><th>group</th><th>n</th><th>mean error</th><th>95% CI</th><th>note</th></tr>"
            )
            for name, row in section["by_group"].items():
                value = "undefined" if row["mean_error"] is None else f"{row['mean_error']:.3f}"
                note = row["reason"] or ("small group" if name in section["small_groups"] else "")
                parts.append(
                    f"<tr><td>{esc(name)}</td><td>{row['n']}</td><td>{value}</td>"
                    f"<td>{_ci_cell(row['ci_low'], row['ci_high'])}</td><td>{esc(note)}</td></tr>"
                )
            diff = section["difference_between_groups"]
            parts.append(
                "</table><p>Largest difference between groups: "
                + (
                    "undefined (" + esc(section["difference_reason"] or "") + ")"
                    if diff is None
                    else f"{diff:.3f} (simultaneous 95% CI {_ci_cell(*section['difference_ci'])})"
                )
                + "</p>"
            )
    parts.append("<h2>Figures</h2>")
    if not figures:
        parts.append("<p>No figures were drawn (<code>--no-figures</code>).</p>")
    for figure in figures:
        png = base64.b64encode(figure["png"]).decode("ascii")
        parts.append(
            f'<figure><img alt="{esc(figure["title"])}" src="data:image/png;base64,{png}">'
            f"<figcaption>{esc(figure['title'])}</figcaption></figure>"
        )
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(options: ReportOptions) -> dict[str, Any]:
    """Compute the report and write ``report.json``, ``report.html`` and ``figures/*.png|svg`` in ``options.out``
    (no figures when ``options.figures`` is false).

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
    figures = []
    if options.figures:
        if options.on_step is not None:
            options.on_step("figures")
        figures = _figures(report, options)
    report["figures"] = [
        {"title": f["title"], "png": f"figures/{f['slug']}.png", "svg": f"figures/{f['slug']}.svg"} for f in figures
    ]
    content = _json_ready(report)
    out = Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    if figures:
        (out / "figures").mkdir(exist_ok=True)
    for figure in figures:
        (out / "figures" / f"{figure['slug']}.png").write_bytes(figure["png"])
        (out / "figures" / f"{figure['slug']}.svg").write_text(figure["svg"], encoding="utf-8")
    (out / "report.json").write_text(json.dumps(content, indent=2), encoding="utf-8")
    (out / "report.html").write_text(_html(content, figures), encoding="utf-8")
    return content
