"""Plots (matplotlib, Agg, no pyplot state): drawn from the dicts the services compute.

The services compute numbers (``labeling.services.consensus.project_consensus``,
``labeling.services.baselines.baseline_comparison``); this module only draws them,
and imports no service (the views call both). Matplotlib is imported when a plot is
drawn, not when the module is loaded. SVG output is deterministic (fixed hash salt,
no date) so that a cached plot and a fresh one are byte-identical.
"""

from __future__ import annotations

import hashlib
import io
import json
import threading
from collections import OrderedDict
from typing import Any

import numpy as np

from colorimetry import ITA_CLASSES

from .services.releases.card import is_hex_colour

FORMATS = {"png": "image/png", "svg": "image/svg+xml"}


def _figure_bytes(fig, fmt: str, dpi: int, metadata: dict | None = None) -> bytes:
    """``fig`` as PNG or SVG bytes, its constrained layout computed once.

    ``Figure.savefig`` runs a figure with a layout engine twice: a pass with drawing disabled to place the
    axes, then the drawing, which places them again; the layout is half a card plot's time. A PNG is
    drawn once on an Agg canvas (the layout runs inside that draw) and encoded by Pillow with no metadata;
    an SVG gets its layout from one pass, then is saved with the layout engine off (the positions stay).
    """
    if fmt == "png":
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from PIL import Image as PILImage

        fig.set_dpi(dpi)
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        buffer = io.BytesIO()
        PILImage.fromarray(np.asarray(canvas.buffer_rgba()), "RGBA").save(buffer, format="png", dpi=(dpi, dpi))
        return buffer.getvalue()
    if fig.get_layout_engine() is not None:
        fig.draw_without_rendering()
        fig.set_layout_engine("none")
    buffer = io.BytesIO()
    fig.savefig(buffer, format=fmt, dpi=dpi, metadata=metadata)
    return buffer.getvalue()


# --------------------------------------------------------------------------
# Consensus dashboard (rendered from the ``project_consensus`` dict)
# --------------------------------------------------------------------------

PLOTS = {
    "label_distribution": "Label distribution per phase",
    "range_histogram": "Per-image range of values",
    "kappa_heatmap": "Labeler x labeler weighted kappa",
    "test_retest": "Test-retest per labeler",
    "labeler_bias": "Labeler bias per tone band",
}
_GREY = "#9a9a9a"
_ACCENT = "#2f5d8a"
_RED = "#b03a2e"


def _message(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True, color="#444", transform=ax.transAxes)
    ax.set_axis_off()


def _plot_label_distribution(fig, dashboard: dict) -> None:
    phases = dashboard["phases"]
    if not phases:
        _message(fig.subplots(), "No labels yet.")
        return
    colours = {tone["position"]: tone["hex"] for tone in dashboard["project"]["tones"]}
    axes = fig.subplots(len(phases), 1, sharex=True, squeeze=False)[:, 0]
    for ax, summary in zip(axes, phases, strict=True):
        dist = summary["label_distribution"]
        values, counts = np.asarray(dist["values"]), np.asarray(dist["counts"], dtype=float)
        total = counts.sum()
        share = counts / total * 100 if total else counts
        colour = [colours.get(int(v), _GREY) if v % 1 == 0 else "#c8c8c8" for v in values]
        ax.bar(values, share, width=0.42 if np.any(values % 1) else 0.8, color=colour, edgecolor="#333", linewidth=0.5)
        for v, s, c in zip(values, share, counts, strict=True):
            ax.annotate(f"{int(c)}", (v, s), xytext=(0, 2), textcoords="offset points", ha="center", fontsize=7)
        for tone in dist["under_represented"]:
            ax.axvspan(tone - 0.5, tone + 0.5, color="#b03a2e", alpha=0.08, linewidth=0)
        ax.set_ylabel("% of labels")
        title = f"{summary['phase']['name']}: {int(total)} labels, {dist['n_skips']} skips"
        if dist["under_represented"]:
            title += f"; under-represented tones (shaded): {', '.join(map(str, dist['under_represented']))}"
        ax.set_title(title, fontsize=9, loc="left")
        ax.set_ylim(0, max(share.max() * 1.18, 1) if total else 1)
    axes[-1].set_xlabel("Value (tone; x.5 = two adjacent tones)")
    axes[-1].set_xticks(range(1, len(colours) + 1))


def _plot_range_histogram(fig, dashboard: dict) -> None:
    ax = fig.subplots()
    selected = dashboard["selected"]
    if not selected or not selected["range_histogram"]:
        _message(ax, "No image with 2+ labels yet.")
        return
    ranges = [row["range"] for row in selected["range_histogram"]]
    counts = [row["n_images"] for row in selected["range_histogram"]]
    threshold = dashboard["wide_range"]
    colour = ["#b03a2e" if r >= threshold else _ACCENT for r in ranges]
    ax.bar(ranges, counts, width=0.4, color=colour)
    for r, c in zip(ranges, counts, strict=True):
        ax.annotate(str(c), (r, c), xytext=(0, 2), textcoords="offset points", ha="center", fontsize=8)
    ax.axvline(threshold - 0.25, color="#b03a2e", linestyle="--", linewidth=1)
    ax.set_xlabel(f"Range of the values on an image (max - min, tones); red: flagged (>= {threshold})")
    ax.set_ylabel("Images")
    ax.set_title(f"{selected['phase']['name']}: {selected['n_images_2plus']} images with 2+ labels", fontsize=10)


def _plot_kappa_heatmap(fig, dashboard: dict) -> None:
    ax = fig.subplots()
    selected = dashboard["selected"]
    if not selected or not selected["kappa"]["labelers"]:
        _message(ax, "No labels yet.")
        return
    kappa = selected["kappa"]
    names = kappa["labelers"]
    matrix = np.array([[np.nan if x is None else x for x in row] for row in kappa["matrix"]], dtype=float)
    from matplotlib import colormaps

    cmap = colormaps["RdBu"].with_extremes(bad="#e6e6e3")
    image = ax.imshow(np.ma.masked_invalid(matrix), vmin=-1, vmax=1, cmap=cmap)
    for i in range(len(names)):
        for j in range(len(names)):
            wide = kappa.get("too_wide")
            if wide and wide[i][j]:  # interval wider than the coefficient rule: no number
                text = "too\nlittle\ndata"
            elif np.isnan(matrix[i, j]):
                text = "n<{}".format(kappa["min_common"])
            else:
                text = f"{matrix[i, j]:.2f}"
            ax.text(j, i, text, ha="center", va="center", fontsize=8)
    ax.set_xticks(range(len(names)), names, rotation=45, ha="right")
    ax.set_yticks(range(len(names)), names)
    ax.set_title(f"{selected['phase']['name']}: quadratic-weighted Cohen's kappa", fontsize=10)
    fig.colorbar(image, ax=ax, shrink=0.8)


def _plot_test_retest(fig, dashboard: dict) -> None:
    retest = dashboard["test_retest"]
    pairs = retest["pairs"]
    if not pairs:
        _message(fig.subplots(), retest["reason"] or "No test-retest pairs.")
        return
    names = sorted({p[0] for p in pairs})
    columns = min(4, len(names))
    rows = -(-len(names) // columns)
    axes = fig.subplots(rows, columns, squeeze=False, sharex=True, sharey=True).ravel()
    n_tones = len(dashboard["project"]["tones"])
    rng = np.random.default_rng(0)
    stats = {row["labeler"]: row for row in retest["per_labeler"]}
    for ax, name in zip(axes, names, strict=False):
        own = np.array([[p[1], p[2]] for p in pairs if p[0] == name], dtype=float)
        jitter = rng.uniform(-0.12, 0.12, size=own.shape)
        ax.plot([0.5, n_tones + 0.5], [0.5, n_tones + 0.5], color=_GREY, linewidth=0.8)
        ax.scatter(own[:, 0] + jitter[:, 0], own[:, 1] + jitter[:, 1], s=14, color=_ACCENT, alpha=0.7)
        exact = stats[name]["exact"]["value"]
        label = f"{name}: n={len(own)}" + (f", exact {exact * 100:.0f}%" if exact is not None else "")
        ax.set_title(label, fontsize=9)
        ax.set_xlim(0.5, n_tones + 0.5)
        ax.set_ylim(0.5, n_tones + 0.5)
        ax.set_aspect("equal")
    for ax in axes[len(names) :]:
        ax.set_axis_off()
    fig.supxlabel("Calibration 1 value")
    fig.supylabel("Calibration 2 value (repeat)")


def _plot_labeler_bias(fig, dashboard: dict) -> None:
    """Each labeler's signed bias per tone band with its 95% interval (``tone_bands``: the others' mean,
    bands by the consensus of all labels; services.consensus.bands), where the band holds enough images."""
    ax = fig.subplots()
    selected = dashboard["selected"]
    bands = ((selected or {}).get("tone_bands") or {}).get("bands") or []
    labelers = ((selected or {}).get("tone_bands") or {}).get("labelers") or []
    lines = 0
    n_lab = max(len(labelers), 1)
    for position, name in enumerate(labelers):
        points = [
            (k, band["bias"][position]["mean_diff"])
            for k, band in enumerate(bands)
            if position < len(band["bias"])
            and band["bias"][position]["mean_diff"].get("low") is not None
            and not band["bias"][position]["mean_diff"].get("reason")
        ]
        if not points:
            continue
        lines += 1
        shift = (position - (n_lab - 1) / 2) * 0.08
        x = [k + shift for k, _ in points]
        y = [m["value"] for _, m in points]
        err = [[m["value"] - m["low"] for _, m in points], [m["high"] - m["value"] for _, m in points]]
        ax.errorbar(x, y, yerr=err, marker="o", capsize=3, linewidth=1, label=name)
    if not lines:
        _message(ax, f"Too little data: no tone band with {dashboard['min_images']}+ images.")
        return
    ax.axhline(0, color=_GREY, linewidth=0.8)
    ax.set_xticks(range(len(bands)), [band["name"] for band in bands], fontsize=8)
    ax.set_xlabel("Tone band (consensus of all labels)")
    ax.set_ylabel("Mean signed difference (+ = deeper)")
    ax.set_title(f"{selected['phase']['name']}: bias against the other labelers, 95% intervals", fontsize=10)
    ax.legend(fontsize=8)


_PLOTTERS = {
    "label_distribution": (_plot_label_distribution, lambda d: (8, 1.9 * max(len(d["phases"]), 1) + 0.6)),
    "range_histogram": (_plot_range_histogram, lambda d: (7, 3.6)),
    "kappa_heatmap": (_plot_kappa_heatmap, lambda d: (5.5, 4.6)),
    "test_retest": (
        _plot_test_retest,
        lambda d: (8, 2.4 * max(1, -(-len({p[0] for p in d["test_retest"]["pairs"]}) // 4)) + 0.8),
    ),
    "labeler_bias": (_plot_labeler_bias, lambda d: (7, 3.6)),
}


def plot_render(dashboard: dict, name: str, fmt: str) -> bytes:
    """Render the plot ``name`` of a ``project_consensus`` dashboard as PNG or SVG bytes."""
    import matplotlib

    matplotlib.use("Agg")  # no display; a no-op when already set
    from matplotlib.figure import Figure

    if name not in _PLOTTERS or fmt not in FORMATS:
        raise ValueError(f"Unknown plot {name}.{fmt}.")
    draw, size = _PLOTTERS[name]
    with matplotlib.rc_context({"svg.hashsalt": "fairtone", "font.size": 9}):
        fig = Figure(figsize=size(dashboard), layout="constrained")
        draw(fig, dashboard)
        return _figure_bytes(fig, fmt, 110, {"Date": None} if fmt == "svg" else None)


# --------------------------------------------------------------------------
# Colorimetric baseline against the human labels (from ``baseline_comparison``)
# --------------------------------------------------------------------------

PLOT_KINDS = ("scatter", "box")
PLOT_FORMATS = FORMATS


def _rho_text(result: dict[str, Any]) -> str:
    if result["rho"] is None:
        return f"n = {result['n']}: rho undefined"
    interval = ""
    if result["ci_low"] is not None:
        interval = f" [{result['ci_low']:.2f}, {result['ci_high']:.2f}]"
    return f"Spearman rho = {result['rho']:.2f}{interval}, n = {result['n']}"


def baseline_plot(comparison: dict[str, Any], *, kind: str, fmt: str, scale_name: str = "") -> bytes:
    """Draw a comparison as PNG or SVG bytes (matplotlib, Agg, no pyplot state).

    Parameters
    ----------
    comparison : dict
        A ``labeling.services.baselines.baseline_comparison`` result.
    kind : str
        ``"scatter"`` (mean label against ITA, apparent albedo and normalised
        apparent albedo) or ``"box"`` (ITA per consensus tone).
    fmt : str
        ``"png"`` or ``"svg"``.
    scale_name : str
        Shown on the label axis.

    Returns
    -------
    bytes
        The image file.

    ``baseline_plot(baseline_comparison(project=project), kind="box", fmt="png")`` gives PNG bytes
    (the baselines page draws each kind: ``labeling/views/baselines.py``).
    """
    if kind not in PLOT_KINDS or fmt not in PLOT_FORMATS:
        raise ValueError(f"unknown plot {kind}.{fmt}")
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    points = comparison["points"]
    label_axis = f"Mean human label{f' ({scale_name})' if scale_name else ''}"
    accent, flagged_colour = "#2f5d8a", "#b03a2e"
    if kind == "scatter":
        # No automatic layout: constrained/tight layout doubled the drawing time.
        fig = Figure(figsize=(12, 4.2))
        fig.subplots_adjust(left=0.05, right=0.99, bottom=0.13, top=0.83, wspace=0.25)
        axes = fig.subplots(1, 3)
        panels = [
            ("ita", "ITA (degrees), median over skin pixels"),
            ("apparent_albedo", "Apparent albedo (mean Y of skin)"),
            ("apparent_albedo_normalized", "Apparent albedo / image white"),
        ]
        for ax, (measure, xlabel) in zip(axes, panels, strict=True):
            for flagged, style in (
                (False, {"color": accent}),
                (True, {"facecolors": "none", "edgecolors": flagged_colour}),
            ):
                xs = [p[measure] for p in points if bool(p["flags"]) == flagged and p[measure] is not None]
                ys = [p["mean_label"] for p in points if bool(p["flags"]) == flagged and p[measure] is not None]
                if xs:
                    ax.scatter(xs, ys, s=22, alpha=0.8, label="flagged" if flagged else "not flagged", **style)
            ax.set_xlabel(xlabel)
            ax.set_ylabel(label_axis)
            ax.set_title(_rho_text(comparison["correlations"][measure]), fontsize=9)
            ax.grid(alpha=0.3)
        if any(p["flags"] for p in points):
            axes[0].legend(fontsize=8, loc="best")
        fig.suptitle(f"Human labels vs colorimetric baseline: {comparison['phase']}", fontsize=11)
    else:
        fig = Figure(figsize=(8, 4.5))
        fig.subplots_adjust(left=0.09, right=0.98, bottom=0.12, top=0.86)
        ax = fig.subplots()
        tones = sorted(int(t) for t in comparison["by_tone"])
        data = [comparison["by_tone"][str(t)] for t in tones]
        if data:
            ax.boxplot(data, positions=tones, widths=0.6, showfliers=False)
            rng = np.random.default_rng(0)  # jitter only
            for t, ys in zip(tones, data, strict=True):
                ax.scatter(t + rng.uniform(-0.15, 0.15, len(ys)), ys, s=12, color=accent, alpha=0.6, zorder=3)
                ax.annotate(
                    f"n={len(ys)}", (t, 1.0), xycoords=("data", "axes fraction"), ha="center", va="bottom", fontsize=8
                )
            ax.set_xticks(tones)
        for bound, _name in ITA_CLASSES[:-1]:
            ax.axhline(bound, color="#999999", lw=0.7, ls="--")
        ax.set_xlabel("Consensus tone (median label, rounded)")
        ax.set_ylabel("ITA (degrees)")
        ax.set_title(
            f"ITA per consensus tone: {comparison['phase']} (dashed: Chardon/Del Bino class bounds)",
            fontsize=10,
            pad=16,
        )
        ax.grid(alpha=0.3, axis="y")
    if not points:
        fig.text(0.5, 0.5, "No labelled images with a baseline yet", ha="center", va="center")
    buffer = io.BytesIO()
    metadata = {"Date": None} if fmt == "svg" else None
    with matplotlib.rc_context({"svg.hashsalt": "fairtone", "svg.fonttype": "none"}):
        fig.savefig(buffer, format=fmt, dpi=110, metadata=metadata)
    return buffer.getvalue()


# --------------------------------------------------------------------------
# A phase's progress over time (rendered as inline SVG by labeling/_progress_chart.html)
# --------------------------------------------------------------------------

#: One colour per labeler (Tableau 10, colour-blind-safer than matplotlib's default cycle); repeats after ten.
LABELER_COLOURS = (
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#76b7b2",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
)


def _nice_step(top: int, max_ticks: int = 5) -> int:
    """A step of 1, 2 or 5 x 10^k giving at most ``max_ticks`` ticks up to ``top``."""
    step = 1
    while True:
        for factor in (1, 2, 5):
            if top / (step * factor) <= max_ticks:
                return step * factor
        step *= 10


def progress_chart(progress: dict, *, width: int = 720, height: int = 240) -> dict:
    """Geometry of a stacked bar chart of labels per day and per labeler (from ``phase_labels_per_day``).

    Every number is computed here; the template only places the shapes (Django escapes every text),
    so the chart is served with the page: no script, no image request, nothing from elsewhere.
    """
    days = progress["days"]
    if not days:
        return {"empty": True}
    left, right, top, bottom = 44, 10, 12, 34
    plot_w, plot_h = width - left - right, height - top - bottom
    highest = max(progress["per_day"]) or 1
    step = _nice_step(highest)
    y_max = -(-highest // step) * step
    slot = plot_w / len(days)
    bar_w = max(slot * 0.8, 1.0)
    bars = []
    for i, day in enumerate(days):
        x = left + i * slot + (slot - bar_w) / 2
        base = top + plot_h
        for j, labeler in enumerate(progress["labelers"]):
            n = labeler["per_day"][i]
            if not n:
                continue
            h = n / y_max * plot_h
            base -= h
            bars.append(
                {
                    "x": round(x, 2),
                    "y": round(base, 2),
                    "w": round(bar_w, 2),
                    "h": round(h, 2),
                    "colour": LABELER_COLOURS[j % len(LABELER_COLOURS)],
                    "title": f"{labeler['pseudonym']}, {day}: {n} label{'s' if n != 1 else ''}",
                }
            )
    y_ticks = [{"y": round(top + plot_h - v / y_max * plot_h, 2), "label": v} for v in range(0, y_max + 1, step)]
    every = max(1, -(-len(days) // 8))
    x_ticks = [
        {"x": round(left + i * slot + slot / 2, 2), "label": day[5:]} for i, day in enumerate(days) if i % every == 0
    ]
    legend = [
        {"pseudonym": labeler["pseudonym"], "total": labeler["total"], "colour": LABELER_COLOURS[j % 10]}
        for j, labeler in enumerate(progress["labelers"])
    ]
    return {
        "empty": False,
        "width": width,
        "height": height,
        "left": left,
        "right": width - right,
        "top": top,
        "baseline": top + plot_h,
        "bars": bars,
        "y_ticks": y_ticks,
        "x_ticks": x_ticks,
        "x_label_y": top + plot_h + 16,
        "legend": legend,
        "summary": f"{progress['total']} labels from {progress['first_day']} to {progress['last_day']}",
    }


# --------------------------------------------------------------------------- the data card's plots


def _text_colour(hex_colour: str) -> str:
    if not is_hex_colour(hex_colour):
        return "#000000"
    r, g, b = (int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
    return "#000000" if 0.299 * r + 0.587 * g + 0.114 * b > 140 else "#ffffff"


def _card_colour(hex_colour: str) -> str:
    return hex_colour if is_hex_colour(hex_colour) else _GREY


def _plot_scale(fig, facts: dict) -> None:
    tones = facts["scale"]["tones"]
    ax = fig.subplots()
    if not tones:
        _message(ax, "The scale has no tones.")
        return
    from matplotlib.patches import Rectangle

    for i, tone in enumerate(tones):
        colour = _card_colour(tone["hex"])
        ax.add_patch(Rectangle((i, 0), 0.92, 1, facecolor=colour, edgecolor="#333", linewidth=0.6))
        ax.text(i + 0.46, 0.5, tone["code"], ha="center", va="center", color=_text_colour(colour), fontsize=10)
        ax.text(i + 0.46, -0.12, tone["name"], ha="center", va="top", fontsize=7, rotation=30 if len(tones) > 6 else 0)
    ax.set_xlim(-0.1, len(tones))
    ax.set_ylim(-0.8, 1.05)
    ax.set_axis_off()
    ax.set_title(f"{facts['scale']['name']} (1 = lightest)", fontsize=9, loc="left")


def _plot_final(fig, facts: dict) -> None:
    f = facts["final_labels"]
    ax = fig.subplots()
    tones = f["tones"]
    if not tones or not f["n_with_final_tone"]:
        _message(ax, "No image has a final tone.")
        return
    x = list(range(1, len(tones) + 1))
    # A share too uncertain to report gets its interval only, no bar.
    shares = [t["share"]["k"] / t["share"]["n"] * 100 for t in tones]
    low = [s - t["share"]["ci_low"] * 100 for s, t in zip(shares, tones, strict=True)]
    high = [t["share"]["ci_high"] * 100 - s for s, t in zip(shares, tones, strict=True)]
    colours = [_card_colour(t["hex"]) for t in tones]
    bars = [0.0 if t["share"]["value"] is None else s for s, t in zip(shares, tones, strict=True)]
    ax.bar(x, bars, width=0.8, color=colours, edgecolor="#333", linewidth=0.6)
    ax.errorbar(x, shares, yerr=[low, high], fmt="none", ecolor="#222", elinewidth=1, capsize=3)
    threshold = f["under_represented_threshold"] * 100
    ax.axhline(threshold, color=_RED, linestyle="--", linewidth=1)
    ax.annotate(
        "under-represented below",
        (0.99, threshold),
        xycoords=("axes fraction", "data"),
        ha="right",
        va="bottom",
        fontsize=7,
        color=_RED,
    )
    for xi, tone in zip(x, tones, strict=True):
        ax.annotate(
            str(tone["share"]["k"]),
            (xi, tone["share"]["ci_high"] * 100),
            xytext=(0, 2),
            textcoords="offset points",
            ha="center",
            fontsize=7,
            color=_RED if tone["under_represented"] else "#222",
        )
    ax.set_xticks(x, [t["code"] for t in tones])
    ax.set_xlabel("Final tone (number above the bar: images)")
    ax.set_ylabel("% of images with a final tone")
    ax.set_ylim(0, max(max(t["share"]["ci_high"] for t in tones) * 100 * 1.15, threshold * 1.5, 1))
    ax.set_title(f"{f['n_with_final_tone']} images; bars: Wilson 95% intervals", fontsize=9, loc="left")


def _plot_agreement(fig, facts: dict) -> None:
    phases = [p for p in facts["agreement"]["phases"] if "alpha" in p]
    if not phases:
        _message(fig.subplots(), "No phase has labels.")
        return
    left, right = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1, 1.6]})
    names = [p["name"] for p in phases]
    x = list(range(len(phases)))
    for threshold, label in ((0.8, "reliable"), (0.667, "tentative")):
        left.axhline(threshold, color=_GREY, linestyle="--", linewidth=0.8)
        left.annotate(label, (0.01, threshold), xycoords=("axes fraction", "data"), va="bottom", fontsize=7)
    for xi, phase in zip(x, phases, strict=True):
        ordinal = phase["alpha"]["ordinal"]
        if ordinal["value"] is None:
            if ordinal.get("too_wide") and ordinal["ci_low"] is not None:
                # Too uncertain to report: the interval alone, no point.
                left.plot([xi, xi], [ordinal["ci_low"], ordinal["ci_high"]], color=_RED, linewidth=1.2)
                left.annotate("too little data", (xi, ordinal["ci_high"]), ha="center", va="bottom", fontsize=7)
                continue
            left.annotate("too little\ndata", (xi, 0.5), ha="center", va="center", fontsize=7, color=_RED)
            continue
        lo = ordinal["ci_low"] if ordinal["ci_low"] is not None else ordinal["value"]
        hi = ordinal["ci_high"] if ordinal["ci_high"] is not None else ordinal["value"]
        left.errorbar(
            [xi],
            [ordinal["value"]],
            yerr=[[ordinal["value"] - lo], [hi - ordinal["value"]]],
            fmt="o",
            color=_ACCENT,
            capsize=3,
        )
    left.set_xticks(x, names, rotation=20, ha="right")
    left.set_xlim(-0.6, len(phases) - 0.4)
    # Down to the lowest interval shown (a hidden alpha's interval can reach far below 0), never above -0.2.
    lows = [p["alpha"]["ordinal"]["ci_low"] for p in phases if p["alpha"]["ordinal"].get("ci_low") is not None]
    left.set_ylim(min([-0.2] + [low - 0.05 for low in lows]), 1.05)
    left.set_ylabel("Krippendorff's alpha (ordinal)")
    left.set_title("Alpha, 95% BCa bootstrap interval", fontsize=9, loc="left")
    measures = (("near", "#2f5d8a"), ("overlap", "#7fa7c9"), ("complete", "#c9d9e8"))
    width = 0.26
    wide_labelled = False
    for j, (measure, colour) in enumerate(measures):
        labelled = False
        for xi, phase in zip(x, phases, strict=True):
            p = phase["consensus"][measure]
            position = xi + (j - 1) * width
            if p["value"] is None and p.get("too_wide"):
                # Too uncertain to report: the interval alone, no bar.
                right.plot(
                    [position, position],
                    [p["ci_low"] * 100, p["ci_high"] * 100],
                    color=_RED,
                    linewidth=1.2,
                    label=None if wide_labelled else "interval only: too wide to report a share",
                )
                wide_labelled = True
                continue
            if p["value"] is None:
                if j == 1:
                    right.annotate("too little data", (xi, 50), ha="center", va="center", fontsize=7, color=_RED)
                continue
            value = p["value"] * 100
            right.bar(
                [position],
                [value],
                width=width,
                color=colour,
                edgecolor="#333",
                linewidth=0.5,
                label=None if labelled else f"{measure} consensus",
            )
            labelled = True
            right.errorbar(
                [position],
                [value],
                yerr=[[value - p["ci_low"] * 100], [p["ci_high"] * 100 - value]],
                fmt="none",
                ecolor="#222",
                elinewidth=0.9,
                capsize=2,
            )
    right.set_xticks(x, names, rotation=20, ha="right")
    right.set_xlim(-0.6, len(phases) - 0.4)
    right.set_ylim(0, 105)
    right.set_ylabel("% of images with 2+ labels")
    right.set_title("Consensus, Wilson 95% intervals", fontsize=9, loc="left")
    handles, _labels = right.get_legend_handles_labels()
    if handles:
        right.legend(fontsize=7, loc="upper right")


_CARD_PLOTTERS = {
    # name: (drawer, figure size, the facts it reads: its cache key)
    "scale": (_plot_scale, lambda facts: (max(6.0, 0.75 * len(facts["scale"]["tones"])), 1.9), "scale"),
    "agreement": (_plot_agreement, lambda facts: (8.0, 3.6), "agreement"),
    "final_labels": (_plot_final, lambda facts: (7.0, 3.6), "final_labels"),
}
#: Drawn card plots by the sha256 of the facts they read (at most ``_CARD_PLOT_CACHE_SIZE``, oldest out).
#: A plot is a pure function of those facts (byte-identical for equal facts), so a release of the same
#: scale (every MST project's scale plot) or a rebuild with unchanged numbers reuses the bytes instead of
#: drawing again: matplotlib takes about 0.15 s a plot, half of a small release's build.
_CARD_PLOT_CACHE: OrderedDict[str, bytes] = OrderedDict()
_CARD_PLOT_CACHE_SIZE = 64
_CARD_PLOT_LOCK = threading.Lock()


def card_plots_cache_clear() -> None:
    """Forget every drawn card plot (tests that check matplotlib's own output)."""
    with _CARD_PLOT_LOCK:
        _CARD_PLOT_CACHE.clear()


def _card_plot_key(name: str, facts_read: Any) -> str:
    text = json.dumps([name, facts_read], sort_keys=True, separators=(",", ":"), default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


def card_plots(facts: dict) -> dict[str, bytes]:
    """The data card's plots from its facts (``services.releases.card_facts``): ``{\"plots/<name>.png\": bytes}``,
    byte-identical for equal facts (no Software or date metadata, a fixed SVG hash salt); a plot whose facts
    were drawn before comes from the cache (``_CARD_PLOT_CACHE``)."""
    out = {}
    for name, (draw, size, reads) in _CARD_PLOTTERS.items():
        key = _card_plot_key(name, facts[reads])
        with _CARD_PLOT_LOCK:
            png = _CARD_PLOT_CACHE.get(key)
            if png is not None:
                _CARD_PLOT_CACHE.move_to_end(key)
        if png is None:
            png = _card_plot_draw(draw, size(facts), facts)
            with _CARD_PLOT_LOCK:
                _CARD_PLOT_CACHE[key] = png
                while len(_CARD_PLOT_CACHE) > _CARD_PLOT_CACHE_SIZE:
                    _CARD_PLOT_CACHE.popitem(last=False)
        out[f"plots/{name}.png"] = png
    return out


def _card_plot_draw(draw, figsize: tuple[float, float], facts: dict) -> bytes:
    import matplotlib

    matplotlib.use("Agg")  # no display; a no-op when already set
    from matplotlib.figure import Figure

    with matplotlib.rc_context({"svg.hashsalt": "fairtone", "font.size": 9, "font.family": "DejaVu Sans"}):
        fig = Figure(figsize=figsize, layout="constrained")
        draw(fig, facts)
        # No metadata (no "Software" naming the matplotlib version, no date): the same facts, the same bytes.
        return _figure_bytes(fig, "png", 100)
