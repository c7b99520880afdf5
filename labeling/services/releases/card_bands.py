"""The data card's "Agreement per tone band" section: its facts and its blocks (issue 22).

Reliability where the fairness evaluation is decided: per phase, the images banded by their consensus tone
on fixed bands of the scale, each band with its images (and people), near consensus, each labeler's
signed bias and ordinal alpha, every number with its 95% interval (Schumann et al. 2023 [Schumann2023]).
The numbers are the consensus dashboard's (``consensus.bands.tone_band_block``), with its rules: no
coefficient below 30 images (people when photos repeat a person), no share or bias from fewer than 5
images. Blocks are the card's plain tuples (``card.py`` lays them out), so this module needs nothing of
``card.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from metrics import agreement

from ...models import Label, Phase, Project
from ..consensus.bands import tone_band_block
from ..consensus.loading import image_subject_units
from .memory import memory_release

__all__ = ["agreement_by_band_blocks", "agreement_by_band_facts"]

TITLE = "Agreement per tone band"


def _proportion(share: dict[str, Any]) -> dict[str, Any]:
    """The dashboard's near-consensus share as the card's proportion (interval only when it is reported)."""
    shown = share["value"] is not None or share.get("too_wide")
    return {
        "k": int(share.get("k") or 0),
        "n": int(share["n"]),
        "value": share["value"],
        "ci_low": share["low"] if shown else None,
        "ci_high": share["high"] if shown else None,
        "reason": share["reason"],
        "too_wide": bool(share.get("too_wide")),
        "interval": share.get("interval"),
    }


def _coefficient(stat: dict[str, Any]) -> dict[str, Any]:
    return {
        "value": stat["value"],
        "ci_low": stat["low"] if stat["value"] is not None else None,
        "ci_high": stat["high"] if stat["value"] is not None else None,
        "reason": stat["reason"],
        "n": stat["n"],
    }


#: Labels read per round trip (a server-side cursor), and the dtype of one read label.
LABEL_ROWS = 20_000
_LABEL_DTYPE = np.dtype(
    [("image", np.int64), ("labeler", np.int64), ("low", np.int16), ("high", np.int16), ("repeat", np.bool_)]
)


def phase_values(phase: Phase) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The phase's labels as ``consensus.phase_labels_load(phase)`` pivots them: ``(values.T, labeler_ids,
    image_ids)``, the same arrays, read through a server-side cursor into 21 bytes per label.

    ``phase_labels_load`` takes each column as one PostgreSQL array (a Python list of ints: 1,000,000
    labels held 210 MB at once, and the pages stayed with the process); the card needs only the values.
    """
    rows = (
        Label.objects.filter(phase=phase)
        .order_by()
        .values_list("image_id", "labeler_id", "tone_low", "tone_high", "is_repeat")
    )
    parts = []
    batch: list[tuple] = []
    for row in rows.iterator(chunk_size=LABEL_ROWS):
        batch.append((row[0], row[1], row[2] or 0, row[3] or 0, row[4]))
        if len(batch) == LABEL_ROWS:
            parts.append(np.array(batch, dtype=_LABEL_DTYPE))
            batch = []
    if batch:
        parts.append(np.array(batch, dtype=_LABEL_DTYPE))
    del batch
    labels = np.concatenate(parts) if parts else np.zeros(0, dtype=_LABEL_DTYPE)
    del parts
    labeler_ids = np.unique(labels["labeler"])
    kept = labels[~labels["repeat"]]
    del labels
    image_ids, image_code = np.unique(kept["image"], return_inverse=True)
    labeler_code = np.searchsorted(labeler_ids, kept["labeler"])
    first = np.full((image_ids.size, labeler_ids.size), np.nan)
    second = np.full((image_ids.size, labeler_ids.size), np.nan)
    # 0 is no tone (a skip), as phase_labels_load reads it.
    first[image_code, labeler_code] = np.where(kept["low"] > 0, kept["low"], np.nan)
    second[image_code, labeler_code] = np.where(kept["high"] > 0, kept["high"], np.nan)
    del kept, image_code, labeler_code
    values = agreement.selection_values(first, second)
    return values.T, labeler_ids, image_ids


def _phase(phase: Phase, n_tones: int, pseudonyms: dict[int, str]) -> dict[str, Any]:
    values, labeler_ids, image_ids = phase_values(phase)
    block = tone_band_block(
        values,
        labeler_ids.tolist(),
        n_tones=n_tones,
        clusters=image_subject_units(phase.project_id, image_ids),
    )
    del values, image_ids
    return {
        "kind": phase.kind,
        "name": phase.get_kind_display(),
        "n_images": block["n_images"],
        "n_unbanded": block["n_unbanded"],
        "resampled": block["resampled"],
        "labelers": [pseudonyms.get(i, "?") for i in block["labelers"]],
        "bands": [
            {
                "name": band["name"],
                "low": band["low"],
                "high": band["high"],
                "n_images": band["n_images"],
                "n_units": band["n_units"],
                "near_consensus": _proportion(band["near_consensus"]),
                "alpha": _coefficient(band["alpha"]),
                "bias": [
                    {
                        "labeler": pseudonyms.get(row["labeler"], "?"),
                        "n": row["n"],
                        "value": row["mean_diff"]["value"],
                        "ci_low": row["mean_diff"]["low"],
                        "ci_high": row["mean_diff"]["high"],
                        "reading": row["mean_diff"]["reading"],
                        "reason": row["mean_diff"]["reason"],
                    }
                    for row in band["bias"]
                ],
            }
            for band in block["bands"]
        ],
        "definitions": {
            "band": block["definition"],
            "width": block["width_choice"],
            "bias": block["bias_definition"],
            "cells": block["cells_note"],
            "range_restriction": block["note"],
        },
    }


def agreement_by_band_facts(project: Project, phases: list, pseudonyms: dict[int, str]) -> dict[str, Any]:
    """The section's facts: one entry per phase with between-labeler labels (calibration-2 repeats left out).

    Each phase's labels are read at once (the images x labelers values), then given back.
    """
    n_tones = project.scale.tones.count()
    with_labels = set(
        Label.objects.filter(phase__in=phases, is_repeat=False).order_by().values_list("phase_id", flat=True).distinct()
    )
    rows = []
    for phase in phases:
        if phase.id in with_labels:
            rows.append(_phase(phase, n_tones, pseudonyms))
            memory_release()
    return {"phases": rows, "n_tones": n_tones}


# --------------------------------------------------------------------------- blocks


def _pct(value: float) -> str:
    return f"{value * 100:.1f}%"


def _near_text(p: dict[str, Any]) -> str:
    if p["value"] is None and p["too_wide"]:
        return f"{p['k']} of {p['n']}, too little data for a share (95% CI {_pct(p['ci_low'])}–{_pct(p['ci_high'])})"
    if p["value"] is None:
        return f"{p['k']} of {p['n']}" if p["n"] else "—"
    return f"{p['k']} of {p['n']}, {_pct(p['value'])} (95% CI {_pct(p['ci_low'])}–{_pct(p['ci_high'])})"


def _bias_text(b: dict[str, Any]) -> str:
    if b["value"] is None:
        return f"n={b['n']}" if b["n"] else "—"
    text = f"{b['value']:+.2f} ({b['ci_low']:+.2f} to {b['ci_high']:+.2f})"
    return text + (f", {b['reading']}" if b["reading"] in ("deeper", "lighter") else "")


def _alpha_text(a: dict[str, Any]) -> str:
    if a["value"] is None:
        return f"counts only (n={a['n']})" if a["n"] else "—"
    return f"{a['value']:.3f} (95% CI {a['ci_low']:.2f} to {a['ci_high']:.2f})"


def agreement_by_band_blocks(facts: dict) -> list[tuple]:
    """The section as the card's blocks (headings, paragraphs, tables); nothing for facts without it."""
    section = facts.get("agreement_by_band")
    if not section or not section.get("phases"):
        return []
    first = section["phases"][0]["definitions"]
    blocks: list[tuple] = [
        ("h", 2, TITLE),
        (
            "p",
            "Where on the scale the labelers agree, and which labeler leans which way there: the fairness "
            f"evaluation is decided band by band (Schumann et al. 2023). Bands: {first['band']}; {first['width']}. "
            f"Near consensus: every valid value of the image within one tone of every other. Bias: "
            f"{first['bias']}. {first['cells']}. No alpha from fewer than 30 images (people, when photos repeat a person) in a band, "
            "no share or bias from fewer than 5: their counts are given instead. The intervals resample images "
            "or people, never the labelers: they are conditional on this labeler panel.",
        ),
        ("note", first["range_restriction"]),
    ]
    for phase in section["phases"]:
        blocks.append(("h", 3, phase["name"]))
        people = phase["resampled"] == "subjects"
        blocks.append(
            (
                "p",
                f"{phase['n_images']} images with two or more valid labels"
                + (f"; {phase['n_unbanded']} with a single valid label left out" if phase["n_unbanded"] else "")
                + (". Some people appear in several photos: intervals resample people." if people else "."),
            )
        )
        headers = [
            "Tones",
            "Images (people)" if people else "Images",
            "Near consensus (95% CI)",
            *[f"Bias {name} (95% CI)" for name in phase["labelers"]],
            "Alpha, ordinal (95% CI)",
        ]
        rows = [
            [
                band["name"],
                f"{band['n_images']} ({band['n_units']})" if people else str(band["n_images"]),
                _near_text(band["near_consensus"]),
                *[_bias_text(b) for b in band["bias"]],
                _alpha_text(band["alpha"]),
            ]
            for band in phase["bands"]
        ]
        blocks.append(("table", headers, rows))
    return blocks
