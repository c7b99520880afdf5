"""Rendering the report: figures (matplotlib; PNG and SVG files under ``figures/``, the PNG also embedded
in the HTML), ``report.json`` and ``report.html``."""

from __future__ import annotations

import base64
import html
import io
import json
import math
from pathlib import Path

import numpy as np

from .inputs import ReportOptions
from .scores import build_report

__all__ = ["write_report"]


def _slug(title: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in title.lower()).strip("_")


def _render(fig, title: str) -> dict:
    """PNG (bytes) and SVG (text) of a figure, then close it."""
    import matplotlib.pyplot as plt

    png, svg = io.BytesIO(), io.StringIO()
    fig.savefig(png, format="png", dpi=80)
    # No date or renderer stamp: the same report gives the same SVG.
    fig.savefig(svg, format="svg", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    return {"title": title, "slug": _slug(title), "png": png.getvalue(), "svg": svg.getvalue()}


def _band_means(ax, part: dict | None) -> None:
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


def _figures(report: dict, options: ReportOptions) -> list[dict]:
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
        if key not in results or part is None or part.get("treatment", "categorical") != "categorical":
            continue
        what = key.replace("_", " ")
        fig, ax = plt.subplots(figsize=(6, 4))
        groups = merged[column].astype(str).to_numpy()
        bins = np.histogram_bin_edges(errors, bins=40)
        for name in part.get("groups_tested") or sorted(set(groups)):
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
        ax.set_title(f"Error distribution by {what} (KS p = {part['p_value']:.3g})")
        ax.legend()
        figures.append(_render(fig, f"Error distributions by {what}"))
    for key, column in (
        ("skin_tone", options.skin_tone),
        ("body_shape", options.body_shape),
    ):
        if key not in results or (report.get(key) or {}).get("treatment") == "categorical":
            continue
        result = results[key]
        x = merged[column].to_numpy(dtype=np.float64)
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.scatter(x, errors, s=4, alpha=0.3, label="samples")
        grid = np.linspace(x.min(), x.max(), 50)
        fitted = result.intercept + result.slope * grid
        ax.plot(grid, fitted, color="C3", label="least squares")
        # The fit's 95% band: +- 1.96 standard errors of the slope around the mean.
        centre = x.mean()
        spread = 1.96 * result.stderr * np.abs(grid - centre)
        ax.fill_between(grid, fitted - spread, fitted + spread, color="C3", alpha=0.15, label="slope 95% band")
        for value, mark in zip(result.attribute_range, ("P5", "P95"), strict=True):
            ax.axvline(value, color="grey", linestyle=":")
            ax.annotate(mark, (value, 1), xycoords=("data", "axes fraction"), ha="center", va="bottom", fontsize=8)
        _band_means(ax, report.get(key))
        ax.axhline(options.threshold, color="grey", linestyle="--", linewidth=0.8)
        ax.set_xlabel(column)
        ax.set_ylabel(options.error)
        ax.set_title(f"Error against {key.replace('_', ' ')} (slope p = {result.p_value:.3g})", pad=14)
        ax.legend(fontsize=7)
        figures.append(_render(fig, f"Error against {key.replace('_', ' ')}"))
    if "intersectional" in results:
        result = results["intersectional"]
        fig, ax = plt.subplots(figsize=(6, 5))
        if report["intersectional"].get("body_shape_treatment") == "categorical":
            # One column per body shape (jittered), standardised skin tone up the page.
            shapes = merged[options.body_shape].astype(str).to_numpy()
            names, codes = np.unique(shapes, return_inverse=True)
            jitter = np.random.default_rng(0).uniform(-0.3, 0.3, codes.size)
            z = np.column_stack([codes + jitter, result.standardised[:, 0]])
            ax.set_xticks(range(names.size), names.tolist())
            x_label = f"{options.body_shape} (categorical)"
        else:
            z = result.standardised
            x_label = f"{options.body_shape} (standardised)"
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
        ax.set_xlabel(x_label)
        ax.set_ylabel(f"{options.skin_tone} (standardised)")
        ax.set_title("Intersectional map")
        figures.append(_render(fig, "Intersectional map (body shape x skin tone)"))
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


def _html(report: dict, figures: list[dict]) -> str:
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
        *(f"<li>{esc(line)}</li>" for line in report["summary"] if not line.startswith("Warning: ")),
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
        p_value = "" if inter.get("p_value") is None else f"{inter['p_value']:.3g}"
        significant = {None: "not tested", True: "yes", False: "no"}[inter.get("significant")]
        parts.append(
            "<tr><td>intersectional</td><td>DBSCAN ensemble, permutation null</td>"
            f"<td>{p_value}</td><td>{significant}</td>"
            f"<td>{inter['n_customers']} customers</td><td>{inter['fraction']:.1%} of samples</td></tr>"
        )
    parts.append("</table>")
    for key in ("gender", "body_shape"):
        part = report[key]
        if part is None or part.get("treatment", "categorical") != "categorical":
            continue
        parts.append(
            f"<h2>{esc(key.replace('_', ' ').capitalize())} by group</h2>"
            f"<p>Column <code>{esc(str(part['column']))}</code> treated as categorical"
            + (f" ({esc(part['treatment_reason'])})" if part.get("treatment_reason") else "")
            + f"; pairwise KS tests, {esc(part['correction'])}.</p>"
            "<table><tr><th>group</th><th>n</th><th>mean error</th><th>note</th></tr>"
        )
        for name, mean in part["group_means"].items():
            parts.append(
                f"<tr><td>{esc(name)}</td><td>{part['group_sizes'][name]}</td><td>{mean:.3f}</td><td>tested</td></tr>"
            )
        for row in part.get("left_out", []):
            parts.append(
                f"<tr><td>{esc(row['group'])}</td><td>{row['n']}</td><td>{row['mean_error']:.3f}</td>"
                f"<td>left out: {esc(row['reason'])}</td></tr>"
            )
        parts.append("</table>")
        if len(part["pairs"]) > 1:
            parts.append("<table><tr><th>pair (worse, better)</th><th>score</th><th>p</th><th>adjusted p</th></tr>")
            for pair in part["pairs"]:
                parts.append(
                    f"<tr><td>{esc(pair['higher_error_group'])}, {esc(pair['lower_error_group'])}</td>"
                    f"<td>{pair['score']:.3f}</td><td>{pair['p_value']:.3g}</td>"
                    f"<td>{pair['p_value_adjusted']:.3g}</td></tr>"
                )
            parts.append("</table>")
    for key in ("body_shape", "skin_tone"):
        part = report[key]
        if part is None or "bands" not in part:
            continue
        bands, verdict = part["bands"], part["verdict"]
        parts.append(
            f"<h2>{esc(key.replace('_', ' ').capitalize())} by band</h2>"
            f"<p>Verdict: {'significant' if verdict['significant'] else 'not significant'} "
            f"(Holm-adjusted p {verdict['p_value']:.3g}), {esc(verdict['level'])}, set by {esc(verdict['driver'])}; "
            f"the {esc(bands['worse_end'])} end is worse. Band-gap test: {esc(bands['test'])}.</p>"
            "<table><tr><th>band</th><th>n</th><th>mean error</th><th>95% CI</th><th>note</th></tr>"
        )
        for band in bands["bands"]:
            mean = "" if band["mean_error"] is None else f"{band['mean_error']:.3f}"
            ci = "" if band["ci_low"] is None else f"{band['ci_low']:.3f} to {band['ci_high']:.3f}"
            notes = [
                text
                for flag, text in ((band["small"], "small band"), (band["reaches_threshold"], "reaches the threshold"))
                if flag
            ]
            parts.append(
                f"<tr><td>{esc(band['label'])}</td><td>{band['n']}</td><td>{mean}</td><td>{ci}</td>"
                f"<td>{esc(', '.join(notes))}</td></tr>"
            )
        low, high = bands["gap_ci"]
        parts.append(
            f"</table><p>Largest gap {bands['gap']:.3f} (95% CI {low:.3f} to {high:.3f}, p {bands['gap_p_value']:.3g}) "
            f"between {esc(bands['worst_band'])} and {esc(bands['best_band'])}: {esc(bands['gap_severity'])}.</p>"
        )
    inter = report["intersectional"]
    if inter is not None:
        parts.append(
            "<h2>Intersectional regions</h2><table><tr><th>region</th><th>customers</th>"
            "<th>flagged at eps</th><th>mean error</th></tr>"
        )
        for finding in inter.get("findings", []):
            parts.append(
                f"<tr><td>{esc(finding['description'])}</td><td>{finding['n_customers']}</td>"
                f"<td>{finding['n_eps']} of {inter['n_eps']}</td><td>{finding['mean_error']:.3f}</td></tr>"
            )
        sweep = ", ".join(f"{s['min_samples']}: {s['n_customers']}" for s in inter.get("min_samples_sweep", []))
        parts.append(f"</table><p>Flagged customers by DBSCAN min_samples (not given by seed 000): {esc(sweep)}.</p>")
    composition = report.get("composition")
    if composition is not None:
        parts.append(
            f"<h2>Composition by skin tone</h2><p>NSD {composition['nsd']:.3g}; normalised discrepancy from "
            f"uniform {composition['discrepancy_l2']:.3g}; {composition['levels']} tones "
            f"({esc(composition['levels_source'])}).</p><table><tr><th>tone</th><th>n</th><th>share</th>"
            "<th>95% CI</th><th>note</th></tr>"
        )
        for row in composition["tones"]:
            note = "under-represented" if row["tone"] in composition["under_represented"] else ""
            parts.append(
                f"<tr><td>{row['tone']}</td><td>{row['n']}</td><td>{row['share']:.1%}</td>"
                f"<td>{row['ci_low']:.1%} to {row['ci_high']:.1%}</td><td>{note}</td></tr>"
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
    for figure in figures:
        png = base64.b64encode(figure["png"]).decode("ascii")
        parts.append(
            f'<figure><img alt="{esc(figure["title"])}" src="data:image/png;base64,{png}">'
            f"<figcaption>{esc(figure['title'])}</figcaption></figure>"
        )
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(options: ReportOptions) -> dict:
    """Compute the report and write ``report.json``, ``report.html`` and ``figures/*.png|svg`` in ``options.out``.

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
    if options.on_step is not None:
        options.on_step("figures")
    figures = _figures(report, options)
    report["figures"] = [
        {"title": f["title"], "png": f"figures/{f['slug']}.png", "svg": f"figures/{f['slug']}.svg"} for f in figures
    ]
    content = _json_ready(report)
    out = Path(options.out)
    (out / "figures").mkdir(parents=True, exist_ok=True)
    for figure in figures:
        (out / "figures" / f"{figure['slug']}.png").write_bytes(figure["png"])
        (out / "figures" / f"{figure['slug']}.svg").write_text(figure["svg"], encoding="utf-8")
    (out / "report.json").write_text(json.dumps(content, indent=2), encoding="utf-8")
    (out / "report.html").write_text(_html(content, figures), encoding="utf-8")
    return content
