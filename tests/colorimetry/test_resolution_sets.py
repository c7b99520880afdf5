"""The held-out sets' storage variants (session 42): what the seventh set's lossless export writes."""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageFilter

from tests.colorimetry import resolution_sets


def _scene() -> np.ndarray:
    rng = np.random.default_rng(42)
    return rng.integers(0, 256, size=(60, 48, 3), dtype=np.uint8)


def test_the_lossless_seventh_export_keeps_every_pixel_of_the_chain(tmp_path, monkeypatch) -> None:
    # The sets' sizes scaled down (the chain is the same at any size; a 12 MP PNG takes seconds to write).
    monkeypatch.setattr(resolution_sets, "SIDES", {"512 px": 64, "2 MP": 160, "12 MP": 400})
    rgb = _scene()
    chain = {
        name: np.asarray(image)
        for name, _side, image in resolution_sets._sized(
            rgb, resolution_sets.HELD_OUT_7_EXPORT["master"], resolution_sets.HELD_OUT_7_EXPORT["down"]
        )
    }
    (tmp_path / "plain").mkdir()
    (tmp_path / "sharp").mkdir()
    plain = resolution_sets.export_7_lossless(rgb, tmp_path / "plain", sharpen=False)
    sharp = resolution_sets.export_7_lossless(rgb, tmp_path / "sharp")
    assert list(plain) == list(resolution_sets.SIDES)
    for name, path in plain.items():
        with Image.open(path) as image:
            assert image.format == "PNG"
            stored = np.asarray(image.convert("RGB"))
        np.testing.assert_array_equal(stored, chain[name])  # lossless, unsharpened: the chain itself
    with Image.open(sharp["512 px"]) as image:
        sharpened = np.asarray(image.convert("RGB"))
    expected = np.asarray(
        Image.fromarray(chain["512 px"]).filter(ImageFilter.UnsharpMask(*resolution_sets.HELD_OUT_7_SHARPEN))
    )
    np.testing.assert_array_equal(sharpened, expected)
    assert not np.array_equal(sharpened, chain["512 px"])
    with Image.open(sharp["12 MP"]) as image:  # only the small file is sharpened
        np.testing.assert_array_equal(np.asarray(image.convert("RGB")), chain["12 MP"])
