"""The data card's facts: every number of the card, gathered from the database and the existing services.

:func:`card_facts` returns one JSON-safe dict (``data_card.json``); :mod:`.card` only lays it out. Nothing
here is written by hand except the fixed texts (the meaning of each column, the known limitations of the
method): composition, scale, process, agreement, test-retest, final labels, labels vs ITA all come from
the project's rows or from ``labeling.services.consensus`` and ``labeling.services.baselines``.

Every proportion carries its Wilson 95% interval (:func:`metrics.intervals.wilson_interval`) and its
``k`` of ``n``; a statistic computed from too few images is ``None`` with a ``reason`` (the consensus
service's "too little data" rule), never a misleading number. Deterministic: no clock is read (dates
come from ``release_info`` and the phases' own rows), lists are sorted, floats rounded.
"""

from __future__ import annotations

import json
from array import array
from collections import Counter
from typing import Any

import numpy as np
from django.db.models import Count

from metrics.agreement import ALPHA_INTERVAL_READINGS
from metrics.intervals import wilson_interval
from metrics.report.composition import REPRESENTATION_RULE, representation_reading

from ...models import Assignment, Image, Label, LabelRevision, Membership, Phase, Project, Reflection, Subject
from ..baselines import FLAG_NAMES, baseline_audit, baseline_correlations, baseline_summary
from ..consensus import MIN_IMAGES, UNDER_REPRESENTED, test_retest_compute
from ..consensus.numbers import (
    DELTA_INTERVAL_METHOD,
    DELTA_MIN_UNITS,
    MAX_COEFFICIENT_WIDTH,
    MAX_INTERVAL_WIDTH,
    interval_too_wide,
    json_clean,
    too_little,
    too_wide,
)
from .agreement import phase_agreement
from .card_bands import agreement_by_band_facts
from .card_protocol import protocol_facts
from .memory import memory_release
from .rules import CARD_FIELDS, CATEGORIES, card_field_title
from .tables import LABELERS_SCHEMA, LABELS_SCHEMA, attribute_columns, images_schema

__all__ = [
    "CARD_FORMAT",
    "CONFIDENCE",
    "FIELD_MEANINGS",
    "LIMITATIONS",
    "card_facts",
    "card_project_facts",
    "proportion",
]

#: Version of the facts' layout (``data_card.json``).
CARD_FORMAT = "fairtone-data-card.1"
#: Coverage of every interval on the card.
CONFIDENCE = 0.95
#: A categorical attribute lists at most this many values (by count); the rest are summed as "other".
MAX_LEVELS = 20
#: A numeric attribute with more distinct values than this is summarised in equal-width bins.
MAX_NUMERIC_LEVELS = 12
NUMERIC_BINS = 8
#: Images listed per kind of change since the previous release (the counts are complete).
MAX_CHANGES_LISTED = 20
NOT_RECORDED = "(not recorded)"
#: Subjects read per round trip for the composition (streamed: never every subject at once).
SUBJECT_ROWS = 2000
NO_SUBJECT = "(no subject)"

#: How alpha's and the kappas' 95% intervals are computed (``metrics.agreement.bootstrap``).
ALPHA_INTERVAL = "image bootstrap, BCa (bias-corrected and accelerated)"
#: From DELTA_MIN_UNITS images (or people) on, the delta method's interval instead (``metrics.agreement.asymptotic``).
ALPHA_INTERVAL_BY_SIZE = f"{ALPHA_INTERVAL}; from {DELTA_MIN_UNITS:,} images or people on, {DELTA_INTERVAL_METHOD}"
#: Alpha's readings come from its interval (metrics.agreement.read_alpha_interval), in its words.
ALPHA_READINGS = ALPHA_INTERVAL_READINGS

#: One-line meaning of each column of the release's tables (``tables.py``); subject attributes are added.
FIELD_MEANINGS: dict[str, dict[str, str]] = {
    "images": {
        "image_id": "FairTone's id of the image (stable across the releases of the project).",
        "external_id": "The image's id in the source collection, as imported.",
        "subject_id": "External id of the person shown; empty when unknown. Images of one person are not independent.",
        "sha256": "SHA-256 of the original file as imported (the boxes of one photo share it).",
        "box_x": "Left edge of the person's box in the photo, in pixels after the photo's EXIF orientation; empty "
        "when the row is the whole photo. A photo of several people has one row per person's box.",
        "box_y": "Top edge of the person's box, in pixels (empty for a whole photo).",
        "box_width": "Width of the person's box, in pixels (empty for a whole photo).",
        "box_height": "Height of the person's box, in pixels (empty for a whole photo).",
        "final_value": "Final value under the release rule (aggregation of the counted valid values; "
        "1 = lightest tone, x.5 = between two adjacent tones); empty without a valid label.",
        "final_tone": "final_value rounded half up to a tone position.",
        "final_tone_name": "Name of final_tone on the scale.",
        "mean": "Mean of the counted valid values.",
        "median": "Median of the counted valid values.",
        "mode": "Most frequent counted valid value (ties broken by the release rule).",
        "mode_count": "How many counted labels gave the mode.",
        "std": "Population standard deviation of the counted valid values.",
        "min": "Smallest counted valid value.",
        "max": "Largest counted valid value.",
        "n_labels": "Counted labels that chose a tone (invalid ones included, skips not).",
        "n_valid": "Counted labels with a valid value (one tone or two adjacent tones).",
        "n_skipped": "Counted labels skipped with a reason (e.g. no skin visible).",
        "n_uncertain": "Counted, non-skipped labels flagged uncertain.",
        "complete_consensus": "Every counted valid label has the same value.",
        "overlap_consensus": "The counted selections share at least one tone.",
        "near_consensus": "Every counted valid value lies within one tone of every other.",
        "n_unique_values": "Number of distinct counted valid values.",
        "n_connected_groups": "Groups of selected tones separated by an unselected tone (1 = one block).",
        "any_uncertainty": "A counted label (skipped ones included) was flagged uncertain.",
        "has_invalid_annotation": "A counted label chose two non-adjacent tones (imported labels only).",
        "ita": "Individual typology angle in degrees (median over the skin pixels, CIELAB D65/2°); "
        "exposure-dependent; empty without a current baseline that computed.",
        "ita_class": "Chardon / Del Bino class of ita (very light ... dark); not a Fitzpatrick type.",
        "lightness": "CIELAB L* (median over the same skin pixels as ita): ITA squeezes both ends of the scale "
        "(MST 1-4 are all 'very light', 8-10 all 'dark'); L* and hue_angle separate them (Thong et al. 2023).",
        "hue_angle": "CIELAB hue angle h* in degrees, atan2(median b*, median a*) over the skin pixels "
        "(Thong et al. 2023: skin hue from red to yellow, beside L*).",
        "apparent_albedo": "Mean relative luminance Y of the skin pixels: an apparent albedo, not the skin's albedo.",
        "apparent_albedo_normalized": "apparent_albedo divided by the image's white estimate.",
        "baseline_flags": "Quality flags of the colorimetric baseline ("
        + ", ".join(FLAG_NAMES.values())
        + "); empty list: none.",
        "baseline_parameters_hash": "Hash of the baseline parameters that produced ita and the albedos.",
        "excluded": "The image is left out of the evaluation set by the release rule.",
        "excluded_reason": "Why it is excluded: readiness categories separated by ';'.",
        "lead_exclusion_reason": "The reason a lead gave when excluding the image in the data manager "
        "(category excluded_by_lead); empty if no lead excluded it.",
    },
    "labels": {
        "label_id": "FairTone's id of the label (one labeler, one image, one phase).",
        "revision_id": "Id of the label's current revision (labels keep every earlier revision).",
        "image_id": "The labelled image (images.image_id).",
        "labeler": "The labeler's pseudonym (no name or e-mail is released).",
        "phase": "Phase of the label: calibration_1, calibration_2, main or post_calibration.",
        "tones": "Selected tone positions: one tone, or two adjacent tones when unsure between them.",
        "tone_names": "Names of the selected tones.",
        "value": "The tone, or the midpoint of two adjacent tones (3 and 4 give 3.5); empty if skipped or invalid.",
        "valid": "The label has a value (not skipped, not two non-adjacent tones).",
        "uncertain": "The labeler flagged the label as uncertain.",
        "skipped": "The labeler skipped the image.",
        "skip_reason": "Why it was skipped (e.g. 'no skin visible'): distinct from uncertain.",
        "time_spent_s": "Seconds the labeler spent on the image.",
        "n_revisions": "Number of revisions of the label (changes, relabels, corrections).",
        "corrected": "The current answer is a lead's correction.",
        "correction_reason": "The lead's reason for the correction.",
        "is_repeat": "A calibration-2 repeat of a calibration-1 image (test-retest only; never counted).",
        "counted": "The label is used for the image's final value under the release rule.",
        "tone_order": "The order in which the tones were shown (positions); it affects agreement.",
        "display": "What the labeler's display reported (JSON), if recorded.",
    },
    "labelers": {
        "labeler": "Pseudonym.",
        "n_labels": "Labels of this labeler in the release's images (every phase).",
        "n_counted": "Of those, labels counted for a final value.",
        "n_images": "Images with a counted label of this labeler.",
        "bias_n": "Images shared with other labelers, used for the bias.",
        "bias_mean_diff": "Mean signed difference from the mean of the other labelers' values on the same "
        "images (+ = deeper; metrics.agreement.labeler_bias, the tone bands' rule over the whole scale); empty "
        "below the minimum number of images.",
        "bias_ci_low": "Lower bound of bias_mean_diff's 95% t interval, clustered by person (CR1: the photos of one "
        "person are one unit; an image without a subject is a person of its own); empty as bias_mean_diff.",
        "bias_ci_high": "Upper bound of bias_mean_diff's 95% t interval (as bias_ci_low).",
        "bias_mean_abs_diff": "Mean absolute difference from the mean of the other labelers' values.",
        "retest_n": "Calibration-1 images this labeler labelled again in calibration 2.",
        "retest_exact": "Share of those with the same value both times; empty with too little data (fewer than "
        "5 images, or a Wilson 95% interval over retest_n wider than 50 percentage points).",
        "retest_within_one": "Share of those within one tone of each other; empty with too little data (as "
        "retest_exact).",
        "retest_weighted_kappa": "Quadratic-weighted kappa between the two rounds; empty with too little data "
        "(fewer than 5 images or a 95% interval wider than 0.5).",
        "retest_mean_shift": "Mean of (calibration 2 - calibration 1): + = drifted deeper.",
        **{
            f"retest_{name}_ci_{end}": f"{'Lower' if end == 'low' else 'Upper'} bound of the 95% interval of "
            f"retest_{name} ({how}); given even where retest_{name} is empty as too uncertain."
            for name, how in (
                ("exact", "Wilson, or clustered by person when photos repeat people"),
                ("within_one", "Wilson, or clustered by person when photos repeat people"),
                ("weighted_kappa", "BCa bootstrap or delta method, as the card says"),
                ("mean_shift", "t interval clustered by person"),
            )
            for end in ("low", "high")
        },
        "profile_shared": "Whether the labeler agreed to share the profile fields below (empty otherwise).",
        "expertise": "Shared profile field: the labeler's expertise, as the labeler gave it.",
        "region_of_upbringing": "Shared profile field: region of upbringing (it changes labels systematically).",
        "gender": "Shared profile field: the labeler's own gender, as the labeler described it (not the subject's).",
    },
}

#: The fixed "known limitations of the method" (title, text); a few numbers are filled from the data.
LIMITATIONS: list[tuple[str, str]] = [
    (
        "Labels are subjective",
        "A skin-tone label is a person's judgement of a photo, not a measurement: labelers differ "
        "systematically (by their own background and region of upbringing) and the same labeler can "
        "answer differently weeks later (see test-retest). The final label is a consensus of perceptions.",
    ),
    (
        "A small labeler team",
        # The figures: Groh et al. 2022 [Groh2022].
        "The labels come from {n_labelers} labeler(s). A small team's shared habits do not average out; "
        "more labels per image make the consensus more stable (crowd-mean agreement with experts rose from "
        "about 0.68-0.81 with 3 labels to 0.85-0.87 with 24, Groh et al. 2022).",
    ),
    (
        "The labels-per-image design",
        "Labels per image were set per phase ({labels_per_image}); an image with fewer valid labels has a less "
        "certain final value, and consensus rates mean less on images with two labels than on images with "
        "four. Calibration-2 repeats measure consistency and are never counted.",
    ),
    (
        "ITA depends on exposure and is not a Fitzpatrick type",
        "The individual typology angle is computed from the photo's pixels: lighting, exposure, white "
        "balance and camera processing move it (one stop of exposure moved a cheek by about two ITA classes). "
        "It is a colorimetric cross-check, not ground truth, and the mapping of ITA to Fitzpatrick types "
        "differs between papers.",
    ),
    (
        "Apparent albedo is not albedo",
        "Skin albedo cannot be recovered from a single photo (lighting and albedo are confounded). The "
        "apparent albedo is the mean luminance of the skin pixels, raw and normalised by an image white "
        "estimate, and is labelled as such.",
    ),
    (
        "Rates from few images are uncertain",
        "Every rate on this card has a Wilson 95% interval; a rate over a few dozen images can be off by "
        "more than ten percentage points. Agreement over fewer than {min_images} images with 2+ labels is "
        "not reported at all, and a share whose interval is wider than {max_interval_points} percentage "
        "points is given as its count and interval only (too little data to read a share).",
    ),
    (
        "Images and people are not the same unit",
        "Several images can show the same person; statistics per image then weigh that person more, and "
        "intervals that treat images as independent are too narrow.",
    ),
    (
        "The scale and its display order",
        "Results depend on the scale used and on the order in which its tones were shown (recorded with every "
        "label); labels on different scales are not interchangeable.",
    ),
    (
        "Under-represented tones",
        "Tones with few images give wide intervals for any metric computed on them: a fairness evaluation "
        "on this dataset is least reliable exactly for the tones it is least populated with.",
    ),
]


# --------------------------------------------------------------------------- numbers


def proportion(k: int, n: int, *, reason: str | None = None) -> dict[str, Any]:
    """``k`` of ``n`` with its share and Wilson interval, or ``None`` values with a reason (no data, too little).

    The dashboard's "too little data" rule (``consensus.numbers.MAX_INTERVAL_WIDTH``): a share whose 95%
    interval is wider than 50 percentage points is not reported (``value`` None, ``too_wide`` True, the
    reason says ``n`` and the interval); ``k``, ``n`` and the interval stay.
    """
    k, n = int(k), int(n)
    if reason is None and n == 0:
        reason = "no data"
    if reason is not None:
        return {"k": k, "n": n, "value": None, "ci_low": None, "ci_high": None, "reason": reason, "too_wide": False}
    low, high = wilson_interval(k, n, CONFIDENCE)
    if interval_too_wide(low, high):
        return {
            "k": k,
            "n": n,
            "value": None,
            "ci_low": low,
            "ci_high": high,
            "reason": too_wide(n, "", low, high),
            "too_wide": True,
        }
    return {"k": k, "n": n, "value": k / n, "ci_low": low, "ci_high": high, "reason": None, "too_wide": False}


def _clustered(rate: dict[str, Any]) -> dict[str, Any]:
    """A consensus-service share pooled over pairs clustered by image, with the service's clustered interval.

    ``k`` of ``n`` pairs, ``n_images`` images; ``ci_low``/``ci_high`` are the image-clustered interval
    (wider than Wilson over the pairs, which are not independent).
    """
    n, k = int(round(rate.get("n_units") or 0)), int(round(rate.get("k") or 0))
    shown = rate["value"] is not None or rate.get("too_wide")
    return {
        "k": k,
        "n": n,
        "value": rate["value"] if rate["value"] is None else k / n,
        "ci_low": rate["low"] if shown else None,
        "ci_high": rate["high"] if shown else None,
        "reason": rate["reason"],
        "too_wide": bool(rate.get("too_wide")),
        "n_images": rate["n"],
        "interval": "image-clustered",
    }


def _from_rate(rate: dict[str, Any], n: int) -> dict[str, Any]:
    """A consensus-service rate (``k`` of ``n`` images, or ``{"value", "reason"}``) as a proportion."""
    rate = rate or {}
    if rate.get("interval") == "image-clustered":
        return _clustered(rate)
    reason = rate.get("reason")
    if reason and not rate.get("too_wide"):
        return proportion(rate.get("k") or 0, n, reason=reason)
    if rate.get("k") is not None:
        return proportion(rate["k"], n)
    if rate.get("value") is None:
        return proportion(0, n, reason=reason or "no data")
    return proportion(round(rate["value"] * n), n)


def _iso(moment) -> str | None:
    return moment.isoformat() if moment is not None else None


# --------------------------------------------------------------------------- sections


def _release(release_info: dict[str, Any]) -> dict[str, Any]:
    keys = ("project", "project_id", "version", "previous_version", "created_at", "code_version")
    return {key: release_info.get(key) for key in keys}


def _card_text(card_text: dict[str, str]) -> list[dict[str, Any]]:
    """Every field of today's form (a release stored before a field existed has it empty: "not given"), then
    any other key a stored release holds, each with its section and whether a release needs it."""
    fields = [*CARD_FIELDS, *sorted(set(card_text) - set(CARD_FIELDS))]
    return [
        {
            "field": key,
            "title": card_field_title(key),
            "text": card_text.get(key, ""),
            "section": CARD_FIELDS[key]["section"] if key in CARD_FIELDS else "other",
            "required": bool(CARD_FIELDS[key]["required"]) if key in CARD_FIELDS else False,
        }
        for key in fields
    ]


def _scale(project: Project) -> dict[str, Any]:
    scale = project.scale
    tones = [
        {"position": t.position, "code": t.code, "name": t.name, "hex": t.hex_colour.lower()}
        for t in scale.tones.order_by("position")
    ]
    return {
        "name": scale.name,
        "kind": scale.kind,
        "citation": scale.citation,
        "description": scale.description,
        "n_tones": len(tones),
        "tones": tones,
        "display_order": [t.position for t in project.ordered_tones()],
    }


def _value_text(value: Any) -> str:
    if value is None:
        return NOT_RECORDED
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, str | int | float):
        return str(value)
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and np.isfinite(value)


class _AttributeTally:
    """One subject attribute over the subjects, streamed by id: subjects and images per distinct value.

    Nothing per subject is kept but the recorded numbers while the attribute may be numeric (8 bytes each,
    in subject order, so that their mean is summed as before)."""

    def __init__(self) -> None:
        self.by_value: dict[tuple[str, str], list] = {}  # (type, JSON) -> [a value, subjects, their images]
        self.numbers = array("d")
        self.numeric = True
        self.n_recorded = 0
        self.n_images_recorded = 0

    def add(self, value: Any, n_images: int) -> None:
        if value is None:
            return
        self.n_recorded += 1
        self.n_images_recorded += n_images
        if self.numeric:
            if _is_number(value):
                self.numbers.append(float(value))
            else:
                self.numeric, self.numbers = False, array("d")
        # The type too: True and 1 are equal keys in Python but different values here.
        key = (type(value).__name__, json.dumps(value, sort_keys=True))
        entry = self.by_value.get(key)
        if entry is None:
            self.by_value[key] = [value, 1, n_images]
        else:
            entry[1] += 1
            entry[2] += n_images


def _attribute(key: str, tally: _AttributeTally, n_subjects: int, n_images_of_subjects: int) -> dict[str, Any]:
    """One subject attribute: subjects (people) per value with share and interval, and their images."""
    values = list(tally.by_value.values())
    numeric = tally.n_recorded > 0 and tally.numeric
    distinct = {float(v) if numeric else _value_text(v) for v, _, _ in values}
    result: dict[str, Any] = {
        "key": key,
        "kind": "numeric" if numeric else "categorical",
        "n_subjects": n_subjects,
        "n_recorded": tally.n_recorded,
        "n_distinct": len(distinct),
        "values": [],
        "other": None,
        "summary": None,
    }
    groups: dict[str, list[int]] = {}  # label -> [subjects, images]
    order: dict[str, tuple] = {}

    def add(label: str, n: int, images: int) -> None:
        group = groups.setdefault(label, [0, 0])
        group[0] += n
        group[1] += images

    if numeric:
        numbers = np.frombuffer(tally.numbers, dtype=np.float64)
        result["summary"] = {
            "min": float(numbers.min()),
            "median": float(np.median(numbers)),
            "max": float(numbers.max()),
            "mean": float(numbers.mean()),
        }
    if numeric and len(distinct) > MAX_NUMERIC_LEVELS:
        edges = np.histogram_bin_edges(numbers, bins=NUMERIC_BINS)
        for v, n, images in values:
            i = min(int(np.searchsorted(edges, float(v), side="right")) - 1, NUMERIC_BINS - 1)
            last = i == NUMERIC_BINS - 1
            label = f"[{edges[i]:.4g}, {edges[i + 1]:.4g}{']' if last else ')'}"
            add(label, n, images)
            order[label] = (0, float(edges[i]))
    else:
        for v, n, images in values:
            label = _value_text(float(v)) if numeric else _value_text(v)
            add(label, n, images)
            order[label] = (0, float(v)) if numeric else (0, label)
    labels = sorted(groups, key=lambda g: order[g])
    if not numeric and len(labels) > MAX_LEVELS:
        labels = sorted(groups, key=lambda g: (-groups[g][0], g))
        kept, rest = labels[:MAX_LEVELS], labels[MAX_LEVELS:]
        result["other"] = {
            "n_values": len(rest),
            "n_images": sum(groups[g][1] for g in rest),
            "share": proportion(sum(groups[g][0] for g in rest), n_subjects),
        }
        labels = kept
    rows = [
        {
            "value": label,
            "missing": False,
            "n_images": groups[label][1],
            "share": proportion(groups[label][0], n_subjects),
        }
        for label in labels
    ]
    n_missing = n_subjects - tally.n_recorded
    if n_missing:
        rows.append(
            {
                "value": NOT_RECORDED,
                "missing": True,
                "n_images": n_images_of_subjects - tally.n_images_recorded,
                "share": proportion(n_missing, n_subjects),
            }
        )
    result["values"] = rows
    return result


def _composition(project: Project) -> dict[str, Any]:
    n_images = Image.objects.filter(project=project).count()
    per_subject = dict(
        Image.objects.filter(project=project, subject__isnull=False)
        .order_by()
        .values_list("subject_id")
        .annotate(n=Count("id"))
        .values_list("subject_id", "n")
    )
    tallies: dict[str, _AttributeTally] = {}
    images_per_subject = array("q")  # of the subjects with images, in subject order
    n_subjects = n_images_of_subjects = 0
    rows = Subject.objects.filter(project=project).order_by("id").values_list("id", "attributes")
    for sid, attrs in rows.iterator(chunk_size=SUBJECT_ROWS):
        n_subjects += 1
        n = per_subject.get(sid, 0)
        n_images_of_subjects += n
        if n:
            images_per_subject.append(n)
        for key, value in (attrs if isinstance(attrs, dict) else {}).items():
            tally = tallies.get(key)
            if tally is None:
                tally = tallies[key] = _AttributeTally()
            tally.add(value, n)
    counts = np.frombuffer(images_per_subject, dtype=np.int64)
    n_with_subject = int(counts.sum()) if counts.size else 0
    return {
        "n_images": n_images,
        "n_subjects": n_subjects,
        "n_subjects_with_images": int(counts.size),
        "n_images_with_subject": n_with_subject,
        "n_images_without_subject": n_images - n_with_subject,
        "images_per_subject": (
            {"min": int(counts.min()), "median": float(np.median(counts)), "max": int(counts.max())}
            if counts.size
            else None
        ),
        "attribute_unit": "subjects (people); each value's images are counted alongside",
        "attributes": [_attribute(key, tallies[key], n_subjects, n_images_of_subjects) for key in sorted(tallies)],
    }


def _profile_counts(values: list[str]) -> list[dict[str, Any]]:
    counts = Counter(v.strip() or NOT_RECORDED for v in values)
    return [{"value": value, "n": n} for value, n in sorted(counts.items(), key=lambda item: (-item[1], item[0]))]


def _team(project: Project) -> dict[str, Any]:
    """The labelers who labelled, summarised (never per person): how many, and their profiles' values."""
    # order_by(): Label's default ordering would join the DISTINCT (one row per label, not per labeler).
    labelled = set(
        Label.objects.filter(phase__project=project).order_by().values_list("labeler_id", flat=True).distinct()
    )
    team = Membership.objects.filter(project=project, id__in=labelled)
    # Profiles only of those who agreed to share them (Membership.share_profile), counted, never per person.
    rows = list(team.filter(share_profile=True).values_list("gender", "region_of_upbringing", "expertise"))
    return {
        "n_labelers": team.count(),
        "n_profiles_given": len(rows),
        "profile": {
            "gender": _profile_counts([r[0] for r in rows]),
            "region_of_upbringing": _profile_counts([r[1] for r in rows]),
            "expertise": _profile_counts([r[2] for r in rows]),
        },
    }


def _phase_process(phase: Phase, pseudonyms: dict[int, str]) -> dict[str, Any]:
    labels = Label.objects.filter(phase=phase)
    counted = labels.filter(is_repeat=False)
    n_labels = labels.count()
    n_repeat_labels = labels.filter(is_repeat=True).count()
    n_labelled_images = counted.values("image_id").distinct().count()
    n_counted_labels = n_labels - n_repeat_labels
    participants = sorted(
        (pseudonyms.get(labeler_id, "?"), seed)
        for labeler_id, seed in phase.participants.values_list("labeler_id", "shuffle_seed")
    )
    return {
        "kind": phase.kind,
        "name": phase.get_kind_display(),
        "status": phase.status,
        "opened_at": _iso(phase.opened_at),
        "closed_at": _iso(phase.closed_at),
        "n_images": phase.phase_images.count(),
        "n_repeated_images": phase.phase_images.filter(is_repeat=True).count(),
        "labels_per_image": phase.labels_per_image,
        "n_labels": n_labels,
        "n_repeat_labels": n_repeat_labels,
        "n_skipped": counted.exclude(skip_reason="").count(),
        "n_labelled_images": n_labelled_images,
        "labels_per_labelled_image": (n_counted_labels / n_labelled_images) if n_labelled_images else None,
        "n_labelers": labels.values("labeler_id").distinct().count(),
        "n_participants": len(participants),
        "selection": {"method": phase.selection_method or None, "seed": phase.selection_seed},
        "shuffle_seeds": [{"labeler": name, "seed": seed} for name, seed in participants],
        "n_reflections": Reflection.objects.filter(phase=phase).count(),
        "n_relabel_requests": Assignment.objects.filter(phase=phase, kind=Assignment.Kind.RELABEL).count(),
        "n_corrections": LabelRevision.objects.filter(
            label__phase=phase, source=LabelRevision.Source.CORRECTION
        ).count(),
    }


def _process(project: Project, phases: list[Phase], pseudonyms: dict[int, str]) -> dict[str, Any]:
    return {
        "labels_per_image": project.labels_per_image,
        "allow_adjacent_pairs": project.allow_adjacent_pairs,
        "offer_uncertain": project.offer_uncertain,
        "skip_reasons": list(project.skip_reasons or []),
        "phases": [_phase_process(phase, pseudonyms) for phase in phases],
    }


def _alpha(block: dict[str, Any]) -> dict[str, Any]:
    ordinal = block["ordinal"]
    reading = ordinal.get("interpretation")
    return {
        "ordinal": {
            "value": ordinal["value"],
            "ci_low": ordinal.get("low"),
            "ci_high": ordinal.get("high"),
            "interpretation": reading,
            "reading": ALPHA_READINGS.get(reading) if reading else None,
            "q": ordinal.get("q"),
            "reason": ordinal["reason"],
            "too_wide": bool(ordinal.get("too_wide")),
        },
        "interval": {
            "value": block["interval"]["value"],
            "ci_low": block["interval"].get("low"),
            "ci_high": block["interval"].get("high"),
            "reason": block["interval"]["reason"],
        },
        "confidence": block["confidence"],
        "n_resamples": block["n_resamples"],
        "interval_method": (
            DELTA_INTERVAL_METHOD
            + ("" if block.get("resampled", "images") == "images" else ", clustered by subject (a person's photos)")
        )
        if block.get("method") == "delta"
        else ALPHA_INTERVAL
        if block.get("resampled", "images") == "images"
        else ALPHA_INTERVAL.replace("image bootstrap", "subject bootstrap (a person's photos resampled together)"),
        "resampled": block.get("resampled", "images"),
    }


def _phase_agreement(phase: Phase) -> dict[str, Any]:
    """One phase's agreement: the consensus service's numbers, computed in chunks of images (``agreement``)."""
    summary = phase_agreement(phase)
    n_images, n_2plus = summary["n_images"], summary["n_images_2plus"]
    reason = None if n_2plus >= MIN_IMAGES else too_little(n_2plus)
    agreement = summary["agreement"]
    result = {
        "kind": phase.kind,
        "name": phase.get_kind_display(),
        "n_labels": summary["n_labels"],
        "n_repeat_labels": summary["n_repeats"],
        "n_images": n_images,
        "n_images_2plus": n_2plus,
        "n_labelers": summary["n_labelers"],
        "reason": reason,
        "alpha": _alpha(agreement["alpha"]),
        "consensus": {
            name: _from_rate(agreement[f"{name}_consensus"], n_2plus) for name in ("near", "overlap", "complete")
        },
        "k_of_n": [],
        "unique_values": [],
        "flags": {
            "uncertain": proportion(summary["flags"]["uncertain"], n_images, reason=reason),
            "invalid": proportion(summary["flags"]["invalid"], n_images, reason=reason),
            "wide_range": proportion(summary["flags"]["wide_range"], n_2plus, reason=reason),
        },
    }
    if reason is None:
        groups: dict[int, int] = {}
        for row in summary["k_of_n"]:
            groups[row["n_labels"]] = groups.get(row["n_labels"], 0) + row["n_items"]
        result["k_of_n"] = [
            {
                "n_labels": row["n_labels"],
                "k_agreed": row["k_agreed"],
                **proportion(row["n_items"], groups[row["n_labels"]]),
            }
            for row in summary["k_of_n"]
            if row["n_labels"] >= 2
        ]
        total = sum(row["n_items"] for row in summary["unique_values"])
        result["unique_values"] = [
            {"n_unique_values": row["n_unique_values"], **proportion(row["n_items"], total)}
            for row in summary["unique_values"]
        ]
    return result


def _agreement(project: Project, phases: list[Phase]) -> dict[str, Any]:
    with_labels = set(Label.objects.filter(phase__in=phases).order_by().values_list("phase_id", flat=True).distinct())
    rows = []
    for phase in phases:
        if phase.id in with_labels:
            rows.append(_phase_agreement(phase))
        else:
            rows.append({"kind": phase.kind, "name": phase.get_kind_display(), "reason": "no labels in this phase"})
    return {
        "min_images": MIN_IMAGES,
        "max_interval_width": MAX_INTERVAL_WIDTH,
        "thresholds": {"reliable": 0.8, "tentative": 0.667},
        "definitions": {
            "near": "every valid value within one tone of every other",
            "overlap": "the selections share at least one tone",
            "complete": "every valid value identical",
            "k_of_n": "the largest group of labelers who gave exactly the same value, among images with n labels",
        },
        "phases": rows,
    }


def _retest_row(row: dict[str, Any]) -> dict[str, Any]:
    n = row["n"]
    return {
        "n": n,
        "exact": _from_rate(row["exact"], n),
        "within_one": _from_rate(row["within_one"], n),
        "weighted_kappa": {
            "value": row["weighted_kappa"]["value"],
            "ci_low": row["weighted_kappa"].get("low"),
            "ci_high": row["weighted_kappa"].get("high"),
            "reason": row["weighted_kappa"]["reason"],
        },
        "mean_shift": {
            "value": row["mean_shift"]["value"],
            "ci_low": row["mean_shift"].get("low"),
            "ci_high": row["mean_shift"].get("high"),
            "reason": row["mean_shift"]["reason"],
        },
    }


def _test_retest(project: Project, pseudonyms: dict[int, str]) -> dict[str, Any]:
    retest = test_retest_compute(project)
    per_labeler = [
        {"labeler": pseudonyms.get(row["labeler"], "?"), **_retest_row(row)} for row in retest["per_labeler"]
    ]
    return {
        "reason": retest["reason"],
        "pooled": _retest_row(retest["pooled"]) if retest["pooled"] else None,
        "per_labeler": sorted(per_labeler, key=lambda row: row["labeler"]),
        "n_repeated_images": Phase.objects.filter(project=project, kind=Phase.Kind.CALIBRATION_2)
        .values_list("n_repeated", flat=True)
        .first(),
    }


def _final(final: dict[str, Any], rule: dict[str, Any], tones: list[dict[str, Any]]) -> dict[str, Any]:
    counts = {int(position): int(n) for position, n in (final.get("tone_counts") or {}).items()}
    total = sum(counts.values())
    n_tones = len(tones)
    threshold = UNDER_REPRESENTED / n_tones if n_tones else 0.0
    rows = []
    for tone in tones:
        share = proportion(counts.get(tone["position"], 0), total)
        # The report's rule (metrics.report.composition), so the card and an evaluation never disagree.
        reading = representation_reading(share["k"], total, share["ci_high"], n_tones) if total and n_tones > 1 else ""
        rows.append(
            {
                **tone,
                "share": share,
                "reading": reading,
                "under_represented": reading in ("absent", "under-represented", "below half an even share"),
                "clearly_under_represented": reading == "under-represented",
            }
        )
    unknown = sorted(set(counts) - {t["position"] for t in tones})
    n_included = int(final.get("n_included", total))
    return {
        "aggregation": final.get("aggregation", rule.get("aggregation")),
        "tie": rule.get("tie"),
        "min_valid_labels": rule.get("min_valid_labels"),
        "phases": rule.get("phases"),
        "n_images": int(final.get("n_images", n_included)),
        "n_included": n_included,
        "n_with_final_tone": total,
        "n_included_without_tone": max(0, n_included - total),
        "tones": rows,
        "unknown_tones": [{"position": p, "n": counts[p]} for p in unknown],
        "under_represented_threshold": threshold,
        "under_represented_rule": REPRESENTATION_RULE,
        "under_represented": [row["position"] for row in rows if row["under_represented"]],
    }


def _correlation(result: dict[str, Any]) -> dict[str, Any]:
    if result["rho"] is None:
        n = result["n"]
        reason = too_little(n, "with a label and a baseline", need=3) if n < 3 else "undefined: a constant variable"
    else:
        reason = None
    return {
        "n": result["n"],
        "rho": result["rho"],
        "ci_low": result["ci_low"],
        "ci_high": result["ci_high"],
        "confidence": result["confidence"],
        "n_resamples": result["n_resamples"],
        "seed": result["seed"],
        "interval_method": result.get("interval_method", "bootstrap"),
        "reason": reason,
    }


def _coverage_audit(project: Project) -> dict[str, Any]:
    """The automatic baseline's faces found by labelled tone, light band against deep band (issue 21)."""
    audit = baseline_audit(project)
    shares = {
        name: proportion(audit["gap"][name]["k"], audit["gap"][name]["n"]) if audit["gap"][name]["n"] else None
        for name in ("light", "deep")
    }
    return {
        "sentence": audit["sentence"],
        "tone_name": audit["tone_name"],
        "light": shares["light"],
        "deep": shares["deep"],
        "warning": audit["warning"],
        "gap": audit["gap"],
        "bands": [{k: band[k] for k in ("band", "first_tone", "last_tone", "coverage")} for band in audit["by_band"]],
        "tone_definition": audit["tone_definition"],
        "skin_detector": audit["skin_detector"],
        "n_images": audit["n_images"],
        "n_masked": audit["n_masked"],
    }


def _labels_vs_ita(project: Project) -> dict[str, Any]:
    comparison = baseline_correlations(project=project)
    summary = baseline_summary(project)
    return {
        "coverage_audit": _coverage_audit(project),
        "label_definition": comparison["label_definition"] + " (all phases)",
        "expected_sign": "negative: a deeper tone (higher label) has a lower ITA",
        "method": "Spearman's rank correlation with a bootstrap interval over images (above 5,000 images: "
        "Fisher's z interval with Bonett and Wright's variance, which matches the bootstrap there)",
        "parameters_hash": comparison["parameters_hash"],
        "code_version": comparison["code_version"],
        "n_flagged": comparison["n_flagged"],
        "ita": _correlation(comparison["correlations"]["ita"]),
        "ita_unflagged": _correlation(comparison["ita_unflagged"]),
        "apparent_albedo": _correlation(comparison["correlations"]["apparent_albedo"]),
        "apparent_albedo_normalized": _correlation(comparison["correlations"]["apparent_albedo_normalized"]),
        "baselines": {
            "n_images": summary["n_images"],
            "n_ok": summary["n_ok"],
            "n_failed": summary["n_failed"],
            "n_missing": summary["n_missing"],
            "n_flagged": summary["n_flagged"],
            "flags": [{"flag": k, "name": FLAG_NAMES.get(k, k), "n": v} for k, v in summary["flags"].items()],
            "ita_classes": [
                {"class": k, "share": proportion(v, summary["n_ok"])} for k, v in summary["classes"].items()
            ],
        },
    }


#: The leads' reasons listed on the card, most frequent first (every one is in the images table).
MAX_LEAD_REASONS = 20


def _exclusions(
    exclusions: dict[str, int], final: dict[str, Any], rule: dict[str, Any], lead_reasons: dict[str, int] | None = None
) -> dict[str, Any]:
    reasons = sorted((lead_reasons or {}).items(), key=lambda item: (-item[1], item[0]))
    names = [*(c for c in CATEGORIES if c in exclusions), *sorted(set(exclusions) - set(CATEGORIES))]
    n_images = int(final.get("n_images", 0))
    n_included = int(final.get("n_included", n_images))
    include = rule.get("include") or {}
    return {
        "n_excluded": n_images - n_included,
        "by_reason": [
            {"reason": name, "description": CATEGORIES.get(name, ""), "n": int(exclusions[name])} for name in names
        ],
        "categories": [
            {"category": name, "description": text, "included": bool(include.get(name, False))}
            for name, text in CATEGORIES.items()
        ],
        "note": "An image can be excluded for more than one reason.",
        # The reasons leads gave for the images excluded_by_lead (lead_exclusion_reason), with how many.
        "lead_reasons": [{"reason": text, "n": int(n)} for text, n in reasons[:MAX_LEAD_REASONS]],
        "n_lead_reasons_not_listed": max(0, len(reasons) - MAX_LEAD_REASONS),
    }


def _changes(previous_diff: dict[str, Any] | None, release_info: dict[str, Any]) -> dict[str, Any]:
    if not previous_diff:
        return {"first_release": True, "from": None, "to": release_info.get("version")}
    counts = dict(previous_diff.get("counts") or {})
    moved = previous_diff.get("moved") or []
    transitions = None
    if len(moved) == counts.get("moved", len(moved)):
        pairs = Counter((m.get("from"), m.get("to")) for m in moved)
        transitions = [
            {"from": a, "to": b, "n": n}
            for (a, b), n in sorted(pairs.items(), key=lambda item: (str(item[0][0]), str(item[0][1])))
        ]
    kinds = ("moved", "added", "removed", "newly_excluded", "newly_included")
    return {
        "first_release": False,
        "from": previous_diff.get("from"),
        "to": previous_diff.get("to", release_info.get("version")),
        "counts": {kind: int(counts.get(kind, 0)) for kind in kinds},
        "transitions": transitions,
        "examples": {kind: list(previous_diff.get(kind) or [])[:MAX_CHANGES_LISTED] for kind in kinds},
    }


def _fields(project: Project) -> dict[str, list[dict[str, str]]]:
    attributes = attribute_columns(project)
    attribute_meaning = {
        name: f"Subject attribute '{key}' as imported with the subject; empty when not recorded."
        for key, name, _type in attributes
    }
    tables = {
        "images": images_schema(attributes).names,
        "labels": LABELS_SCHEMA.names,
        "labelers": LABELERS_SCHEMA.names,
    }
    return {
        table: [
            {
                "name": name,
                # Subject attributes are columns of the images table only: the labelers table's gender is the
                # labeler's own (a subject attribute may share its name).
                "meaning": (attribute_meaning.get(name) if table == "images" else None)
                or FIELD_MEANINGS[table].get(name, ""),
            }
            for name in names
        ]
        for table, names in tables.items()
    }


def _limitations(team: dict[str, Any], process: dict[str, Any]) -> list[dict[str, str]]:
    per_phase = [f"{p['name']} {p['labels_per_image']}" for p in process["phases"] if p["n_labels"]]
    values = {
        "n_labelers": team["n_labelers"],
        "labels_per_image": ", ".join(per_phase) or f"project default {process['labels_per_image']}",
        "min_images": MIN_IMAGES,
        "max_interval_points": round(MAX_INTERVAL_WIDTH * 100),
    }
    return [{"title": title, "text": text.format(**values)} for title, text in LIMITATIONS]


# --------------------------------------------------------------------------- the facts


def card_project_facts(project: Project, phases: list) -> dict:
    """The card's sections that come from the project's rows alone, not from the release's tables.

    Composition, scale, team, process, agreement, test-retest, labels vs ITA, fields and limitations:
    :func:`release_write` reads them before it writes the tables, so that their working memory (the
    agreement's count matrix and bootstrap, the ITA correlations' resamples) is not added to the tables'.
    """
    phases = sorted(phases, key=lambda p: (p.index, p.id))
    pseudonyms = dict(Membership.objects.filter(project=project).values_list("id", "pseudonym"))
    team = _team(project)
    process = _process(project, phases, pseudonyms)
    composition = _composition(project)
    # The two sections with the most working memory, each followed by giving it back.
    labels_vs_ita = _labels_vs_ita(project)
    memory_release()
    agreement = _agreement(project, phases)
    memory_release()
    agreement_by_band = agreement_by_band_facts(project, phases, pseudonyms)  # issue 22 (card_bands)
    return {
        "composition": composition,
        "scale": _scale(project),
        "team": team,
        "process": process,
        "agreement": agreement,
        "agreement_by_band": agreement_by_band,
        "test_retest": _test_retest(project, pseudonyms),
        "labels_vs_ita": labels_vs_ita,
        "fields": _fields(project),
        "limitations": _limitations(team, process),
        "annotation_protocol": protocol_facts(project, phases),
    }


def card_facts(
    *,
    project: Project,
    phases: list,
    final: dict,
    exclusions: dict[str, int],
    rule: dict,
    card_text: dict,
    previous_diff: dict | None,
    release_info: dict,
    project_facts: dict | None = None,
    lead_reasons: dict[str, int] | None = None,
) -> dict:
    """Everything the data card of a release says, as one JSON-safe dict (``data_card.json``).

    Parameters
    ----------
    project : Project
    phases : list of Phase
        The project's phases (shown in ``Phase.ORDER``).
    final : dict
        The release's final labels: ``tone_counts`` ({tone position: included images with that final
        tone}), ``n_images``, ``n_included``, ``aggregation``.
    exclusions : dict
        Excluded images per readiness category (an image may count under several).
    rule : dict
        The release rule (``rules.rule_clean``).
    card_text : dict
        The lead-written texts (``rules.CARD_FIELDS``).
    previous_diff : dict or None
        ``release_diff`` of the previous release to this one; None for the first release.
    release_info : dict
        ``version``, ``created_at`` (the only date used), ``code_version``, ``project``...
    project_facts : dict, optional
        :func:`card_project_facts` of the project and phases, if already read.
    lead_reasons : dict, optional
        The reasons leads gave for the images excluded as ``excluded_by_lead`` ({reason: images}).

    Returns
    -------
    dict
        Keys ``card_format``, ``confidence``, ``release``, ``card_text``, ``composition``, ``scale``,
        ``team``, ``process``, ``agreement``, ``test_retest``, ``final_labels``, ``labels_vs_ita``,
        ``exclusions``, ``changes``, ``rule``, ``fields``, ``limitations``, ``annotation_protocol``
        (:func:`.card_protocol.protocol_facts`). Proportions are
        ``{"k", "n", "value", "ci_low", "ci_high", "reason"}``; a statistic that is not shown has
        ``value`` None and a ``reason``.
    """
    if project_facts is None:
        project_facts = card_project_facts(project, phases)
    facts = {
        "card_format": CARD_FORMAT,
        "confidence": CONFIDENCE,
        "intervals": {
            "proportions": "Wilson score interval",
            "pooled_test_retest": "clustered by image: ratio estimator, cluster-robust variance, Wilson score "
            "interval on the effective sample size (Korn and Graubard 1998)",
            "too_little_data": f"a share whose interval is wider than {MAX_INTERVAL_WIDTH:g} is not reported, "
            f"nor an agreement coefficient (alpha, kappa) whose interval is wider than {MAX_COEFFICIENT_WIDTH:g}",
            "alpha": ALPHA_INTERVAL_BY_SIZE,
            "kappa": ALPHA_INTERVAL_BY_SIZE,
            "spearman": "bootstrap over images, percentile (above 5,000 images: Fisher's z, Bonett-Wright variance)",
        },
        "release": _release(release_info),
        "card_text": _card_text(card_text or {}),
        "composition": project_facts["composition"],
        "scale": project_facts["scale"],
        "team": project_facts["team"],
        "process": project_facts["process"],
        "agreement": project_facts["agreement"],
        "agreement_by_band": project_facts.get("agreement_by_band"),
        "test_retest": project_facts["test_retest"],
        "final_labels": _final(final, rule, project_facts["scale"]["tones"]),
        "labels_vs_ita": project_facts["labels_vs_ita"],
        "exclusions": _exclusions(exclusions, final, rule, lead_reasons),
        "changes": _changes(previous_diff, release_info),
        "rule": rule,
        "fields": project_facts["fields"],
        "limitations": project_facts["limitations"],
        "annotation_protocol": project_facts["annotation_protocol"],
    }
    return json_clean(facts)
