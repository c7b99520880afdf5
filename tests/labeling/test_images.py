"""Image ingestion (labeling.services.images): validation, storage, derivatives."""

import hashlib
import io
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from django.conf import settings as django_settings
from django.test import override_settings
from PIL import Image as PILImage
from PIL import ImageCms

from labeling.models import Image
from labeling.services.images import (
    DuplicateImage,
    ImageRejected,
    image_create_from_bytes,
    image_make_derivatives,
    image_open_oriented_rgb,
    sanitize_filename,
)

RED = (220, 30, 40)
BLUE = (30, 40, 210)


@pytest.fixture(autouse=True)
def media_root(settings, tmp_path):
    """A fresh MEDIA_ROOT per test, so leftover files are attributable to the test."""
    settings.MEDIA_ROOT = str(tmp_path / "media")
    return Path(settings.MEDIA_ROOT)


def encode(img: PILImage.Image, fmt: str, **kwargs) -> bytes:
    buffer = io.BytesIO()
    img.save(buffer, format=fmt, **kwargs)
    return buffer.getvalue()


def solid(colour=RED, size=(64, 48), mode="RGB") -> PILImage.Image:
    return PILImage.new(mode, size, colour)


def stored_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def limits(**overrides):
    return override_settings(FAIRTONE={**django_settings.FAIRTONE, **overrides})


def display_pixels(image: Image) -> np.ndarray:
    image.refresh_from_db()
    with image.display.open("rb") as handle:
        return np.asarray(PILImage.open(handle).convert("RGB")).astype(int)


def make(project, data, name="photo.png", **kwargs) -> Image:
    return image_create_from_bytes(project=project, filename=name, data=data, **kwargs)


def exif_with_orientation(orientation: int) -> bytes:
    exif = PILImage.Exif()
    exif[0x0112] = orientation
    return exif.tobytes()


def png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


# --- good imports -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fmt", "name", "kwargs"),
    [
        ("JPEG", "a.jpg", {"quality": 95}),
        ("PNG", "b.png", {}),
        ("WEBP", "c.webp", {"lossless": True}),
        ("TIFF", "d.tif", {}),
        ("BMP", "e.bmp", {}),
        ("GIF", "f.gif", {}),
    ],
)
def test_supported_formats_are_stored_unchanged(project, media_root, fmt, name, kwargs):
    data = encode(solid(size=(64, 48)), fmt, **kwargs)
    image = make(project, data, name=f"folder/{name}")
    image.refresh_from_db()
    assert image.format == fmt
    assert (image.width, image.height) == (64, 48)
    assert image.file_size == len(data)
    assert image.sha256 == hashlib.sha256(data).hexdigest()
    assert image.original_filename == name
    assert image.external_id == Path(name).stem
    assert image.derivative_status == Image.DerivativeStatus.PENDING
    with image.original.open("rb") as handle:
        assert handle.read() == data  # provenance: the bytes as uploaded


@pytest.mark.parametrize(
    ("img", "fmt", "mode"),
    [
        (solid((0, 255, 255, 0), mode="CMYK"), "JPEG", "CMYK"),
        (PILImage.fromarray(np.full((48, 64), 100 * 257, np.uint16)), "PNG", "I;16"),
        (solid(mode="RGB").convert("P"), "PNG", "P"),
        (solid((200, 10, 10, 128), mode="RGBA"), "PNG", "RGBA"),
        (solid(77, mode="L"), "PNG", "L"),
    ],
)
def test_source_mode_is_recorded(project, img, fmt, mode):
    image = make(project, encode(img, fmt), name=f"x.{fmt.lower()}")
    assert image.source_mode == mode


def test_exif_orientation_6_swaps_width_and_height_and_rotates_display(project):
    # Stored 60 wide x 40 tall: top half red, bottom half blue.
    stored = np.zeros((40, 60, 3), np.uint8)
    stored[:20] = RED
    stored[20:] = BLUE
    data = encode(PILImage.fromarray(stored), "JPEG", quality=95, exif=exif_with_orientation(6))
    image = make(project, data, name="rotated.jpg")
    assert image.exif_orientation == 6
    assert (image.width, image.height) == (40, 60)

    image_make_derivatives(image=image)
    shown = display_pixels(image)
    assert shown.shape == (60, 40, 3)
    # EXIF 2.32 orientation 6: "the 0th row is the visual right-hand side", so the
    # stored top (red) is on the right and the stored bottom (blue) on the left.
    assert np.abs(shown[30, 35] - RED).max() <= 6
    assert np.abs(shown[30, 4] - BLUE).max() <= 6


def test_display_derivative_matches_oriented_size_for_every_orientation(project):
    for orientation in range(1, 9):
        data = encode(
            solid(size=(30, 20), colour=(orientation * 20, 50, 60)),
            "JPEG",
            exif=exif_with_orientation(orientation),
        )
        image = make(project, data, name=f"o{orientation}.jpg")
        image_make_derivatives(image=image)
        image.refresh_from_db()
        with image.display.open("rb") as handle:
            assert PILImage.open(handle).size == (image.width, image.height)
        expected = (20, 30) if orientation >= 5 else (30, 20)
        assert (image.width, image.height) == expected


# --- derivatives: mode conversion ---------------------------------------------------------


def test_cmyk_jpeg_display_is_rgb(project):
    # Pure magenta+yellow ink, no cyan or black, is red.
    image = make(
        project,
        encode(solid((0, 255, 255, 0), mode="CMYK"), "JPEG", quality=95),
        "c.jpg",
    )
    image_make_derivatives(image=image)
    assert np.abs(display_pixels(image)[24, 32] - (255, 0, 0)).max() <= 6


def test_16_bit_png_is_scaled_not_clipped(project):
    # 100 * 257 in 16 bits is 100 in 8 bits (65535 = 255 * 257); clipping gives 255.
    sixteen = PILImage.fromarray(np.full((48, 64), 100 * 257, np.uint16))
    image = make(project, encode(sixteen, "PNG"), "deep.png")
    image_make_derivatives(image=image)
    assert np.abs(display_pixels(image)[24, 32] - (100, 100, 100)).max() <= 2


def test_palette_and_grayscale_are_converted(project):
    palette = make(project, encode(solid((0, 0, 255)).convert("P"), "GIF"), "p.gif")
    gray = make(project, encode(solid(77, mode="L"), "PNG"), "g.png")
    for image, colour in ((palette, (0, 0, 255)), (gray, (77, 77, 77))):
        image_make_derivatives(image=image)
        assert np.abs(display_pixels(image)[24, 32] - colour).max() <= 3


def test_alpha_is_composited_on_mid_grey(project):
    rgba = np.zeros((48, 64, 4), np.uint8)
    rgba[..., :3] = (255, 0, 0)
    rgba[:, :32, 3] = 0  # transparent left half
    rgba[:, 32:, 3] = 255  # opaque right half
    image = make(project, encode(PILImage.fromarray(rgba), "PNG"), "alpha.png")
    image_make_derivatives(image=image)
    shown = display_pixels(image)
    assert np.abs(shown[24, 8] - (128, 128, 128)).max() <= 3
    assert np.abs(shown[24, 56] - (255, 0, 0)).max() <= 6


def test_transparent_palette_gif_is_composited_on_mid_grey(project):
    img = solid((0, 200, 0)).convert("P", palette=PILImage.Palette.ADAPTIVE)
    index = img.getpixel((0, 0))
    image = make(project, encode(img, "GIF", transparency=index), "t.gif")
    image_make_derivatives(image=image)
    assert np.abs(display_pixels(image)[24, 32] - (128, 128, 128)).max() <= 3


def test_embedded_srgb_profile_keeps_colours(project):
    srgb = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    image = make(project, encode(solid(RED), "PNG", icc_profile=srgb), "icc.png")
    image_make_derivatives(image=image)
    image.refresh_from_db()
    assert image.derivative_status == Image.DerivativeStatus.READY
    assert image.derivative_error == ""
    assert np.abs(display_pixels(image)[24, 32] - RED).max() <= 4


def test_broken_icc_profile_keeps_pixels_and_says_so(project):
    image = make(project, encode(solid(RED), "PNG", icc_profile=b"not a profile" * 10), "bad.png")
    image_make_derivatives(image=image)
    image.refresh_from_db()
    assert image.derivative_status == Image.DerivativeStatus.READY
    assert "colour profile" in image.derivative_error
    assert np.abs(display_pixels(image)[24, 32] - RED).max() <= 4


def test_derivatives_are_downscaled_within_limits(project):
    with limits(DISPLAY_MAX_SIDE=50, THUMBNAIL_MAX_SIDE=20):
        image = make(project, encode(solid(size=(400, 100)), "JPEG"), "wide.jpg")
        image_make_derivatives(image=image)
    image.refresh_from_db()
    with image.display.open("rb") as handle:
        width, height = PILImage.open(handle).size
    assert width == 50 and height in (12, 13)  # 400x100 scaled by 1/8
    with image.thumbnail.open("rb") as handle:
        thumb = PILImage.open(handle)
        assert thumb.format == "JPEG" and max(thumb.size) == 20


def test_derivatives_are_idempotent(project, media_root):
    image = make(project, encode(solid(), "PNG"), "twice.png")
    image_make_derivatives(image=image)
    first = stored_files(media_root)
    image_make_derivatives(image=image)
    image.refresh_from_db()
    assert stored_files(media_root) == first
    assert len(first) == 3  # original, display, thumbnail
    assert image.derivative_status == Image.DerivativeStatus.READY


def test_unreadable_original_marks_derivatives_failed(project):
    image = make(project, encode(solid(), "PNG"), "gone.png")
    Path(image.original.path).write_bytes(b"garbage")
    image_make_derivatives(image=image)
    image.refresh_from_db()
    assert image.derivative_status == Image.DerivativeStatus.FAILED
    assert image.derivative_error


def test_open_oriented_rgb_has_the_stored_size(project):
    data = encode(solid(size=(30, 20)), "JPEG", exif=exif_with_orientation(8))
    image = make(project, data, "eight.jpg")
    rgb = image_open_oriented_rgb(image)
    assert rgb.mode == "RGB"
    assert rgb.size == (image.width, image.height) == (20, 30)


def test_derivatives_are_enqueued_on_commit(project, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        image = make(project, encode(solid(), "PNG"), "queued.png")
    assert len(callbacks) == 1
    image.refresh_from_db()
    from django.conf import settings

    if settings.CELERY_TASK_ALWAYS_EAGER:
        assert image.derivative_status == Image.DerivativeStatus.READY
    else:
        # A real worker got the task; it cannot see this test's uncommitted rows.
        # tests/test_real_services.py checks the worker's side with committed data.
        assert image.derivative_status == Image.DerivativeStatus.PENDING


# --- rejections ---------------------------------------------------------------------------


def assert_rejected(project, media_root, data, name, *fragments):
    with pytest.raises(ImageRejected) as caught:
        make(project, data, name=name)
    for fragment in fragments:
        assert fragment in caught.value.reason
    assert not Image.objects.filter(project=project).exists()
    assert stored_files(media_root) == []
    return caught.value.reason


def test_duplicate_content_is_reported_with_the_existing_image(project, media_root):
    data = encode(solid(), "PNG")
    first = make(project, data, name="one.png")
    with pytest.raises(DuplicateImage) as caught:
        make(project, data, name="two.png")
    assert caught.value.existing == first
    assert Image.objects.filter(project=project).count() == 1
    assert len(stored_files(media_root)) == 1


def test_truncated_jpeg(project, media_root):
    data = encode(solid(size=(200, 150)), "JPEG")
    assert_rejected(project, media_root, data[: len(data) // 2], "cut.jpg", "truncated JPEG")


def test_corrupt_jpeg_body(project, media_root):
    data = bytearray(encode(solid(size=(200, 150)), "JPEG"))
    data[20:] = b"\x00" * (len(data) - 20)
    assert_rejected(project, media_root, bytes(data), "corrupt.jpg")


def test_text_file_named_jpg(project, media_root):
    assert_rejected(project, media_root, b"hello, I am a note\n" * 5, "note.jpg", "plain text")


def test_pdf_named_png(project, media_root):
    data = b"%PDF-1.7\n1 0 obj\n<<>>\nendobj\n" + bytes(range(256))
    assert_rejected(project, media_root, data, "scan.png", "not an image", "PDF")


def test_extension_must_not_lie_about_content(project, media_root):
    assert_rejected(project, media_root, encode(solid(), "PNG"), "photo.jpg", ".jpg", "PNG")


def test_unsupported_extension(project, media_root):
    assert_rejected(project, media_root, encode(solid(), "PNG"), "photo.heic", ".heic")


def test_empty_file(project, media_root):
    assert_rejected(project, media_root, b"", "empty.png", "empty")


def test_file_over_the_byte_limit(project, media_root):
    with limits(MAX_IMAGE_BYTES=100):
        assert_rejected(project, media_root, encode(solid(), "PNG"), "big.png", "limit")


def test_image_over_the_pixel_limit(project, media_root):
    with limits(MAX_IMAGE_PIXELS=1000):
        assert_rejected(
            project,
            media_root,
            encode(solid(size=(64, 48)), "PNG"),
            "big.png",
            "3,072",
            "1,000",
        )


def test_decompression_bomb_header_is_refused_by_pillow(project, media_root):
    # A PNG that claims 100,000 x 100,000 pixels: Pillow's guard refuses it at
    # open, before any pixel is decoded.
    ihdr = struct.pack(">IIBBBBB", 100_000, 100_000, 1, 0, 0, 0, 0)
    data = (
        b"\x89PNG\r\n\x1a\n"
        + png_chunk(b"IHDR", ihdr)
        + png_chunk(b"IDAT", zlib.compress(b"\x00" * 100))
        + png_chunk(b"IEND", b"")
    )
    with limits(MAX_IMAGE_PIXELS=10**12):
        assert_rejected(project, media_root, data, "bomb.png", "decompression bomb", "pixels")


def test_pillow_decompression_bomb_warning_is_a_rejection(project, media_root, monkeypatch):
    # 1,600 pixels is over Pillow's limit (1,000) but under twice it: Pillow only
    # warns; the warning must still reject the file.
    monkeypatch.setattr(PILImage, "MAX_IMAGE_PIXELS", 1000)
    assert_rejected(
        project,
        media_root,
        encode(solid(size=(40, 40)), "PNG"),
        "w.png",
        "decompression bomb",
    )


def test_taken_external_id_is_rejected(project, media_root):
    make(project, encode(solid(RED), "PNG"), name="same.png")
    with pytest.raises(ImageRejected, match="'same' is already used"):
        make(project, encode(solid(BLUE), "PNG"), name="same.png")
    assert Image.objects.filter(project=project).count() == 1
    assert len(stored_files(media_root)) == 1


def test_attributes_must_be_text_or_numbers(project, media_root):
    image = make(project, encode(solid(), "PNG"), attributes={"pose": "A", "height_cm": 172.5})
    assert image.attributes == {"pose": "A", "height_cm": 172.5}
    with pytest.raises(ImageRejected, match="text or a number"):
        make(project, encode(solid(BLUE), "PNG"), name="b.png", attributes={"x": [1]})


def test_failure_after_writing_leaves_nothing(project, media_root, monkeypatch):
    def explode(self, *args, **kwargs):
        raise RuntimeError("database went away")

    monkeypatch.setattr(Image, "save", explode)
    with pytest.raises(RuntimeError):
        make(
            project,
            encode(solid(), "PNG"),
            mask_data=encode(solid(255, mode="L"), "PNG"),
        )
    monkeypatch.undo()
    assert not Image.objects.filter(project=project).exists()
    assert stored_files(media_root) == []


# --- masks ----------------------------------------------------------------------------------


def test_mask_is_stored_as_a_binary_png(project):
    mask = np.zeros((48, 64), np.uint8)
    mask[10:20, 5:30] = 3  # any non-zero value is inside
    image = make(
        project,
        encode(solid(), "PNG"),
        mask_data=encode(PILImage.fromarray(mask), "PNG"),
        mask_kind="silhouette",
    )
    assert image.mask_kind == "silhouette"
    with image.mask.open("rb") as handle:
        stored = PILImage.open(handle)
        assert stored.format == "PNG"
        assert stored.mode == "1"
        assert np.array_equal(np.asarray(stored), mask != 0)


def test_mask_size_is_checked_against_the_oriented_image(project, media_root):
    data = encode(solid(size=(60, 40)), "JPEG", exif=exif_with_orientation(6))
    mask = encode(solid(255, size=(60, 40), mode="L"), "PNG")
    with pytest.raises(ImageRejected) as caught:
        make(project, data, name="r.jpg", mask_data=mask, mask_kind="skin")
    assert caught.value.reason == "mask is 60x40 but the image is 40x60 after EXIF orientation"
    assert stored_files(media_root) == []


def test_mask_that_is_not_an_image(project, media_root):
    with pytest.raises(ImageRejected, match="mask"):
        make(project, encode(solid(), "PNG"), mask_data=b"%PDF-1.4 nope")
    assert stored_files(media_root) == []


def test_sanitize_filename():
    assert sanitize_filename("../../etc/passwd.png") == "passwd.png"
    assert sanitize_filename("C:\\Users\\a\\IMG\x00_1.JPG") == "IMG_1.JPG"
    assert sanitize_filename("...") == "image"
