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
degrees, the 512 px copy apart: noise and 4:2:0 chroma widen the per-pixel distribution). Now 19 of
20 (``bench/bench_resolution.py``; Grace Hopper at Monk 10 at 1.25). The cases below include the
ones that failed before.
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


@pytest.mark.parametrize(
    ("portrait", "tone"),
    [("astronaut", 2), ("astronaut", 6), ("astronaut", 10), ("grace_hopper", 1), ("grace_hopper", 4)],
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


def test_the_check_can_fail_the_cascades_box_moves_with_the_scale(tmp_path) -> None:
    """The same check on the cascades at Monk 7 (their box is found on a different grid at each scale)."""
    readings = [measure_image(path, skin_detector="face")["ita_median"] for path in _files(tmp_path, 7).values()]
    found = [r for r in readings if r is not None]
    assert len(found) < len(readings) or max(found) - min(found) > 1.0
