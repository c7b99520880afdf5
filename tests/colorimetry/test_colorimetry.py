"""Tests for the colorimetry package (pure NumPy/Pillow, no database).

References: scikit-image's rgb2lab (float64, D65, 2 degree observer), the
Monk Skin Tone swatch table of DOMAIN.md section 3, Pillow's own decoders.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from skimage.color import rgb2lab

import colorimetry
from colorimetry import (
    FITZPATRICK_ITA_CHARDON_CLASSES,
    FITZPATRICK_ITA_KINYANJUI_2020,
    ImageDecodeError,
    MaskSizeError,
    classify_ita,
    detect_skin,
    fitzpatrick_from_ita,
    ita_degrees,
    measure_image,
    skin_tone_stats,
    srgb_to_lab,
)

REPO_ROOT = Path(__file__).resolve().parents[2]

# Monk Skin Tone swatches with L*, b*, ITA published in DOMAIN.md section 3.
MST_TABLE = [
    (1, "f6ede4", 94.21, 5.43, 82.99),
    (2, "f3e7db", 92.27, 7.29, 80.21),
    (3, "f7ead0", 93.09, 14.22, 71.74),
    (4, "eadaba", 87.57, 17.76, 64.70),
    (5, "d7bd96", 77.90, 23.14, 50.32),
    (6, "a07e56", 55.14, 26.75, 10.88),
    (7, "825c43", 42.47, 20.54, -20.14),
    (8, "604134", 30.68, 13.34, -55.38),
    (9, "3a312a", 21.07, 5.97, -78.34),
    (10, "292420", 14.61, 3.53, -84.31),
]
OTHER_COLOURS = ["6080c0", "2040ff", "808080", "ffffff", "000000", "ff0000", "10e0a0"]


def _rgb(hex_colour: str) -> tuple[int, int, int]:
    return tuple(int(hex_colour[i : i + 2], 16) for i in (0, 2, 4))


def _skimage_lab(rgb: tuple[int, int, int]) -> np.ndarray:
    return rgb2lab(np.array([[rgb]], dtype=np.uint8))[0, 0]


def _skimage_ita(rgb: tuple[int, int, int]) -> float:
    lightness, _, b = _skimage_lab(rgb)
    return math.degrees(math.atan2(lightness - 50.0, b))


def _uniform(rgb: tuple[int, int, int], shape: tuple[int, int] = (6, 5)) -> np.ndarray:
    return np.full((*shape, 3), rgb, dtype=np.uint8)


def _full_mask(image: np.ndarray) -> np.ndarray:
    return np.ones(image.shape[:2], dtype=bool)


# --- Lab and ITA ---------------------------------------------------------------


@pytest.mark.parametrize("hex_colour", [row[1] for row in MST_TABLE] + OTHER_COLOURS)
def test_uniform_colour_matches_skimage(hex_colour: str) -> None:
    rgb = _rgb(hex_colour)
    image = _uniform(rgb)
    stats = skin_tone_stats(image, _full_mask(image))
    reference = _skimage_lab(rgb)
    assert stats["lightness_median"] == pytest.approx(reference[0], abs=0.05)
    assert stats["a_median"] == pytest.approx(reference[1], abs=0.05)
    assert stats["b_median"] == pytest.approx(reference[2], abs=0.05)
    assert stats["ita_median"] == pytest.approx(_skimage_ita(rgb), abs=0.05)
    assert stats["ita_iqr"] == pytest.approx(0.0, abs=0.05)
    assert stats["n_skin_pixels"] == image.shape[0] * image.shape[1]


def test_srgb_to_lab_matches_skimage_on_random_colours() -> None:
    rng = np.random.default_rng(1)
    pixels = rng.integers(0, 256, size=(50, 40, 3), dtype=np.uint8)
    lab = srgb_to_lab(pixels)
    assert lab.shape == pixels.shape
    np.testing.assert_allclose(lab, rgb2lab(pixels), atol=0.01)


@pytest.mark.parametrize(("tone", "hex_colour", "lightness", "b", "ita"), MST_TABLE)
def test_monk_swatches_match_published_table(
    tone: int, hex_colour: str, lightness: float, b: float, ita: float
) -> None:
    image = _uniform(_rgb(hex_colour))
    stats = skin_tone_stats(image, _full_mask(image))
    assert stats["lightness_median"] == pytest.approx(lightness, abs=0.05)
    assert stats["b_median"] == pytest.approx(b, abs=0.05)
    assert stats["ita_median"] == pytest.approx(ita, abs=0.05)
    assert stats["ita_of_medians"] == pytest.approx(ita, abs=0.05)


def test_bluish_colour_has_negative_b_and_ita_above_90() -> None:
    rgb = _rgb("6080c0")
    image = _uniform(rgb)
    stats = skin_tone_stats(image, _full_mask(image))
    assert stats["b_median"] < 0
    assert stats["lightness_median"] > 50
    assert stats["ita_median"] > 90


def test_ita_uses_atan2_for_non_positive_b() -> None:
    # L* = 60, b* = -5: the point is up and to the left, 90 + atan(5/10).
    assert ita_degrees(60.0, -5.0) == pytest.approx(90 + math.degrees(math.atan(0.5)))
    assert ita_degrees(60.0, 0.0) == pytest.approx(90.0)
    assert ita_degrees(40.0, 0.0) == pytest.approx(-90.0)
    assert ita_degrees(40.0, -5.0) < -90.0
    values = ita_degrees(np.array([60.0, 60.0]), np.array([5.0, -5.0]))
    assert values[0] < 90 < values[1]


def test_hue_angle_of_medians() -> None:
    rgb = _rgb("a07e56")
    image = _uniform(rgb)
    stats = skin_tone_stats(image, _full_mask(image))
    _, a, b = _skimage_lab(rgb)
    assert stats["hue_angle"] == pytest.approx(math.degrees(math.atan2(b, a)), abs=0.1)


@pytest.mark.parametrize(
    ("ita", "expected"),
    [
        (82.99, "very_light"),
        (55.01, "very_light"),
        (55.0, "light"),
        (41.0, "intermediate"),
        (28.0, "tan"),
        (10.88, "tan"),
        (10.0, "brown"),
        (-29.9, "brown"),
        (-30.0, "dark"),
        (-84.31, "dark"),
        (None, None),
    ],
)
def test_ita_classes_chardon_del_bino(ita: float | None, expected: str | None) -> None:
    assert classify_ita(ita) == expected


@pytest.mark.parametrize(
    ("ita", "kinyanjui", "chardon"),
    [
        (60.0, 1, 1),
        (50.0, 2, 2),
        (30.0, 3, 3),
        (20.0, 4, 4),
        (15.0, 5, 4),
        (10.0, 6, 5),
        (-40.0, 6, 6),
    ],
)
def test_fitzpatrick_mappings(ita: float, kinyanjui: int, chardon: int) -> None:
    assert fitzpatrick_from_ita(ita) == kinyanjui
    assert fitzpatrick_from_ita(ita, FITZPATRICK_ITA_KINYANJUI_2020) == kinyanjui
    assert fitzpatrick_from_ita(ita, FITZPATRICK_ITA_CHARDON_CLASSES) == chardon


@pytest.mark.parametrize(
    ("ita", "groh"),
    [(46.0, 1), (45.0, 2), (29.0, 2), (28.0, 3), (18.0, 3), (6.0, 4), (5.0, 5), (-19.0, 5), (-20.0, 6)],
)
def test_groh_2021_empirical_thresholds(ita: float, groh: int) -> None:
    # Groh et al. 2021 report ITA results with 45/28/17/5/-20 (issue 12), not the 55/41/28/19/10 table.
    assert fitzpatrick_from_ita(ita, colorimetry.FITZPATRICK_ITA_GROH_2021_EMPIRICAL) == groh


def test_fitzpatrick_mapping_is_configurable() -> None:
    custom = [(0.0, 1), (-math.inf, 2)]
    assert fitzpatrick_from_ita(5.0, custom) == 1
    assert fitzpatrick_from_ita(-5.0, custom) == 2
    image = _uniform(_rgb("a07e56"))  # ITA 10.88
    default = skin_tone_stats(image, _full_mask(image))
    chardon = skin_tone_stats(image, _full_mask(image), fitzpatrick_mapping=FITZPATRICK_ITA_CHARDON_CLASSES)
    assert (default["fitzpatrick"], chardon["fitzpatrick"]) == (5, 4)
    assert chardon["parameters"]["fitzpatrick_mapping"] == "chardon_classes"


# --- masks, detector, albedo -----------------------------------------------------


def test_mask_selects_exactly_its_pixels() -> None:
    skin, blue = _rgb("d7bd96"), _rgb("6080c0")
    image = np.empty((10, 12, 3), dtype=np.uint8)
    image[:, :5] = skin
    image[:, 5:] = blue
    mask = np.zeros((10, 12), dtype=bool)
    mask[:, 5:] = True
    stats = skin_tone_stats(image, mask)
    assert stats["n_skin_pixels"] == 70
    assert stats["skin_fraction"] == pytest.approx(70 / 120)
    assert stats["ita_median"] == pytest.approx(_skimage_ita(blue), abs=0.05)
    assert stats["b_median"] == pytest.approx(_skimage_lab(blue)[2], abs=0.05)
    # The user's mask is trusted even where the detector would disagree.
    assert stats["parameters"]["skin_detector"] == "mask"


def test_mask_shape_must_match() -> None:
    image = _uniform(_rgb("d7bd96"))
    with pytest.raises(MaskSizeError):
        skin_tone_stats(image, np.ones((2, 2), dtype=bool))


def _reference_detector(rgb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Chai & Ngan (full-range YCbCr) and Kovac rules in float64, as published.

    Returns the decision and whether a pixel is within 0.5 of a Cb/Cr bound
    (where the module's integer arithmetic may round either way).
    """
    r, g, b = (rgb[..., c].astype(np.float64) for c in range(3))
    cb = 128 - 0.168736 * r - 0.331264 * g + 0.5 * b
    cr = 128 + 0.5 * r - 0.418688 * g - 0.081312 * b
    kovac = (
        (r > 95)
        & (g > 40)
        & (b > 20)
        & (np.maximum(np.maximum(r, g), b) - np.minimum(np.minimum(r, g), b) > 15)
        & (np.abs(r - g) > 15)
        & (r > g)
        & (r > b)
    )
    chai_ngan = (cb >= 77) & (cb <= 127) & (cr >= 133) & (cr <= 173)
    near = np.zeros_like(kovac)
    for value, bound in ((cb, 77), (cb, 127), (cr, 133), (cr, 173)):
        near |= np.abs(value - bound) < 0.5
    return kovac & chai_ngan, near


def test_detector_matches_published_rules() -> None:
    rng = np.random.default_rng(2)
    rgb = rng.integers(0, 256, size=(300, 300, 3), dtype=np.uint8)
    expected, near_bound = _reference_detector(rgb)
    detected = detect_skin(rgb)
    assert expected.sum() > 1000  # the random sample does contain skin colours
    assert np.array_equal(detected[~near_bound], expected[~near_bound])


def test_detector_has_no_uint8_wraparound() -> None:
    # (96, 97, 21) passes the Chai & Ngan box but has G > R; in uint8, R - G
    # wraps to 255 and would pass Kovac's |R - G| > 15 and R > G tests.
    rgb = np.array([[[96, 97, 21], [0xD7, 0xBD, 0x96]]], dtype=np.uint8)
    assert detect_skin(rgb).tolist() == [[False, True]]


def test_detector_finds_skin_patch_on_background() -> None:
    image = _uniform(_rgb("8090a0"), (40, 40))
    image[10:30, 10:30] = _rgb("c09070")
    stats = skin_tone_stats(image, skin_detector="rules")
    assert stats["n_skin_pixels"] == 400
    assert stats["ita_median"] == pytest.approx(_skimage_ita(_rgb("c09070")), abs=0.05)


def test_albedo_is_mean_linear_luminance() -> None:
    image = np.empty((4, 4, 3), dtype=np.uint8)
    image[:2] = _rgb("d7bd96")
    image[2:] = _rgb("825c43")
    stats = skin_tone_stats(image, _full_mask(image))
    # Y of CIE XYZ (D65) from skimage, averaged over the two colours.
    from skimage.color import rgb2xyz

    y = rgb2xyz(image)[..., 1]
    assert stats["albedo"] == pytest.approx(y.mean(), abs=1e-4)
    # Image white = 99th percentile of Y: here the lighter colour.
    assert stats["white_luminance"] == pytest.approx(y.max(), abs=1e-4)
    assert stats["albedo_normalized"] == pytest.approx(y.mean() / y.max(), abs=1e-4)


def test_no_skin_gives_json_safe_nulls() -> None:
    image = _uniform(_rgb("2040ff"), (20, 20))
    stats = skin_tone_stats(image)
    assert stats["n_skin_pixels"] == 0
    assert stats["ita_median"] is None and stats["ita_class"] is None
    assert stats["fitzpatrick"] is None and stats["albedo"] is None
    assert "too_little_skin" in stats["flags"]
    json.dumps(stats, allow_nan=False)
    assert stats["algorithm_version"] == colorimetry.ALGORITHM_VERSION


# --- quality flags ------------------------------------------------------------


def _portrait(
    skin: tuple[int, int, int] = (0xC0, 0x90, 0x70),
    background: tuple[int, int, int] = (0xE8, 0xE8, 0xE8),
) -> np.ndarray:
    """A skin square (25% of the frame) on a light neutral background."""
    rng = np.random.default_rng(3)
    image = np.empty((80, 80, 3), dtype=np.float64)
    image[:] = background
    image[20:60, 20:60] = skin
    image += rng.normal(0.0, 2.0, image.shape)
    return np.clip(np.rint(image), 0, 255).astype(np.uint8)


def test_no_flags_on_normal_skin_patch() -> None:
    stats = skin_tone_stats(_portrait(), skin_detector="rules")
    assert stats["flags"] == ["rule_based_skin"]
    assert stats["skin_fraction"] == pytest.approx(0.25, abs=0.01)


def test_overexposed_flags_clipped_highlights() -> None:
    image = np.clip(_portrait().astype(np.int32) * 3 // 2, 0, 255).astype(np.uint8)
    stats = skin_tone_stats(image, skin_detector="rules")
    assert "clipped_highlights" in stats["flags"]


def test_underexposed_flag() -> None:
    image = (_portrait().astype(np.float64) * 0.25).astype(np.uint8)
    stats = skin_tone_stats(image, np.ones(image.shape[:2], dtype=bool))
    assert "underexposed" in stats["flags"]
    assert "underexposed" not in skin_tone_stats(_portrait(), skin_detector="rules")["flags"]


def test_colour_cast_flag() -> None:
    stats = skin_tone_stats(_portrait(background=(0x50, 0x80, 0xF0)), skin_detector="rules")
    assert "color_cast" in stats["flags"]


def test_too_little_skin_flag_and_threshold_parameter() -> None:
    image = _uniform(_rgb("e8e8e8"), (100, 100))
    image[:10, :20] = _rgb("c09070")  # 2% skin
    assert "too_little_skin" in skin_tone_stats(image, skin_detector="rules")["flags"]
    relaxed = skin_tone_stats(image, min_skin_fraction=0.01, skin_detector="rules")
    assert "too_little_skin" not in relaxed["flags"]
    assert relaxed["parameters"]["min_skin_fraction"] == 0.01


def test_b_near_zero_flag_on_grey() -> None:
    image = _uniform((150, 150, 150))
    stats = skin_tone_stats(image, _full_mask(image))
    assert "b_near_zero" in stats["flags"]
    assert stats["ita_median"] == pytest.approx(90.0, abs=0.05)


# --- files ------------------------------------------------------------------------

SKIN = _rgb("c09070")
BLUE = _rgb("4060c0")


def _two_halves(width: int, height: int) -> Image.Image:
    """Left half skin, right half blue (raw pixel orientation)."""
    array = np.empty((height, width, 3), dtype=np.uint8)
    array[:, : width // 2] = SKIN
    array[:, width // 2 :] = BLUE
    return Image.fromarray(array)


def test_exif_rotated_jpeg_with_aligned_mask(tmp_path: Path) -> None:
    path = tmp_path / "rotated.jpg"
    exif = Image.Exif()
    exif[0x0112] = 6  # display rotated 90 degrees clockwise
    _two_halves(64, 32).save(path, quality=95, exif=exif)
    # Oriented image is 32 wide, 64 high; the raw left half is now on top.
    mask = np.zeros((64, 32), dtype=np.uint8)
    mask[:32] = 255
    mask_path = tmp_path / "mask.png"
    Image.fromarray(mask).save(mask_path)
    stats = measure_image(path, mask_path)
    assert (stats["width"], stats["height"]) == (32, 64)
    assert stats["decode"]["exif_orientation"] == 6
    assert stats["n_skin_pixels"] == 32 * 32
    assert stats["ita_median"] == pytest.approx(_skimage_ita(SKIN), abs=1.0)
    # The same mask on the bottom half measures the blue.
    Image.fromarray(255 - mask).save(mask_path)
    assert measure_image(path, mask_path)["b_median"] < 0
    # A mask in raw (unrotated) orientation is the wrong size.
    Image.fromarray(np.zeros((32, 64), dtype=np.uint8)).save(mask_path)
    with pytest.raises(MaskSizeError, match="32x64"):
        measure_image(path, mask_path)


def test_wrong_size_mask(tmp_path: Path) -> None:
    path = tmp_path / "image.png"
    _two_halves(20, 10).save(path)
    mask_path = tmp_path / "mask.png"
    Image.new("L", (21, 10), 255).save(mask_path)
    with pytest.raises(MaskSizeError, match=r"21x10.*20x10"):
        measure_image(path, mask_path)


@pytest.mark.parametrize("mode", ["1", "L", "P", "RGB", "RGBA", "LA", "I;16"])
def test_mask_file_modes(tmp_path: Path, mode: str) -> None:
    path = tmp_path / "image.png"
    _two_halves(20, 10).save(path)
    selected = np.zeros((10, 20), dtype=np.uint8)
    selected[:, :10] = 255
    base = Image.fromarray(selected)
    if mode in ("RGBA", "LA"):
        # Opaque everywhere; colour says where the skin is.
        mask_image = base.convert(mode)
    elif mode == "I;16":
        mask_image = Image.fromarray(selected.astype(np.uint16) * 257)
    else:
        mask_image = base.convert(mode)
    mask_path = tmp_path / "mask.png"
    mask_image.save(mask_path)
    stats = measure_image(path, mask_path)
    assert stats["n_skin_pixels"] == 100
    assert stats["ita_median"] == pytest.approx(_skimage_ita(SKIN), abs=0.05)


def test_transparent_mask_pixels_are_not_skin(tmp_path: Path) -> None:
    path = tmp_path / "image.png"
    _two_halves(20, 10).save(path)
    mask = np.zeros((10, 20, 4), dtype=np.uint8)
    mask[..., :3] = 255  # white everywhere ...
    mask[:, :10, 3] = 255  # ... but only the left half opaque
    mask_path = tmp_path / "mask.png"
    Image.fromarray(mask, "RGBA").save(mask_path)
    assert measure_image(path, mask_path)["n_skin_pixels"] == 100


def test_grayscale_png(tmp_path: Path) -> None:
    path = tmp_path / "grey.png"
    Image.new("L", (10, 10), 128).save(path)
    stats = measure_image(path, max_pixels=10_000)
    assert stats["decode"]["mode"] == "L"
    grey = _skimage_lab((128, 128, 128))
    assert stats["n_skin_pixels"] == 0  # grey is not skin for the detector
    mask_path = tmp_path / "mask.png"
    Image.new("L", (10, 10), 1).save(mask_path)
    stats = measure_image(path, mask_path)
    assert stats["lightness_median"] == pytest.approx(grey[0], abs=0.05)
    assert "b_near_zero" in stats["flags"]


def test_sixteen_bit_png_is_scaled_not_clipped(tmp_path: Path) -> None:
    path = tmp_path / "grey16.png"
    Image.fromarray(np.full((8, 8), 128 * 257, dtype=np.uint16)).save(path)
    assert Image.open(path).mode in ("I;16", "I")
    mask_path = tmp_path / "mask.png"
    Image.new("L", (8, 8), 255).save(mask_path)
    stats = measure_image(path, mask_path)
    assert stats["lightness_median"] == pytest.approx(_skimage_lab((128, 128, 128))[0], abs=0.05)


def test_palette_png(tmp_path: Path) -> None:
    path = tmp_path / "palette.png"
    _two_halves(20, 10).convert("P", palette=Image.Palette.ADAPTIVE).save(path)
    assert Image.open(path).mode == "P"
    stats = measure_image(path, skin_detector="rules")
    assert stats["n_skin_pixels"] == 100
    assert stats["ita_median"] == pytest.approx(_skimage_ita(SKIN), abs=0.05)


def test_rgba_png_drops_alpha_and_ignores_transparent_pixels(tmp_path: Path) -> None:
    array = np.empty((10, 20, 4), dtype=np.uint8)
    array[..., :3] = SKIN
    array[..., 3] = 255
    array[:, 10:, 3] = 0  # right half fully transparent (colour still skin)
    path = tmp_path / "rgba.png"
    Image.fromarray(array, "RGBA").save(path)
    stats = measure_image(path, skin_detector="rules")
    assert stats["n_skin_pixels"] == 100
    # Not composited: the measured colour is the stored colour.
    assert stats["ita_median"] == pytest.approx(_skimage_ita(SKIN), abs=0.05)


def test_cmyk_jpeg_matches_pillow_conversion(tmp_path: Path) -> None:
    path = tmp_path / "cmyk.jpg"
    Image.new("CMYK", (32, 32), (20, 70, 110, 40)).save(path, quality=95)
    with Image.open(path) as image:
        assert image.mode == "CMYK"
        expected = np.asarray(image.convert("RGB"))
    mask_path = tmp_path / "mask.png"
    Image.new("L", (32, 32), 255).save(mask_path)
    stats = measure_image(path, mask_path)
    lab = rgb2lab(expected).reshape(-1, 3)
    assert stats["lightness_median"] == pytest.approx(np.median(lab[:, 0]), abs=0.05)
    assert stats["b_median"] == pytest.approx(np.median(lab[:, 2]), abs=0.05)
    assert stats["b_median"] > 10  # a warm colour, not inverted CMYK


def test_embedded_srgb_profile_changes_nothing(tmp_path: Path) -> None:
    from PIL import ImageCms

    srgb = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    plain, tagged = tmp_path / "plain.png", tmp_path / "tagged.png"
    _two_halves(20, 10).save(plain)
    _two_halves(20, 10).save(tagged, icc_profile=srgb)
    a, b = measure_image(plain), measure_image(tagged)
    assert a["ita_median"] == pytest.approx(b["ita_median"], abs=0.05)
    assert b["decode"]["icc_profile"] != "none"


@pytest.mark.parametrize("size", [(1, 1), (2, 2)])
@pytest.mark.parametrize("suffix", [".png", ".jpg"])
def test_tiny_images(tmp_path: Path, size: tuple[int, int], suffix: str) -> None:
    path = tmp_path / f"tiny{suffix}"
    Image.new("RGB", size, SKIN).save(path, quality=100)
    stats = measure_image(path, skin_detector="rules")
    assert (stats["width"], stats["height"]) == size
    assert (stats["analysed_width"], stats["analysed_height"]) == size
    assert stats["n_skin_pixels"] == size[0] * size[1]
    assert stats["ita_median"] == pytest.approx(_skimage_ita(SKIN), abs=1.5)


def test_corrupt_files_raise_image_decode_error(tmp_path: Path) -> None:
    good = tmp_path / "good.jpg"
    _two_halves(256, 256).save(good, quality=90)
    data = good.read_bytes()
    truncated = tmp_path / "truncated.jpg"
    truncated.write_bytes(data[: len(data) // 2])
    garbage = tmp_path / "garbage.jpg"
    garbage.write_bytes(b"\xff\xd8\xff\xe0" + bytes(range(256)) * 4)
    text = tmp_path / "notes.png"
    text.write_text("not an image")
    for path in (truncated, garbage, text):
        with pytest.raises(ImageDecodeError):
            measure_image(path)
    with pytest.raises(ImageDecodeError):
        measure_image(good, text)  # corrupt mask
    with pytest.raises(FileNotFoundError):
        measure_image(tmp_path / "missing.jpg")


def _synthetic_photo(width: int, height: int, seed: int = 0) -> np.ndarray:
    """Smooth-shaded skin ellipse on a textured background, with noise."""
    rng = np.random.default_rng(seed)
    small = rng.integers(40, 200, size=(6, 9, 3), dtype=np.uint8)
    image = np.asarray(Image.fromarray(small).resize((width, height), Image.Resampling.BICUBIC)).astype(np.float32)
    yy, xx = np.ogrid[0:height, 0:width]
    r2 = ((xx - 0.45 * width) / (0.2 * width)) ** 2 + ((yy - 0.5 * height) / (0.3 * height)) ** 2
    inside = r2 < 1.0
    # Lambertian-like shading of the linear skin colour, encoded with the
    # sRGB power law (the exact curve does not matter for the test).
    shade = 0.45 + 0.55 * np.sqrt(1.0 - r2[inside].astype(np.float32))
    skin_linear = ((np.array([0xC8, 0x9A, 0x74]) / 255 + 0.055) / 1.055) ** 2.4
    for c in range(3):
        channel = image[..., c]
        channel[inside] = 255 * (np.float32(skin_linear[c]) * shade) ** (1 / 2.4)
    image += 3.0 * rng.standard_normal(size=image.shape, dtype=np.float32)
    return np.clip(np.rint(image), 0, 255).astype(np.uint8)


def _float64_ita_median(pixels: np.ndarray) -> float:
    """Median per-pixel ITA of N x 3 uint8 pixels with skimage's float64 Lab.

    Lab is computed by skimage on the distinct colours and expanded back, which
    gives the same per-pixel values as converting every pixel, faster.
    """
    codes = (pixels[:, 0].astype(np.int32) << 16) | ((pixels[:, 1].astype(np.int32) << 8) | pixels[:, 2])
    unique, inverse = np.unique(codes, return_inverse=True)
    colours = np.stack([unique >> 16, (unique >> 8) & 255, unique & 255], axis=-1)
    lab = rgb2lab(colours.astype(np.uint8)[None])[0][inverse]
    return float(np.median(np.degrees(np.arctan2(lab[:, 0] - 50.0, lab[:, 2]))))


def _float64_ita_of_mean(pixels: np.ndarray) -> float:
    """ITA of the mean linear sRGB colour of N x 3 uint8 pixels, float64 (skimage's Lab of the mean)."""
    from skimage.color import rgb2xyz, xyz2lab

    linear = pixels.astype(np.float64) / 255.0
    linear = np.where(linear <= 0.04045, linear / 12.92, ((linear + 0.055) / 1.055) ** 2.4)
    mean = linear.mean(axis=0)
    encoded = np.where(mean <= 0.0031308, 12.92 * mean, 1.055 * mean ** (1 / 2.4) - 0.055)
    L, _, b = xyz2lab(rgb2xyz(encoded[None, None]))[0, 0]
    return float(np.degrees(np.arctan2(L - 50.0, b)))


def test_draft_decode_matches_full_resolution_float64(tmp_path: Path) -> None:
    path = tmp_path / "photo.jpg"
    Image.fromarray(_synthetic_photo(2000, 1200)).save(path, quality=90)
    stats = measure_image(path, skin_detector="rules")
    assert stats["decode"]["draft_scale"] > 1  # the fast path was taken
    assert stats["analysed_width"] * stats["analysed_height"] <= (colorimetry.DEFAULT_MAX_PIXELS)
    with Image.open(path) as image:
        full = np.asarray(image.convert("RGB"))
    skin = detect_skin(full)
    reference = _float64_ita_median(full[skin])  # float64, full resolution
    assert skin.mean() > 0.1
    assert abs(stats["ita_pixel_median"] - reference) <= 0.5
    assert abs(stats["ita_median"] - _float64_ita_of_mean(full[skin])) <= 0.5
    assert stats["skin_fraction"] == pytest.approx(skin.mean(), abs=0.02)


def test_mask_is_resized_to_analysed_size(tmp_path: Path) -> None:
    path = tmp_path / "photo.jpg"
    Image.fromarray(_synthetic_photo(800, 600, seed=4)).save(path, quality=90)
    mask = np.zeros((600, 800), dtype=np.uint8)
    mask[:, :200] = 255  # left quarter
    mask_path = tmp_path / "mask.png"
    Image.fromarray(mask).save(mask_path)
    stats = measure_image(path, mask_path, max_pixels=40_000)
    assert stats["analysed_width"] < 800
    assert stats["skin_fraction"] == pytest.approx(0.25, abs=0.01)
    assert stats["parameters"]["skin_detector"] == "mask"


def test_labeling_colorimetry_is_the_same_code() -> None:
    """``labeling.colorimetry`` is the public contract path: it re-exports this package's names."""
    from labeling.colorimetry import measure_image as contract_measure_image
    from labeling.colorimetry import skin_tone_stats as contract_skin_tone_stats

    assert contract_measure_image is measure_image
    assert contract_skin_tone_stats is skin_tone_stats


@pytest.mark.slow  # starts a Python process (pytest.ini): CI runs it, bin/test --fast skips it
def test_contract_path_does_not_import_django_or_skimage() -> None:
    code = (
        "import sys, labeling.colorimetry; "
        "assert 'django' not in sys.modules, 'django imported'; "
        "assert 'skimage' not in sys.modules, 'skimage imported'"
    )
    subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, check=True)
