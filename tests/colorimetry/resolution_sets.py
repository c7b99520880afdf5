"""Held-out scenes for the resolution check (issue 21): the same photo at 512 px, 2 MP and 12 MP.

Written down and committed before any method ran on it. The development set of
``bench/bench_resolution.py`` is the first recolouring model (``skin_evaluation_set.recoloured``) of both
portraits at the ten Monk tones, enlarged with Lanczos and stored at quality 92. These scenes differ in
every step a photo goes through:

* the recolouring: the second model (``skin_evaluation_camera.recoloured_camera``: specular highlights
  that do not follow the pigment, brows that keep their colour) with sensor noise, and the first model
  under other exposures;
* the framing: crops (tight on the face, the upper body, off-centre), a mirror, a warm cast;
* the export: the 12 MP master enlarged with bicubic (not Lanczos) interpolation, exported at 2 MP and
  512 px with a box filter, stored at JPEG quality 85 (4:2:0 chroma).

72 scenes: two portraits x ten tones x three scene kinds (60), plus 12 crops at alternate tones.
Each scene is measured through the fast decode path at 512 px, 2 MP and 12 MP and by a full decode at
2 MP and 12 MP (five readings); a scene passes when all five are found and within 1 degree.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from . import skin_evaluation_camera as camera_model
from . import skin_evaluation_set as first

#: Long side of each export (12 MP = 3464 x 3464 on the square portraits).
SIDES = {"512 px": 512, "2 MP": 1414, "12 MP": 3464}
#: Full decode: every pixel of a 12 MP photo analysed.
FULL_DECODE_MAX_PIXELS = 13_000_000
HELD_OUT_JPEG_QUALITY = 85


@dataclass(frozen=True)
class Scene:
    name: str
    rgb: np.ndarray


def _variants() -> dict[str, Callable[[first.Portrait, int], np.ndarray]]:
    def camera_plain(portrait: first.Portrait, tone: int) -> np.ndarray:
        return camera_model.camera(camera_model.recoloured_camera(portrait, tone), seed=tone)

    def first_over(portrait: first.Portrait, tone: int) -> np.ndarray:
        rgb = first.recoloured(portrait, tone)
        return first.exposure(0.4)(rgb, portrait.truth, tone)[0]

    def camera_warm_mirror(portrait: first.Portrait, tone: int) -> np.ndarray:
        rgb = camera_model.recoloured_camera(portrait, tone)
        rgb, _ = first.chain(first.white_balance((1.12, 1.0, 0.86)), first.mirror)(rgb, portrait.truth, tone)
        return camera_model.camera(rgb, seed=100 + tone)

    return {"camera": camera_plain, "first_plus_0.4_stop": first_over, "camera_warm_mirror": camera_warm_mirror}


def _crop(rgb: np.ndarray, box: tuple[float, float, float, float]) -> np.ndarray:
    h, w = rgb.shape[:2]
    x0, y0, x1, y1 = (round(f * s) for f, s in zip(box, (w, h, w, h), strict=True))
    return rgb[y0:y1, x0:x1].copy()


#: Crops (fractions of the portrait: x0, y0, x1, y1) of the second model, under half a stop.
CROPS = {
    "tight": (0.2, 0.0, 0.8, 0.6),
    "upper_body_off_centre": (0.0, 0.0, 0.75, 1.0),
}


def held_out_scenes() -> Iterator[Scene]:
    """The 72 held-out scenes (8-bit sRGB arrays before the export)."""
    variants = _variants()
    for portrait in (first.astronaut(), first.grace_hopper()):
        for kind, make in variants.items():
            for tone in range(1, 11):
                yield Scene(f"{portrait.name} {kind} MST {tone}", make(portrait, tone))
        for crop_name, box in CROPS.items():
            for tone in (1, 4, 7):
                rgb = camera_model.recoloured_camera(portrait, tone)
                rgb = first.exposure(-0.5)(rgb, portrait.truth, tone)[0]
                yield Scene(f"{portrait.name} crop {crop_name} MST {tone}", camera_model.camera(_crop(rgb, box), 7))


def export(
    rgb: np.ndarray, directory: Path, *, master: Image.Resampling, down: Image.Resampling, quality: int
) -> dict[str, Path]:
    """The photo enlarged to a 12 MP master and exported from it at each of :data:`SIDES` (JPEG files)."""
    base = Image.fromarray(rgb)
    scale = SIDES["12 MP"] / max(base.size)
    big = base.resize((round(base.width * scale), round(base.height * scale)), master)
    files = {}
    for name, side in SIDES.items():
        path = directory / f"{side}.jpg"
        if side == SIDES["12 MP"]:
            image = big
        else:
            image = big.resize(
                (round(big.width * side / max(big.size)), round(big.height * side / max(big.size))), down
            )
        image.save(path, quality=quality)
        files[name] = path
    return files


def readings(files: dict[str, Path], measure: Callable[..., dict], **options: object) -> dict[str, float | None]:
    """ITA of each export through the fast decode and (above 512 px) a full decode."""
    out: dict[str, float | None] = {}
    for name, path in files.items():
        out[f"{name} fast"] = measure(path, **options)["ita_median"]
        if name != "512 px":
            out[f"{name} full"] = measure(path, max_pixels=FULL_DECODE_MAX_PIXELS, **options)["ita_median"]
    return out


def held_out_readings(scene: Scene, measure: Callable[..., dict], **options: object) -> dict[str, float | None]:
    """:func:`readings` of one held-out scene with the held-out export (bicubic, box, quality 85)."""
    with tempfile.TemporaryDirectory() as tmp:
        files = export(
            scene.rgb,
            Path(tmp),
            master=Image.Resampling.BICUBIC,
            down=Image.Resampling.BOX,
            quality=HELD_OUT_JPEG_QUALITY,
        )
        return readings(files, measure, **options)
