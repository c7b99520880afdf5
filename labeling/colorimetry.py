"""Public contract path of the colorimetric baseline: ``labeling.colorimetry``.

The code lives in the top-level pure package :mod:`colorimetry` (NumPy and
Pillow, no Django). This module re-exports its public names so that
``labeling.colorimetry.skin_tone_stats``, ``labeling.colorimetry.measure_image``
and the others stay importable from here: the Django app
(``labeling.services.baselines``) and outside callers use this path. Add
nothing here; new code goes into :mod:`colorimetry`.
"""

from colorimetry import (
    ALGORITHM_VERSION,
    DEFAULT_MAX_PIXELS,
    DEFAULT_SKIN_DETECTOR,
    FITZPATRICK_ITA_CHARDON_CLASSES,
    FITZPATRICK_ITA_GROH_2021_EMPIRICAL,
    FITZPATRICK_ITA_KINYANJUI_2020,
    ITA_CLASSES,
    SKIN_DETECTORS,
    FitzpatrickMapping,
    ImageDecodeError,
    LandmarkModelUnavailable,
    MaskSizeError,
    SkinSelection,
    classify_ita,
    decode_image,
    detect_skin,
    fitzpatrick_from_ita,
    ita_degrees,
    measure_image,
    select_skin,
    skin_detector_evaluation,
    skin_tone_stats,
    srgb_to_lab,
)

__all__ = [
    "ALGORITHM_VERSION",
    "DEFAULT_MAX_PIXELS",
    "DEFAULT_SKIN_DETECTOR",
    "FITZPATRICK_ITA_CHARDON_CLASSES",
    "FITZPATRICK_ITA_GROH_2021_EMPIRICAL",
    "FITZPATRICK_ITA_KINYANJUI_2020",
    "ITA_CLASSES",
    "FitzpatrickMapping",
    "ImageDecodeError",
    "LandmarkModelUnavailable",
    "MaskSizeError",
    "SKIN_DETECTORS",
    "SkinSelection",
    "classify_ita",
    "decode_image",
    "detect_skin",
    "fitzpatrick_from_ita",
    "ita_degrees",
    "measure_image",
    "select_skin",
    "skin_detector_evaluation",
    "skin_tone_stats",
    "srgb_to_lab",
]
