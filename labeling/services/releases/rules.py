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
#: The data card's texts a lead writes; every one is required.
CARD_FIELDS: dict[str, str] = {
    "motivation": "Motivation",
    "intended_uses": "Intended uses",
    "out_of_scope_uses": "Out-of-scope uses",
    "licence": "Licence",
    "contacts": "Contacts",
    "consent": "Consent of the people photographed",
}
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


def card_text_clean(raw: dict[str, Any] | None) -> dict[str, str]:
    """The data card's texts, each required and non-empty (``ValidationError`` per missing field)."""
    if raw is not None and not isinstance(raw, dict):
        raise ValidationError({"card_text": f"An object with {', '.join(CARD_FIELDS)}."})
    raw = raw or {}
    errors = {}
    cleaned = {}
    for key in sorted(set(raw) - set(CARD_FIELDS)):
        errors[f"card_text.{key}"] = f"Unknown card field (use {', '.join(CARD_FIELDS)})."
    for key, title in CARD_FIELDS.items():
        value = raw.get(key)
        text = value.strip() if isinstance(value, str) else ""
        if not text:
            errors[f"card_text.{key}"] = f"{title} is required before a release is made."
        elif len(text) > MAX_CARD_TEXT:
            errors[f"card_text.{key}"] = f"At most {MAX_CARD_TEXT} characters."
        cleaned[key] = text.replace("\r\n", "\n")
    if errors:
        raise ValidationError(errors)
    return cleaned
