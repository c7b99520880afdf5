"""Benchmark colorimetry.measure_image on a 12-megapixel JPEG.

Run: ``python bench/bench_colorimetry.py [--width 4000 --height 3000]``.

Everything is measured in the same run, on the same synthetic photo-like
JPEG (shaded skin-coloured face, neck and arm on a textured background,
sensor noise, quality 90, 4:2:0 chroma subsampling as phone cameras):

(a) Pillow's plain full-resolution decode, ``Image.open(p).convert("RGB")``;
(b) ``measure_image(p, skin_detector="rules")`` (draft decode + analysis; the colour
    rules, as (c): the synthetic photo has no real face for the face detector;
    bench/bench_skin_detector.py times that one);
(c) a naive pipeline: full decode, float64 ``skimage.color.rgb2lab`` over all
    pixels, the same skin rule, ITA of the skin's mean linear colour (and the median of per-pixel ITA).

Goals: (b) / (a) <= 1.0, and |ITA(b) - ITA(c)| <= 0.5 degree ((c) is the
full-resolution float64 reference on the same skin rule).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from colorimetry import DEFAULT_MAX_PIXELS, detect_skin, measure_image


def _smooth_noise(rng: np.random.Generator, shape: tuple[int, int], cells: int) -> np.ndarray:
    """Random field in [0, 1] with about ``cells`` features across the width."""
    height, width = shape
    small_w = max(2, cells)
    small_h = max(2, round(cells * height / width))
    small = rng.random((small_h, small_w)).astype(np.float32)
    field = Image.fromarray(small, "F").resize((width, height), Image.Resampling.BICUBIC)
    return np.asarray(field)


def make_photo(width: int, height: int, seed: int = 0) -> np.ndarray:
    """A photo-like uint8 RGB image: shaded skin on a textured background."""
    rng = np.random.default_rng(seed)
    linear = np.empty((height, width, 3), dtype=np.float32)
    # Background: large coloured patches plus finer texture, moderate exposure.
    coarse = [_smooth_noise(rng, (height, width), 6) for _ in range(3)]
    fine = _smooth_noise(rng, (height, width), 300)
    for c in range(3):
        linear[..., c] = 0.04 + 0.35 * coarse[c] * (0.7 + 0.6 * fine)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    yy /= height
    xx /= width
    # Skin base colour (linear sRGB of #b08a64, a mid tone) with slow
    # pigment variation.
    base = ((np.array([0xB0, 0x8A, 0x64]) / 255 + 0.055) / 1.055) ** 2.4
    pigment = 0.9 + 0.2 * _smooth_noise(rng, (height, width), 40)
    ellipses = [  # centre x, centre y, semi-axis x, semi-axis y (fractions)
        (0.5, 0.40, 0.16, 0.27),  # face
        (0.5, 0.75, 0.08, 0.12),  # neck
        (0.82, 0.72, 0.06, 0.25),  # arm
    ]
    for cx, cy, ax, ay in ellipses:
        r2 = ((xx - cx) / ax) ** 2 + ((yy - cy) / ay) ** 2
        inside = r2 < 1.0
        # Lambertian sphere shading lit from the upper left, plus ambient.
        nz = np.sqrt(np.clip(1.0 - r2, 0.0, 1.0))
        nx = (xx - cx) / ax
        ny = (yy - cy) / ay
        shade = 0.35 + 0.65 * np.clip(0.5 * nz - 0.45 * nx - 0.35 * ny + 0.3, 0, 1)
        for c in range(3):
            channel = linear[..., c]
            channel[inside] = (base[c] * shade * pigment)[inside]
    srgb = np.where(
        linear > 0.0031308,
        1.055 * np.power(np.clip(linear, 0.0031308, None), 1 / 2.4) - 0.055,
        12.92 * linear,
    )
    srgb = srgb * 255.0 + rng.normal(0.0, 3.0, size=srgb.shape).astype(np.float32)
    return np.clip(np.rint(srgb), 0, 255).astype(np.uint8)


def naive_ita(path: Path) -> tuple[float, float]:
    """Full decode, float64 skimage rgb2lab on all pixels, same skin rule.

    Returns the ITA of the skin's mean linear colour (``ita_median`` since colorimetry-4.0.0) and the
    median of per-pixel ITA (``ita_pixel_median``).
    """
    from skimage.color import rgb2lab, rgb2xyz, xyz2lab

    rgb = np.asarray(Image.open(path).convert("RGB"))
    lab = rgb2lab(rgb)  # float64, every pixel
    skin = detect_skin(rgb)
    ita = np.degrees(np.arctan2(lab[..., 0][skin] - 50.0, lab[..., 2][skin]))
    linear = rgb2xyz(rgb[skin][None])[0].mean(axis=0)  # XYZ is linear in linear RGB: mean of XYZ
    L, _, b = xyz2lab(linear[None, None])[0, 0]
    return float(np.degrees(np.arctan2(L - 50.0, b))), float(np.median(ita))


def _median_time(function, repeats: int) -> tuple[float, object]:
    times = []
    value = None
    for _ in range(repeats):
        start = time.perf_counter()
        value = function()
        times.append(time.perf_counter() - start)
    return statistics.median(times), value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=4000)
    parser.add_argument("--height", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--max-pixels", type=int, default=DEFAULT_MAX_PIXELS)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "photo.jpg"
        start = time.perf_counter()
        Image.fromarray(make_photo(args.width, args.height)).save(path, quality=90, subsampling="4:2:0")
        print(
            f"synthetic photo {args.width}x{args.height} "
            f"({args.width * args.height / 1e6:.1f} MP), "
            f"{path.stat().st_size / 1e6:.1f} MB JPEG q90, "
            f"made in {time.perf_counter() - start:.1f} s"
        )

        def pillow_decode() -> None:
            with Image.open(path) as image:
                image.convert("RGB").load()

        # Warm up file cache and lazy imports before timing.
        pillow_decode()
        measure_image(path, max_pixels=args.max_pixels, skin_detector="rules")

        t_decode, _ = _median_time(pillow_decode, args.repeats)
        t_measure, stats = _median_time(
            lambda: measure_image(path, max_pixels=args.max_pixels, skin_detector="rules"), args.repeats
        )
        t_naive, (reference_ita, reference_pixel_median) = _median_time(lambda: naive_ita(path), 2)

    print(f"(a) Pillow full decode            {t_decode * 1e3:8.1f} ms (median of {args.repeats})")
    print(f"(b) measure_image                 {t_measure * 1e3:8.1f} ms (median of {args.repeats})")
    print(f"(c) naive full-res float64        {t_naive * 1e3:8.1f} ms (median of 2)")
    print(
        f"analysed {stats['analysed_width']}x{stats['analysed_height']} "
        f"(draft 1/{stats['decode']['draft_scale']}, "
        f"reduce {stats['decode']['reduce_factor']}), "
        f"skin fraction {stats['skin_fraction']:.3f}, flags {stats['flags']}"
    )
    print(f"ratio measure_image / pillow_decode = {t_measure / t_decode:.2f}  (goal <= 1.0)")
    print(f"ratio naive / pillow_decode         = {t_naive / t_decode:.1f}")
    print(
        f"ITA: measure_image {stats['ita_median']:.3f}, full-res float64 "
        f"{reference_ita:.3f}, |diff| = {abs(stats['ita_median'] - reference_ita):.3f} deg "
        "(goal <= 0.5)"
    )
    print(
        f"ITA per-pixel median: measure_image {stats['ita_pixel_median']:.3f}, full-res float64 "
        f"{reference_pixel_median:.3f}, |diff| = {abs(stats['ita_pixel_median'] - reference_pixel_median):.3f} deg"
    )


if __name__ == "__main__":
    main()
