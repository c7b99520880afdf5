"""The data card's annotation protocol and sensitive-data statement, from the project's rows (issue 22).

CrowdWorkSheets [Diaz2022] asks a dataset's card for what the annotators saw and how they worked; here it is
computed, not written: the instructions the labelers read (the project's sanitised HTML as plain text), the
scale's swatches with the example photos shown per tone, the display conditions each label's browser reported
(``LabelRevision.client_info``, counted over submissions), the calibration reflections (counted: their words
were written to the lead and stay with the lead) and the time spent per label (median, quartiles, 90th
percentile). :func:`protocol_facts` is one JSON-safe dict, laid out by :mod:`.card`; the fixed
:data:`.card_texts.SENSITIVE_STATEMENT` goes with them.
"""

from __future__ import annotations

from array import array
from collections import Counter
from html.parser import HTMLParser
from typing import Any

import numpy as np
from django.db.models import Count
from django.db.models.fields.json import KT

from ...models import Label, LabelRevision, Phase, Project, Reflection, ToneExample
from ..labels import BIAS_FACTORS, REFLECTION_TEXTS
from .card_texts import SENSITIVE_STATEMENT

__all__ = ["instructions_text", "protocol_facts"]

#: Fewer timed labels than this: no distribution, a reason instead.
MIN_TIMED_LABELS = 5
#: The labelers' own submissions (a lead's correction or an import reports no display of a labeler).
LABELER_SOURCES = (LabelRevision.Source.LABELER, LabelRevision.Source.CHANGE, LabelRevision.Source.RELABEL)
#: What the labeling page's browser reports (``static/labeling/label.js``, clientInfo), summarised on the card.
DISPLAY_PROPERTIES = (
    ("colorGamut", "Colour gamut"),
    ("dynamicRangeHigh", "High dynamic range"),
    ("prefersColorScheme", "Colour scheme"),
    ("devicePixelRatio", "Device pixel ratio"),
    ("screenWidth", "Screen width (CSS pixels)"),
    ("mobile", "Mobile device"),
)
#: Screen widths are counted in these bands (CSS pixels), never as exact sizes.
SCREEN_BANDS = ((0, "under 1024"), (1024, "1024 to 1439"), (1440, "1440 to 1919"), (1920, "1920 or more"))
#: Values listed per display property (by count); the rest are summed as "other".
MAX_DISPLAY_VALUES = 6
NOT_RECORDED = "(not recorded)"
_BLOCK_TAGS = {"p", "div", "br", "li", "ul", "ol", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "tr"}


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag in _BLOCK_TAGS:
            self.parts.append("\n")
        if tag == "li":
            self.parts.append("• ")

    def handle_endtag(self, tag: str) -> None:
        if tag in _BLOCK_TAGS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def instructions_text(html_text: str) -> str:
    """The instructions' words without their markup: one line per paragraph or list item (• before an item)."""
    parser = _Text()
    parser.feed(html_text or "")
    parser.close()
    lines = [" ".join(line.split()) for line in "".join(parser.parts).split("\n")]
    return "\n".join(line for line in lines if line)


def _tone_examples(project: Project) -> list[dict[str, Any]]:
    """Each tone of the scale in display order, with the example photos shown with the instructions."""
    examples: dict[int, list[tuple[str, str]]] = {}
    rows = (
        ToneExample.objects.filter(project=project)
        .order_by("tone__position", "image__external_id")
        .values_list("tone__position", "image__external_id", "caption")
    )
    for position, external_id, caption in rows:
        examples.setdefault(position, []).append((external_id, caption))
    return [
        {
            "position": t.position,
            "code": t.code,
            "name": t.name,
            "hex": t.hex_colour.lower(),
            "n_examples": len(examples.get(t.position, [])),
            "examples": [{"external_id": e, "caption": c} for e, c in examples.get(t.position, [])],
        }
        for t in project.ordered_tones()
    ]


def _display_value(key: str, value: Any) -> str:
    """One reported value as the card counts it (the databases give JSON scalars as text or numbers)."""
    if value is None or value == "":
        return NOT_RECORDED
    text = str(value).strip().lower()
    if key in ("dynamicRangeHigh", "mobile"):
        return {"1": "yes", "true": "yes", "0": "no", "false": "no"}.get(text, NOT_RECORDED)
    if key in ("devicePixelRatio", "screenWidth"):
        try:
            number = float(text)
        except ValueError:
            return NOT_RECORDED
        if key == "screenWidth":
            return next(name for low, name in reversed(SCREEN_BANDS) if number >= low)
        return f"{number:g}"
    return str(value)[:40]


def _display(phases: list[Phase]) -> dict[str, Any]:
    """The labelers' displays, counted over their submissions (one per answer or change), per property."""
    revisions = LabelRevision.objects.filter(label__phase__in=phases, source__in=LABELER_SOURCES).order_by()
    n_submissions = revisions.count()
    n_simulated = revisions.filter(client_info__simulated=True).count()
    n_recorded = revisions.filter(client_info__has_key="colorGamut").count()
    properties = []
    for key, title in DISPLAY_PROPERTIES:
        counts: Counter[str] = Counter()
        grouped = revisions.annotate(v=KT(f"client_info__{key}")).values("v").annotate(n=Count("id"))
        for row in grouped:
            counts[_display_value(key, row["v"])] += row["n"]
        order = [name for _, name in SCREEN_BANDS] if key == "screenWidth" else None
        values = sorted(
            ((value, n) for value, n in counts.items() if value != NOT_RECORDED),
            key=lambda item: (order.index(item[0]),) if order else (-item[1], item[0]),
        )
        listed = values[:MAX_DISPLAY_VALUES]
        rest = sum(n for _, n in values[MAX_DISPLAY_VALUES:])
        properties.append(
            {
                "key": key,
                "title": title,
                "values": [{"value": value, "n": n} for value, n in listed]
                + ([{"value": "(other)", "n": rest}] if rest else []),
                "n_not_recorded": counts.get(NOT_RECORDED, 0),
            }
        )
    return {
        "n_submissions": n_submissions,
        "n_recorded": n_recorded,
        "n_simulated": n_simulated,
        "unit": "submissions (each answer or change of answer by a labeler)",
        "properties": properties,
    }


def _reflections(phases: list[Phase]) -> list[dict[str, Any]]:
    """Per calibration phase: how many reflected, minutes taken, the bias factors ticked; never their words."""
    out = []
    for phase in phases:
        if not phase.is_calibration:
            continue
        rows = list(Reflection.objects.filter(phase=phase).values("minutes_taken", "biases_noticed", *REFLECTION_TEXTS))
        skipped = [
            r
            for r in rows
            if r["minutes_taken"] is None
            and not r["biases_noticed"]
            and not any((r[k] or "").strip() for k in REFLECTION_TEXTS)
        ]
        minutes = sorted(r["minutes_taken"] for r in rows if r["minutes_taken"] is not None)
        factors = Counter(f for r in rows for f in (r["biases_noticed"] or []) if f in BIAS_FACTORS)
        out.append(
            {
                "kind": phase.kind,
                "name": phase.get_kind_display(),
                "n_participants": phase.participants.count(),
                "n_reflections": len(rows) - len(skipped),
                "n_skipped": len(skipped),
                "minutes_median": float(np.median(minutes)) if minutes else None,
                "n_minutes": len(minutes),
                "biases_noticed": [
                    {"factor": key, "title": title, "n": factors.get(key, 0)} for key, title in BIAS_FACTORS.items()
                ],
                "n_unclear_instructions": sum(bool((r["unclear_instructions"] or "").strip()) for r in rows),
                "n_other_biases": sum(bool((r["biases_other"] or "").strip()) for r in rows),
                "n_mindfulness_plan": sum(bool((r["mindfulness_plan"] or "").strip()) for r in rows),
            }
        )
    return out


def _times(name: str, kind: str, milliseconds: array, n_labels: int) -> dict[str, Any]:
    seconds = np.frombuffer(milliseconds, dtype=np.int64).astype(np.float64) / 1000.0
    row: dict[str, Any] = {
        "kind": kind,
        "name": name,
        "n_labels": n_labels,
        "n": int(seconds.size),
        "n_not_recorded": n_labels - int(seconds.size),
        "median_s": None,
        "p25_s": None,
        "p75_s": None,
        "p90_s": None,
        "reason": None,
    }
    if seconds.size < MIN_TIMED_LABELS:
        row["reason"] = f"too little data: {seconds.size} timed label(s) (needs {MIN_TIMED_LABELS})"
        return row
    p25, median, p75, p90 = np.percentile(seconds, [25, 50, 75, 90])
    row.update(
        median_s=round(float(median), 2),
        p25_s=round(float(p25), 2),
        p75_s=round(float(p75), 2),
        p90_s=round(float(p90), 2),
    )
    return row


def _time_per_label(phases: list[Phase]) -> list[dict[str, Any]]:
    """Seconds a labeler spent per label (the counting revision's time), per phase and over all phases.

    A label with no time (0: imported, or a lead's correction without one) is counted as not recorded."""
    rows = []
    everything = array("q")
    n_all = 0
    for phase in phases:
        times = array("q")
        n_labels = 0
        for ms in (
            Label.objects.filter(phase=phase)
            .order_by()
            .values_list("time_spent_ms", flat=True)
            .iterator(chunk_size=5000)
        ):
            n_labels += 1
            if ms:
                times.append(int(ms))
        if not n_labels:
            continue
        everything.extend(times)
        n_all += n_labels
        rows.append(_times(phase.get_kind_display(), phase.kind, times, n_labels))
    if len(rows) > 1:
        rows.append(_times("All phases", "all", everything, n_all))
    return rows


def protocol_facts(project: Project, phases: list[Phase]) -> dict[str, Any]:
    """The annotation protocol's facts: instructions, tone examples, display conditions, reflections, times."""
    return {
        "instructions": instructions_text(project.instructions),
        "tone_examples": _tone_examples(project),
        "tone_order": [t.position for t in project.ordered_tones()],
        "display": _display(phases),
        "reflections": _reflections(phases),
        "time_per_label": _time_per_label(phases),
        "sensitive_statement": SENSITIVE_STATEMENT,
    }
