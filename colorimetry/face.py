"""Skin pixels chosen by where the face is, then by the face's own colour.

The rule-based colour boxes of :mod:`colorimetry.skin` were measured to reject
Monk tones 1-3 and 9-10 outright and to pick orange or beige objects instead of
a face (DOMAIN.md section 5; issue 12). This module locates skin by geometry
instead:

1. **Face.** OpenCV's frontal-face Haar cascades (Viola & Jones 2001 [ViolaJones2001]; the
   ``haarcascade_frontalface_default.xml`` and ``_alt.xml`` models that ship
   *inside* the ``opencv-python-headless`` wheel, under ``cv2.data.haarcascades``:
   nothing is downloaded at run time, they run on CPU with NumPy 2). A cascade
   works on intensity patterns, not colour, so it is run on the grey image after
   histogram equalisation, then, if nothing was found, on the log of the linear
   luminance, where a dark face has the same internal contrast as a light one;
   then a box inferred from a pair of eyes, then the second cascade on both
   views (:func:`detect_faces`). The most confident face is measured
   (``n_faces`` says how many were found). Detection runs on a copy scaled to
   :data:`DETECT_MAX_SIDE` pixels on its long side (faces smaller than
   :data:`MIN_FACE_FRACTION` of the short side are not searched and are flagged
   ``no_face``).
2. **Skin regions.** Inside the face box, fixed fractions sample the forehead
   and both cheeks (:data:`SAMPLE_REGIONS`) and leave out the eyes, brows,
   nose tip, lips and the hair line. The fractions fit the proportions of the
   cascade's box (it spans roughly mid-forehead to chin; eyes at about 0.38 of
   its height, mouth at about 0.78).
3. **Refinement by the face's own colour.** The forehead is dropped when its
   median colour is far from the cheeks' (a fringe of hair). Pixels whose L*,
   a* or b* lie more than :data:`REFINE_SIGMAS` robust standard deviations
   (1.4826 x MAD, with a floor) from the sample's median are dropped, twice:
   strands of hair, glasses frames, specular highlights and deep shadows go,
   skin stays, whatever its tone (the statistics are the face's own, not a
   colour box tuned on mid tones). Then every pixel of the face's ellipse
   (:data:`FACE_ELLIPSE`) that fits the same model is added: the cheeks alone
   are lighter than the face as a whole (on the development cases the mean
   error was +3.0 and +2.9 degrees ITA for Monk 6 and 7 with the cheeks and
   forehead alone, +1.4 and +0.4 with the face added).

   Since colorimetry-5.0.0 (issue 21) this is done on a grid fixed on the face
   (:data:`CANONICAL_EYE_DISTANCE` pixels between the eyes, resampled in linear
   light) and gives each pixel a weight rather than in or out: the cut at
   :data:`REFINE_SIGMAS` becomes a ramp, the forehead's in-or-out a weight
   (:func:`canonical_skin_weights`), so that the same photo at another size is
   measured on the same skin.

Nothing is corrected: ITA is measured on the pixels as recorded.

The rule-based detector stays available as a labelled fallback (see
:func:`colorimetry.stats.skin_tone_stats`, ``skin_detector``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from .color import _LINEAR_F32, _lab_from_linear, _luminance

__all__ = [
    "DETECT_MAX_SIDE",
    "FACE_DETECTOR_NAME",
    "REFINE_SIGMAS",
    "SAMPLE_REGIONS",
    "FaceSkin",
    "detect_faces",
    "face_skin_mask",
]

#: Recorded in results' ``parameters["skin_detector"]``.
FACE_DETECTOR_NAME = "opencv_haar_frontalface+cheeks_forehead+face_colour_refinement"

#: Long side of the copy the cascade runs on. On the evaluation portraits
#: (512 px) one detection took 6-9 ms at 320 px and 25-30 ms at 512 px on the
#: shared 2-CPU machine; 400 keeps faces of 1/16 of the image side detectable.
DETECT_MAX_SIDE = 320
#: Long side of the copy the eye cascade runs on (eyes are small).
EYE_MAX_SIDE = 480
#: Cascade confidence below which a detection is not a face. On the evaluation
#: portraits true faces scored 3.6-9.5 and false ones (a shuttle, a patch) -0.2-1.1.
MIN_FACE_WEIGHT = 2.5
#: The second frontal cascade shipped in the wheel (``haarcascade_frontalface_alt``,
#: Lienhart's tilted-feature cascade), tried when the default one finds nothing on
#: either grey view. Its confidence is on another scale: a detection counts when it
#: passes the cascade's own final-stage threshold (104.75, rounded up). It found the
#: dark recoloured faces of a crop the default cascade missed, and no face on 22
#: scenes without one (scikit-image's sample data: a shuttle, coffee, a cat, coins,
#: text, textures and others), as the default cascade finds none there.
ALT_CASCADE = "haarcascade_frontalface_alt.xml"
MIN_ALT_FACE_WEIGHT = 105.0
#: Step between the cascade's scales.
SCALE_FACTOR = 1.2
#: Smallest face searched, as a fraction of the image's short side.
MIN_FACE_FRACTION = 0.1
#: Luminance mapped to 0 in the log view (L* 0.9): darker pixels are noise.
_LOG_FLOOR = 1e-3

#: (x0, y0, x1, y1) as fractions of the face box: forehead, left cheek, right cheek.
SAMPLE_REGIONS: tuple[tuple[float, float, float, float], ...] = (
    (0.32, 0.10, 0.68, 0.22),
    (0.18, 0.52, 0.38, 0.70),
    (0.62, 0.52, 0.82, 0.70),
)

#: The face's ellipse in its box: centre x, centre y, radius x, radius y as
#: fractions of the box (the cascade's box runs from mid-forehead to the chin).
FACE_ELLIPSE = (0.5, 0.55, 0.42, 0.5)
#: Largest CIELAB distance (Delta E 1976) between the forehead's and the cheeks'
#: median colour for the forehead to be measured with them.
REGION_MAX_DELTA_E = 8.0
#: Robust standard deviations kept around the face's median L*, a*, b*.
REFINE_SIGMAS = 2.5
#: Floors of the robust standard deviations (L*, a*, b*): a very even face must
#: not lose its texture to a zero MAD.
_SIGMA_FLOOR = (2.0, 1.5, 1.5)


@dataclass(frozen=True)
class FaceSkin:
    """Skin pixels chosen from a face (see :func:`face_skin_mask`).

    Attributes
    ----------
    mask : numpy.ndarray
        ``H x W`` boolean, the pixels to measure (all False when no face).
    face_box : tuple of int or None
        ``(x, y, width, height)`` of the measured face in the image's pixels.
    n_faces : int
        Faces found.
    sampled_pixels : int
        Pixels in the sample regions before refinement.
    method : str
        How the face was found (see :func:`detect_faces`), "" when it was not.
    """

    mask: np.ndarray
    face_box: tuple[int, int, int, int] | None
    n_faces: int
    sampled_pixels: int
    method: str
    weights: np.ndarray | None = None


@functools.cache
def _cascade(name: str) -> Any:
    import cv2  # heavy: imported on first use

    path = cv2.data.haarcascades + name  # type: ignore[attr-defined]  # cv2's stubs lack the data module
    cascade = cv2.CascadeClassifier(path)
    if cascade.empty():  # pragma: no cover - a broken install
        raise RuntimeError(f"cannot load the OpenCV cascade {path}")
    return cascade


def _grey_views(small: np.ndarray) -> Any:
    """Grey images to run the cascades on, in order: each brings out a different face.

    * histogram-equalised grey (the cascade's own training condition);
    * log of the linear luminance: shading and texture are multiplicative, so in
      log units a dark face has the same internal contrast (eyes vs cheeks, brows
      vs forehead) as a light one, only its edge against hair and background
      changes.

    (An exposure bracket, linear gain 8, was tried as a third view: on the
    development cases it found no face the other two missed.)
    """
    import cv2

    linear = np.take(_LINEAR_F32, small)
    luminance = _luminance(linear[..., 0], linear[..., 1], linear[..., 2])
    yield "equalised", lambda: cv2.equalizeHist(cv2.cvtColor(small, cv2.COLOR_RGB2GRAY))
    yield "log_luminance", lambda: _log_grey(luminance)


def _log_grey(luminance: np.ndarray) -> np.ndarray:
    floor = np.float32(_LOG_FLOOR)
    scaled = np.log(np.maximum(luminance, floor) / floor) / -np.log(floor)
    return np.asarray(np.round(scaled * 255.0).astype(np.uint8))


def _reduced(rgb: np.ndarray, max_side: int) -> tuple[np.ndarray, float]:
    import cv2

    # Smaller images are enlarged: the cascades' windows are 24 (face) and 20 (eye)
    # pixels, so a face filling a third of a 256-pixel image is otherwise missed.
    height, width = rgb.shape[:2]
    scale = max_side / max(height, width)
    if abs(scale - 1.0) < 0.02:
        return np.ascontiguousarray(rgb), 1.0
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    return cv2.resize(rgb, size, interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR), scale


def _best(
    cascade: Any, grey: np.ndarray, min_side: int, scale_factor: float, max_side: int = 0
) -> list[tuple[float, tuple[int, ...]]]:
    boxes, _levels, weights = cascade.detectMultiScale3(
        grey,
        scaleFactor=scale_factor,
        minNeighbors=4,
        minSize=(min_side, min_side),
        maxSize=(max_side, max_side),
        outputRejectLevels=True,
    )
    return sorted(((float(w), tuple(int(v) for v in b)) for b, w in zip(boxes, weights)), reverse=True)


def detect_faces(rgb: np.ndarray) -> tuple[list[tuple[int, int, int, int]], str]:
    """Frontal faces in an sRGB image, most confident first, and how they were found.

    The frontal-face cascade runs on the grey views of :func:`_grey_views` until
    one finds a face whose cascade confidence (the last stage's sum, OpenCV's
    ``levelWeights``) reaches :data:`MIN_FACE_WEIGHT`. When none does, a face box is
    inferred from a pair of eyes (``haarcascade_eye``, on the log-luminance view
    at up to :data:`EYE_MAX_SIDE` pixels): the whites of the eyes stand out on a
    dark face where the whole-face pattern may not. Two eyes of similar size,
    level, 1.2-4 eye widths apart give a box 2.2 eye distances wide with the eyes
    at 0.38 of its height (the frontal cascade's proportions, measured on the
    astronaut portrait). When no pair is found either, the second frontal cascade
    (:data:`ALT_CASCADE`, at :data:`MIN_ALT_FACE_WEIGHT`) is tried on both views:
    last, because on the development portrait it put a face on the suit where the
    eye pair had found the real one.

    Parameters
    ----------
    rgb : numpy.ndarray
        ``H x W x 3`` ``uint8`` sRGB image.

    Returns
    -------
    tuple
        ``(boxes, method)``: ``(x, y, width, height)`` boxes in the image's
        pixels, and ``"frontal_face:<view>"``, ``"frontal_face_alt:<view>"``,
        ``"eye_pair"`` or ``""`` (none).
    """
    small, scale = _reduced(rgb, DETECT_MAX_SIDE)
    min_side = max(24, round(MIN_FACE_FRACTION * min(small.shape[:2])))
    made: dict[str, np.ndarray] = {}
    greys = [(view, functools.partial(_made, made, view, make)) for view, make in _grey_views(small)]
    found = _frontal(greys, "haarcascade_frontalface_default.xml", MIN_FACE_WEIGHT, min_side)
    if found:
        view, boxes = found
        return [tuple(round(v / scale) for v in box) for box in boxes], f"frontal_face:{view}"
    pairs = _eye_pair_boxes(rgb)
    if pairs:
        return pairs, "eye_pair"
    found = _frontal(greys, ALT_CASCADE, MIN_ALT_FACE_WEIGHT, min_side)
    if found:
        view, boxes = found
        return [tuple(round(v / scale) for v in box) for box in boxes], f"frontal_face_alt:{view}"
    return [], ""


def _made(made: dict[str, np.ndarray], view: str, make: Any) -> np.ndarray:
    """A grey view, made on first use only (most images need the first one alone)."""
    if view not in made:
        made[view] = make()
    return np.asarray(made[view])


def _frontal(greys: Any, name: str, minimum: float, min_side: int) -> Any:
    """``(view, boxes)`` of the first grey view (``(name, make)`` pairs) on which cascade ``name`` finds a
    face, or None."""
    for view, make in greys:
        found = [box for weight, box in _best(_cascade(name), make(), min_side, SCALE_FACTOR) if weight >= minimum]
        if found:
            return view, found
    return None


def _eye_pair_boxes(rgb: np.ndarray) -> list[tuple[int, int, int, int]]:
    """Face boxes inferred from pairs of eyes (see :func:`detect_faces`), best pair first."""
    eyes_image, eye_scale = _reduced(rgb, EYE_MAX_SIDE)
    linear = np.take(_LINEAR_F32, eyes_image)
    eyes = _best(
        _cascade("haarcascade_eye.xml"),
        _log_grey(_luminance(linear[..., 0], linear[..., 1], linear[..., 2])),
        12,
        SCALE_FACTOR,
        # An eye wider than 1/8 of the image is not searched: the smallest scales
        # cost the most, the largest ones find nothing a face cascade missed.
        max(13, min(eyes_image.shape[:2]) // 8),
    )
    pairs = []
    for i, (wi, (xi, yi, si, _)) in enumerate(eyes):
        for wj, (xj, yj, sj, _) in eyes[i + 1 :]:
            size = (si + sj) / 2
            cxi, cyi, cxj, cyj = xi + si / 2, yi + si / 2, xj + sj / 2, yj + sj / 2
            distance = abs(cxi - cxj)
            if max(si, sj) > 1.5 * min(si, sj) or abs(cyi - cyj) > 0.5 * size:
                continue
            if not 1.2 * size <= distance <= 4.0 * size:
                continue
            pairs.append((wi + wj, (cxi + cxj) / 2, (cyi + cyj) / 2, distance))
    pairs.sort(reverse=True)
    boxes = []
    for _w, cx, cy, distance in pairs:
        side = 2.2 * distance
        x, y = cx - side / 2, cy - 0.38 * side
        boxes.append((round(x / eye_scale), round(y / eye_scale), round(side / eye_scale), round(side / eye_scale)))
    return boxes


def face_skin_mask(rgb: np.ndarray, opaque: np.ndarray | None = None) -> FaceSkin:
    """Skin pixels of the largest face: cheeks and forehead refined by the face's colour.

    Parameters
    ----------
    rgb : numpy.ndarray
        ``H x W x 3`` ``uint8`` sRGB image.
    opaque : numpy.ndarray, optional
        ``H x W`` boolean; pixels outside it are never skin.

    Returns
    -------
    FaceSkin
        The mask (empty when no face was found), the weights of :func:`canonical_skin_weights` and where
        they came from.
    """
    height, width = rgb.shape[:2]
    faces, method = detect_faces(rgb)
    if not faces:
        return FaceSkin(np.zeros((height, width), dtype=bool), None, 0, 0, "")
    x, y, w, h = faces[0]
    # Pixel (i, j) covers [i - 0.5, i + 0.5): the box's pixels x .. x + w - 1 span x - 0.5 .. x + w - 0.5.
    samples = [
        np.array([(x + fx * w - 0.5, y + fy * h - 0.5) for fx, fy in ((fx0, fy0), (fx1, fy0), (fx1, fy1), (fx0, fy1))])
        for fx0, fy0, fx1, fy1 in SAMPLE_REGIONS
    ]
    angles = np.linspace(0.0, 2 * np.pi, 72, endpoint=False)
    ellipse = np.stack(
        [
            x - 0.5 + FACE_ELLIPSE[0] * w + FACE_ELLIPSE[2] * w * np.cos(angles),
            y - 0.5 + FACE_ELLIPSE[1] * h + FACE_ELLIPSE[3] * h * np.sin(angles),
        ],
        axis=1,
    )
    weights, sampled = canonical_skin_weights(rgb, opaque, samples, ellipse, [], w / BOX_WIDTH_PER_EYE_DISTANCE)
    return FaceSkin(weights >= 0.5, (x, y, w, h), len(faces), sampled, method, weights)


# --------------------------------------------------------------------------- the skin, on the face's grid

#: The cascades' box is about 2.2 eye distances wide (:func:`_eye_pair_boxes` uses that ratio).
BOX_WIDTH_PER_EYE_DISTANCE = 2.2
#: Distance between the eyes, in pixels, of the canonical grid on which the skin is chosen
#: (colorimetry-5.0.0, issue 21). The face is resampled to it (area average in linear light, bilinear
#: when it is enlarged), so every size of a photo is judged on the same pixels. 32 puts a canonical pixel
#: at or above the pixel of the fast decode path on a portrait (eye distance 35-90 px at 433-512 px).
CANONICAL_EYE_DISTANCE = 32.0
#: Scale (Gaussian sigma, as a fraction of the distance between the eyes) at which the refinement sees
#: a* and b* (colorimetry-4.0.0): sensor noise and JPEG's 4:2:0 chroma (colour stored at half the pixel
#: pitch) widen per-pixel chroma at small sizes.
CHROMA_SMOOTHING = 0.2
#: Scale (same units) at which it sees L* (colorimetry-5.0.0): above the footprint of the coarsest pixel
#: a photo is analysed at (1/35 of the eye distance at 12 MP through the fast path), far below the 0.2 of
#: the chroma (L* smoothed at 0.2 let hair in). Without it, the L* spread of the face, and with it the
#: shaded pixels kept, changed with the source's own blur at that scale (development set: 18 of 20 within
#: 1 degree without; 20 of 20 at 0.03, 0.05 and 0.08).
LIGHTNESS_SMOOTHING = 0.05
#: A pixel's colour weight is 1 within WEIGHT_FULL robust standard deviations of the face's colour (the
#: largest of L*, a*, b*) and falls linearly to 0 at WEIGHT_ZERO (centred on the cut at REFINE_SIGMAS of
#: colorimetry 4.0.0): a small change of a pixel's colour changes its weight a little, never in or out.
WEIGHT_FULL = 1.5
WEIGHT_ZERO = 3.5
#: The forehead's weight in the colour model falls from 1 to 0 as its median colour's distance from the
#: cheeks' goes from REGION_MAX_DELTA_E - FOREHEAD_RAMP to REGION_MAX_DELTA_E + FOREHEAD_RAMP.
#: colorimetry-5.2.0: 6 (was 2). The distance itself moves between sizes and decodes of one photo (by up
#: to 1.5 Delta E on the light development scenes of ``bench/bench_resolution.py --development-light``:
#: 6.7 to 8.2 on Grace Hopper at Monk 3), and on a two-population sample the colour model follows the
#: forehead's weight; a ramp of 2 turned that into weights 0.44-0.82, a ramp of 6 into 0.48-0.61. A
#: forehead 14 Delta E from the cheeks (a fringe of hair) still has no weight.
FOREHEAD_RAMP = 6.0
#: Polygons are rasterised as coverage fractions, FILL_SUPERSAMPLE x FILL_SUPERSAMPLE points per pixel.
FILL_SUPERSAMPLE = 4


def _coverage(shape: tuple[int, int], polygons: list[np.ndarray]) -> np.ndarray:
    """Fraction (0..1) of each pixel of a ``shape`` grid covered by the union of ``polygons``."""
    import cv2

    k = FILL_SUPERSAMPLE
    fine = np.zeros((shape[0] * k, shape[1] * k), dtype=np.uint8)
    for polygon in polygons:
        fine_points = (polygon + 0.5) * k - 0.5
        cv2.fillPoly(fine, [np.round(fine_points * 16).astype(np.int32)], 1, lineType=cv2.LINE_8, shift=4)
    return np.asarray(cv2.resize(fine.astype(np.float32), (shape[1], shape[0]), interpolation=cv2.INTER_AREA))


def canonical_skin_weights(
    rgb: np.ndarray,
    opaque: np.ndarray | None,
    samples: list[np.ndarray],
    face: np.ndarray,
    excluded: list[np.ndarray],
    eye_distance: float,
    cheek_bounds: np.ndarray | None = None,
    cheek_cuts: list[np.ndarray] | None = None,
) -> tuple[np.ndarray, int]:
    """Each pixel's weight (0..1) as the face's skin, judged on a grid fixed on the face.

    Shared by both face detectors, so they differ only in where they look. ``samples`` are the forehead
    then the cheeks, ``face`` the face's outline, ``excluded`` the features cut from it (eyes, brows,
    lips), all polygons in image pixels (pixel centres at integers); ``eye_distance`` in pixels.
    ``cheek_bounds`` (a polygon) and ``cheek_cuts`` (polygons), when given, clip the cheek samples (every
    sample after the forehead): their coverage is multiplied by the bounds' coverage and by one minus the
    cuts' (colorimetry-5.3.0: the landmark model's stated-size cheek discs kept clear of the features).

    1. The face's part of the image is resampled to :data:`CANONICAL_EYE_DISTANCE` pixels between the
       eyes, in linear light (area average when reduced: what a larger pixel records), and converted to
       CIELAB; L* is seen at :data:`LIGHTNESS_SMOOTHING`, a* and b* at :data:`CHROMA_SMOOTHING` eye
       distances. The polygons are rasterised on that grid as coverage fractions.
    2. The face's colour: the weighted median and robust spread (1.4826 x MAD, floored) of the sample,
       the forehead weighted by how close its median colour is to the cheeks' (:data:`FOREHEAD_RAMP`),
       computed again with each pixel weighted by its fit.
    3. A pixel's weight is its coverage by the sample or the face (less the features) times its colour
       fit (:data:`WEIGHT_FULL`, :data:`WEIGHT_ZERO`). The grid's weights are interpolated back to the
       image's pixels.

    Before colorimetry-5.0.0 each pixel of the analysed image was in or out (2.5 robust sigmas, the
    forehead in or out at :data:`REGION_MAX_DELTA_E`): pixels near a cut flipped with the photo's size,
    and they are the shaded or lit ones, so the measured colour moved with the size (issue 21).

    Returns
    -------
    tuple
        ``(weights, sampled)``: ``H x W`` float32 weights and the sample's area in image pixels.
    """
    import cv2

    height, width = rgb.shape[:2]
    weights = np.zeros((height, width), dtype=np.float32)
    if not eye_distance > 0:
        return weights, 0
    points = np.concatenate([face, *samples])
    pad = 3 * CHROMA_SMOOTHING * eye_distance + 2
    x0 = max(0, int(np.floor(points[:, 0].min() - pad)))
    y0 = max(0, int(np.floor(points[:, 1].min() - pad)))
    x1 = min(width, int(np.ceil(points[:, 0].max() + pad)) + 1)
    y1 = min(height, int(np.ceil(points[:, 1].max() + pad)) + 1)
    if x1 <= x0 or y1 <= y0:
        return weights, 0
    scale = CANONICAL_EYE_DISTANCE / eye_distance
    cw, ch = max(1, round((x1 - x0) * scale)), max(1, round((y1 - y0) * scale))
    sx, sy = cw / (x1 - x0), ch / (y1 - y0)
    interpolation = cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR
    linear = cv2.resize(np.take(_LINEAR_F32, rgb[y0:y1, x0:x1]), (cw, ch), interpolation=interpolation)
    linear = linear.reshape(ch, cw, 3)
    L, a, b = _lab_from_linear(*(np.ascontiguousarray(linear[..., c]).reshape(-1) for c in range(3)))
    grid_lab = np.stack([L, a, b]).reshape(3, ch, cw)
    for channel, sigma in ((0, LIGHTNESS_SMOOTHING), (1, CHROMA_SMOOTHING), (2, CHROMA_SMOOTHING)):
        if sigma <= 0:
            continue
        grid_lab[channel] = cv2.GaussianBlur(
            grid_lab[channel], (0, 0), sigma * CANONICAL_EYE_DISTANCE, borderType=cv2.BORDER_REFLECT
        )
    lab = grid_lab.reshape(3, -1)

    def to_grid(polygon: np.ndarray) -> np.ndarray:
        return np.asarray((polygon - np.array([x0, y0]) + 0.5) * np.array([sx, sy]) - 0.5)

    allowed = np.ones(ch * cw, dtype=np.float32)
    if opaque is not None:
        part = opaque[y0:y1, x0:x1].astype(np.float32)
        allowed = cv2.resize(part, (cw, ch), interpolation=interpolation).reshape(-1)
    sample_cover = [_coverage((ch, cw), [to_grid(p)]).reshape(-1) * allowed for p in samples]
    if cheek_bounds is not None or cheek_cuts:
        clip = np.ones(ch * cw, dtype=np.float32)
        if cheek_bounds is not None:
            clip *= _coverage((ch, cw), [to_grid(cheek_bounds)]).reshape(-1)
        if cheek_cuts:
            clip *= 1.0 - _coverage((ch, cw), [to_grid(p) for p in cheek_cuts]).reshape(-1)
        sample_cover = sample_cover[:1] + [c * clip for c in sample_cover[1:]]
    sampled = int(round(sum(float(c.sum()) for c in sample_cover) / (sx * sy)))
    face_cover = _coverage((ch, cw), [to_grid(face)]).reshape(-1)
    if excluded:
        face_cover *= 1.0 - _coverage((ch, cw), [to_grid(p) for p in excluded]).reshape(-1)
    where = np.maximum(face_cover * allowed, np.maximum.reduce(sample_cover))
    index, sample_weight = _sample_with_forehead_weight(lab, [np.flatnonzero(c >= 0.5) for c in sample_cover])
    model = _colour_model(lab[:, index], sample_weight) if index.size else None
    if model is None:
        return weights, sampled
    grid = (where * _fit(lab, *model)).astype(np.float32).reshape(ch, cw)
    back = cv2.resize(grid, (x1 - x0, y1 - y0), interpolation=cv2.INTER_LINEAR)
    if opaque is not None:
        back *= opaque[y0:y1, x0:x1]
    weights[y0:y1, x0:x1] = back
    return weights, sampled


def _weighted_median(values: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Per row of ``values`` (k x n), the weighted median (``weight``: n, not all 0), interpolated: each
    value stands at the middle of its weight on the cumulative scale and the median is read off the
    line through those points (colorimetry-5.2.0). Continuous in the weights and the values: the first
    value past half the weight (5.1.0) jumped to the next value when a weight changed a little, by a
    large step where the sample has a gap (two populations: the forehead and the cheeks)."""
    order = np.argsort(values, axis=1, kind="stable")
    ordered = np.take_along_axis(values, order, axis=1)
    mass = weight[order]
    total = mass.sum(axis=1)
    middle = (np.cumsum(mass, axis=1) - mass / 2) / total[:, None]
    out = np.empty(values.shape[0])
    for row in range(values.shape[0]):
        keep = mass[row] > 0
        out[row] = np.interp(0.5, middle[row, keep], ordered[row, keep])
    return out


def _colour_model(sample: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The face's colour: weighted median and robust spread (1.4826 x weighted MAD, floored) of the
    sample's L*, a*, b*, computed twice, the second time with each pixel also weighted by its fit to the
    first (:func:`_fit`). None when nothing is left."""
    current = weight.astype(np.float64)
    for _ in range(2):
        if not current.sum() > 0:
            return None
        centre = _weighted_median(sample, current)
        mad = _weighted_median(np.abs(sample - centre[:, None]), current)
        spread = np.maximum(1.4826 * mad, _SIGMA_FLOOR)
        current = weight * _fit(sample, centre, spread)
    return centre, spread


def _fit(lab: np.ndarray, centre: np.ndarray, spread: np.ndarray) -> np.ndarray:
    """Colour weight of each column of ``lab``: 1 within :data:`WEIGHT_FULL` robust sigmas (the largest of
    L*, a*, b*), 0 beyond :data:`WEIGHT_ZERO`, linear between."""
    z = np.max(np.abs(lab - centre[:, None]) / spread[:, None], axis=0)
    return np.asarray(np.clip((WEIGHT_ZERO - z) / (WEIGHT_ZERO - WEIGHT_FULL), 0.0, 1.0))


def _sample_with_forehead_weight(lab: np.ndarray, regions: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The sample's pixels (cheeks, then the forehead) and their weights: 1 for the cheeks (hair rarely
    covers them); for the forehead a weight falling with the distance (Delta E 1976) of its median colour
    from the cheeks' (a fringe of hair close to the skin's colour would otherwise pass the per-pixel fit
    when it fills half the sample), around :data:`REGION_MAX_DELTA_E`."""
    forehead, cheeks = regions[0], np.concatenate(regions[1:])
    if not cheeks.size:
        return forehead, np.ones(forehead.size)
    forehead_weight = 0.0
    if forehead.size:
        difference = np.median(lab[:, forehead], axis=1) - np.median(lab[:, cheeks], axis=1)
        distance = float(np.sqrt((difference**2).sum()))
        forehead_weight = min(1.0, max(0.0, (REGION_MAX_DELTA_E + FOREHEAD_RAMP - distance) / (2 * FOREHEAD_RAMP)))
    weight = np.concatenate([np.ones(cheeks.size), np.full(forehead.size, forehead_weight)])
    return np.concatenate([cheeks, forehead]), weight
