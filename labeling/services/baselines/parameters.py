"""Baseline parameters: their defaults, validation, the effective set of a project and its hash.

A result is keyed by (image, hash of the full parameter set, code version):
:func:`baseline_parameters_hash` and :data:`BASELINE_CODE_VERSION` say which
stored results are current (:func:`baselines_current`).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import QuerySet

from ... import colorimetry
from ...colorimetry import (
    ALGORITHM_VERSION,
    FITZPATRICK_ITA_CHARDON_CLASSES,
    FITZPATRICK_ITA_GROH_2021_EMPIRICAL,
    FITZPATRICK_ITA_KINYANJUI_2020,
    ITA_CLASSES,
    SKIN_DETECTORS,
    skin_tone_stats,
)
from ...models import ImageBaseline, Project

#: Stored with every result: the colorimetry version plus this package's own
#: (bump the suffix when the Django side changes a number, e.g. the silhouette
#: handling or the decode used for it). django.2 (issue 21): a skin-masked image also records what the
#: automatic detector would have read (``stats["automatic"]``), for the audit by labelled tone.
BASELINE_CODE_VERSION = f"{ALGORITHM_VERSION}+django.2"

FITZPATRICK_MAPPINGS = {
    mapping.name: mapping
    for mapping in (
        FITZPATRICK_ITA_KINYANJUI_2020,
        FITZPATRICK_ITA_GROH_2021_EMPIRICAL,
        FITZPATRICK_ITA_CHARDON_CLASSES,
    )
}
ITA_CLASS_NAMES = [name for _bound, name in ITA_CLASSES]


def _class_ranges() -> dict[str, str]:
    ranges = {}
    upper = None
    for bound, name in ITA_CLASSES:
        if upper is None:
            ranges[name] = f"> {bound:g}°"
        elif math.isinf(bound):
            ranges[name] = f"≤ {upper:g}°"
        else:
            ranges[name] = f"{bound:g}° to {upper:g}°"
        upper = bound
    return ranges


#: "(lower, upper]" of each ITA class, for people.
ITA_CLASS_RANGES = _class_ranges()
FLAG_NAMES = {
    "no_face": "no face found",
    "too_little_skin": "too little skin",
    "wide_ita_spread": "ITA spread too wide for one skin",
    "ita_out_of_range": "ITA out of range (negative b*)",
    "rule_based_skin": "skin from the colour-rule fallback",
    "clipped_highlights": "clipped highlights",
    "underexposed": "underexposed",
    "color_cast": "strong colour cast",
    "b_near_zero": "b* near 0",
}

# name -> (type, minimum, maximum, what it is). Defaults come from the signature
# of colorimetry.skin_tone_stats so the two can never drift apart.
PARAMETER_SPECS: dict[str, tuple[type, float, float, str]] = {
    "min_skin_fraction": (float, 0.0, 1.0, "flag 'too little skin' below this skin fraction (mask, colour rules)"),
    "min_skin_pixels": (int, 1, 1_000_000, "flag 'too little skin' below this many skin pixels"),
    "max_ita_iqr": (float, 0.0, 360.0, "flag 'ITA spread too wide' above this ITA interquartile range (degrees)"),
    "clip_level": (int, 128, 255, "a channel at or above this counts as clipped"),
    "max_clipped_fraction": (float, 0.0, 1.0, "flag clipped/crushed when more skin pixels are"),
    "min_white_luminance": (float, 0.0, 1.0, "flag 'underexposed' when the image white Y is below"),
    "max_cast_ratio": (float, 1.0, 100.0, "flag 'colour cast' above this grey-world channel ratio"),
    "min_abs_b": (float, 0.0, 50.0, "flag 'b* near 0' when |median b*| is below"),
    "white_percentile": (float, 50.0, 100.0, "percentile of Y taken as the image white"),
    "max_pixels": (int, 10_000, 50_000_000, "pixels analysed per image (decoded at reduced size)"),
}
_STATS_DEFAULTS = {
    name: parameter.default
    for name, parameter in inspect.signature(skin_tone_stats).parameters.items()
    if parameter.kind is inspect.Parameter.KEYWORD_ONLY and not name.startswith("_")
}
DEFAULT_PARAMETERS: dict[str, Any] = {
    **{name: _STATS_DEFAULTS[name] for name in PARAMETER_SPECS if name != "max_pixels"},
    "max_pixels": colorimetry.DEFAULT_MAX_PIXELS,
    "fitzpatrick_mapping": _STATS_DEFAULTS["fitzpatrick_mapping"].name,
    "skin_detector": _STATS_DEFAULTS["skin_detector"],
}
#: What each ``skin_detector`` choice means, for people.
SKIN_DETECTOR_CHOICES = {
    "landmarks_or_face": "landmark model (MediaPipe BlazeFace + Face Mesh), else the cascades (no face: no number)",
    "landmarks": "landmark model only (no face: no number)",
    "face": "OpenCV cascades only: cheeks and forehead of the face box (no face: no number)",
    "face_or_rules": "face, else the colour rules (labelled fallback)",
    "rules": "colour rules only (Chai & Ngan + Kovac; misses light and deep tones)",
}
assert set(SKIN_DETECTOR_CHOICES) == set(SKIN_DETECTORS)


def baseline_parameters_validate(raw: Any) -> dict[str, Any]:
    """Check baseline parameter overrides and return them normalised.

    Parameters
    ----------
    raw : dict or None
        Overrides of :data:`DEFAULT_PARAMETERS` (names as in
        :func:`labeling.colorimetry.skin_tone_stats`, plus ``max_pixels``,
        ``fitzpatrick_mapping``, a name from :data:`FITZPATRICK_MAPPINGS`, and
        ``skin_detector``, one of :data:`SKIN_DETECTOR_CHOICES`).

    Returns
    -------
    dict
        The overrides with numbers as float or int.

    Raises
    ------
    django.core.exceptions.ValidationError
        With one message per bad key (unknown name, wrong type, out of range).

    Examples
    --------
    >>> baseline_parameters_validate({"min_skin_fraction": "0.05"})
    {'min_skin_fraction': 0.05}
    """
    if raw in (None, ""):
        return {}
    if not isinstance(raw, dict):
        raise ValidationError({"parameters": "Send the parameters as a JSON object."})
    errors: dict[str, str] = {}
    clean: dict[str, Any] = {}
    for key, value in raw.items():
        if key == "fitzpatrick_mapping":
            # A name: an object or a list is refused here (it is not hashable: ``in`` would raise).
            if not isinstance(value, str) or value not in FITZPATRICK_MAPPINGS:
                errors[key] = f"Choose one of: {', '.join(FITZPATRICK_MAPPINGS)}."
            else:
                clean[key] = value
            continue
        if key == "skin_detector":
            if not isinstance(value, str) or value not in SKIN_DETECTORS:
                errors[key] = f"Choose one of: {', '.join(SKIN_DETECTORS)}."
            else:
                clean[key] = value
            continue
        spec = PARAMETER_SPECS.get(key)
        if spec is None:
            known = ", ".join([*PARAMETER_SPECS, "fitzpatrick_mapping", "skin_detector"])
            errors[str(key)[:60]] = f"Unknown parameter. Known: {known}."
            continue
        kind, low, high, _help = spec
        try:
            if isinstance(value, bool):
                raise ValueError
            number = float(value)
            if not math.isfinite(number):
                raise ValueError
            if kind is int:
                if number != int(number):
                    raise ValueError
                number = int(number)
        except (TypeError, ValueError):
            errors[key] = f"Expected {'a whole number' if kind is int else 'a number'}."
            continue
        if not low <= number <= high:
            errors[key] = f"Must be between {low:g} and {high:g}."
            continue
        clean[key] = number
    if errors:
        raise ValidationError(errors)
    return clean


def baseline_parameters_effective(project: Project, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The full parameter set for ``project``: defaults, project settings, then overrides.

    Parameters
    ----------
    project : Project
        Its ``baseline_parameters`` override the defaults.
    overrides : dict, optional
        Already validated overrides applied last.

    Returns
    -------
    dict
        Every key of :data:`DEFAULT_PARAMETERS`.

    Examples
    --------
    >>> baseline_parameters_effective(project)["fitzpatrick_mapping"]
    'kinyanjui2020'
    """
    stored = baseline_parameters_validate(project.baseline_parameters or {})
    return {**DEFAULT_PARAMETERS, **stored, **(overrides or {})}


def baseline_parameters_hash(parameters: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of ``parameters`` (the results' key).

    Examples
    --------
    >>> baseline_parameters_hash({"b": 1, "a": 2}) == baseline_parameters_hash({"a": 2, "b": 1})
    True
    """
    canonical = json.dumps(parameters, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def baselines_current(project: Project) -> QuerySet[ImageBaseline]:
    """The results for the project's current parameters and this code version."""
    parameters_hash = baseline_parameters_hash(baseline_parameters_effective(project))
    return ImageBaseline.objects.filter(
        image__project=project,
        parameters_hash=parameters_hash,
        code_version=BASELINE_CODE_VERSION,
    )


def stats_options(parameters: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments of :func:`labeling.colorimetry.skin_tone_stats` in ``parameters``."""
    options = {k: v for k, v in parameters.items() if k in _STATS_DEFAULTS}
    options["fitzpatrick_mapping"] = FITZPATRICK_MAPPINGS[parameters["fitzpatrick_mapping"]]
    # A parameter set stored before the face detector existed meant the colour rules.
    options.setdefault("skin_detector", "rules")
    return options
