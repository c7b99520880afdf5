"""Development material for issue 21 (no held-out set): how far a small face's 512 px reading drifts from the
12 MP full decode, against the face's size in the file's chroma samples.

Run: ``python bench/dev_small_face_chroma.py [--quick] [--erode R]``.

``--erode R`` (an experiment, not the method): the detector's sample (its mask and the support of its
weights) eroded by R pixels before the ITA is taken, in both readings (the 512 px fast read and the 12 MP
full decode both analyse the file's own pixels, so R is in file pixels in both), falling back to the
sample itself when fewer than 100 pixels would remain.

Scenes (made for this study only; no held-out set uses them): both evaluation portraits, the second
recolouring model (``skin_evaluation_camera``) at each Monk tone, on a 16:9 wall ``factor`` times the
portrait's width (factors 1.0, 1.4, 1.8, 2.2, 2.8; walls of three colours by tone), the portrait at the
bottom centre, camera noise seeds 500 + tone. Export: a Lanczos 12 MP master (the reference: quality 92 4:2:0,
fully decoded) and a 512 px file reduced from it with bicubic, stored at JPEG quality 75 4:2:0, 92 4:2:0 and
75 4:4:4. Printed per 512 px file: the face box's width in the file's pixels and in its chroma samples (the
width over the horizontal subsampling factor), the skin sample's area in chroma samples, the drift (512 px
fast reading minus the 12 MP full decode); then the largest |drift| by bands of each of the two sizes.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from colorimetry import measure_image  # noqa: E402
from tests.colorimetry import skin_evaluation_camera as camera_model  # noqa: E402
from tests.colorimetry import skin_evaluation_set as first  # noqa: E402

FACTORS = (1.0, 1.4, 1.8, 2.2, 2.8)
WALLS = ((120, 110, 130), (150, 150, 140), (70, 80, 95))
FILES_512 = {"q75 4:2:0": (75, 2), "q92 4:2:0": (92, 2), "q75 4:4:4": (75, 0)}


def wall_scene(rgb: np.ndarray, factor: float, colour: tuple[int, int, int]) -> np.ndarray:
    h, w = rgb.shape[:2]
    width = round(factor * w)
    height = max(h, round(width * 9 / 16))
    wall = np.empty((height, width, 3), dtype=np.uint8)
    wall[:] = colour
    x0 = (width - w) // 2
    wall[height - h :, x0 : x0 + w] = rgb
    return wall


def chroma_width(path: Path, result: dict) -> tuple[float, int, float]:
    """The face box's width in the file's pixels, the horizontal chroma subsampling factor and the skin
    sample's area in the file's chroma samples."""
    with Image.open(path) as image:
        layers = getattr(image, "layer", None)
        factor, vertical = 1, 1
        if layers and len(layers) == 3:
            factor = max(layer[1] for layer in layers) // max(1, layers[1][1])
            vertical = max(layer[2] for layer in layers) // max(1, layers[1][2])
    box = result["face_box"]
    scale = result["width"] / result["analysed_width"]
    return box[2] * scale, factor, result["n_skin_pixels"] * scale**2 / (factor * vertical)


def erode_samples(radius: int) -> None:
    """Wrap ``colorimetry.stats.select_skin`` so that a face's sample is eroded by ``radius`` pixels."""
    import dataclasses

    import cv2

    from colorimetry import stats

    select = stats.select_skin
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * radius + 1, 2 * radius + 1))

    def eroded(rgb, mask=None, **options):
        selection = select(rgb, mask, **options)
        if selection.source != "face":
            return selection
        support = selection.weights > 0 if selection.weights is not None else selection.mask
        kept = cv2.erode(support.astype(np.uint8), kernel, borderType=cv2.BORDER_CONSTANT, borderValue=0) > 0
        if np.count_nonzero(kept) < 100:
            return selection
        weights = (
            None if selection.weights is None else np.where(kept, selection.weights, 0).astype(selection.weights.dtype)
        )
        return dataclasses.replace(selection, mask=selection.mask & kept, weights=weights)

    stats.select_skin = eroded


def main(quick: bool = False) -> None:
    rows = []
    tones = (1, 2, 4, 7, 10) if quick else range(1, 11)
    for portrait in (first.astronaut(), first.grace_hopper()):
        for factor in FACTORS:
            for tone in tones:
                colour = WALLS[tone % len(WALLS)]
                rgb = wall_scene(camera_model.recoloured_camera(portrait, tone), factor, colour)
                rgb = camera_model.camera(rgb, 500 + tone)
                base = Image.fromarray(rgb)
                scale = 3464 / max(base.size)
                master = base.resize((round(base.width * scale), round(base.height * scale)), Image.Resampling.LANCZOS)
                with tempfile.TemporaryDirectory() as tmp:
                    ref_path = Path(tmp) / "12mp.jpg"
                    master.save(ref_path, quality=92)
                    reference = measure_image(ref_path, max_pixels=13_000_000)["ita_median"]
                    small = master.resize(
                        (512, round(master.height * 512 / master.width)), Image.Resampling.BICUBIC
                    )  # fmt: skip
                    for name, (quality, subsampling) in FILES_512.items():
                        path = Path(tmp) / f"512-{quality}-{subsampling}.jpg"
                        small.save(path, quality=quality, subsampling=subsampling)
                        result = measure_image(path)
                        if result["ita_median"] is None or reference is None or result["face_box"] is None:
                            print(f"{portrait.name:12} x{factor} MST {tone:2} {name}: no reading")
                            continue
                        width, sub, area = chroma_width(path, result)
                        drift = result["ita_median"] - reference
                        rows.append((portrait.name, factor, tone, name, width, width / sub, drift, area))
                        print(
                            f"{portrait.name:12} x{factor} MST {tone:2} {name}: face {width:5.0f} px, "
                            f"{width / sub:5.0f} chroma samples, skin {area:6.0f} chroma samples, drift {drift:+.2f}",
                            flush=True,
                        )
    print()
    _by_band(rows, 5, "the face's width", [(0, 30), (30, 40), (40, 50), (50, 60), (60, 80), (80, 100), (100, 1000)])
    _by_band(
        rows,
        7,
        "the skin sample's area",
        [(0, 200), (200, 400), (400, 600), (600, 800), (800, 1200), (1200, 2000), (2000, 10**6)],
    )


def _by_band(rows: list[tuple], column: int, what: str, bands: list[tuple[int, int]]) -> None:
    """The largest |drift| and the count over 1 degree per band of ``rows[column]`` (chroma samples)."""
    print(f"largest |drift| by {what} in chroma samples (512 px files):")
    for lo, hi in bands:
        inside = [abs(r[6]) for r in rows if lo <= r[column] < hi]
        if inside:
            over = sum(d > 1.0 for d in inside)
            print(f"  [{lo:4}, {hi:7}): {len(inside):3} files, worst {max(inside):.2f}, over 1 degree: {over}")


if __name__ == "__main__":
    if "--erode" in sys.argv:
        erode_samples(int(sys.argv[sys.argv.index("--erode") + 1]))
    main(quick="--quick" in sys.argv)
