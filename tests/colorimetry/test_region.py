"""The colorimetry functions measure inside a region (one person's box in a group photo, issue 23): the pure
``colorimetry`` package takes the region; the app passes an item's box."""

import numpy as np
import pytest
from PIL import Image

from colorimetry import decode_image, measure_image, region_check, region_crop, skin_tone_stats

LIGHT, DEEP = (0xD7, 0xBD, 0x96), (0x3A, 0x22, 0x17)


def two_people(path, size=(200, 100), fmt="PNG", exif=None):
    """Left half light skin, right half deep skin (as shown, after ``exif``'s orientation)."""
    img = Image.new("RGB", size, LIGHT)
    img.paste(DEEP, (size[0] // 2, 0, size[0], size[1]))
    if exif is not None:
        # Stored turned back, so that the EXIF orientation turns it the right way up.
        img = img.transpose(Image.Transpose.ROTATE_90)
        data = Image.Exif()
        data[0x0112] = exif
        img.save(path, format=fmt, exif=data.tobytes(), quality=95)
    else:
        img.save(path, format=fmt)
    return path


def full_mask(path, size=(200, 100)):
    Image.new("L", size, 255).save(path)
    return path


def uniform_ita(colour) -> float:
    return skin_tone_stats(np.full((20, 20, 3), colour, np.uint8), np.ones((20, 20), bool))["ita_median"]


def test_a_region_is_the_same_pixels_as_the_whole_image_cut(tmp_path):
    path = tmp_path / "p.png"
    rng = np.random.default_rng(3)
    Image.fromarray(rng.integers(0, 255, (90, 140, 3), dtype=np.uint8)).save(path)
    whole = decode_image(path, max_pixels=10**6)
    part = decode_image(path, max_pixels=10**6, region=(13, 7, 50, 60))
    assert np.array_equal(part.rgb, whole.rgb[7:67, 13:63])
    assert (part.width, part.height, part.region) == (140, 90, (13, 7, 50, 60))


def test_measuring_a_region_measures_that_person_only(tmp_path):
    path, mask = two_people(tmp_path / "p.png"), full_mask(tmp_path / "m.png")
    left = measure_image(path, mask, region=(10, 10, 60, 80))
    right = measure_image(path, mask, region=(120, 10, 60, 80))
    whole = measure_image(path, mask)
    assert left["ita_median"] == pytest.approx(uniform_ita(LIGHT), abs=0.01)
    assert right["ita_median"] == pytest.approx(uniform_ita(DEEP), abs=0.01)
    assert left["region"] == [10, 10, 60, 80] and "region" not in whole
    assert left["n_skin_pixels"] == 60 * 80 and whole["n_skin_pixels"] == 200 * 100
    assert whole["ita_iqr"] > 50  # the whole photo mixes the two people


def test_a_region_is_in_the_photo_as_shown_after_its_exif_orientation(tmp_path):
    path = two_people(tmp_path / "p.jpg", fmt="JPEG", exif=6)  # stored 100 x 200, shown 200 x 100
    decoded = decode_image(path, region=(150, 20, 40, 60))
    assert (decoded.width, decoded.height) == (200, 100)
    assert np.abs(decoded.rgb.reshape(-1, 3).mean(axis=0) - DEEP).max() < 4


def test_a_small_region_of_a_big_jpeg_is_decoded_finer(tmp_path):
    path = tmp_path / "big.jpg"
    Image.new("RGB", (2400, 1600), LIGHT).save(path, quality=90)
    whole = decode_image(path, max_pixels=200_000)
    part = decode_image(path, max_pixels=200_000, region=(1000, 600, 300, 300))
    assert whole.decode["draft_scale"] == 8 and part.decode["draft_scale"] == 1
    assert part.rgb.shape == (300, 300, 3)
    bigger = decode_image(path, max_pixels=200_000, region=(0, 0, 1200, 1600))
    assert bigger.decode["draft_scale"] == 4 and bigger.rgb.shape[0] * bigger.rgb.shape[1] <= 200_000


@pytest.mark.parametrize(
    "region", [(150, 0, 60, 10), (0, 0, 0, 5), (-1, 0, 5, 5), (0, 95, 5, 6), (1.5, 0, 2, 2), (1, 2, 3)]
)
def test_a_region_outside_the_image_is_refused(tmp_path, region):
    path = two_people(tmp_path / "p.png")
    with pytest.raises(ValueError, match="region"):
        decode_image(path, region=region)
    with pytest.raises(ValueError, match="region"):
        region_check(region, 200, 100)


def test_region_crop_on_a_reduced_copy_keeps_every_pixel_the_region_touches():
    copy = np.arange(5 * 7).reshape(5, 7)  # a 1/3 copy of a 21 x 15 image
    assert region_crop(copy, (0, 0, 21, 15), (21, 15)).shape == (5, 7)
    assert region_crop(copy, (4, 4, 1, 1), (21, 15)).tolist() == [[8]]  # inside copy pixel (1, 1)
    assert region_crop(copy, (2, 2, 2, 2), (21, 15)).shape == (2, 2)  # straddles copy pixels 0 and 1
