"""The same photo at 512 px, 2 MP and 12 MP gives the same ITA within 1 degree (issue 21).

Each photo is a recoloured portrait of the evaluation set enlarged (Lanczos) to a 12 MP master and
exported from it at 2 MP and 512 px, each stored as a JPEG (quality 92, 4:2:0 chroma as cameras do);
each size is measured through the fast decode path (:data:`colorimetry.DEFAULT_MAX_PIXELS`, libjpeg's DCT scaling) and, above 512 px, a full
decode. Before issue 21 the cascades' face box moved with the scale: 3.7 degrees between 512 px and
12 MP were reported, 1.6 between the fast and the full decode of the 12 MP file.

Since colorimetry-4.0.0 the central value (``ita_median``) is the ITA of the skin's area-averaged
linear colour, and the skin refinement sees a* and b* smoothed at a scale fixed on the face
(:data:`colorimetry.face.CHROMA_SMOOTHING` x the eye distance). Before, the per-pixel median was
reported: 16 of 20 development cases within 1 degree (Grace Hopper at Monk 1, 2 and 4 at 2.2-2.3
degrees, the 512 px copy apart: noise and 4:2:0 chroma widen the per-pixel distribution); 4.0.0: 19 of
20 (``bench/bench_resolution.py``; Grace Hopper at Monk 10 at 1.25).

Since colorimetry-5.0.0 the skin is chosen on a grid fixed on the face
(:data:`colorimetry.face.CANONICAL_EYE_DISTANCE` pixels between the eyes, resampled in linear light) and
each pixel has a weight, not an in-or-out verdict (:func:`colorimetry.face.canonical_skin_weights`):
pixels near the colour cut and the forehead near its Delta E cut flipped with the size. The mesh's
input is area-averaged before the warp. Development set: 20 of 20 within 1 degree, worst 0.92; held-out
set (``resolution_sets.py``): 67 of 72 (4.0.0: 63), worst 2.07 (2.37). The cases below include the ones
that failed before (Grace Hopper at Monk 10 in 4.0.0, the astronaut at Monk 7 in a first 5.0.0 candidate).

Since colorimetry-5.1.0 Face Mesh's presence check applies after its tracking pass: the dark face the
held-out set missed at 2 MP through the fast path is found (docs/colorimetry-resolution.md, which also
records a colour-model change tried and reverted: steadier across sizes, but the development set's
MST 5-6 read dark beyond the 5-degree bar).

Since colorimetry-5.2.0 the forehead's weight in the face's colour model ramps over 6 Delta E either
side of :data:`colorimetry.face.REGION_MAX_DELTA_E` (was 2) and the model's weighted median is
interpolated: the forehead-to-cheeks distance moves by up to 1.5 Delta E between the readings of one
photo, and the colour model with the forehead's weight. Development set 20 of 20, worst 0.81; first
held-out set 70 of 72 (5.1.0: 68), worst 1.44; second held-out set (``held_out_2_scenes``) 70 of 72
(5.1.0: 69), worst 1.09 (2.35) (docs/colorimetry-resolution.md).

Since colorimetry-5.3.0 the landmark model samples each cheek as a disc of 0.30 eye distances (cut by the
features and the face's edge) instead of a small mesh polygon: Face Mesh's points move 2-3% of the eye
distance with the pixels it is given. Development set 20 of 20, worst 0.48 (5.2.0: 0.81);
development-light set 27 of 30 (26), worst 1.55 (1.79) (docs/colorimetry-resolution.md, session 35).

Since colorimetry-5.4.0 the landmarks of an image over the fast path's pixel cap (a full decode) are found
on a copy box-reduced by the fast path's factor: every reading feeds Face Mesh nearly the same pixels.
Development set 20 of 20, worst 0.77 (5.3.0: 0.48); development-light 30 of 30, worst 0.86 (27, 1.55)
(docs/colorimetry-resolution.md, session 37).
"""

from __future__ import annotations

import pytest
from PIL import Image

from colorimetry import measure_image

from . import skin_evaluation_set as evaluation

#: Full decode: every pixel of a 12 MP photo analysed.
FULL = 13_000_000
SIDES = {"512 px": 512, "2 MP": 1414, "12 MP": 3464}


PORTRAITS = {"astronaut": evaluation.astronaut, "grace_hopper": evaluation.grace_hopper}


def _files(tmp_path, tone: int, portrait: str = "astronaut") -> dict[str, object]:
    base = Image.fromarray(evaluation.recoloured(PORTRAITS[portrait](), tone))
    scale = SIDES["12 MP"] / max(base.size)
    master = base.resize((round(base.width * scale), round(base.height * scale)), Image.Resampling.LANCZOS)
    files = {}
    for name, side in SIDES.items():
        path = tmp_path / f"{side}.jpg"
        size = (side, round(master.height * side / master.width))
        image = master if side == master.width else master.resize(size, Image.Resampling.LANCZOS)
        image.save(path, quality=92)
        files[name] = path
    return files


#: Each case costs 1-2 s (five measurements, two of them of 12 MP): the fast tier measures the two ends of
#: the scale (MST 1 and 10, where detectors fail), the slow tier the middle tones too (CI runs both;
#: pytest.ini: the colorimetry evaluation sets' middle tones are slow-tier).
SLOW = pytest.mark.slow


@pytest.mark.parametrize(
    ("portrait", "tone"),
    [
        pytest.param("astronaut", 2, marks=SLOW),
        pytest.param("astronaut", 6, marks=SLOW),
        pytest.param("astronaut", 7, marks=SLOW),
        pytest.param("astronaut", 10, marks=SLOW),
        ("grace_hopper", 1),
        pytest.param("grace_hopper", 4, marks=SLOW),
        ("grace_hopper", 10),
    ],
)
def test_ita_is_the_same_at_every_resolution_and_decode(tmp_path, portrait: str, tone: int) -> None:
    readings = {}
    for name, path in _files(tmp_path, tone, portrait).items():
        fast = measure_image(path)
        assert fast["face_method"].startswith("face_mesh"), name
        readings[f"{name} fast"] = fast["ita_median"]
        if name != "512 px":
            readings[f"{name} full"] = measure_image(path, max_pixels=FULL)["ita_median"]
    assert readings["12 MP full"] is not None
    spread = max(readings.values()) - min(readings.values())
    assert spread <= 1.0, readings


@pytest.mark.slow
def test_the_check_can_fail_the_cascades_box_moves_with_the_scale(tmp_path) -> None:
    """The same check on the cascades at Monk 6 (their box is found on a different grid at each scale;
    colorimetry-5.2.0: 2.0 degrees between the 2 MP and the 12 MP full decodes. Monk 7, used before, came
    within 1 degree with 5.2.0's wider forehead ramp)."""
    readings = []
    for name, path in _files(tmp_path, 6).items():
        readings.append(measure_image(path, skin_detector="face")["ita_median"])
        if name != "512 px":
            readings.append(measure_image(path, max_pixels=FULL, skin_detector="face")["ita_median"])
    found = [r for r in readings if r is not None]
    assert len(found) < len(readings) or max(found) - min(found) > 1.0


def test_the_forehead_is_weighted_not_switched_in_or_out() -> None:
    """colorimetry-5.0.0: the forehead's weight in the face's colour falls linearly around Delta E 8 from
    the cheeks' (4.0.0 kept it up to 8 and dropped it beyond: Grace Hopper's light tones sit at 8.5-9.4,
    and the decision flipped between sizes of the same photo)."""
    import numpy as np

    from colorimetry.face import FOREHEAD_RAMP, REGION_MAX_DELTA_E, _sample_with_forehead_weight

    def forehead_weight(distance: float) -> float:
        lab = np.zeros((3, 20))
        lab[:, :10] = [[60.0], [10.0], [15.0]]  # the cheeks
        lab[:, 10:] = [[60.0 + distance], [10.0], [15.0]]  # the forehead, ``distance`` lighter
        index, weight = _sample_with_forehead_weight(lab, [np.arange(10, 20), np.arange(0, 5), np.arange(5, 10)])
        assert list(index[:10]) == list(range(10)) and (weight[:10] == 1).all()
        return float(weight[10:].max())

    assert forehead_weight(REGION_MAX_DELTA_E - FOREHEAD_RAMP - 0.5) == 1.0
    assert forehead_weight(REGION_MAX_DELTA_E + FOREHEAD_RAMP + 0.5) == 0.0
    below, above = forehead_weight(REGION_MAX_DELTA_E - 0.1), forehead_weight(REGION_MAX_DELTA_E + 0.1)
    assert 0.0 < above < below < 1.0 and below - above == pytest.approx(0.2 / (2 * FOREHEAD_RAMP))


def test_a_pixels_colour_weight_is_a_ramp() -> None:
    """A pixel's colour weight falls linearly between WEIGHT_FULL and WEIGHT_ZERO robust sigmas (the
    largest of L*, a*, b*): a small change of its colour changes its weight a little."""
    import numpy as np

    from colorimetry.face import WEIGHT_FULL, WEIGHT_ZERO, _fit

    centre, spread = np.array([60.0, 10.0, 15.0]), np.array([4.0, 1.5, 1.5])
    z = np.array([0.0, WEIGHT_FULL, (WEIGHT_FULL + WEIGHT_ZERO) / 2, WEIGHT_ZERO, WEIGHT_ZERO + 1])
    in_l = np.stack([centre[0] + z * spread[0], np.full(5, centre[1]), np.full(5, centre[2])])
    in_b = np.stack([np.full(5, centre[0]), np.full(5, centre[1]), centre[2] - z * spread[2]])
    for lab in (in_l, in_b):
        assert _fit(lab, centre, spread) == pytest.approx([1.0, 1.0, 0.5, 0.0, 0.0])


@pytest.mark.slow
def test_a_dark_face_is_kept_when_the_tracked_mesh_confirms_it(tmp_path) -> None:
    """colorimetry-5.1.0: Face Mesh's face-presence gate applies after the tracking pass. The held-out
    resolution scene 'astronaut camera_warm_mirror MST 10' at 2 MP through the fast path (707 px, DCT
    scaling): BlazeFace found the face (0.77), the mesh on its loose box scored 0.39 and the face was
    dropped; the mesh on its own points' box scores 1.00 (docs/colorimetry-resolution.md)."""
    from PIL import Image

    from . import resolution_sets

    scene = next(s for s in resolution_sets.held_out_scenes() if s.name == "astronaut camera_warm_mirror MST 10")
    files = resolution_sets.export(
        scene.rgb,
        tmp_path,
        master=Image.Resampling.BICUBIC,
        down=Image.Resampling.BOX,
        quality=resolution_sets.HELD_OUT_JPEG_QUALITY,
    )
    result = measure_image(files["2 MP"])
    assert result["analysed_width"] == 707
    assert result["face_method"] == "face_mesh:short_range", result["flags"]
