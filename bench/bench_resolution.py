"""The same photo at 512 px, 2 MP and 12 MP, fast and full decode: how far apart its ITA readings are.

Run: ``python bench/bench_resolution.py [--development-light | --held-out | --held-out-2 | --held-out-3 |
--held-out-4 | --held-out-5 | --held-out-6 | --held-out-7 | --held-out-8 | --held-out-9 | --time]``; with a held-out set ``[--lossless |
--jpeg-100]``, and with the seventh ``[--unsharpened]``.

``--time``: the time of one ``measure_image`` (default detector) per reading of the development cases
(median over the 20 cases; 512 px, 2 MP and 12 MP through the fast path, 2 MP and 12 MP fully decoded).

``--held-out`` measures the held-out scenes of ``tests/colorimetry/resolution_sets.py`` instead (other
recolourings, exposures, crops, export path; committed before the method was developed): per scene the
spread of the five readings, then per reading how many are within 1 degree of the 12 MP full decode.
``--held-out-2``: the same on the second held-out set (``held_out_2_scenes``: other exposures, casts,
crops and export; written down before colorimetry-5.2.0 ran on it, the first having been seen twice).
``--held-out-3``: the third held-out set (``held_out_3_scenes``: magenta light, a turned head, defocus,
reframing; Hamming / bicubic / progressive 4:2:2 JPEG stored with EXIF orientation 6; session 35,
committed before any method ran on it). ``--held-out-4``: the fourth (``held_out_4_scenes``: green
fluorescent light half a stop over, the head turned 12 degrees the other way, a small original, a tall dark
frame and a zoomed crop; Lanczos / bilinear / quality 95 4:4:4 JPEG; session 36, committed before any method
ran on it). ``--held-out-5``: the fifth (``held_out_5_scenes``: tungsten-amber light 0.6 stop under, cyan light
with the head turned 17 degrees, a wide frame with the face small, a corner and a phone-vertical frame;
bicubic master, box reduction in linear light, quality 80 4:2:2 JPEG; session 37, committed before any method
ran on it). ``--held-out-6``: the sixth (``held_out_6_scenes``: yellow light 0.3 stop under, the head turned 6
degrees clockwise 0.4 stop over, the face small and high on the left of a 3:2 frame, a textured 4:3 wall and a
tight chin-cut crop; Lanczos master, Hamming reduction, the 512 px file reduced from the 2 MP one, progressive
quality 75 4:2:0 JPEG; session 38, committed before any method ran on it). ``--held-out-7``: the seventh
(``held_out_7_scenes``: 0.7 stop over, a whole stop under with the head turned 21 degrees clockwise, the face
small in a square frame 2.6 times the portrait, the bottom right of a 4:5 frame and a vignette; bilinear master,
Lanczos reductions, the 512 px file sharpened, quality 70 4:2:0 JPEG; session 39, committed before any method
ran on it, and not run in session 39). Session 42: ``--lossless`` stores every file of a held-out set as PNG
instead of JPEG, ``--jpeg-100`` as a quality-100 4:4:4 JPEG (nearly lossless, still DCT-scaled by the fast
path): the set's chain without its compression; ``--unsharpened`` leaves the seventh set's 512 px file
unsharpened, so that with either the readings differ by resolution and decode path alone. ``--held-out-8``:
the eighth (``held_out_8_scenes``: small faces on a dark 3:2 wall, on a square three times the portrait and
high in a 9:16 phone frame, the head turned 15 degrees, a control with the face large; bicubic master, box
reductions, quality 86 4:2:0 JPEG, nothing sharpened; session 42, committed before any method ran on it).
``--held-out-9``: the ninth (``held_out_9_scenes``: rose-tinted light 0.3 stop under, the head turned 9 degrees
clockwise 0.4 stop under, a medium face low in a 4:3 frame, a mirrored 16:10 frame and a close crop, the
reframed scenes at MST 3, 5 and 8; Hamming master, bilinear reductions, quality 90 4:2:0 JPEG; session 43,
committed before any method ran on it).

Each evaluation portrait (scikit-image's astronaut, Matplotlib's Grace Hopper) recoloured to each Monk
tone is enlarged (Lanczos) to a 12 MP master, exported at 2 MP and 512 px from it (Lanczos), and each
file stored as a JPEG (quality 92, Pillow's default 4:2:0 chroma). Every file is measured through the
fast decode path (``DEFAULT_MAX_PIXELS``: libjpeg's DCT scaling) and, above 512 px, a full decode, with
the default detector (the landmark model) and the cascades. Printed per case: the spread (largest minus
smallest ITA) of the five readings, and the readings; then how many cases are within 1 degree.
"""

from __future__ import annotations

import functools
import sys
import tempfile
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from colorimetry import measure_image  # noqa: E402
from tests.colorimetry import skin_evaluation_set as evaluation  # noqa: E402

SIDES = {"512 px": 512, "2 MP": 1414, "12 MP": 3464}
FULL = 13_000_000


def readings(portrait, tone: int, detector: str) -> dict[str, float | None]:
    base = Image.fromarray(evaluation.recoloured(portrait, tone))
    master = base.resize((round(base.width * 3464 / 512), round(base.height * 3464 / 512)), Image.Resampling.LANCZOS)
    out: dict[str, float | None] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, side in SIDES.items():
            path = Path(tmp) / f"{side}.jpg"
            image = master if side == 3464 else master.resize(
                (side, round(master.height * side / master.width)), Image.Resampling.LANCZOS
            )  # fmt: skip
            image.save(path, quality=92)
            out[f"{name} fast"] = measure_image(path, skin_detector=detector)["ita_median"]
            if side != 512:
                out[f"{name} full"] = measure_image(path, max_pixels=FULL, skin_detector=detector)["ita_median"]
    return out


def _stored_as(measure, storage: str):
    """``measure`` with every file the set's export stores written as ``storage`` instead (under the same
    name, with its EXIF, so an EXIF-rotated file stays rotated): ``"png"``, lossless; ``"jpeg100"``, a
    baseline JPEG at quality 100 with 4:4:4 chroma, nearly lossless and still read through libjpeg's DCT
    scaling by the fast path. The set's chain without its compression. Pillow opens files by content."""
    original_save = Image.Image.save
    params = {"png": {"format": "PNG"}, "jpeg100": {"format": "JPEG", "quality": 100, "subsampling": 0}}[storage]

    def save(image, fp, format=None, **given):  # noqa: A002 - Pillow's own parameter name
        exif = given.get("exif")
        return original_save(image, fp, **params, **({"exif": exif} if exif else {}))

    def stored(scene, measure_image, **options):
        Image.Image.save = save
        try:
            return measure(scene, measure_image, **options)
        finally:
            Image.Image.save = original_save

    return stored


def held_out(which: int = 1) -> None:
    """The held-out scenes (``tests/colorimetry/resolution_sets.py``; ``which``: the first to ninth
    held-out set), default detector: per reading and overall."""
    from tests.colorimetry import resolution_sets

    detector = "landmarks_or_face"
    spreads: list[float | None] = []
    deviations: dict[str, list[float]] = {}
    # The first set's functions have no number in their names (held_out_scenes, held_out_readings).
    prefix = "held_out" if which == 1 else f"held_out_{which}"
    scenes = getattr(resolution_sets, f"{prefix}_scenes")()
    measure = getattr(resolution_sets, f"{prefix}_readings")
    if which == 7 and "--unsharpened" in sys.argv:  # the seventh set's 512 px file not sharpened
        measure = functools.partial(resolution_sets.held_out_7_lossless_readings, sharpen=False)
    # ``--lossless`` / ``--jpeg-100``: every file stored as PNG / quality-100 4:4:4 JPEG (compression apart).
    for flag, storage in (("--lossless", "png"), ("--jpeg-100", "jpeg100")):
        if flag in sys.argv:
            measure = _stored_as(measure, storage)
    for scene in scenes:
        values = measure(scene, measure_image, skin_detector=detector)
        found = [v for v in values.values() if v is not None]
        spread = max(found) - min(found) if found and len(found) == len(values) else None
        spreads.append(spread)
        if spread is not None:
            # Each reading against the 12 MP full decode (the reference of the check).
            for name, value in values.items():
                deviations.setdefault(name, []).append(abs(value - values["12 MP full"]))  # type: ignore[operator]
        shown = ", ".join(f"{k} {'-' if v is None else f'{v:.2f}'}" for k, v in values.items())
        print(f"  {scene.name:45} {spread if spread is None else round(spread, 2)!s:>5}  {shown}")
    complete = [s for s in spreads if s is not None]
    print(
        f"{detector}: {sum(s <= 1.0 for s in complete)}/{len(spreads)} held-out scenes with every reading found and within 1 degree"
    )
    print(
        f"  worst spread {max(complete):.2f}, mean spread {sum(complete) / len(complete):.3f}, "
        f"scenes with a reading missing: {len(spreads) - len(complete)}"
    )
    for name, values in deviations.items():
        print(
            f"  {name:12} within 1 degree of the 12 MP full decode: {sum(v <= 1.0 for v in values)}/{len(values)}, worst {max(values):.2f}"
        )


def development_light() -> None:
    """``--development-light``: light faces under the development set's own variants (tuning set of
    colorimetry-5.2.0; the held-out sets are not used for tuning). Both portraits, Monk 1-5, the skin
    detector's development variants with exposure or cast (``skin_evaluation_set.DEVELOPMENT_VARIANTS``),
    the development export (Lanczos, quality 92); default detector."""
    from tests.colorimetry import resolution_sets

    detector = "landmarks_or_face"
    names = ("under_half_stop_mirror", "over_half_stop_orange_beige_brown", "cool_tight_crop")
    spreads = []
    for portrait in (evaluation.astronaut(), evaluation.grace_hopper()):
        for tone in range(1, 6):
            base = evaluation.recoloured(portrait, tone)
            for name in names:
                rgb = evaluation.DEVELOPMENT_VARIANTS[name](base, portrait.truth, tone)[0]
                with tempfile.TemporaryDirectory() as tmp:
                    files = resolution_sets.export(
                        rgb, Path(tmp), master=Image.Resampling.LANCZOS, down=Image.Resampling.LANCZOS, quality=92
                    )
                    values = resolution_sets.readings(files, measure_image, skin_detector=detector)
                found = [v for v in values.values() if v is not None]
                spread = max(found) - min(found) if found and len(found) == len(values) else float("inf")
                spreads.append(spread)
                shown = ", ".join(f"{k} {'-' if v is None else f'{v:.2f}'}" for k, v in values.items())
                print(f"  {portrait.name:12} {name:34} {tone:>2}  {spread:5.2f}  {shown}")
    print(
        f"{detector}: {sum(s <= 1.0 for s in spreads)}/{len(spreads)} light development scenes within 1 degree, "
        f"worst {max(spreads):.2f}, mean spread {sum(spreads) / len(spreads):.3f}"
    )


def timing() -> None:
    """Median time of one measurement per reading of the development cases (``--time``)."""
    import statistics
    import time

    times: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for portrait in (evaluation.astronaut(), evaluation.grace_hopper()):
            for tone in range(1, 11):
                base = Image.fromarray(evaluation.recoloured(portrait, tone))
                scale = 3464 / max(base.size)
                master = base.resize((round(base.width * scale), round(base.height * scale)), Image.Resampling.LANCZOS)
                for name, side in SIDES.items():
                    path = Path(tmp) / f"{side}.jpg"
                    size = (side, round(master.height * side / master.width))
                    (master if side == master.width else master.resize(size, Image.Resampling.LANCZOS)).save(
                        path, quality=92
                    )
                    for kind, cap in (("fast", None), ("full", FULL)):
                        if kind == "full" and side == 512:
                            continue
                        options = {} if cap is None else {"max_pixels": cap}
                        start = time.perf_counter()
                        measure_image(path, **options)
                        times.setdefault(f"{name} {kind}", []).append(time.perf_counter() - start)
    for name, values in times.items():
        print(f"  {name:12} {statistics.median(values) * 1e3:8.1f} ms per measurement (median of {len(values)})")


def main() -> None:
    for which in (9, 8, 7, 6, 5, 4, 3, 2):
        if f"--held-out-{which}" in sys.argv:
            held_out(which)
            return
    if "--development-light" in sys.argv:
        development_light()
        return
    if "--held-out" in sys.argv:
        held_out()
        return
    if "--time" in sys.argv:
        timing()
        return
    for detector in ("landmarks_or_face", "face"):
        within = total = 0
        print(f"\n{detector}: portrait, tone, readings found, spread (degrees), readings")
        for portrait in (evaluation.astronaut(), evaluation.grace_hopper()):
            for tone in range(1, 11):
                values = readings(portrait, tone, detector)
                found = [v for v in values.values() if v is not None]
                spread = max(found) - min(found) if found else None
                total += 1
                within += bool(spread is not None and len(found) == len(values) and spread <= 1.0)
                shown = ", ".join(f"{k} {'-' if v is None else f'{v:.2f}'}" for k, v in values.items())
                print(
                    f"  {portrait.name:12} {tone:>2}  {len(found)}/{len(values)}  {spread if spread is None else round(spread, 2)!s:>5}  {shown}"
                )
        print(f"{detector}: {within}/{total} cases with every reading found and within 1 degree")


if __name__ == "__main__":
    main()
