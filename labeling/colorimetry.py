"""Colorimetric skin-tone baseline: ITA and apparent albedo from photos.

Pure NumPy/Pillow; this module must never import Django, so it can be tested,
benchmarked and reused on its own (``tests/labeling/test_colorimetry.py``
checks that in a subprocess).

What is computed
----------------
* CIELAB from sRGB exactly as :func:`skimage.color.rgb2lab` does by default:
  sRGB decoding (IEC 61966-2-1), the sRGB/Rec. 709 RGB -> XYZ matrix, the D65
  white point for the 2 degree observer and skimage's CIE constants. The
  sRGB decoding is a 256-entry lookup table and the arithmetic is float32;
  the difference from skimage's float64 result is below 0.01 in L*, a*, b*.
* ITA (individual typology angle, Chardon et al. 1991) per skin pixel:
  ``ITA = degrees(atan2(L* - 50, b*))``. ``atan2`` (not ``atan((L*-50)/b*)``)
  keeps the angle correct for b* <= 0.
* ``ita_median`` is the median of the *per-pixel* ITA over the skin pixels,
  with its quartiles and interquartile range (what the labeling workflow
  asks for: the spread tells how uniform the skin measurement is).
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

Skin pixels
-----------
With a user mask the statistics use exactly the mask's pixels (the
segmentation is trusted). Without one, a documented rule-based detector is
used: the YCbCr box of Chai & Ngan (1999), Cb in [77, 127] and Cr in
[133, 173], computed with the full-range JFIF/BT.601 transform (as Pillow's
and OpenCV's 8-bit YCbCr; *not* scikit-image's studio-range ``rgb2ycbcr``),
intersected with the Kovac et al. (2003) uniform-daylight RGB rules
(R > 95, G > 40, B > 20, max - min > 15, |R - G| > 15, R > G, R > B). Given
R > G and R > B, max = R and max - min > 15 follows from R - G > 15, so the
implemented rule is R > 95, G > 40, B > 20, R - G > 15, R > B, evaluated in
int16 (``abs(R - G)`` on uint8 would wrap). scikit-image's LBP face cascade
is not used: multi-scale detection costs more than the whole measurement.

Quality flags (thresholds are keyword parameters, echoed in ``parameters``)
-------------------------------------------------------------------------
``too_little_skin``
    skin fraction below ``min_skin_fraction`` (0.025: the 2.5% visible-skin
    pre-filter of the reference labeling process).
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

import functools
import io
import math
import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image, ImageOps

__all__ = [
    "ALGORITHM_VERSION",
    "DEFAULT_MAX_PIXELS",
    "FITZPATRICK_ITA_CHARDON_CLASSES",
    "FITZPATRICK_ITA_KINYANJUI_2020",
    "ITA_CLASSES",
    "FitzpatrickMapping",
    "ImageDecodeError",
    "MaskSizeError",
    "classify_ita",
    "detect_skin",
    "fitzpatrick_from_ita",
    "ita_degrees",
    "measure_image",
    "skin_tone_stats",
    "srgb_to_lab",
]

#: Stored with every result so a measurement can be traced to the code that
#: produced it. Bump on any change that can move a number.
ALGORITHM_VERSION = "colorimetry-1.0.0"

#: Analysed-pixel cap for :func:`measure_image`. A 12 MP (4000 x 3000) JPEG
#: is then decoded at 1/8 scale (500 x 375). On the benchmark photo
#: (bench/bench_colorimetry.py, shared 2-CPU machine) measure_image took
#: 0.35-0.40x the time of Pillow's full decode in four runs, and its median
#: ITA was 0.11 degree from the full-resolution float64 value. With a 1 MP cap
#: (1/4 scale) the ITA error was below 0.01 degree but the time 0.64x and
#: 1.41x in two runs: too close to the 1.0x budget. libjpeg's entropy
#: decoding is the floor: 1/8 and 1/4 decodes cost about 40% of a full one.
DEFAULT_MAX_PIXELS = 500_000

# --- colour science constants (identical to skimage.color.colorconv) ---------

# sRGB (Rec. 709 primaries) linear RGB -> XYZ, as skimage's ``xyz_from_rgb``.
_XYZ_FROM_RGB = np.array(
    [
        [0.412453, 0.357580, 0.180423],
        [0.212671, 0.715160, 0.072169],
        [0.019334, 0.119193, 0.950227],
    ]
)
# D65 white point, 2 degree observer (skimage ``_illuminants["D65"]["2"]``).
_D65_WHITE = np.array([0.95047, 1.0, 1.08883])
# CIE f(t) constants as used by skimage: t > 0.008856 -> cbrt(t), else
# 7.787 t + 16/116.
_LAB_EPSILON = 0.008856
_LAB_KAPPA_SLOPE = 7.787


def _srgb_decode_table() -> np.ndarray:
    v = np.arange(256, dtype=np.float64) / 255.0
    linear = np.where(v > 0.04045, ((v + 0.055) / 1.055) ** 2.4, v / 12.92)
    return linear


_LINEAR_F64 = _srgb_decode_table()
_LINEAR_F32 = _LINEAR_F64.astype(np.float32)
# XYZ already divided by the white point, so f() can be applied directly.
_XYZN_FROM_RGB_F32 = (_XYZ_FROM_RGB / _D65_WHITE[:, None]).astype(np.float32)
_XYZ_FROM_RGB_F32 = _XYZ_FROM_RGB.astype(np.float32)

# --- classifications -----------------------------------------------------------

#: ITA skin-colour classes of Chardon et al. (1991), as extended by
#: Del Bino et al. (2006) with "brown" and "dark": (exclusive lower bound,
#: class); a value belongs to the first class whose bound it exceeds.
ITA_CLASSES: tuple[tuple[float, str], ...] = (
    (55.0, "very_light"),
    (41.0, "light"),
    (28.0, "intermediate"),
    (10.0, "tan"),
    (-30.0, "brown"),
    (-math.inf, "dark"),
)


@dataclass(frozen=True)
class FitzpatrickMapping:
    """An ITA -> Fitzpatrick type table with its source.

    Attributes
    ----------
    name : str
        Short identifier stored with results.
    source : str
        Citation of the table.
    lower_bounds : tuple of (float, int)
        ``(exclusive lower ITA bound, Fitzpatrick type)`` in decreasing bound
        order; the last bound must be ``-inf``.
    """

    name: str
    source: str
    lower_bounds: tuple[tuple[float, int], ...]


#: ITA -> Fitzpatrick mapping of Kinyanjui et al. (2020), "Fairness of
#: classifiers across skin tones in dermatology", MICCAI 2020, reused by
#: Groh et al. (2021), "Evaluating deep neural networks trained on clinical
#: images in dermatology with the Fitzpatrick 17k dataset", CVPR Workshops:
#: I > 55; II 41-55; III 28-41; IV 19-28; V 10-19; VI <= 10. It splits the
#: Chardon "tan" class at 19 degrees and puts everything at or below 10
#: degrees into type VI. The default here.
FITZPATRICK_ITA_KINYANJUI_2020 = FitzpatrickMapping(
    name="kinyanjui2020",
    source=(
        "Kinyanjui et al. 2020, Fairness of classifiers across skin tones in "
        "dermatology, MICCAI; as used by Groh et al. 2021 (Fitzpatrick 17k)"
    ),
    lower_bounds=(
        (55.0, 1),
        (41.0, 2),
        (28.0, 3),
        (19.0, 4),
        (10.0, 5),
        (-math.inf, 6),
    ),
)

#: One Fitzpatrick type per Chardon/Del Bino ITA class (very light -> I, ...,
#: dark -> VI), a one-to-one reading common in public code. Offered for
#: comparison; Del Bino & Bernerd (2013) stress that ITA classes and
#: phototypes are related but not equivalent.
FITZPATRICK_ITA_CHARDON_CLASSES = FitzpatrickMapping(
    name="chardon_classes",
    source=("Chardon et al. 1991 / Del Bino et al. 2006 ITA classes, read one class per Fitzpatrick type"),
    lower_bounds=tuple((bound, index + 1) for index, (bound, _label) in enumerate(ITA_CLASSES)),
)


class ImageDecodeError(ValueError):
    """The file is not a decodable image (corrupt, truncated, unknown format)."""


class MaskSizeError(ValueError):
    """The mask's size differs from the (EXIF-oriented) image's size."""


# --- public colour functions ---------------------------------------------------


def srgb_to_lab(rgb_uint8: np.ndarray) -> np.ndarray:
    """Convert 8-bit sRGB to CIELAB (D65, 2 degree observer).

    Matches :func:`skimage.color.rgb2lab` (default illuminant and observer)
    to better than 0.01 in each coordinate, using a 256-entry sRGB decoding
    table and float32 arithmetic.

    Parameters
    ----------
    rgb_uint8 : numpy.ndarray
        ``uint8`` array of shape ``(..., 3)`` in R, G, B order (not OpenCV's
        BGR).

    Returns
    -------
    numpy.ndarray
        ``float32`` array of the same shape holding L* (0..100), a*, b*.

    Examples
    --------
    >>> lab = srgb_to_lab(np.array([0xF6, 0xED, 0xE4], dtype=np.uint8))
    >>> [round(float(v), 2) for v in lab[[0, 2]]]  # Monk tone 1
    [94.21, 5.43]
    """
    rgb = np.asarray(rgb_uint8)
    if rgb.dtype != np.uint8:
        raise TypeError(f"srgb_to_lab expects uint8 sRGB, got {rgb.dtype}")
    if rgb.shape[-1:] != (3,):
        raise ValueError(f"srgb_to_lab expects shape (..., 3), got {rgb.shape}")
    lab = _lab_from_pixels(rgb.reshape(-1, 3))
    return lab.reshape(rgb.shape)


def ita_degrees(L: Any, b: Any) -> Any:
    """Individual typology angle, ``degrees(atan2(L* - 50, b*))``.

    ``atan2`` keeps the angle right when b* <= 0 (a bluish or grey pixel):
    L* = 60, b* = -5 gives 116.6 degrees, where ``atan((L*-50)/b*)`` would
    give -63.4.

    Parameters
    ----------
    L : float or array_like
        CIELAB lightness L*.
    b : float or array_like
        CIELAB b* (yellow-blue).

    Returns
    -------
    float or numpy.ndarray
        ITA in degrees, in (-180, 180]; a float for scalar inputs.

    Examples
    --------
    >>> round(ita_degrees(60.0, 10.0), 2)
    45.0
    >>> round(ita_degrees(60.0, -5.0), 2)
    116.57
    """
    ita = np.degrees(np.arctan2(np.subtract(L, 50.0), b))
    if np.ndim(ita) == 0:
        return float(ita)
    return ita


def classify_ita(ita: float | None, classes: Sequence[tuple[float, str]] = ITA_CLASSES) -> str | None:
    """ITA skin-colour class (Chardon 1991 / Del Bino 2006).

    Parameters
    ----------
    ita : float or None
        ITA in degrees.
    classes : sequence of (float, str)
        ``(exclusive lower bound, label)`` pairs in decreasing bound order.

    Returns
    -------
    str or None
        ``very_light`` (> 55), ``light`` (41-55], ``intermediate`` (28-41],
        ``tan`` (10-28], ``brown`` (-30-10], ``dark`` (<= -30); ``None`` for
        an undefined ITA.

    Examples
    --------
    >>> classify_ita(50.32), classify_ita(-30.0)
    ('light', 'dark')
    """
    return _lookup(ita, classes)


def fitzpatrick_from_ita(
    ita: float | None,
    mapping: FitzpatrickMapping | Sequence[tuple[float, int]] = FITZPATRICK_ITA_KINYANJUI_2020,
) -> int | None:
    """Fitzpatrick type estimated from ITA with a configurable table.

    Published ITA -> Fitzpatrick tables disagree; the table used is recorded
    in the results' ``parameters``.

    Parameters
    ----------
    ita : float or None
        ITA in degrees.
    mapping : FitzpatrickMapping or sequence of (float, int)
        Table of ``(exclusive lower ITA bound, type)`` in decreasing bound
        order. Default :data:`FITZPATRICK_ITA_KINYANJUI_2020`.

    Returns
    -------
    int or None
        Fitzpatrick type (1-6 with the built-in tables), ``None`` for an
        undefined ITA.

    Examples
    --------
    >>> fitzpatrick_from_ita(50.32), fitzpatrick_from_ita(15.0)
    (2, 5)
    >>> fitzpatrick_from_ita(15.0, FITZPATRICK_ITA_CHARDON_CLASSES)
    4
    """
    bounds = mapping.lower_bounds if isinstance(mapping, FitzpatrickMapping) else mapping
    return _lookup(ita, bounds)


def _lookup(value: float | None, table: Sequence[tuple[float, Any]]) -> Any:
    if value is None or not math.isfinite(value):
        return None
    for bound, label in table:
        if value > bound:
            return label
    return table[-1][1]


# --- skin statistics -----------------------------------------------------------


def skin_tone_stats(
    rgb: np.ndarray,
    mask: np.ndarray | None = None,
    *,
    min_skin_fraction: float = 0.025,
    clip_level: int = 250,
    max_clipped_fraction: float = 0.05,
    min_white_luminance: float = 0.10,
    max_cast_ratio: float = 2.0,
    min_abs_b: float = 2.0,
    white_percentile: float = 99.0,
    fitzpatrick_mapping: FitzpatrickMapping = FITZPATRICK_ITA_KINYANJUI_2020,
    _opaque: np.ndarray | None = None,
) -> dict[str, Any]:
    """Colorimetric skin-tone statistics of one image.

    Parameters
    ----------
    rgb : numpy.ndarray
        ``H x W x 3`` ``uint8`` sRGB image (R, G, B order).
    mask : numpy.ndarray, optional
        ``H x W`` boolean skin mask. When given, exactly its pixels are
        measured; otherwise the rule-based detector of the module docstring
        chooses them.
    min_skin_fraction : float
        ``too_little_skin`` threshold on the skin fraction.
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
        Internal (used by :func:`measure_image` for images with alpha):
        pixels the automatic detector may consider; ignored with a mask.

    Returns
    -------
    dict
        ``ita_median``, ``ita_q25``, ``ita_q75``, ``ita_iqr``,
        ``ita_of_medians``, ``lightness_median``, ``a_median``, ``b_median``,
        ``hue_angle`` (degrees, atan2(b*, a*) of the medians), ``ita_class``,
        ``fitzpatrick``, ``albedo`` (mean linear Y of skin pixels),
        ``albedo_normalized``, ``white_luminance`` (the white estimate),
        ``clipped_fraction``, ``grey_world_ratio`` (None when not judged),
        ``skin_fraction``, ``n_skin_pixels``, ``n_pixels``, ``flags`` (list
        of str), ``parameters`` (values used) and ``algorithm_version``.

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
    parameters = {
        "skin_detector": "mask" if mask is not None else "chai_ngan_ycbcr+kovac_rgb",
        "min_skin_fraction": min_skin_fraction,
        "clip_level": clip_level,
        "max_clipped_fraction": max_clipped_fraction,
        "min_white_luminance": min_white_luminance,
        "max_cast_ratio": max_cast_ratio,
        "min_abs_b": min_abs_b,
        "white_percentile": white_percentile,
        "fitzpatrick_mapping": fitzpatrick_mapping.name,
        "ita_median": "median of per-pixel ITA",
        "albedo_white": f"percentile {white_percentile:g} of Y over the image",
    }
    return _skin_tone_stats(rgb, mask, _opaque, parameters, fitzpatrick_mapping)


def _skin_tone_stats(
    rgb: np.ndarray,
    mask: np.ndarray | None,
    opaque: np.ndarray | None,
    parameters: dict[str, Any],
    fitzpatrick_mapping: FitzpatrickMapping,
) -> dict[str, Any]:
    # Everything works on contiguous 1-D channel arrays: numpy reductions and
    # partitions along the short axis of an N x 3 array are several times
    # slower (measured: max(axis=1) 8 ms vs 0.04 ms for 255k pixels).
    height, width = rgb.shape[:2]
    n_pixels = height * width
    skin = detect_skin(rgb) if mask is None else mask
    if mask is None and opaque is not None:
        skin &= opaque
    flat = rgb.reshape(-1, 3)
    skin_index = np.flatnonzero(skin.reshape(-1))
    n_skin = int(skin_index.size)
    skin_fraction = n_skin / n_pixels if n_pixels else 0.0
    channels = [np.take(flat[:, c], skin_index) for c in range(3)]
    linear = [np.take(_LINEAR_F32, channel) for channel in channels]

    result: dict[str, Any] = dict.fromkeys(
        (
            "ita_median",
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
        result.update(
            ita_median=q50,
            ita_q25=q25,
            ita_q75=q75,
            ita_iqr=q75 - q25,
            ita_of_medians=ita_degrees(L_med, b_med),
            lightness_median=L_med,
            a_median=a_med,
            b_median=b_med,
            hue_angle=math.degrees(math.atan2(b_med, a_med)),
            ita_class=classify_ita(q50),
            fitzpatrick=fitzpatrick_from_ita(q50, fitzpatrick_mapping),
            albedo=_mean(_luminance(*linear)),
        )

    # Image white: a percentile of Y over the whole image.
    all_linear = [np.take(_LINEAR_F32, flat[:, c]) for c in range(3)]
    white = float(np.percentile(_luminance(*all_linear), parameters["white_percentile"])) if n_pixels else 0.0
    if result["albedo"] is not None and white > 0:
        result["albedo_normalized"] = result["albedo"] / white

    flags: list[str] = []
    if skin_fraction < parameters["min_skin_fraction"]:
        flags.append("too_little_skin")

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
        flags=flags,
        parameters=parameters,
        algorithm_version=ALGORITHM_VERSION,
    )
    return result


def _sum(values: np.ndarray) -> float:
    return float(values.sum(dtype=np.float64))


def _mean(values: np.ndarray) -> float:
    return float(values.mean(dtype=np.float64))


def _luminance(r: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Relative luminance Y from linear sRGB channels (float32)."""
    m = _XYZ_FROM_RGB_F32[1]
    return m[0] * r + m[1] * g + m[2] * b


def detect_skin(rgb: np.ndarray) -> np.ndarray:
    """Rule-based skin mask: Chai & Ngan YCbCr box AND Kovac RGB rules.

    Parameters
    ----------
    rgb : numpy.ndarray
        ``H x W x 3`` ``uint8`` sRGB image.

    Returns
    -------
    numpy.ndarray
        ``H x W`` boolean mask.

    Examples
    --------
    >>> detect_skin(np.array([[[0xD7, 0xBD, 0x96], [0x60, 0x80, 0xC0]]], np.uint8))
    array([[ True, False]])
    """
    r = rgb[..., 0].astype(np.int16)
    g = rgb[..., 1].astype(np.int16)
    b = rgb[..., 2].astype(np.int16)
    r_minus_g = r - g
    skin = (r > 95) & (g > 40) & (b > 20) & (r_minus_g > 15) & (r > b)
    # Full-range BT.601 (JFIF) chroma, in units of 1/1024 to stay in int32:
    # Cb - 128 = -0.168736 R - 0.331264 G + 0.5 B
    # Cr - 128 =  0.5 R - 0.418688 G - 0.081312 B
    r32 = r.astype(np.int32)
    g32 = g.astype(np.int32)
    b32 = b.astype(np.int32)
    cb = -173 * r32 - 339 * g32 + 512 * b32
    cr = 512 * r32 - 429 * g32 - 83 * b32
    skin &= (cb >= (77 - 128) * 1024) & (cb <= (127 - 128) * 1024)
    skin &= (cr >= (133 - 128) * 1024) & (cr <= (173 - 128) * 1024)
    return skin


def _lab_from_pixels(pixels: np.ndarray) -> np.ndarray:
    """N x 3 uint8 sRGB -> N x 3 float32 CIELAB (skimage-compatible)."""
    linear = [np.take(_LINEAR_F32, pixels[:, c]) for c in range(3)]
    return np.stack(_lab_from_linear(*linear), axis=-1)


def _lab_from_linear(r: np.ndarray, g: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Linear sRGB channels (float32, 1-D) -> L*, a*, b* (float32, 1-D)."""
    f = []
    for row in _XYZN_FROM_RGB_F32:  # X/Xn, Y/Yn, Z/Zn, then CIE f()
        t = row[0] * r + row[1] * g + row[2] * b
        # float32 pow is about 2.5x faster than np.cbrt here and as accurate
        # (measured on 255k values); t >= 0 always.
        ft = np.power(t, np.float32(1.0 / 3.0))
        small = t <= _LAB_EPSILON
        if small.any():
            ft[small] = t[small] * np.float32(_LAB_KAPPA_SLOPE) + np.float32(16.0 / 116.0)
        f.append(ft)
    fx, fy, fz = f
    L = np.float32(116.0) * fy - np.float32(16.0)
    return L, np.float32(500.0) * (fx - fy), np.float32(200.0) * (fy - fz)


# --- images on disk ------------------------------------------------------------

# EXIF orientations 5-8 swap width and height.
_TRANSPOSING_ORIENTATIONS = frozenset({5, 6, 7, 8})
_EXIF_ORIENTATION_TAG = 0x0112
# The errors Pillow raises on unreadable data. DecompressionBombError is
# deliberately not caught: the guard stays on and surfaces as itself.
_DECODE_ERRORS = (OSError, SyntaxError, ValueError, EOFError, IndexError, struct.error)


def measure_image(
    path: str | os.PathLike[str],
    mask_path: str | os.PathLike[str] | None = None,
    *,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    **options: Any,
) -> dict[str, Any]:
    """Measure skin tone in an image file, optionally restricted by a mask file.

    The image is decoded with Pillow at reduced resolution so that at most
    ``max_pixels`` are analysed: a JPEG through libjpeg's DCT scaling
    (``Image.draft``, the smallest of 1/1, 1/2, 1/4, 1/8 that fits, several
    times faster than a full decode), then, like other formats after a full
    decode, box-reduced (``Image.reduce``) if still too large. EXIF
    orientation is applied (``ImageOps.exif_transpose``). Conversion to 8-bit
    sRGB: an embedded non-sRGB ICC profile (e.g. Display P3 from phones, a
    CMYK press profile) is converted to sRGB with LittleCMS (relative
    colorimetric intent); otherwise Pillow's conversion is used (grey
    replicated, palette expanded, CMYK naive); 16-bit greyscale (``I;16``,
    ``I``) is scaled by 255/65535 rather than clipped. Alpha is dropped, not
    composited (compositing onto white or black would invent colours at soft
    edges); fully transparent pixels are excluded from the automatic skin
    detector. Pillow's decompression-bomb guard is left on.

    Parameters
    ----------
    path : str or os.PathLike
        Image file.
    mask_path : str or os.PathLike, optional
        Skin mask file, any mode, same size as the EXIF-oriented image (its
        own EXIF orientation, if any, is applied too). A pixel is skin when
        any colour band is nonzero and, for modes with alpha, alpha is
        nonzero. It is resized to the analysed size with nearest-neighbour
        sampling (masks are binary).
    max_pixels : int
        Cap on the number of analysed pixels.
    **options
        Keyword arguments of :func:`skin_tone_stats` (thresholds, mapping).

    Returns
    -------
    dict
        The mapping of :func:`skin_tone_stats` plus ``width`` and ``height``
        (oriented, full resolution), ``analysed_width``, ``analysed_height``
        and ``decode`` (format, mode, JPEG draft scale, reduce factor, EXIF
        orientation, ICC handling).

    Raises
    ------
    ImageDecodeError
        The image or mask file is corrupt, truncated or not an image.
    MaskSizeError
        The mask's size differs from the oriented image's size (checked from
        the file headers, before decoding).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     p = pathlib.Path(tmp) / "patch.png"
    ...     Image.new("RGB", (8, 8), (0xD7, 0xBD, 0x96)).save(p)
    ...     stats = measure_image(p)
    >>> round(stats["ita_median"], 2), stats["width"], stats["flags"]
    (50.32, 8, [])
    """
    if max_pixels < 1:
        raise ValueError(f"max_pixels must be positive, got {max_pixels}")
    mask_image = None
    image = _open_image(path, "image")
    try:
        orientation = _orientation(image, path)
        width, height = _oriented_size(image.size, orientation)
        if mask_path is not None:
            mask_image = _open_image(mask_path, "mask")
            mask_size = _oriented_size(mask_image.size, _orientation(mask_image, mask_path))
            if mask_size != (width, height):
                raise MaskSizeError(
                    f"mask {os.fspath(mask_path)!r} is {mask_size[0]}x{mask_size[1]} "
                    f"pixels but image {os.fspath(path)!r} is {width}x{height} "
                    "(after EXIF orientation); the mask must match the image"
                )

        source_format, source_mode = image.format, image.mode
        draft_scale = 1
        if image.format == "JPEG":
            raw_width, raw_height = image.size
            for draft_scale in (1, 2, 4, 8):
                scaled = math.ceil(raw_width / draft_scale) * math.ceil(raw_height / draft_scale)
                if scaled <= max_pixels:
                    break
            if draft_scale > 1:
                # draft() picks the largest s in (8, 4, 2, 1) with
                # size // s >= the requested size, so request size // scale.
                image.draft(
                    "RGB",
                    (
                        max(1, raw_width // draft_scale),
                        max(1, raw_height // draft_scale),
                    ),
                )
        try:
            image.load()
            rgb_image, icc_status = _to_rgb(image)
            if orientation != 1:
                rgb_image = ImageOps.exif_transpose(rgb_image)
            reduce_factor = _reduce_factor(rgb_image.size, max_pixels)
            if reduce_factor > 1:
                rgb_image = rgb_image.reduce(reduce_factor)
            array = np.asarray(rgb_image)
        except _DECODE_ERRORS as exc:
            raise ImageDecodeError(f"cannot decode image {os.fspath(path)!r}: {exc}") from exc

        mask = None
        if mask_image is not None:
            try:
                mask = _mask_array(mask_image, (array.shape[1], array.shape[0]))
            except _DECODE_ERRORS as exc:
                raise ImageDecodeError(f"cannot decode mask {os.fspath(mask_path)!r}: {exc}") from exc
    finally:
        image.close()
        if mask_image is not None:
            mask_image.close()

    opaque = None
    if array.shape[2] == 4:
        opaque = array[..., 3] != 0
        array = np.ascontiguousarray(array[..., :3])
    result = skin_tone_stats(array, mask, _opaque=opaque, **options)
    result.update(
        width=width,
        height=height,
        analysed_width=array.shape[1],
        analysed_height=array.shape[0],
        decode={
            "format": source_format,
            "mode": source_mode,
            "draft_scale": draft_scale,
            "reduce_factor": reduce_factor,
            "exif_orientation": orientation,
            "icc_profile": icc_status,
        },
    )
    return result


def _oriented_size(size: tuple[int, int], orientation: int) -> tuple[int, int]:
    if orientation in _TRANSPOSING_ORIENTATIONS:
        return size[1], size[0]
    return size


def _reduce_factor(size: tuple[int, int], max_pixels: int) -> int:
    """Smallest integer box-reduction factor leaving at most ``max_pixels``."""
    width, height = size
    factor = max(1, math.ceil(math.sqrt(width * height / max_pixels)))
    while math.ceil(width / factor) * math.ceil(height / factor) > max_pixels:
        factor += 1
    return factor


def _open_image(path: str | os.PathLike[str], what: str) -> Image.Image:
    try:
        return Image.open(path)
    except FileNotFoundError:
        raise
    except _DECODE_ERRORS as exc:
        raise ImageDecodeError(f"cannot read {what} {os.fspath(path)!r}: {exc}") from exc


def _orientation(image: Image.Image, path: str | os.PathLike[str]) -> int:
    try:
        orientation = image.getexif().get(_EXIF_ORIENTATION_TAG, 1)
    except _DECODE_ERRORS as exc:
        raise ImageDecodeError(f"cannot read {os.fspath(path)!r}: {exc}") from exc
    return orientation if orientation in range(1, 9) else 1


def _to_rgb(image: Image.Image) -> tuple[Image.Image, str]:
    """Decoded image -> 8-bit ``RGB`` or ``RGBA`` image, and ICC handling."""
    mode = image.mode
    icc_status = "none"
    icc = image.info.get("icc_profile")
    if icc:
        converted = _icc_to_srgb(image, icc) if mode in ("RGB", "CMYK", "L") else None
        if converted is not None:
            return converted, "converted_to_srgb"
        icc_status = "srgb_or_not_applied"
    if mode in ("RGB", "RGBA"):
        return image, icc_status
    if mode in ("I;16", "I;16L", "I;16B", "I;16N", "I"):
        # Pillow's convert() clips 16-bit values to 0..255; scale instead.
        values = np.asarray(image).astype(np.int64).clip(0, 65535)
        grey = ((values * 255 + 32767) // 65535).astype(np.uint8)
        return Image.fromarray(grey, "L").convert("RGB"), icc_status
    if mode in ("LA", "La", "PA", "RGBa") or (mode == "P" and "transparency" in image.info):
        return image.convert("RGBA"), icc_status
    return image.convert("RGB"), icc_status


@functools.lru_cache(maxsize=16)
def _srgb_transform(icc: bytes, mode: str) -> Any:
    from PIL import ImageCms

    source = ImageCms.ImageCmsProfile(io.BytesIO(icc))
    description = (ImageCms.getProfileDescription(source) or "").lower()
    if "srgb" in description:
        return None  # already sRGB: skip an identity transform
    return ImageCms.buildTransform(
        source,
        ImageCms.createProfile("sRGB"),
        mode,
        "RGB",
        renderingIntent=ImageCms.Intent.RELATIVE_COLORIMETRIC,
    )


def _icc_to_srgb(image: Image.Image, icc: bytes) -> Image.Image | None:
    try:
        transform = _srgb_transform(bytes(icc), image.mode)
        if transform is None:
            return None
        from PIL import ImageCms

        return ImageCms.applyTransform(image, transform)
    except Exception:  # noqa: BLE001 - broken or unsupported profile: fall back
        return None


def _mask_array(mask_image: Image.Image, size: tuple[int, int]) -> np.ndarray:
    """Mask image -> boolean array resized (nearest) to ``size`` = (w, h)."""
    mask_image.load()
    mask_image = ImageOps.exif_transpose(mask_image)
    if mask_image.mode == "P":
        mask_image = mask_image.convert("RGBA")
    bands = mask_image.getbands()
    values = np.asarray(mask_image)
    if values.ndim == 2:
        skin = values != 0
    elif "A" in bands:
        alpha = bands.index("A")
        colour = [i for i in range(len(bands)) if i != alpha]
        skin = (values[..., colour] != 0).any(axis=-1) & (values[..., alpha] != 0)
    else:
        skin = (values != 0).any(axis=-1)
    if skin.shape[::-1] != size:
        skin_image = Image.fromarray(skin.astype(np.uint8) * 255, "L")
        skin = np.asarray(skin_image.resize(size, Image.Resampling.NEAREST)) != 0
    return skin
