"""What a release's rule and card text may say: choices, defaults, and their validation (one error per field)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError

from metrics.finalise import AGGREGATIONS, TIE_RULES

from ...models import Phase

#: Readiness categories: images a lead includes or excludes explicitly, with what each means.
CATEGORIES: dict[str, str] = {
    "no_labels": "No counted label (no phase of the rule labelled the image).",
    "too_few_labels": "Fewer valid labels than the rule's minimum.",
    "no_near_consensus": "Two or more valid labels, not all within one tone of each other.",
    "open_relabels": "Sent back for relabeling and not answered yet.",
    "outliers": "A label far from every other label of its phase (the post-calibration review's rule).",
    "no_baseline": "No current colorimetric baseline that computed without a quality flag.",
    "excluded_by_lead": "Excluded by a lead in the data manager, with their reason (lead_exclusion_reason).",
}
#: What the release page proposes before the lead decides.
DEFAULT_INCLUDE = {
    "no_labels": False,
    "too_few_labels": False,
    "no_near_consensus": True,
    "open_relabels": False,
    "outliers": True,
    "no_baseline": True,
    "excluded_by_lead": False,
}
#: Categories a lead's explicit choice may leave out (their default applies). ``excluded_by_lead``: the lead
#: already decided image by image in the data manager, and API clients written before it existed keep working.
OPTIONAL_CATEGORIES = ("excluded_by_lead",)
#: The data card's sections in the order of Datasheets for Datasets [Gebru2021] (Annotation: CrowdWorkSheets
#: [Diaz2022]); a lead-written field belongs to one of them.
CARD_SECTIONS: dict[str, str] = {
    "motivation": "Motivation",
    "composition": "Composition",
    "collection": "Collection",
    "preprocessing": "Preprocessing",
    "annotation": "Annotation",
    "uses": "Uses",
    "distribution": "Distribution",
    "maintenance": "Maintenance",
}


def _field(section: str, title: str, help_text: str, *, required: bool = True, standard: str = "") -> dict[str, Any]:
    return {"section": section, "title": title, "help": help_text, "required": required, "standard": standard}


#: The data card's texts a lead writes (what no computation can): the key, its section, title, help text, whether
#: a release needs it, and the question it answers (Datasheets [Gebru2021], CrowdWorkSheets [Diaz2022]). The six
#: of the first card (motivation, intended_uses, out_of_scope_uses, licence, contacts, consent) keep their keys.
CARD_FIELDS: dict[str, dict[str, Any]] = {
    "motivation": _field(
        "motivation",
        "Motivation",
        "Why the dataset was made: the fairness question it answers, for which model or task.",
        standard="Datasheets: Motivation, for what purpose was the dataset created?",
    ),
    "funding": _field(
        "motivation",
        "Funding",
        "Who funded the collection and the labeling (optional).",
        required=False,
        standard="Datasheets: Motivation, who funded the creation of the dataset?",
    ),
    "collection_source": _field(
        "collection",
        "Source of the photos",
        "Where the photos come from: the collection, archive or study, and how they were obtained "
        "(taken for this project, licensed, scraped...).",
        standard="Datasheets: Collection process, how was the data acquired?",
    ),
    "collection_time_frame": _field(
        "collection",
        "Collection time frame",
        "When the photos were taken or gathered, as dates where known (e.g. 2024-03-01 to 2024-06-30); say "
        "'unknown' if it is. ISO dates here also go to croissant.json (rai:dataCollectionTimeframe).",
        standard="Datasheets: Collection process, over what timeframe was the data collected?",
    ),
    "collection_devices": _field(
        "collection",
        "Cameras and devices",
        "The cameras or phones, lighting and settings used, as far as known ('unknown' if not): they change how "
        "skin tones appear.",
        standard="Datasheets: Collection process, what mechanisms or procedures were used?",
    ),
    "collected_by": _field(
        "collection",
        "Who collected the photos",
        "Who took or gathered the photos (staff, contractors, volunteers, a vendor) and how they were paid.",
        standard="Datasheets: Collection process, who was involved in the data collection process?",
    ),
    "consent": _field(
        "collection",
        "Consent of the people photographed",
        "How each person was informed and agreed (what they were told, in writing or not), and how they can "
        "withdraw; the legal basis for the skin-tone labels, a special category of data (GDPR Art. 9).",
        standard="Datasheets: Collection process, did the individuals consent? How can they revoke it?",
    ),
    "pre_filtering": _field(
        "preprocessing",
        "Pre-filtering of the photos",
        "Which photos were removed before labeling, and by which rule (e.g. bad lighting, occlusion, less than "
        "2.5% visible skin, duplicates), by hand or automatically; how many if known.",
        standard="Datasheets: Preprocessing, was any preprocessing, cleaning or filtering done?",
    ),
    "labeler_recruitment": _field(
        "annotation",
        "Labeler recruitment",
        "How the labelers were found and chosen (employees, crowd platform, experts), with the criteria, and "
        "whether their own backgrounds were considered.",
        standard="CrowdWorkSheets: Task formulation and annotator selection",
    ),
    "labeler_training": _field(
        "annotation",
        "Labeler training",
        "Training or briefing beyond the written instructions and the calibration phases (optional).",
        required=False,
        standard="CrowdWorkSheets: Platform and infrastructure choices",
    ),
    "compensation": _field(
        "annotation",
        "Compensation",
        "How and how much the labelers were paid (per hour or per label, in which currency), or why not.",
        standard="CrowdWorkSheets: Dataset analysis and evaluation, compensation of annotators",
    ),
    "working_conditions": _field(
        "annotation",
        "Working conditions",
        "Hours, breaks, where they worked, the screens they used, how they could raise concerns or stop.",
        standard="CrowdWorkSheets: Platform and infrastructure choices, annotator well-being",
    ),
    "intended_uses": _field(
        "uses",
        "Intended uses",
        "What the dataset is for (e.g. measuring a face model's performance gaps across skin tones).",
        standard="Datasheets: Uses, for what tasks has the dataset been used or is it meant?",
    ),
    "out_of_scope_uses": _field(
        "uses",
        "Out-of-scope uses (uses to avoid)",
        "Uses to avoid: e.g. inferring anyone's skin tone or ethnicity, training classifiers of people.",
        standard="Datasheets: Uses, are there tasks for which the dataset should not be used?",
    ),
    "social_impact": _field(
        "uses",
        "Social impact",
        "Foreseeable effects on the people photographed or on groups, good and bad (optional).",
        required=False,
        standard="Datasheets: Uses, is there anything that might impact future uses? (rai:dataSocialImpact)",
    ),
    "licence": _field(
        "distribution",
        "Licence",
        "The licence or terms of use (an SPDX name such as CC-BY-4.0 is recognised for croissant.json).",
        standard="Datasheets: Distribution, under which licence will the dataset be distributed?",
    ),
    "maintenance_plan": _field(
        "maintenance",
        "Maintenance plan",
        "Who maintains the dataset, how errors and erasure requests are handled, how long it is supported.",
        standard="Datasheets: Maintenance, who will support and maintain the dataset? Will it be updated?",
    ),
    "contacts": _field(
        "maintenance",
        "Contacts",
        "Who to write to about the dataset (a team address rather than a person's).",
        standard="Datasheets: Maintenance, how can the owner or curator be contacted?",
    ),
}
#: The fields a release needs (the others may be left empty).
CARD_REQUIRED = tuple(key for key, field in CARD_FIELDS.items() if field["required"])
DEFAULT_MIN_VALID_LABELS = 2
MAX_MIN_VALID_LABELS = 50
MAX_CARD_TEXT = 20_000
RULE_KEYS = ("phases", "aggregation", "tie", "min_valid_labels", "include", "with_images")


def _bool(value: Any, field: str, errors: dict) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("1", "true", "yes", "on", "0", "false", "no", "off", ""):
        return value.strip().lower() in ("1", "true", "yes", "on")
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    errors[field] = "true or false."
    return False


def _phases(value: Any, errors: dict) -> str | list[str]:
    if value in (None, "", "latest"):
        return "latest"
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, list | tuple) or not value or not all(isinstance(v, str) for v in value):
        errors["phases"] = f"'latest' or a list of phase kinds ({', '.join(Phase.ORDER)})."
        return "latest"
    unknown = [v for v in value if v not in Phase.Kind.values]
    if unknown:
        errors["phases"] = f"Unknown phase kind(s) {', '.join(unknown)}; use 'latest' or {', '.join(Phase.ORDER)}."
        return "latest"
    return [kind for kind in Phase.ORDER if kind in value]


def rule_clean(raw: dict[str, Any] | None, *, explicit: bool = False) -> dict[str, Any]:
    """The rule with its defaults, validated.

    ``phases``: ``"latest"`` (for each image, the latest phase by ``Phase.ORDER`` that labelled it) or
    phase kinds; ``aggregation``: mean, median or mode; ``tie`` (for the mode): lower, higher or
    nearest_mean; ``min_valid_labels``; ``include``: ``{category: bool}`` for every category of
    :data:`CATEGORIES` (with ``explicit``, each must be given: the lead decides, except those of
    :data:`OPTIONAL_CATEGORIES`; otherwise :data:`DEFAULT_INCLUDE` fills the gaps); ``with_images``.

    Raises
    ------
    django.core.exceptions.ValidationError
        Per field: an unknown key, phase kind, aggregation, tie or category, a bad number.
    """
    raw = dict(raw or {})
    errors: dict[str, str] = {}
    for key in sorted(set(raw) - set(RULE_KEYS)):
        errors[key] = f"Unknown rule field (use {', '.join(RULE_KEYS)})."
    aggregation = raw.get("aggregation") or "mean"
    if aggregation not in AGGREGATIONS:
        errors["aggregation"] = f"One of {', '.join(AGGREGATIONS)}."
    tie = raw.get("tie") or "lower"
    if tie not in TIE_RULES:
        errors["tie"] = f"One of {', '.join(TIE_RULES)}."
    minimum = raw.get("min_valid_labels", DEFAULT_MIN_VALID_LABELS)
    if minimum in (None, ""):
        minimum = DEFAULT_MIN_VALID_LABELS
    try:
        if isinstance(minimum, bool) or float(minimum) != int(minimum):
            raise ValueError
        minimum = int(minimum)
        if not 1 <= minimum <= MAX_MIN_VALID_LABELS:
            raise ValueError
    except (TypeError, ValueError):
        errors["min_valid_labels"] = f"A whole number from 1 to {MAX_MIN_VALID_LABELS}."
        minimum = DEFAULT_MIN_VALID_LABELS
    include_raw = raw.get("include") or {}
    include: dict[str, bool] = {}
    if not isinstance(include_raw, dict):
        errors["include"] = "An object {category: true or false}."
        include_raw = {}
    unknown = sorted(set(include_raw) - set(CATEGORIES))
    missing = [c for c in CATEGORIES if c not in include_raw and c not in OPTIONAL_CATEGORIES]
    if unknown:
        errors["include"] = f"Unknown categor(y/ies) {', '.join(map(str, unknown))}; use {', '.join(CATEGORIES)}."
    elif explicit and missing:
        errors["include"] = f"Say whether to include the images of: {', '.join(missing)}."
    for category in CATEGORIES:
        if category in include_raw:
            include[category] = _bool(include_raw[category], "include", errors)
        else:
            include[category] = DEFAULT_INCLUDE[category]
    rule = {
        "phases": _phases(raw.get("phases"), errors),
        "aggregation": aggregation,
        "tie": tie,
        "min_valid_labels": minimum,
        "include": include,
        "with_images": _bool(raw.get("with_images", False), "with_images", errors),
    }
    if errors:
        raise ValidationError(errors)
    return rule


def rule_stored(rule: dict[str, Any]) -> dict[str, Any]:
    """A rule as stored with a release, with every current category in ``include``: a rule stored
    before a category existed gets its default (nothing else is changed or validated again)."""
    rule = dict(rule)
    include = dict(rule.get("include") or {})
    for category in CATEGORIES:
        include.setdefault(category, DEFAULT_INCLUDE[category])
    rule["include"] = include
    return rule


def card_field_title(key: str) -> str:
    """A card field's title (a key unknown today, e.g. from a later version, as its words)."""
    field = CARD_FIELDS.get(key)
    return field["title"] if field else key.replace("_", " ").capitalize()


def card_text_clean(raw: dict[str, Any] | None) -> dict[str, str]:
    """The data card's texts: every field of :data:`CARD_REQUIRED` non-empty, the optional ones may be empty
    (stored as ""), each at most :data:`MAX_CARD_TEXT` characters (``ValidationError`` per field,
    ``card_text.<key>``)."""
    if raw is not None and not isinstance(raw, dict):
        raise ValidationError({"card_text": f"An object with {', '.join(CARD_FIELDS)}."})
    raw = raw or {}
    errors = {}
    cleaned = {}
    for key in sorted(set(raw) - set(CARD_FIELDS)):
        errors[f"card_text.{key}"] = f"Unknown card field (use {', '.join(CARD_FIELDS)})."
    for key, field in CARD_FIELDS.items():
        value = raw.get(key)
        if value is not None and not isinstance(value, str):
            errors[f"card_text.{key}"] = "A text."
            continue
        text = (value or "").strip()
        if not text and field["required"]:
            errors[f"card_text.{key}"] = f"{field['title']} is required before a release is made."
        elif len(text) > MAX_CARD_TEXT:
            errors[f"card_text.{key}"] = f"At most {MAX_CARD_TEXT} characters."
        cleaned[key] = text.replace("\r\n", "\n")
    if errors:
        raise ValidationError(errors)
    return cleaned
