"""Skin-tone statistics and quality flags of one decoded RGB image.

* ``ita_median`` (the name kept for compatibility; since colorimetry-4.0.0,
  issue 21) is the ITA of the skin's *area-averaged colour*: the skin pixels'
  linear sRGB averaged, then converted to CIELAB. The median of the per-pixel
  ITA, reported before as ``ita_median``, is now ``ita_pixel_median``, with its
  quartiles and interquartile range (the spread tells how uniform the skin
  measurement is). The per-pixel median depends on the resolution: noise and
  JPEG's 4:2:0 chroma widen the per-pixel distribution at small sizes, and ITA
  is non-linear in (L*, b*), so its median is not the ITA of a typical colour
  (2.2-2.3 degrees between 512 px and 12 MP on the lightest tones); light
  averaged over an area is what a larger pixel records, so the average in
  linear light is the same at every size.
  ``ita_of_medians`` (ITA of median L* and median b*) is also returned
  because much published code reports that one; the two differ because ITA
  is non-linear in (L*, b*).
* Apparent albedo: the mean relative luminance Y (linear, 0..1) of the skin
  pixels. Skin albedo proper cannot be recovered from one photo (lighting
  and reflectance are confounded), so this is labelled *apparent*.
  ``albedo_normalized`` divides it by an estimate of the image white: the
  99th percentile of Y over the analysed image (white-patch / max-RGB
  Retinex assumption). A percentile rather than the maximum ignores isolated
  specular or hot pixels; the white-patch estimate is preferred over grey
  world because grey world depends on how much skin and which background
  colours fill the frame, while the brightest 1% of a normally exposed photo
  sits near the exposure's white. It overestimates the normalised albedo of
  scenes that contain nothing bright.

Quality flags (thresholds are keyword parameters, echoed in ``parameters``)
-------------------------------------------------------------------------
Skin pixels (``skin_detector``)
-------------------------------
``"landmarks_or_face"`` (the default since colorimetry-3.0.0, issue 21): the
face's cheeks, forehead and oval placed by MediaPipe's BlazeFace and Face Mesh
(:mod:`colorimetry.landmarks`), refined by the face's own colour; when the
landmark model finds no face, the cascades' face (``"face"``). ``"landmarks"``:
the landmark model alone. ``"face"``: OpenCV's Haar cascades, cheeks and
forehead of their box, refined by the face's own colour
(:mod:`colorimetry.face`; the default before 3.0.0). ``"face_or_rules"``: the cascades, and when
no face is found the rule-based detector of :mod:`colorimetry.skin`, labelled
(``skin_source`` ``"rules"``, flag ``rule_based_skin``). ``"rules"``: the
rule-based detector alone (the method before issue 12; it rejects Monk tones
1-3 and 9-10 and picks orange objects: kept for comparison). A mask, when
given, always wins. ``skin_source`` says which pixels were measured.

``no_face``
    no face was found (face and landmark detectors). Then nothing is
    measured: no number ever comes from the background.
``rule_based_skin``
    the rule-based fallback chose the pixels (``"face_or_rules"``/``"rules"``).
``too_little_skin``
    with a mask or the rule-based detector, skin fraction below
    ``min_skin_fraction`` (0.025: the 2.5% visible-skin pre-filter of the
    reference labeling process); with the face detector, fewer than
    ``min_skin_pixels`` (100) skin pixels kept (the face's sample is small by
    design, so a fraction of the image says nothing).
``wide_ita_spread``
    the interquartile range of the per-pixel ITA exceeds ``max_ita_iqr``
    (40 degrees): the region is too varied to be one skin (the rule-based
    overlay of the astronaut portrait, face plus hair plus garment, had 68; the
    face detector's regions on the development cases of
    ``tests/colorimetry/skin_evaluation_set.py`` had 2-28, the widest on Monk 6,
    where ITA moves about 2 degrees per unit of L*, so shading alone spreads it).
``ita_out_of_range``
    the median b* is negative (or the median ITA lies beyond +-90 degrees):
    the angle then says "lighter than white", not a skin colour; ``ita_class``
    and ``fitzpatrick`` are left empty rather than "very light" / type I.
``clipped_highlights``
    more than ``max_clipped_fraction`` (5%) of the skin pixels have a channel
    >= ``clip_level`` (250): a clipped channel loses the hue and pushes L*
    and ITA up. Evaluated on all pixels when no skin was found.
``underexposed``
    the image white estimate Y99 is below ``min_white_luminance`` (0.10,
    i.e. L* 37.8: even the brightest 1% of the image is darker than mid grey)
    or more than ``max_clipped_fraction`` of the skin pixels are crushed to
    near black (all channels <= 255 - ``clip_level``).
``color_cast``
    grey-world test on the non-skin pixels: the ratio of the largest to the
    smallest mean linear R, G, B exceeds ``max_cast_ratio`` (2.0, one stop of
    imbalance between channels). Skin itself is excluded (skin is reddish in
    linear RGB: R/B is about 2-3). Not evaluated when fewer than 5% of the
    pixels are non-skin. Scenes dominated by one saturated colour can trigger
    it too: it is a warning, not a verdict.
``b_near_zero``
    ``abs(b_median) < min_abs_b`` (2.0). All Monk swatches have b* >= 3.5;
    a grey or greyscale image gives b* = 0 and an ITA of +-90 degrees that
    says nothing about skin.

Results are JSON-safe: Python floats, ints, strings, lists and dicts;
statistics that are undefined (no skin pixels) are ``None``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import landmarks
from .classes import FITZPATRICK_ITA_KINYANJUI_2020, FitzpatrickMapping, classify_ita, fitzpatrick_from_ita
from .color import _LINEAR_F32, _lab_from_linear, _luminance, ita_degrees
from .errors import MaskSizeError
from .face import FACE_DETECTOR_NAME, face_skin_mask
from .landmarks import LANDMARK_DETECTOR_NAME, landmark_skin_mask
from .skin import detect_skin

__all__ = [
    "ALGORITHM_VERSION",
    "DEFAULT_SKIN_DETECTOR",
    "RULES_DETECTOR_NAME",
    "SKIN_DETECTORS",
    "SkinSelection",
    "select_skin",
    "skin_tone_stats",
]

#: Recorded in ``parameters["skin_detector_name"]`` when the colour rules chose the pixels.
RULES_DETECTOR_NAME = "chai_ngan_ycbcr+kovac_rgb"
#: Values of ``skin_detector`` (module docstring). ``"face"`` keeps its meaning of before issue 21 (the
#: cascades), so that a stored parameter set still means what it meant.
SKIN_DETECTORS = ("landmarks_or_face", "landmarks", "face", "face_or_rules", "rules")
#: The default: the landmark model, the cascades when it finds no face (README, "Known limitations":
#: on the second recolouring model the cascades found 12 of 24 Monk 8-10 faces, the landmark model 24).
DEFAULT_SKIN_DETECTOR = "landmarks_or_face"


@dataclass(frozen=True)
class SkinSelection:
    """Which pixels are measured and where they came from (see :func:`select_skin`).

    Attributes
    ----------
    mask : numpy.ndarray
        ``H x W`` boolean.
    source : str
        ``"mask"``, ``"face"``, ``"rules"`` or ``""`` (nothing credible found).
    flags : tuple of str
        ``no_face``, ``rule_based_skin``.
    face_box : tuple of int or None
        ``(x, y, width, height)`` of the measured face.
    n_faces : int
        Faces found.
    face_method : str
        How the face was found (:func:`colorimetry.face.detect_faces`).
    """

    mask: np.ndarray
    source: str
    flags: tuple[str, ...] = ()
    face_box: tuple[int, int, int, int] | None = None
    n_faces: int = 0
    face_method: str = ""
    weights: np.ndarray | None = None


def select_skin(
    rgb: np.ndarray,
    mask: np.ndarray | None = None,
    *,
    skin_detector: str = DEFAULT_SKIN_DETECTOR,
    opaque: np.ndarray | None = None,
) -> SkinSelection:
    """The skin pixels to measure: the mask's, else the face's, else (if allowed) the colour rules'.

    Parameters
    ----------
    rgb : numpy.ndarray
        ``H x W x 3`` ``uint8`` sRGB image.
    mask : numpy.ndarray, optional
        ``H x W`` boolean skin mask; when given it wins.
    skin_detector : str
        One of :data:`SKIN_DETECTORS` (module docstring).
    opaque : numpy.ndarray, optional
        ``H x W`` boolean: the detectors never choose pixels outside it (a
        silhouette mask, or the non-transparent pixels).

    Returns
    -------
    SkinSelection
    """
    if skin_detector not in SKIN_DETECTORS:
        raise ValueError(f"skin_detector must be one of {SKIN_DETECTORS}, got {skin_detector!r}")
    if mask is not None:
        return SkinSelection(mask, "mask")
    if skin_detector == "rules":
        return SkinSelection(_rules(rgb, opaque), "rules", ("rule_based_skin",))
    if skin_detector.startswith("landmarks"):
        face = landmark_skin_mask(rgb, opaque)
        if face.face_box is not None or skin_detector == "landmarks":
            flags = () if face.face_box is not None else ("no_face",)
            return SkinSelection(
                face.mask,
                "face" if face.face_box else "",
                flags,
                face.face_box,
                face.n_faces,
                face.method,
                face.weights,
            )
    face = face_skin_mask(rgb, opaque)
    if face.face_box is not None:
        return SkinSelection(face.mask, "face", (), face.face_box, face.n_faces, face.method, face.weights)
    if skin_detector == "face_or_rules":
        return SkinSelection(_rules(rgb, opaque), "rules", ("no_face", "rule_based_skin"))
    return SkinSelection(face.mask, "", ("no_face",))


def _rules(rgb: np.ndarray, opaque: np.ndarray | None) -> np.ndarray:
    skin = detect_skin(rgb)
    if opaque is not None:
        skin &= opaque
    return skin


#: Stored with every result so a measurement can be traced to the code that
#: produced it. Bump on any change that can move a number. The benches' comparisons with the methods before
#: measure exactly as those did, and say so: ``COLORIMETRY_FACE_TILE_LEVELS=2`` is colorimetry-5.5.0,
#: ``COLORIMETRY_FACE_TILES=0`` colorimetry-5.4.0, with ``COLORIMETRY_LANDMARK_SCALE=analysed`` too
#: colorimetry-5.3.0 (that scale with the tiles was never a release: it says both). Without the tiles the
#: number of tile levels does not matter. colorimetry-5.7.0 is 5.6.0 with the averaged framings
#: (``COLORIMETRY_MESH_JITTERS=0`` turns them off); with an older method they were never a release: it says
#: both.
_BEFORE_FRAMINGS = {
    ("fast_path", 3): "colorimetry-5.6.0",
    ("fast_path", 2): "colorimetry-5.5.0",
    ("fast_path", 0): "colorimetry-5.4.0",
    ("analysed", 0): "colorimetry-5.3.0",
    ("analysed", 2): "colorimetry-5.3.0+face-tiles",
    ("analysed", 3): "colorimetry-5.3.0+face-tiles-3",
}[(landmarks.LANDMARK_SCALE, landmarks.FACE_TILE_LEVELS if landmarks.FACE_TILES else 0)]
ALGORITHM_VERSION = _BEFORE_FRAMINGS
if landmarks.MESH_JITTERS:
    ALGORITHM_VERSION = (
        "colorimetry-5.7.0" if _BEFORE_FRAMINGS == "colorimetry-5.6.0" else f"{_BEFORE_FRAMINGS}+mesh-jitters"
    )


def skin_tone_stats(
    rgb: np.ndarray,
    mask: np.ndarray | None = None,
    *,
    skin_detector: str = DEFAULT_SKIN_DETECTOR,
    min_skin_fraction: float = 0.025,
    min_skin_pixels: int = 100,
    max_ita_iqr: float = 40.0,
    clip_level: int = 250,
    max_clipped_fraction: float = 0.05,
    min_white_luminance: float = 0.10,
    max_cast_ratio: float = 2.0,
    min_abs_b: float = 2.0,
    white_percentile: float = 99.0,
    fitzpatrick_mapping: FitzpatrickMapping = FITZPATRICK_ITA_KINYANJUI_2020,
    _opaque: np.ndarray | None = None,
    _mask_out: list[np.ndarray] | None = None,
) -> dict[str, Any]:
    """Colorimetric skin-tone statistics of one image.

    Parameters
    ----------
    rgb : numpy.ndarray
        ``H x W x 3`` ``uint8`` sRGB image (R, G, B order).
    mask : numpy.ndarray, optional
        ``H x W`` boolean skin mask. When given, exactly its pixels are
        measured; otherwise ``skin_detector`` chooses them.
    skin_detector : str
        One of :data:`SKIN_DETECTORS`: how skin is chosen
        without a mask (module docstring).
    min_skin_fraction : float
        ``too_little_skin`` threshold on the skin fraction (mask and rules).
    min_skin_pixels : int
        ``too_little_skin`` threshold on the number of skin pixels (any source).
    max_ita_iqr : float
        ``wide_ita_spread`` above this ITA interquartile range (degrees).
    clip_level : int
        Channel value at or above which a pixel counts as clipped; pixels
        with all channels <= ``255 - clip_level`` count as crushed.
    max_clipped_fraction : float
        Fraction of clipped (or crushed) skin pixels that raises
        ``clipped_highlights`` (or ``underexposed``).
    min_white_luminance : float
        ``underexposed`` when the image white estimate Y is below this.
    max_cast_ratio : float
        ``color_cast`` when the grey-world channel ratio of the non-skin
        pixels exceeds this.
    min_abs_b : float
        ``b_near_zero`` when ``abs(b_median)`` is below this.
    white_percentile : float
        Percentile of Y over the image used as its white estimate.
    fitzpatrick_mapping : FitzpatrickMapping
        ITA -> Fitzpatrick table.
    _opaque : numpy.ndarray, optional
        Internal (used by :func:`measure_image` for images with alpha, and
        for silhouette masks): pixels the automatic detectors may consider;
        ignored with a mask.
    _mask_out : list, optional
        Internal (the app's overlay, which shows the pixels measured instead
        of choosing them again): the ``H x W`` boolean skin selection is
        appended to it.

    Returns
    -------
    dict
        ``ita_median`` (ITA of the area-averaged linear colour),
        ``ita_pixel_median`` (median of per-pixel ITA), ``ita_q25``,
        ``ita_q75``, ``ita_iqr`` (per pixel),
        ``ita_of_medians``, ``lightness_median``, ``a_median``, ``b_median``,
        ``hue_angle`` (degrees, atan2(b*, a*) of the medians), ``ita_class``,
        ``fitzpatrick``, ``albedo`` (mean linear Y of skin pixels),
        ``albedo_normalized``, ``white_luminance`` (the white estimate),
        ``clipped_fraction``, ``grey_world_ratio`` (None when not judged),
        ``skin_fraction``, ``n_skin_pixels``, ``n_pixels``, ``skin_source``
        (``mask``, ``face``, ``rules`` or empty), ``face_box``, ``n_faces``,
        ``face_method``, ``flags`` (list of str), ``parameters`` (values used)
        and ``algorithm_version``.

    Examples
    --------
    >>> patch = np.full((4, 4, 3), (0xD7, 0xBD, 0x96), dtype=np.uint8)
    >>> stats = skin_tone_stats(patch, np.ones((4, 4), dtype=bool))
    >>> round(stats["ita_median"], 2), stats["ita_class"]  # Monk tone 5
    (50.32, 'light')
    """
    rgb = np.asarray(rgb)
    if rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
        raise ValueError(f"rgb must be an H x W x 3 uint8 array, got {rgb.dtype} {rgb.shape}")
    if mask is not None:
        mask = np.asarray(mask)
        if mask.shape != rgb.shape[:2]:
            raise MaskSizeError(f"mask shape {mask.shape} differs from image shape {rgb.shape[:2]}")
        mask = mask.astype(bool, copy=False)
    selection = select_skin(rgb, mask, skin_detector=skin_detector, opaque=_opaque)
    if _mask_out is not None:
        _mask_out.append(selection.mask)
    parameters = {
        "skin_detector": _detector_name(selection, skin_detector),
        "skin_detector_choice": skin_detector,
        "min_skin_fraction": min_skin_fraction,
        "min_skin_pixels": min_skin_pixels,
        "max_ita_iqr": max_ita_iqr,
        "clip_level": clip_level,
        "max_clipped_fraction": max_clipped_fraction,
        "min_white_luminance": min_white_luminance,
        "max_cast_ratio": max_cast_ratio,
        "min_abs_b": min_abs_b,
        "white_percentile": white_percentile,
        "fitzpatrick_mapping": fitzpatrick_mapping.name,
        "ita_median": "ITA of the mean linear sRGB colour of the skin pixels",
        "ita_pixel_median": "median of per-pixel ITA",
        "albedo_white": f"percentile {white_percentile:g} of Y over the image",
    }
    return _skin_tone_stats(rgb, selection, parameters, fitzpatrick_mapping)


def _detector_name(selection: SkinSelection, choice: str) -> str:
    if selection.source == "mask":
        return "mask"
    if selection.source == "rules":
        return RULES_DETECTOR_NAME if choice == "rules" else f"{RULES_DETECTOR_NAME} (fallback: no face)"
    if selection.face_method.startswith("face_mesh") or choice == "landmarks":
        return LANDMARK_DETECTOR_NAME
    if choice.startswith("landmarks"):
        return f"{FACE_DETECTOR_NAME} (fallback: no face from the landmark model)"
    return FACE_DETECTOR_NAME


def _skin_tone_stats(
    rgb: np.ndarray,
    selection: SkinSelection,
    parameters: dict[str, Any],
    fitzpatrick_mapping: FitzpatrickMapping,
) -> dict[str, Any]:
    # Everything works on contiguous 1-D channel arrays: numpy reductions and
    # partitions along the short axis of an N x 3 array are several times
    # slower (measured: max(axis=1) 8 ms vs 0.04 ms for 255k pixels).
    height, width = rgb.shape[:2]
    n_pixels = height * width
    skin = selection.mask
    flat = rgb.reshape(-1, 3)
    skin_index = np.flatnonzero(skin.reshape(-1))
    n_skin = int(skin_index.size)
    skin_fraction = n_skin / n_pixels if n_pixels else 0.0
    channels = [np.take(flat[:, c], skin_index) for c in range(3)]
    linear = [np.take(_LINEAR_F32, channel) for channel in channels]

    result: dict[str, Any] = dict.fromkeys(
        (
            "ita_median",
            "ita_pixel_median",
            "ita_q25",
            "ita_q75",
            "ita_iqr",
            "ita_of_medians",
            "lightness_median",
            "a_median",
            "b_median",
            "hue_angle",
            "ita_class",
            "fitzpatrick",
            "albedo",
            "albedo_normalized",
        )
    )
    if n_skin:
        L, a, b = _lab_from_linear(*linear)
        ita = np.degrees(np.arctan2(L - np.float32(50.0), b))
        q25, q50, q75 = (float(v) for v in np.percentile(ita, (25.0, 50.0, 75.0)))
        L_med, a_med, b_med = (float(np.median(v)) for v in (L, a, b))
        if selection.weights is not None:
            # The detector's weights (colorimetry-5.0.0): the weighted mean over every pixel with a weight.
            # Products and sums, not a dot product: BLAS's threads cost 60 ms here on a shared machine.
            weighted = np.flatnonzero(selection.weights.reshape(-1) > 0)
            w = np.take(selection.weights.reshape(-1), weighted)
            total = _sum(w)
            mean_linear = [
                np.array([_sum(np.take(_LINEAR_F32, np.take(flat[:, c], weighted)) * w) / total], dtype=np.float32)
                for c in range(3)
            ]
        else:
            mean_linear = [np.array([_mean(channel)], dtype=np.float32) for channel in linear]
        L_mean, _, b_mean = (float(v[0]) for v in _lab_from_linear(*mean_linear))
        central = ita_degrees(L_mean, b_mean)
        # b* < 0 puts the angle beyond +-90 degrees ("lighter than white"): no class.
        out_of_range = b_mean < 0.0 or abs(central) > 90.0
        result.update(
            ita_median=central,
            ita_pixel_median=q50,
            ita_q25=q25,
            ita_q75=q75,
            ita_iqr=q75 - q25,
            ita_of_medians=ita_degrees(L_med, b_med),
            lightness_median=L_med,
            a_median=a_med,
            b_median=b_med,
            hue_angle=math.degrees(math.atan2(b_med, a_med)),
            ita_class=None if out_of_range else classify_ita(central),
            fitzpatrick=None if out_of_range else fitzpatrick_from_ita(central, fitzpatrick_mapping),
            albedo=_mean(_luminance(*linear)),
        )

    # Image white: a percentile of Y over the whole image.
    all_linear = [np.take(_LINEAR_F32, flat[:, c]) for c in range(3)]
    white = float(np.percentile(_luminance(*all_linear), parameters["white_percentile"])) if n_pixels else 0.0
    if result["albedo"] is not None and white > 0:
        result["albedo_normalized"] = result["albedo"] / white

    flags: list[str] = list(selection.flags)
    too_little = n_skin < parameters["min_skin_pixels"]
    if selection.source != "face":  # the face's sample is small by design
        too_little |= skin_fraction < parameters["min_skin_fraction"]
    if too_little:
        flags.append("too_little_skin")
    if result["ita_iqr"] is not None and result["ita_iqr"] > parameters["max_ita_iqr"]:
        flags.append("wide_ita_spread")
    if n_skin and (result["b_median"] < 0.0 or abs(result["ita_median"]) > 90.0):
        flags.append("ita_out_of_range")

    clip_level = parameters["clip_level"]
    judged = channels if n_skin else [flat[:, c] for c in range(3)]
    if judged[0].size:
        brightest = np.maximum(np.maximum(judged[0], judged[1]), judged[2])
        clipped = float(np.count_nonzero(brightest >= clip_level)) / brightest.size
        crushed = float(np.count_nonzero(brightest <= 255 - clip_level)) / brightest.size
    else:
        clipped = crushed = 0.0
    if clipped > parameters["max_clipped_fraction"]:
        flags.append("clipped_highlights")
    if white < parameters["min_white_luminance"] or crushed > parameters["max_clipped_fraction"]:
        flags.append("underexposed")

    # Grey world on the non-skin pixels: channel sums over the image minus
    # those over the skin.
    n_background = n_pixels - n_skin
    cast_ratio = None
    if n_background and n_background >= 0.05 * n_pixels:
        means = np.array(
            [(_sum(all_linear[c]) - (_sum(linear[c]) if n_skin else 0.0)) / n_background for c in range(3)]
        )
        if means.min() > 0:
            cast_ratio = float(means.max() / means.min())
            if cast_ratio > parameters["max_cast_ratio"]:
                flags.append("color_cast")
        elif means.max() > 0:  # one channel entirely black: extreme cast
            flags.append("color_cast")

    b_median = result["b_median"]
    if b_median is not None and abs(b_median) < parameters["min_abs_b"]:
        flags.append("b_near_zero")

    result.update(
        white_luminance=white,
        clipped_fraction=clipped,
        grey_world_ratio=cast_ratio,
        skin_fraction=skin_fraction,
        n_skin_pixels=n_skin,
        n_pixels=n_pixels,
        skin_source=selection.source,
        face_box=list(selection.face_box) if selection.face_box is not None else None,
        n_faces=selection.n_faces,
        face_method=selection.face_method,
        flags=flags,
        parameters=parameters,
        algorithm_version=ALGORITHM_VERSION,
    )
    return result


def _sum(values: np.ndarray) -> float:
    return float(values.sum(dtype=np.float64))


def _mean(values: np.ndarray) -> float:
    return float(values.mean(dtype=np.float64))
