"""The data card of a release, laid out from its facts (:func:`.card_facts.card_facts`): Markdown, HTML, JSON, plots.

Its sections follow Datasheets for Datasets [Gebru2021], CrowdWorkSheets [Diaz2022] and the Data Cards
Playbook [Pushkarna2022]. Purely presentational: no database, no clock. The card is built once as a list of blocks (heading,
paragraph, table, list, note, image, lead-written text) and written twice, as Markdown (plots referenced
as ``plots/<name>.png``) and as one self-contained HTML page (inline CSS, plots as ``data:`` URIs, no
external URL, a Content-Security-Policy that allows no script, every text HTML-escaped: the lead-written
texts, pseudonyms, tone names and attribute values are user input). ``data_card.json`` is the facts
themselves. The same facts give the same bytes: PNGs without the Software/date metadata, a fixed SVG hash
salt, sorted JSON keys.

The plots are drawn by ``labeling.plots.card_plots`` (the presentation floor, with every other plot), which
the app registers here when it is ready (:func:`card_plots_register`): services may not import that module
(the ``services-import-no-views`` import contract).
"""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Callable
from typing import Any

from ..consensus.numbers import MAX_INTERVAL_WIDTH
from ..markdown_text import escape_markdown_text
from .card_bands import agreement_by_band_blocks
from .card_texts import RELEASE_MAINTENANCE, RELEASE_PREPROCESSING, SENSITIVE_STATEMENT
from .rules import CARD_SECTIONS

__all__ = ["PLOT_NAMES", "SECTIONS", "card_plots_register", "card_render", "is_hex_colour"]

#: The card's sections (``##``), in order: Datasheets for Datasets' (Motivation, Composition, Collection,
#: Preprocessing, Uses, Distribution, Maintenance) with the annotation between Preprocessing and Uses as
#: CrowdWorkSheets asks (the scale, the protocol, the labelers, the process and what it gave). The lead's texts
#: are ``###`` under the section of their field (``rules.CARD_FIELDS``).
SECTIONS = (
    "Summary",
    "Motivation",
    "Composition",
    "Sensitive data",
    "Collection",
    "Preprocessing",
    "Skin-tone scale",
    "Annotation protocol",
    "Labelers",
    "Labeling process",
    "Agreement",
    "Agreement per tone band",
    "Test-retest",
    "Final labels",
    "Labels vs ITA",
    "Exclusions",
    "Known limitations of the method",
    "Uses",
    "Distribution",
    "Changes since the previous release",
    "Fields",
    "Maintenance",
)
#: The sections a lead-written field may belong to (``rules.CARD_SECTIONS``).
SECTION_KEYS = tuple(CARD_SECTIONS)
PREPROCESSING = RELEASE_PREPROCESSING
#: Plots of the card (``plots/<name>.png``) and their alt texts.
PLOT_NAMES = {
    "scale": "The scale's tones as shown to the labelers",
    "agreement": "Agreement per phase: ordinal alpha and consensus rates with their 95% intervals",
    "final_labels": "Final tone distribution with Wilson 95% intervals",
}
_ACCENT = "#2f5d8a"
_GREY = "#9a9a9a"
_RED = "#b03a2e"
_DASH = "–"  # between the bounds of an interval

Block = tuple


# --------------------------------------------------------------------------- formatting


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f}%"


#: Percentage points above which an interval is too wide to report a share (the dashboard's rule).
_WIDE = round(MAX_INTERVAL_WIDTH * 100)


def _ci_pct(p: dict[str, Any]) -> str:
    return f"95% CI {p['ci_low'] * 100:.1f}{_DASH}{p['ci_high'] * 100:.1f}%"


def _prop(p: dict[str, Any], *, of: bool = True) -> str:
    """``k of n, share (95% CI low–high%)``, or the reason why it is not shown.

    A share whose interval is too wide to read keeps its count and interval, without the share.
    """
    if p["value"] is None and p.get("too_wide"):
        return f"{p['k']} of {p['n']}, too little data for a share ({_ci_pct(p)}, wider than {_WIDE} points)"
    if p["value"] is None:
        return f"not reported ({p['reason']})"
    head = f"{p['k']} of {p['n']}, " if of else ""
    return f"{head}{_pct(p['value'])} ({_ci_pct(p)})"


def _num(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _stat(block: dict[str, Any], digits: int = 3) -> str:
    """A statistic, with its 95% interval when it has one (a kappa), or why it is not reported."""
    if block["value"] is None:
        return f"not reported ({block['reason']})"
    if block.get("ci_low") is not None and block.get("ci_high") is not None:
        return f"{_num(block['value'], digits)} (95% CI {block['ci_low']:.2f} to {block['ci_high']:.2f})"
    return _num(block["value"], digits)


def _date(text: str | None) -> str:
    return text[:10] if text else "—"


# --------------------------------------------------------------------------- the card as blocks


def _h(level: int, text: str) -> Block:
    return ("h", level, text)


def _p(text: str) -> Block:
    return ("p", text)


def _note(text: str) -> Block:
    return ("note", text)


def _table(headers: list[str], rows: list[list[Any]]) -> Block:
    return ("table", headers, rows)


def _list(items: list[str]) -> Block:
    return ("list", items)


def _img(name: str) -> Block:
    return ("img", name, PLOT_NAMES[name])


def _user(text: str) -> Block:
    return ("user", text)


def _swatch(hex_colour: str) -> tuple:
    return ("swatch", hex_colour)


def _summary(facts: dict) -> list[Block]:
    release, composition, final = facts["release"], facts["composition"], facts["final_labels"]
    labels = sum(p["n_labels"] for p in facts["process"]["phases"])
    previous = release.get("previous_version")
    return [
        _h(2, "Summary"),
        _p(
            f"Version {release['version']} of the fairness-evaluation dataset of project {release['project']}, "
            f"created {release['created_at']} ({release['code_version']})."
            + (f" Previous version: {previous}." if previous else " First release of this dataset.")
        ),
        _list(
            [
                f"Images: {composition['n_images']} ({final['n_included']} in the evaluation set, "
                f"{facts['exclusions']['n_excluded']} excluded), of {composition['n_subjects']} subjects.",
                f"Scale: {facts['scale']['name']} ({facts['scale']['n_tones']} tones).",
                f"Labels: {labels} by {facts['team']['n_labelers']} labelers over "
                f"{sum(1 for p in facts['process']['phases'] if p['n_labels'])} phases.",
                f"Final label: the {final['aggregation']} of each image's counted valid labels, rounded half up.",
            ]
        ),
        _p(
            "Every share on this card comes with its Wilson 95% confidence interval; a statistic computed from "
            f"fewer than {facts['agreement']['min_images']} images with two or more labels is not reported, and "
            f"a share whose interval is wider than {_WIDE} percentage points is given as its count and interval "
            "only (too little data to read a share)."
        ),
    ]


def _composition(facts: dict) -> list[Block]:
    c = facts["composition"]
    blocks = [_h(2, "Composition")]
    per = c["images_per_subject"]
    text = f"{c['n_images']} images of {c['n_subjects']} subjects (people)"
    if per:
        text += f"; images per subject: {per['min']} to {per['max']}, median {per['median']:g}"
    text += f". Images without a subject: {c['n_images_without_subject']}."
    blocks.append(_p(text))
    if not c["attributes"]:
        blocks.append(_p("No subject attribute was recorded."))
        return blocks
    blocks.append(
        _p(
            "Subject attributes, counted over subjects (each person once) with the share of all subjects and its "
            "95% interval; the images of those subjects alongside."
        )
    )
    for attribute in c["attributes"]:
        blocks.append(_h(3, f"Attribute: {attribute['key']}"))
        if attribute["summary"]:
            s = attribute["summary"]
            blocks.append(
                _p(
                    f"Numeric, recorded for {attribute['n_recorded']} of {attribute['n_subjects']} subjects: "
                    f"min {s['min']:g}, median {s['median']:g}, mean {s['mean']:.4g}, max {s['max']:g}."
                )
            )
        rows = [[row["value"], _prop(row["share"]), str(row["n_images"])] for row in attribute["values"]]
        if attribute["other"]:
            other = attribute["other"]
            rows.append([f"(other: {other['n_values']} values)", _prop(other["share"]), str(other["n_images"])])
        blocks.append(_table(["Value", "Subjects (share, 95% CI)", "Images"], rows))
    return blocks


def _scale(facts: dict) -> list[Block]:
    s = facts["scale"]
    text = f"{s['name']}: {s['n_tones']} tones, 1 = lightest."
    if s["citation"]:
        text += f" Source: {s['citation'].rstrip('.')}."
    order = ", ".join(str(p) for p in s["display_order"])
    text += f" The tones were shown all at once, in this fixed order (positions): {order}."
    rows = [[str(t["position"]), t["code"], t["name"], _swatch(t["hex"])] for t in s["tones"]]
    return [_h(2, "Skin-tone scale"), _p(text), _table(["Position", "Code", "Name", "Colour"], rows), _img("scale")]


def _profile(values: list[dict]) -> str:
    return ", ".join(f"{v['value']} {v['n']}" for v in values) or "—"


def _process(facts: dict) -> list[Block]:
    p, team = facts["process"], facts["team"]
    skips = ", ".join(p["skip_reasons"]) or "none"
    blocks = [
        _h(2, "Labeling process"),
        _p(
            "Labels per image are set per phase (table below; the project's default is "
            f"{p['labels_per_image']}); each labeler saw the images in their own shuffled order. "
            + (
                "A labeler could choose two adjacent tones when unsure (their midpoint is the value). "
                if p["allow_adjacent_pairs"]
                else "One tone per label. "
            )
            + ("An 'uncertain' flag was offered. " if p["offer_uncertain"] else "")
            + f"Skip reasons offered: {skips}."
        ),
        _p(
            f"Team: {team['n_labelers']} labelers. "
            + (
                f"Profiles of the {team['n_profiles_given']} who agreed to share them (as each gave them, counted, "
                "never per person): "
                f"gender: {_profile(team['profile']['gender'])}; "
                f"region of upbringing: {_profile(team['profile']['region_of_upbringing'])}; "
                f"expertise: {_profile(team['profile']['expertise'])}."
                if team.get("n_profiles_given", team["n_labelers"])
                else "No labeler agreed to share a profile."
            )
        ),
    ]
    rows = []
    for phase in p["phases"]:
        per_image = phase["labels_per_labelled_image"]
        selection = phase["selection"]
        chosen = selection["method"] or "—"
        if selection["seed"] is not None:
            chosen += f", seed {selection['seed']}"
        rows.append(
            [
                phase["name"],
                phase["status"],
                _date(phase["opened_at"]),
                _date(phase["closed_at"]),
                str(phase["n_images"])
                + (f" ({phase['n_repeated_images']} repeated)" if phase["n_repeated_images"] else ""),
                str(phase["n_labels"]) + (f" ({phase['n_repeat_labels']} repeats)" if phase["n_repeat_labels"] else ""),
                f"{phase['labels_per_image']} / {_num(per_image, 2)}",
                str(phase["n_labelers"]),
                chosen,
                str(phase["n_reflections"]),
                f"{phase['n_relabel_requests']} / {phase['n_corrections']}",
            ]
        )
    blocks.append(
        _table(
            [
                "Phase",
                "Status",
                "Opened",
                "Closed",
                "Images",
                "Labels",
                "Labels per image (target / achieved)",
                "Labelers",
                "Image selection",
                "Reflections",
                "Relabels / corrections",
            ],
            rows,
        )
    )
    seeds = [
        f"{phase['name']}: " + ", ".join(f"{s['labeler']} {s['seed']}" for s in phase["shuffle_seeds"])
        for phase in p["phases"]
        if phase["shuffle_seeds"]
    ]
    if seeds:
        blocks.append(_p("Seeds of each labeler's shuffled order, per phase (for reproducibility):"))
        blocks.append(_list(seeds))
    return blocks


def _alpha_text(alpha: dict) -> str:
    ordinal = alpha["ordinal"]
    if ordinal["value"] is None:
        return f"Krippendorff's alpha (ordinal): not reported ({ordinal['reason']})."
    text = f"Krippendorff's alpha (ordinal): {ordinal['value']:.3f}"
    if ordinal["ci_low"] is not None:
        text += f" (95% CI {ordinal['ci_low']:.3f} to {ordinal['ci_high']:.3f}; {alpha['interval_method']}" + (
            f", {alpha['n_resamples']} resamples)" if alpha.get("n_resamples") else ")"
        )
    text += f": {ordinal['reading'] or ordinal['interpretation']}."
    q = ordinal.get("q") or {}
    if q.get("tentative") is not None and q.get("reliable") is not None:
        text += (
            f" Bootstrap chance that alpha falls below .667: {q['tentative']:.1%}; below .800: {q['reliable']:.1%} "
            "(Hayes & Krippendorff's q). "
            f"The interval resamples {alpha.get('resampled', 'images')}, not the labelers: it is conditional on "
            "this labeler panel."
        )
    interval = alpha["interval"]
    if interval["value"] is not None:
        text += f" Interval alpha alongside: {interval['value']:.3f}"
        if interval.get("ci_low") is not None:
            text += f" (95% CI {interval['ci_low']:.3f} to {interval['ci_high']:.3f})"
        text += "."
    elif (interval.get("reason") or "").startswith("too little data: n="):
        text += f" Interval alpha alongside: not reported ({interval['reason']})."
    return text


def _agreement(facts: dict) -> list[Block]:
    a = facts["agreement"]
    d = a["definitions"]
    blocks = [
        _h(2, "Agreement"),
        _p(
            "Between labelers, per phase (calibration-2 repeats left out). Labels are ordinal, so agreement is "
            "Krippendorff's alpha, ordinal (reliable from .800, tentative from .667, otherwise not reliable). "
            f"Near consensus: {d['near']}; overlap consensus: {d['overlap']}; complete consensus: "
            f"{d['complete']}; over images with two or more valid labels."
        ),
        _img("agreement"),
    ]
    for phase in a["phases"]:
        blocks.append(_h(3, phase["name"]))
        if "alpha" not in phase:
            blocks.append(_note(f"Not reported: {phase['reason']}."))
            continue
        blocks.append(
            _p(
                f"{phase['n_labels']} labels by {phase['n_labelers']} labelers on {phase['n_images']} images; "
                f"{phase['n_images_2plus']} images with two or more valid labels."
            )
        )
        if phase["reason"]:
            blocks.append(_note(f"Agreement is not reported for this phase: {phase['reason']}."))
        blocks.append(_p(_alpha_text(phase["alpha"])))
        consensus = phase["consensus"]
        flags = phase["flags"]
        blocks.append(
            _table(
                ["Measure", "Images (share, 95% CI)"],
                [
                    ["Near consensus", _prop(consensus["near"])],
                    ["Overlap consensus", _prop(consensus["overlap"])],
                    ["Complete consensus", _prop(consensus["complete"])],
                    ["Labels spanning 3+ tones", _prop(flags["wide_range"])],
                    ["Any label flagged uncertain", _prop(flags["uncertain"])],
                    ["Any invalid (non-adjacent) pair", _prop(flags["invalid"])],
                ],
            )
        )
        if phase["k_of_n"]:
            blocks.append(
                _p(
                    f"k of n labelers agreed exactly ({d['k_of_n']}; between labelers, so calibration-2 "
                    "repeats, the test-retest labels, are left out):"
                )
            )
            blocks.append(
                _table(
                    ["Labels on the image (n)", "Largest agreeing group (k)", "Images (share of those with n, 95% CI)"],
                    [[str(r["n_labels"]), str(r["k_agreed"]), _prop(r)] for r in phase["k_of_n"]],
                )
            )
        if phase["unique_values"]:
            blocks.append(_p("Distinct values per image (images with two or more labels):"))
            blocks.append(
                _table(
                    ["Distinct values", "Images (share, 95% CI)"],
                    [[str(r["n_unique_values"]), _prop(r)] for r in phase["unique_values"]],
                )
            )
    return blocks


def _retest_cells(row: dict) -> list[str]:
    return [
        str(row["n"]),
        _prop(row["exact"]),
        _prop(row["within_one"]),
        _stat(row["weighted_kappa"]),
        _stat(row["mean_shift"], 2),
    ]


def _test_retest(facts: dict) -> list[Block]:
    r = facts["test_retest"]
    blocks = [
        _h(2, "Test-retest"),
        _p(
            "The same labeler on the same image weeks apart: calibration-1 images shown again in calibration 2"
            + (f" ({r['n_repeated_images']} images)" if r["n_repeated_images"] else "")
            + ". Mean shift: calibration 2 minus calibration 1 (+ = deeper). The pairs of all labelers on one "
            "image are not independent, so the intervals of the all-labelers row are clustered by image."
        ),
    ]
    if r["pooled"] is None:
        blocks.append(_note(f"Not reported: {r['reason']}."))
        return blocks
    headers = ["Labeler", "Pairs", "Same value (95% CI)", "Within one tone (95% CI)", "Weighted kappa", "Mean shift"]
    rows = [[row["labeler"], *_retest_cells(row)] for row in r["per_labeler"]]
    rows.append(["All labelers", *_retest_cells(r["pooled"])])
    blocks.append(_table(headers, rows))
    return blocks


def _final(facts: dict) -> list[Block]:
    f = facts["final_labels"]
    phases = f["phases"] if isinstance(f["phases"], str) else ", ".join(f["phases"])
    blocks = [
        _h(2, "Final labels"),
        _p(
            f"Final value: the {f['aggregation']} of each image's counted valid labels (mode ties: {f['tie']}), "
            f"rounded half up to a tone; labels counted from phases: {phases} (a labeler at most once per image, "
            f"calibration-2 repeats never); at least {f['min_valid_labels']} valid labels needed. "
            f"{f['n_with_final_tone']} of the {f['n_included']} included images have a final tone"
            + (f" ({f['n_included_without_tone']} have none)." if f["n_included_without_tone"] else ".")
        ),
        _table(
            ["Tone", "Name", "Colour", "Images (share, 95% CI)", "Note"],
            [
                [
                    t["code"],
                    t["name"],
                    _swatch(t["hex"]),
                    _prop(t["share"]),
                    t.get("reading", "") if t["under_represented"] else "",
                ]
                for t in f["tones"]
            ],
        ),
        _img("final_labels"),
    ]
    threshold = f["under_represented_threshold"]
    for t in f["tones"]:
        if not t["under_represented"]:
            continue
        share = t["share"]
        if t.get("reading") == "absent":
            blocks.append(
                _note(
                    f"Tone {t['code']} ({t['name']}) is absent: 0 of {share['n']} images have it; no score on this "
                    f"dataset says anything about this tone."
                )
            )
            continue
        certainty = (
            "the whole interval lies below the threshold"
            if t["clearly_under_represented"]
            else "the interval reaches above the threshold, so this is not certain"
        )
        blocks.append(
            _note(
                f"Tone {t['code']} ({t['name']}) is under-represented: {share['k']} of {share['n']} images, "
                f"{_pct(share['value'])} ({_ci_pct(share)}), below half of an even share "
                f"(threshold {threshold:.3f} of the images); {certainty}."
            )
        )
    if f["tones"] and not f["under_represented"] and f["n_with_final_tone"]:
        blocks.append(_p(f"No tone is under-represented ({f['under_represented_rule']})."))
    if f["unknown_tones"]:
        blocks.append(
            _note(
                "Final tones outside the scale: " + ", ".join(f"{u['position']} ({u['n']})" for u in f["unknown_tones"])
            )
        )
    return blocks


def _rho_text(what: str, c: dict) -> str:
    if c["rho"] is None:
        return f"{what}: not reported ({c['reason']})."
    interval = ""
    if c["ci_low"] is not None:
        method = (
            "Fisher's z with Bonett and Wright's variance"
            if c.get("interval_method") == "fisher_z_bonett_wright"
            else f"bootstrap, {c['n_resamples']} resamples"
        )
        interval = f" (95% CI {c['ci_low']:.2f} to {c['ci_high']:.2f}; {method})"
    return f"{what}: Spearman's rho = {c['rho']:.2f}{interval}, n = {c['n']} images."


def _labels_vs_ita(facts: dict) -> list[Block]:
    v = facts["labels_vs_ita"]
    b = v["baselines"]
    blocks = [
        _h(2, "Labels vs ITA"),
        _p(
            f"Human labels against the colorimetric baseline, by rank correlation (not by mapping swatches to ITA). "
            f"Human value: {v['label_definition']}; expected sign: {v['expected_sign']}. Baseline parameters "
            f"{v['parameters_hash'][:12]}, {v['code_version']}."
        ),
        _list(
            [
                _rho_text("Mean label vs ITA", v["ita"]),
                _rho_text("Mean label vs ITA, images without a quality flag only", v["ita_unflagged"]),
                _rho_text("Mean label vs apparent albedo", v["apparent_albedo"]),
                _rho_text("Mean label vs normalised apparent albedo", v["apparent_albedo_normalized"]),
            ]
        ),
        _p(
            f"Baselines: {b['n_ok']} of {b['n_images']} images computed ({b['n_flagged']} with a quality flag), "
            f"{b['n_failed']} failed, {b['n_missing']} not computed. Compared images with a quality flag: "
            f"{v['n_flagged']}."
        ),
    ]
    if b["n_ok"]:
        blocks.append(
            _table(
                ["ITA class (Chardon / Del Bino)", "Images (share, 95% CI)"],
                [[row["class"], _prop(row["share"])] for row in b["ita_classes"]],
            )
        )
    flagged = [f"{row['name']}: {row['n']}" for row in b["flags"] if row["n"]]
    if flagged:
        blocks.append(_p("Quality flags: " + "; ".join(flagged) + "."))
    audit = v.get("coverage_audit")  # cards written before issue 21 have none
    if audit:
        gap = audit["gap"]
        spans = {
            b["band"]: f"{audit['tone_name']} {b['first_tone']}"
            + (f"-{b['last_tone']}" if b["last_tone"] != b["first_tone"] else "")
            for b in audit["bands"]
        }
        found = [
            f"{_prop(audit[name])} of {spans[name]} images" if audit[name] else f"no {spans[name]} images"
            for name in ("deep", "light")
        ]
        text = (
            f"Faces found by labelled tone: the automatic baseline found a face in {found[0]} and {found[1]} "
            f"({audit['skin_detector']})."
        )
        if audit["warning"]:
            text += (
                f" Warning: the gap ({gap['difference']:.2f}, 95% CI {gap['ci_low']:.2f} to {gap['ci_high']:.2f}, "
                "Newcombe) is beyond chance: the deepest tones' faces are found less often, and their ITA is missing "
                "more often."
            )
        elif audit["warning"] is None:
            text += f" No test: {gap['reason']}."
        blocks.append(_p(text))
    return blocks


def _exclusions(facts: dict) -> list[Block]:
    e = facts["exclusions"]
    final = facts["final_labels"]
    blocks = [
        _h(2, "Exclusions"),
        _p(
            f"{e['n_excluded']} of {final['n_images']} images are excluded from the evaluation set (their rows stay "
            f"in the images table with excluded = true). {e['note']}"
        ),
    ]
    if e["by_reason"]:
        blocks.append(
            _table(
                ["Reason", "Meaning", "Images"], [[r["reason"], r["description"], str(r["n"])] for r in e["by_reason"]]
            )
        )
    if e.get("lead_reasons"):
        blocks.append(_p("The reasons leads gave when they excluded images in the data manager (excluded_by_lead):"))
        blocks.append(_table(["Lead's reason", "Images"], [[r["reason"], str(r["n"])] for r in e["lead_reasons"]]))
        if e.get("n_lead_reasons_not_listed"):
            blocks.append(
                _p(f"{e['n_lead_reasons_not_listed']} other reason(s): see lead_exclusion_reason in the images table.")
            )
    blocks.append(_p("What the lead decided for each readiness category:"))
    blocks.append(
        _table(
            ["Category", "Meaning", "Images in it"],
            [[c["category"], c["description"], "kept" if c["included"] else "excluded"] for c in e["categories"]],
        )
    )
    return blocks


def _changes(facts: dict) -> list[Block]:
    c = facts["changes"]
    blocks = [_h(2, "Changes since the previous release")]
    if c["first_release"]:
        blocks.append(_p("First release: there is no previous release to compare with."))
        return blocks
    counts = c["counts"]
    blocks.append(_p(f"From version {c['from']} to version {c['to']}:"))
    blocks.append(
        _table(
            ["Change", "Images"],
            [
                ["Final tone moved", str(counts["moved"])],
                ["Added", str(counts["added"])],
                ["Removed", str(counts["removed"])],
                ["Newly excluded", str(counts["newly_excluded"])],
                ["Newly included", str(counts["newly_included"])],
            ],
        )
    )
    if c["transitions"]:
        blocks.append(
            _table(
                ["From tone", "To tone", "Images"],
                [
                    [
                        "—" if t["from"] is None else str(t["from"]),
                        "—" if t["to"] is None else str(t["to"]),
                        str(t["n"]),
                    ]
                    for t in c["transitions"]
                ],
            )
        )
    examples = []
    for kind, items in c["examples"].items():
        if items:
            names = ", ".join(str(item.get("external_id") or item.get("image_id")) for item in items)
            more = counts[kind] - len(items)
            examples.append(f"{kind.replace('_', ' ')}: {names}" + (f" and {more} more" if more > 0 else ""))
    if examples:
        blocks.append(_list(examples))
    return blocks


def _fields(facts: dict) -> list[Block]:
    blocks = [
        _h(2, "Fields"),
        _p("The release's tables (CSV, JSON Lines and Parquet), one line per column."),
    ]
    for table, title in (
        ("images", "images: one row per image"),
        ("labels", "labels: one row per label"),
        ("labelers", "labelers: one row per labeler"),
    ):
        blocks.append(_h(3, title))
        blocks.append(_table(["Column", "Meaning"], [[f["name"], f["meaning"]] for f in facts["fields"][table]]))
    return blocks


def _limitations(facts: dict) -> list[Block]:
    return [
        _h(2, "Known limitations of the method"),
        _list([f"{item['title']}: {item['text']}" for item in facts["limitations"]]),
    ]


# --------------------------------------------------------------------------- Datasheets / CrowdWorkSheets (issue 22)


def _lead_fields(facts: dict, section: str) -> list[Block]:
    """The lead's texts of one section, each as ``###``: a required one missing (a release stored before the
    field existed) says "(not given)"; an optional one left empty is left out."""
    blocks: list[Block] = []
    for entry in facts["card_text"]:
        if entry.get("section", "other") != section:
            continue
        if not entry["text"].strip() and not entry.get("required", True):
            continue
        blocks += [_h(3, entry["title"]), _user(entry["text"])]
    return blocks


def _lead_section(facts: dict, section: str, title: str, intro: str | None = None) -> list[Block]:
    return [_h(2, title), *([_p(intro)] if intro else []), *_lead_fields(facts, section)]


def _sensitive(facts: dict) -> list[Block]:
    protocol = facts.get("annotation_protocol") or {}
    attributes = [a["key"] for a in facts["composition"]["attributes"]]
    blocks = [_h(2, "Sensitive data"), _p(protocol.get("sensitive_statement") or SENSITIVE_STATEMENT)]
    blocks.append(
        _p(
            "Subject attributes released with each image: "
            + (", ".join(attributes) if attributes else "none")
            + ". Labelers' profile fields appear only for those who agreed to share them; the card counts them, "
            "never per person."
        )
    )
    return blocks


def _preprocessing(facts: dict) -> list[Block]:
    return [
        _h(2, "Preprocessing"),
        *_lead_fields(facts, "preprocessing"),
        _h(3, "In FairTone"),
        _list(list(PREPROCESSING)),
    ]


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f} s"


def _protocol(facts: dict) -> list[Block]:
    """What the labelers saw and how long they took, from the project's records (CrowdWorkSheets)."""
    protocol = facts.get("annotation_protocol")
    blocks = [_h(2, "Annotation protocol")]
    if not protocol:
        return [*blocks, _p("Not recorded with this release.")]
    blocks.append(_p("What the labelers saw and how they worked, from the project's records (not written by hand)."))
    blocks.append(_h(3, "Instructions the labelers read"))
    if protocol["instructions"]:
        blocks.append(_p("As shown on every labeling page, without their formatting:"))
        blocks.append(_user(protocol["instructions"]))
    else:
        blocks.append(_p("No written instructions were given."))
    blocks.append(_h(3, "Tones and example photos"))
    examples = protocol["tone_examples"]
    order = ", ".join(str(t["position"]) for t in examples)
    n_examples = sum(t["n_examples"] for t in examples)
    blocks.append(
        _p(
            f"The scale's swatches were shown beside every photo, in this order (positions): {order}. "
            + (
                f"{n_examples} example photos were shown with the instructions:"
                if n_examples
                else "No example photo was shown with the instructions: the swatches only."
            )
        )
    )
    if n_examples:
        rows = [
            [
                t["code"],
                t["name"],
                _swatch(t["hex"]),
                str(t["n_examples"]),
                "; ".join(e["external_id"] + (f" ({e['caption']})" if e["caption"] else "") for e in t["examples"])
                or "—",
            ]
            for t in examples
        ]
        blocks.append(_table(["Tone", "Name", "Swatch", "Example photos", "Photos (caption)"], rows))
    display = protocol["display"]
    blocks.append(_h(3, "Display conditions"))
    text = (
        f"Every label stores what the labeler's browser reported about the display (the labels table's display "
        f"column): it changes how a tone looks. Of {display['n_submissions']} {display['unit']}, "
        f"{display['n_recorded']} reported their display"
    )
    if display["n_simulated"]:
        text += f", {display['n_simulated']} are simulated (demo labels, no display)"
    blocks.append(_p(text + "."))
    if display["n_recorded"]:
        blocks.append(
            _table(
                ["Property", "Submissions per value", "Not reported"],
                [
                    [
                        p["title"],
                        ", ".join(f"{v['value']}: {v['n']}" for v in p["values"]) or "—",
                        str(p["n_not_recorded"]),
                    ]
                    for p in display["properties"]
                ],
            )
        )
    blocks.append(_h(3, "Calibration reflections"))
    reflections = protocol["reflections"]
    if not reflections:
        blocks.append(_p("No calibration phase: no reflection was asked."))
    items = []
    for r in reflections:
        noticed = ", ".join(f"{b['title'].lower()} {b['n']}" for b in r["biases_noticed"] if b["n"]) or "none"
        minutes = (
            f"median {r['minutes_median']:g} minutes taken ({r['n_minutes']} gave it)"
            if r["minutes_median"] is not None
            else "no time given"
        )
        items.append(
            f"{r['name']}: {r['n_reflections']} of {r['n_participants']} labelers reflected ({r['n_skipped']} "
            f"skipped); {minutes}; influences they noticed in themselves: {noticed}; "
            f"{r['n_unclear_instructions']} found something in the instructions unclear, {r['n_other_biases']} "
            f"named another influence, {r['n_mindfulness_plan']} wrote a plan for the next phase."
        )
    if items:
        blocks.append(_list(items))
        blocks.append(
            _p(
                "Counted only: the labelers wrote their reflections to the lead, who read them before the next "
                "phase; their words are not published."
            )
        )
    blocks.append(_h(3, "Time per label"))
    times = protocol["time_per_label"]
    if not times:
        blocks.append(_p("No labels."))
        return blocks
    blocks.append(
        _p(
            "Seconds from the photo on screen to the answer, of each label's counting answer (skips included); "
            "a label without a time (imported, or a lead's correction) is not counted."
        )
    )
    rows = []
    for t in times:
        if t["median_s"] is None:
            rows.append([t["name"], f"{t['n']} of {t['n_labels']}", f"not reported ({t['reason']})", "—", "—"])
        else:
            rows.append(
                [
                    t["name"],
                    f"{t['n']} of {t['n_labels']}",
                    _seconds(t["median_s"]),
                    f"{_seconds(t['p25_s'])} to {_seconds(t['p75_s'])}",
                    _seconds(t["p90_s"]),
                ]
            )
    blocks.append(_table(["Phase", "Timed labels", "Median", "Interquartile range", "90th percentile"], rows))
    return blocks


def _labelers(facts: dict) -> list[Block]:
    return _lead_section(
        facts,
        "annotation",
        "Labelers",
        "Who labelled, how they were chosen, paid and worked (CrowdWorkSheets), as the lead states it; the team's "
        "numbers and shared profiles are in the labeling process below.",
    )


def _distribution(facts: dict) -> list[Block]:
    return [
        _h(2, "Distribution"),
        _p(
            "Each release is a folder and one zip: the images, labels and labelers tables (CSV, JSON Lines, "
            "Parquet), this card (Markdown, HTML and its facts as JSON), croissant.json (MLCommons Croissant "
            "with its Responsible AI fields), manifest.json (every file's SHA-256) and, when asked for, the "
            "photos as a Hugging Face imagefolder with its dataset card."
        ),
        *_lead_fields(facts, "distribution"),
    ]


def _maintenance(facts: dict) -> list[Block]:
    blocks = [_h(2, "Maintenance"), *_lead_fields(facts, "maintenance"), _h(3, "Versions and erasure")]
    blocks.append(_p(RELEASE_MAINTENANCE))
    for entry in facts["card_text"]:  # keys a stored release holds that today's form does not
        if entry.get("section", "other") not in SECTION_KEYS:
            blocks += [_h(3, entry["title"]), _user(entry["text"])]
    return blocks


def _blocks(facts: dict) -> list[Block]:
    release = facts["release"]
    blocks: list[Block] = [_h(1, f"Data card: {release['project']}, version {release['version']}")]
    blocks += _summary(facts)
    blocks += _lead_section(facts, "motivation", "Motivation")
    blocks += _composition(facts)
    blocks += _sensitive(facts)
    blocks += _lead_section(facts, "collection", "Collection")
    blocks += _preprocessing(facts)
    blocks += _scale(facts)
    blocks += _protocol(facts)
    blocks += _labelers(facts)
    blocks += _process(facts)
    blocks += _agreement(facts)
    blocks += agreement_by_band_blocks(facts)
    blocks += _test_retest(facts)
    blocks += _final(facts)
    blocks += _labels_vs_ita(facts)
    blocks += _exclusions(facts)
    blocks += _limitations(facts)
    blocks += _lead_section(facts, "uses", "Uses")
    blocks += _distribution(facts)
    blocks += _changes(facts)
    blocks += _fields(facts)
    blocks += _maintenance(facts)
    return blocks


# --------------------------------------------------------------------------- Markdown


def _md(text: str) -> str:
    """Inline text for Markdown: HTML and link syntax neutralised, one line."""
    text = str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = text.replace("[", "\\[").replace("]", "\\]").replace("|", "\\|")
    return " ".join(text.split("\n"))


def _md_cell(cell: Any) -> str:
    if isinstance(cell, tuple) and cell[0] == "swatch":
        return f"`{cell[1]}`"
    return _md(cell)


def _markdown(blocks: list[Block]) -> str:
    out: list[str] = []
    for block in blocks:
        kind = block[0]
        if kind == "h":
            out.append(f"{'#' * block[1]} {_md(block[2])}")
        elif kind == "p":
            out.append(_md(block[1]))
        elif kind == "note":
            out.append(f"> **Note:** {_md(block[1])}")
        elif kind == "user":
            paragraphs = [p.strip() for p in str(block[1]).replace("\r\n", "\n").split("\n\n") if p.strip()]
            # A lead's own words: the one rule for people's text in Markdown (services.markdown_text).
            lines = ["  \n".join(escape_markdown_text(line) for line in p.split("\n")) for p in paragraphs] or [
                "(not given)"
            ]
            out.append("\n\n".join(lines))
        elif kind == "list":
            out.append("\n".join(f"- {_md(item)}" for item in block[1]))
        elif kind == "img":
            out.append(f"![{_md(block[2])}](plots/{block[1]}.png)")
        elif kind == "table":
            headers, rows = block[1], block[2]
            lines = [
                "| " + " | ".join(_md(h) for h in headers) + " |",
                "|" + "|".join("---" for _ in headers) + "|",
            ]
            lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
            out.append("\n".join(lines))
    return "\n\n".join(out) + "\n"


# --------------------------------------------------------------------------- HTML

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;max-width:62rem;margin:2rem auto;padding:0 1rem;
color:#222;line-height:1.45}
h1{font-size:1.6rem}h2{font-size:1.3rem;margin-top:2.2rem;border-bottom:1px solid #ddd;padding-bottom:.2rem}
h3{font-size:1.05rem;margin-top:1.4rem}
table{border-collapse:collapse;margin:.6rem 0;font-size:.9rem}
th,td{border:1px solid #d6d6d6;padding:.25rem .5rem;text-align:left;vertical-align:top}
th{background:#f3f3f1}
.note{border-left:4px solid #b03a2e;background:#fbf1ef;padding:.4rem .7rem}
.user{border-left:4px solid #2f5d8a;background:#f2f6fa;padding:.2rem .8rem;white-space:normal}
.swatch{display:inline-block;width:1.6em;height:1em;border:1px solid #555;vertical-align:middle;margin-right:.4em}
img{max-width:100%;height:auto}
code{font-size:.85rem}
""".strip()


def _e(text: Any) -> str:
    """HTML-escaped text; ``://`` as ``&#58;//`` so that no URL (even a quoted one) appears literally."""
    return html.escape(str(text), quote=True).replace("://", "&#58;//")


def _html_cell(cell: Any) -> str:
    if isinstance(cell, tuple) and cell[0] == "swatch":
        colour = cell[1] if is_hex_colour(cell[1]) else "#ffffff"
        return f'<span class="swatch" style="background:{colour}"></span><code>{_e(cell[1])}</code>'
    return _e(cell)


def is_hex_colour(text: str) -> bool:
    return (
        isinstance(text, str)
        and len(text) == 7
        and text[0] == "#"
        and all(c in "0123456789abcdefABCDEF" for c in text[1:])
    )


def _html(blocks: list[Block], plots: dict[str, bytes], title: str) -> str:
    out = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta http-equiv="Content-Security-Policy" '
        "content=\"default-src 'none'; img-src data:; style-src 'unsafe-inline'\">",
        f"<title>{_e(title)}</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body>",
    ]
    for block in blocks:
        kind = block[0]
        if kind == "h":
            out.append(f"<h{block[1]}>{_e(block[2])}</h{block[1]}>")
        elif kind == "p":
            out.append(f"<p>{_e(block[1])}</p>")
        elif kind == "note":
            out.append(f'<p class="note"><strong>Note:</strong> {_e(block[1])}</p>')
        elif kind == "user":
            paragraphs = [p.strip() for p in str(block[1]).replace("\r\n", "\n").split("\n\n") if p.strip()]
            inner = (
                "".join("<p>" + "<br>".join(_e(line) for line in p.split("\n")) + "</p>" for p in paragraphs)
                or "<p>(not given)</p>"
            )
            out.append(f'<div class="user">{inner}</div>')
        elif kind == "list":
            out.append("<ul>" + "".join(f"<li>{_e(item)}</li>" for item in block[1]) + "</ul>")
        elif kind == "img":
            data = base64.b64encode(plots[f"plots/{block[1]}.png"]).decode("ascii")
            out.append(f'<p><img alt="{_e(block[2])}" src="data:image/png;base64,{data}"></p>')
        elif kind == "table":
            head = "".join(f"<th>{_e(h)}</th>" for h in block[1])
            body = "".join("<tr>" + "".join(f"<td>{_html_cell(c)}</td>" for c in row) + "</tr>" for row in block[2])
            out.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
    out += ["</body>", "</html>"]
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- plots

#: Draws the card's plots from its facts (``{"plots/<name>.png": bytes}`` for each of :data:`PLOT_NAMES`):
#: ``labeling.plots.card_plots``, registered when the app is ready (``labeling.apps``). Plots are drawn at
#: the presentation floor; services may not import it (the ``services-import-no-views`` contract).
_draw_plots: Callable[[dict[str, Any]], dict[str, bytes]] | None = None


def card_plots_register(draw: Callable[[dict[str, Any]], dict[str, bytes]]) -> None:
    """Set the function that draws the card's plots (called once, by ``labeling.apps``)."""
    global _draw_plots
    _draw_plots = draw


# --------------------------------------------------------------------------- the files


def card_render(facts: dict) -> dict[str, bytes]:
    """The data card's files from its facts.

    Returns
    -------
    dict of str to bytes
        ``data_card.md`` (plots referenced as ``plots/<name>.png``), ``data_card.html`` (self-contained:
        inline CSS, plots as data URIs, no external URL, no script), ``data_card.json`` (the facts, sorted
        keys, indent 2) and ``plots/<name>.png`` for each of :data:`PLOT_NAMES`. Byte-identical for equal
        facts.
    """
    if _draw_plots is None:
        raise RuntimeError("no plot drawer registered: labeling.apps registers labeling.plots.card_plots")
    plots = _draw_plots(facts)
    blocks = _blocks(facts)
    release = facts["release"]
    title = f"Data card: {release['project']}, version {release['version']}"
    files = {
        "data_card.md": _markdown(blocks).encode("utf-8"),
        "data_card.html": _html(blocks, plots, title).encode("utf-8"),
        "data_card.json": (
            json.dumps(facts, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
        ).encode("utf-8"),
        **plots,
    }
    return dict(sorted(files.items()))
