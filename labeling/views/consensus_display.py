"""What the consensus pages show, built from the service's numbers: text and table rows only.

The views fetch; this module formats (numbers as text, the tables' rows and columns), so
the templates only print and the views hold no presentation.
"""

from .. import plots
from ..services import consensus as svc

COMPARISON_ROWS = [
    ("Near consensus (all values within one tone)", ("near_consensus",), "pct"),
    ("Overlap consensus (all selections share a tone)", ("overlap_consensus",), "pct"),
    ("Complete consensus (identical selections)", ("complete_consensus",), "pct"),
    ("Pairs of labels that agree exactly", ("percent_exact",), "pct"),
    ("Pairs of labels within one tone", ("percent_within_one",), "pct"),
    ("Krippendorff's alpha, ordinal", ("alpha", "ordinal"), "alpha"),
    ("Krippendorff's alpha, interval", ("alpha", "interval"), "num"),
    ("Fleiss' kappa (nominal)", ("fleiss_kappa",), "num"),
]

#: The headline numbers of the selected phase, at the top of the dashboard (the rest is a click away).
SUMMARY_ROWS = [
    ("Krippendorff's alpha, ordinal", ("alpha", "ordinal"), "alpha"),
    ("Near consensus (all values within one tone)", ("near_consensus",), "pct"),
    ("Overlap consensus (all selections share a tone)", ("overlap_consensus",), "pct"),
    ("Pairs of labels within one tone", ("percent_within_one",), "pct"),
]

IMAGE_COLUMNS = [
    ("image_id", "Image"),
    ("n_valid", "Valid"),
    ("mean", "Mean"),
    ("std", "Std"),
    ("median", "Median"),
    ("mode", "Mode"),
    ("min", "Min"),
    ("max", "Max"),
    ("range", "Range"),
    ("complete_consensus", "Complete"),
    ("overlap_consensus", "Overlap"),
    ("near_consensus", "Near"),
    ("n_unique_values", "Unique"),
    ("n_connected_groups", "Groups"),
    ("any_uncertainty", "Uncertain"),
]

FILTER_TITLES = {
    "complete_consensus": "Complete",
    "overlap_consensus": "Overlap",
    "near_consensus": "Near",
    "any_uncertainty": "Uncertain",
    "wide_range": f"Range ≥ {svc.WIDE_RANGE}",
}


def display(obj):
    """Copy of a dashboard dict where every ``{"value", "reason"}`` gets ``pct``, ``num`` and ``signed`` texts."""
    if isinstance(obj, list):
        return [display(x) for x in obj]
    if not isinstance(obj, dict):
        return obj
    out = {k: display(v) for k, v in obj.items()}
    if "value" in obj and "reason" in obj:
        value = obj["value"]
        out["pct"] = None if value is None else f"{value * 100:.1f}%"
        out["num"] = None if value is None else f"{value:.3f}"
        out["signed"] = None if value is None else f"{value:+.2f}"
    return out


def _agreement_cell(summary: dict, path: tuple[str, ...]) -> dict:
    """One measure of a phase; a rate carries its 95% interval (``low``, ``high``, ``n``) itself."""
    cell = summary["agreement"]
    for key in path:
        cell = cell[key]
    return cell


def summary_context(selected: dict | None) -> dict | None:
    """The selected phase in a few numbers: agreement with intervals, counts, and the labelers to look at
    first (largest bias; the one without whom the panel agrees most). Facts with their numbers, no verdict
    beyond alpha's published thresholds."""
    if not selected:
        return None
    labelers = selected.get("per_labeler") or []

    def value(stat: dict | None):
        return None if not stat else stat.get("value")

    with_bias = [r for r in labelers if value(r["bias"]["mean_diff"]) is not None]
    with_change = [r for r in labelers if value(r.get("alpha_change")) is not None]
    # Read from the intervals: the labeler whose interval lies furthest from 0 when any excludes it,
    # else the largest point (said to be within chance).
    shown = [r for r in with_bias if r["bias"]["mean_diff"].get("reading") in ("deeper", "lighter")]

    def distance(r: dict) -> float:
        b = r["bias"]["mean_diff"]
        return b["low"] if b["low"] > 0 else -b["high"]

    if shown:
        biased = max(shown, key=distance)
    else:
        biased = max(with_bias, key=lambda r: abs(value(r["bias"]["mean_diff"])), default=None)
    raises = max(with_change, key=lambda r: value(r["alpha_change"]), default=None)
    return {
        "cells": [
            {"label": label, "s": _agreement_cell(selected, path), "fmt": fmt} for label, path, fmt in SUMMARY_ROWS
        ],
        "biased": biased,
        "bias_shown": bool(shown),
        "raises": raises if raises is not None and value(raises["alpha_change"]) > 0 else None,
    }


def comparison_rows(phases: list[dict]) -> list[dict]:
    """One row per agreement measure, one cell per phase."""
    return [
        {"label": label, "cells": [_agreement_cell(s, path) for s in phases], "fmt": fmt}
        for label, path, fmt in COMPARISON_ROWS
    ]


def calibration_2_rows(phases: list[dict]) -> list[dict]:
    """Calibration 2's agreement on its new images only and on all its images, side by side."""
    rows = []
    for summary in phases:
        everything = summary.get("agreement_all_images")
        if not everything:
            continue
        rows.append(
            {
                "phase": summary["phase"],
                "n_new": summary["n_images_2plus"],
                "n_all": everything["n_images_2plus"],
                "measures": [
                    {
                        "label": label,
                        "new": _agreement_cell(summary, path),
                        "all": _agreement_cell(everything, path),
                        "fmt": fmt,
                    }
                    for label, path, fmt in COMPARISON_ROWS
                ],
            }
        )
    return rows


def _distribution_cells(phases: list[dict], index: int, value: float) -> list[dict]:
    cells = []
    for summary in phases:
        dist = summary["label_distribution"]
        total = sum(dist["counts"]) or 1
        count = dist["counts"][index]
        shares = dist.get("shares") or []
        cells.append(
            {
                "count": count,
                "pct": f"{count / total * 100:.1f}%",
                # The share of labels with its image-clustered interval (or "too little data").
                "share": shares[index] if index < len(shares) else None,
                "few": value % 1 == 0 and int(value) in dist["under_represented"],
            }
        )
    return cells


def distribution_rows(phases: list[dict], tones: dict[int, dict]) -> list[dict]:
    """One row per tone (and per half-step somebody used), one cell per phase."""
    if not phases:
        return []
    rows = []
    for index, value in enumerate(phases[0]["label_distribution"]["values"]):
        cells = _distribution_cells(phases, index, value)
        if value % 1 and not any(c["count"] for c in cells):
            continue  # half-steps nobody used
        tone = tones.get(int(value)) if value % 1 == 0 else None
        rows.append(
            {
                "label": f"{value:g}" if tone is None else f"{tone['code']}",
                "hex": tone and tone["hex"],
                "pair": bool(value % 1),
                "cells": cells,
            }
        )
    return rows


def drift_rows(labelers: list[dict], phases: list[dict]) -> list[dict]:
    """Each labeler's baseline in each phase."""
    return [
        {
            "labeler": row["labeler"],
            "cells": [next((b for b in row["baseline"] if b["phase_id"] == s["phase"]["id"]), None) for s in phases],
        }
        for row in labelers
    ]


def _kappa_cell(kappa: dict, row: int, col: int) -> dict:
    """One kappa of the matrix: its text, and its images in common and 95% interval as the cell's title."""
    value, n = kappa["matrix"][row][col], kappa["n_common"][row][col]
    lows, highs, wide = kappa.get("low"), kappa.get("high"), kappa.get("too_wide")  # absent in old caches
    low, high = (lows[row][col], highs[row][col]) if lows and highs else (None, None)
    too_wide = bool(wide and wide[row][col])
    interval = "" if low is None or high is None else f"; 95% interval {low:.2f} to {high:.2f}"
    if too_wide:
        return {
            "text": "too little data",
            "n": n,
            "too_wide": True,
            "title": f"too little data: n={n} images in common{interval} (wider than {kappa['max_width']:g})",
        }
    return {
        "text": "—" if value is None else f"{value:.2f}",
        "n": n,
        "too_wide": False,
        "title": f"{n} images in common{interval}",
    }


def kappa_rows(selected: dict | None) -> list[dict]:
    """The labeler x labeler kappa matrix of the selected phase, as text with the images in common and
    each kappa's interval (a too-wide one says "too little data")."""
    if not selected:
        return []
    kappa = selected["kappa"]
    return [
        {"labeler": name, "cells": [_kappa_cell(kappa, i, j) for j in range(len(kappa["labelers"]))]}
        for i, name in enumerate(kappa["labelers"])
    ]


def dashboard_context(dashboard: dict) -> dict:
    """Everything the dashboard page prints."""
    dashboard = display(dashboard)
    phases = dashboard["phases"]
    selected = dashboard["selected"]
    return {
        "dashboard": dashboard,
        "selected": selected,
        "summary": summary_context(selected),
        "kappa_rows": kappa_rows(selected),
        "phases": phases,
        "comparison": comparison_rows(phases),
        "calibration_2": calibration_2_rows(phases),
        "rate_comparisons": dashboard.get("rate_comparisons", []),
        "distribution": distribution_rows(phases, {t["position"]: t for t in dashboard["project"]["tones"]}),
        "drift_rows": drift_rows(dashboard["labelers"], phases),
        "plot_names": plots.PLOTS,
        "min_images": svc.MIN_IMAGES,
        "max_interval_points": round(svc.MAX_INTERVAL_WIDTH * 100),
        "max_coefficient_width": f"{svc.MAX_COEFFICIENT_WIDTH:g}",
        "zero_width_min_images": svc.ZERO_WIDTH_MIN_IMAGES,
        "coefficient_min_units": svc.COEFFICIENT_MIN_UNITS,
        "wide_range": svc.WIDE_RANGE,
    }


def images_page_context(params, phase) -> dict:
    """The images table's columns, filters and links (the query kept across pages and sorting)."""
    query = params.copy()
    query.pop("page", None)
    query.setdefault("phase", str(phase.pk))
    unordered = query.copy()
    unordered.pop("ordering", None)
    return {
        "params": params,
        "query": query.urlencode(),
        "query_without_ordering": unordered.urlencode(),
        "columns": IMAGE_COLUMNS,
        "boolean_filters": [(n, FILTER_TITLES[n], params.get(n, "")) for n in svc.BOOLEAN_FILTERS],
        "wide_range": svc.WIDE_RANGE,
    }
