"""Decoding an image file (and its mask) to the 8-bit sRGB array that is measured."""

from __future__ import annotations

import functools
import io
import math
import os
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image, ImageOps

from .errors import ImageDecodeError, MaskSizeError

__all__ = [
    "DEFAULT_MAX_PIXELS",
    "DecodedImage",
    "decode_image",
    "fast_path_factor",
    "jpeg_draft_scale",
    "region_check",
    "region_crop",
]

#: Analysed-pixel cap for :func:`measure_image`. A 12 MP (4000 x 3000) JPEG
#: is then decoded at 1/8 scale (500 x 375). On the benchmark photo
#: (bench/bench_colorimetry.py, shared 2-CPU machine) measure_image took
#: 0.35-0.40x the time of Pillow's full decode in four runs, and its median
#: ITA was 0.11 degree from the full-resolution float64 value. With a 1 MP cap
#: (1/4 scale) the ITA error was below 0.01 degree but the time 0.64x and
#: 1.41x in two runs: too close to the 1.0x budget. libjpeg's entropy
#: decoding is the floor: 1/8 and 1/4 decodes cost about 40% of a full one.
DEFAULT_MAX_PIXELS = 500_000

# EXIF orientations 5-8 swap width and height.
_TRANSPOSING_ORIENTATIONS = frozenset({5, 6, 7, 8})
_EXIF_ORIENTATION_TAG = 0x0112
# The errors Pillow raises on unreadable data. DecompressionBombError is
# deliberately not caught: the guard stays on and surfaces as itself.
_DECODE_ERRORS = (OSError, SyntaxError, ValueError, EOFError, IndexError, struct.error)


@dataclass(frozen=True)
class DecodedImage:
    """An image file decoded for measurement (see :func:`decode_image`).

    Attributes
    ----------
    rgb : numpy.ndarray
        ``H x W x 3`` ``uint8`` sRGB array at the analysed (reduced) size.
    mask : numpy.ndarray or None
        ``H x W`` boolean skin mask from the mask file, if one was given.
    opaque : numpy.ndarray or None
        ``H x W`` boolean, the pixels that are not fully transparent, for
        images with alpha; None otherwise.
    width, height : int
        Size of the EXIF-oriented image at full resolution.
    decode : dict
        How it was decoded: ``format``, ``mode``, ``draft_scale``,
        ``reduce_factor``, ``exif_orientation``, ``icc_profile``.
    region : tuple of int or None
        ``(x, y, width, height)`` of the part decoded (full-resolution pixels of
        the oriented image), or None for the whole image.
    """

    rgb: np.ndarray
    mask: np.ndarray | None
    opaque: np.ndarray | None
    width: int
    height: int
    decode: dict[str, Any]
    region: tuple[int, int, int, int] | None = None


Region = tuple[int, int, int, int]


def region_check(region: Region, width: int, height: int) -> Region:
    """``region`` as four ints ``(x, y, width, height)`` inside an image of ``width`` x ``height`` pixels.

    Raises
    ------
    ValueError
        Not four whole numbers, no area, or not inside the image.

    Examples
    --------
    >>> region_check((10, 0, 20, 30), 40, 30)
    (10, 0, 20, 30)
    >>> region_check((30, 0, 20, 30), 40, 30)
    Traceback (most recent call last):
    ...
    ValueError: region (30, 0, 20, 30) is not inside the 40 x 30 image
    """
    values = tuple(region)
    if len(values) != 4 or any(isinstance(v, bool) or not isinstance(v, int | np.integer) for v in values):
        raise ValueError(f"region must be four whole numbers (x, y, width, height), got {region!r}")
    x, y, w, h = (int(v) for v in values)
    if w < 1 or h < 1:
        raise ValueError(f"region {region!r} has no area")
    if x < 0 or y < 0 or x + w > width or y + h > height:
        raise ValueError(f"region {region!r} is not inside the {width} x {height} image")
    return (x, y, w, h)


def _region_bounds(region: Region, full: tuple[int, int], size: tuple[int, int]) -> tuple[int, int, int, int]:
    """``region`` (pixels of a ``full`` = (w, h) image) as (left, top, right, bottom) on a copy of ``size``:
    every pixel the region touches, at least one."""
    sx, sy = size[0] / full[0], size[1] / full[1]
    x, y, w, h = region
    left = min(size[0] - 1, math.floor(x * sx))
    top = min(size[1] - 1, math.floor(y * sy))
    right = max(left + 1, min(size[0], math.ceil((x + w) * sx)))
    bottom = max(top + 1, min(size[1], math.ceil((y + h) * sy)))
    return left, top, right, bottom


def region_crop(array: np.ndarray, region: Region, full_size: tuple[int, int]) -> np.ndarray:
    """The part of ``array`` (an ``H x W [x C]`` copy of an image of ``full_size`` = (width, height)
    pixels, possibly reduced) that ``region`` covers: a view, every pixel the region touches.

    Examples
    --------
    >>> a = np.arange(24).reshape(4, 6)  # a half-size copy of a 12 x 8 image
    >>> region_crop(a, (2, 2, 4, 4), (12, 8))
    array([[ 7,  8],
           [13, 14]])
    """
    height, width = array.shape[:2]
    left, top, right, bottom = _region_bounds(region, full_size, (width, height))
    return array[top:bottom, left:right]


def decode_image(
    path: str | os.PathLike[str],
    mask_path: str | os.PathLike[str] | None = None,
    *,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    region: Region | None = None,
) -> DecodedImage:
    """Decode an image file (and a mask file) to at most ``max_pixels`` 8-bit sRGB pixels.

    The image is decoded with Pillow at reduced resolution: a JPEG through
    libjpeg's DCT scaling (``Image.draft``, the smallest of 1/1, 1/2, 1/4, 1/8
    that fits, several times faster than a full decode), then, like other
    formats after a full decode, box-reduced (``Image.reduce``) if still too
    large. EXIF orientation is applied (``ImageOps.exif_transpose``).
    Conversion to 8-bit sRGB: an embedded non-sRGB ICC profile (e.g. Display
    P3 from phones, a CMYK press profile) is converted to sRGB with LittleCMS
    (relative colorimetric intent); otherwise Pillow's conversion is used (grey
    replicated, palette expanded, CMYK naive); 16-bit greyscale (``I;16``,
    ``I``) is scaled by 255/65535 rather than clipped. Alpha is dropped, not
    composited (compositing onto white or black would invent colours at soft
    edges), and returned as ``opaque``. Pillow's decompression-bomb guard is
    left on.

    Parameters
    ----------
    path : str or os.PathLike
        Image file.
    mask_path : str or os.PathLike, optional
        Skin mask file, any mode, same size as the EXIF-oriented image (its
        own EXIF orientation, if any, is applied too). A pixel is skin when
        any colour band is nonzero and, for modes with alpha, alpha is
        nonzero. It is resized to the analysed size with nearest-neighbour
        sampling (masks are binary).
    max_pixels : int
        Cap on the number of analysed pixels.
    region : (x, y, width, height), optional
        Decode only this part of the image (full-resolution pixels after the
        EXIF orientation; for example one person's box in a group photo). The
        pixel cap then applies to the region: a small region is decoded at a
        finer scale than the whole image would be. The mask is cut to the same
        part. ``width`` and ``height`` of the result stay the whole image's.

    Returns
    -------
    DecodedImage

    Raises
    ------
    ImageDecodeError
        The image or mask file is corrupt, truncated or not an image.
    MaskSizeError
        The mask's size differs from the oriented image's size (checked from
        the file headers, before decoding).
    ValueError
        ``region`` is not inside the image (:func:`region_check`).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     p = pathlib.Path(tmp) / "photo.png"
    ...     Image.new("RGBA", (40, 30), (0xD7, 0xBD, 0x96, 255)).save(p)
    ...     decoded = decode_image(p, max_pixels=300)
    ...     part = decode_image(p, max_pixels=300, region=(10, 5, 20, 10))
    >>> decoded.rgb.shape, decoded.width, decoded.decode["reduce_factor"], bool(decoded.opaque.all())
    ((15, 20, 3), 40, 2, True)
    >>> part.rgb.shape, part.width, part.region
    ((10, 20, 3), 40, (10, 5, 20, 10))
    """
    if max_pixels < 1:
        raise ValueError(f"max_pixels must be positive, got {max_pixels}")
    mask_image = None
    image = _open_image(path, "image")
    try:
        orientation = _orientation(image, path)
        width, height = _oriented_size(image.size, orientation)
        if region is not None:
            region = region_check(region, width, height)
        # The share of the image's pixels that is analysed (before the cap): all of them, or the region's.
        share = 1.0 if region is None else (region[2] * region[3]) / (width * height)
        if mask_path is not None:
            mask_image = _open_image(mask_path, "mask")
            mask_size = _oriented_size(mask_image.size, _orientation(mask_image, mask_path))
            if mask_size != (width, height):
                raise MaskSizeError(
                    f"mask {os.fspath(mask_path)!r} is {mask_size[0]}x{mask_size[1]} "
                    f"pixels but image {os.fspath(path)!r} is {width}x{height} "
                    "(after EXIF orientation); the mask must match the image"
                )

        source_format, source_mode = image.format, image.mode
        draft_scale = 1
        if image.format == "JPEG":
            raw_width, raw_height = image.size
            draft_scale = jpeg_draft_scale(raw_width, raw_height, max_pixels, share)
            if draft_scale > 1:
                # draft() picks the largest s in (8, 4, 2, 1) with
                # size // s >= the requested size, so request size // scale.
                image.draft(
                    "RGB",
                    (
                        max(1, raw_width // draft_scale),
                        max(1, raw_height // draft_scale),
                    ),
                )
        try:
            image.load()
            rgb_image, icc_status = _to_rgb(image)
            if orientation != 1:
                rgb_image = ImageOps.exif_transpose(rgb_image)
            if region is not None:
                rgb_image = rgb_image.crop(_region_bounds(region, (width, height), rgb_image.size))
            reduce_factor = _reduce_factor(rgb_image.size, max_pixels)
            if reduce_factor > 1:
                rgb_image = rgb_image.reduce(reduce_factor)
            array = np.asarray(rgb_image)
        except _DECODE_ERRORS as exc:
            raise ImageDecodeError(f"cannot decode image {os.fspath(path)!r}: {exc}") from exc

        mask = None
        if mask_image is not None:
            try:
                mask = _mask_array(mask_image, (array.shape[1], array.shape[0]), region)
            except _DECODE_ERRORS as exc:
                raise ImageDecodeError(f"cannot decode mask {os.fspath(mask_path or '')!r}: {exc}") from exc
    finally:
        image.close()
        if mask_image is not None:
            mask_image.close()

    opaque = None
    if array.shape[2] == 4:
        opaque = array[..., 3] != 0
        array = np.ascontiguousarray(array[..., :3])
    return DecodedImage(
        rgb=array,
        mask=mask,
        opaque=opaque,
        width=width,
        height=height,
        decode={
            "format": source_format,
            "mode": source_mode,
            "draft_scale": draft_scale,
            "reduce_factor": reduce_factor,
            "exif_orientation": orientation,
            "icc_profile": icc_status,
        },
        region=region,
    )


def _oriented_size(size: tuple[int, int], orientation: int) -> tuple[int, int]:
    if orientation in _TRANSPOSING_ORIENTATIONS:
        return size[1], size[0]
    return size


def jpeg_draft_scale(width: int, height: int, max_pixels: int, share: float = 1.0) -> int:
    """The DCT scale (1, 2, 4 or 8) the fast path decodes a ``width`` x ``height`` JPEG at: the smallest
    that leaves at most ``max_pixels`` (of the ``share`` of the image analysed), else 8.

    >>> jpeg_draft_scale(4000, 3000, 500_000), jpeg_draft_scale(700, 700, 500_000)
    (8, 1)
    """
    for scale in (1, 2, 4):
        if math.ceil(width / scale) * math.ceil(height / scale) * share <= max_pixels:
            return scale
    return 8


def fast_path_factor(width: int, height: int, max_pixels: int = DEFAULT_MAX_PIXELS) -> int:
    """The whole reduction the fast path applies to a ``width`` x ``height`` JPEG: its DCT scale
    (:func:`jpeg_draft_scale`) times the integer box reduction of the scaled image (:func:`decode_image`).

    >>> fast_path_factor(512, 512), fast_path_factor(1414, 1414), fast_path_factor(12000, 9000)
    (1, 2, 16)
    """
    scale = jpeg_draft_scale(width, height, max_pixels)
    return scale * _reduce_factor((math.ceil(width / scale), math.ceil(height / scale)), max_pixels)


def _reduce_factor(size: tuple[int, int], max_pixels: int) -> int:
    """Smallest integer box-reduction factor leaving at most ``max_pixels``."""
    width, height = size
    factor = max(1, math.ceil(math.sqrt(width * height / max_pixels)))
    while math.ceil(width / factor) * math.ceil(height / factor) > max_pixels:
        factor += 1
    return factor


def _open_image(path: str | os.PathLike[str], what: str) -> Image.Image:
    try:
        return Image.open(path)
    except FileNotFoundError:
        raise
    except _DECODE_ERRORS as exc:
        raise ImageDecodeError(f"cannot read {what} {os.fspath(path)!r}: {exc}") from exc


def _orientation(image: Image.Image, path: str | os.PathLike[str]) -> int:
    try:
        orientation = image.getexif().get(_EXIF_ORIENTATION_TAG, 1)
    except _DECODE_ERRORS as exc:
        raise ImageDecodeError(f"cannot read {os.fspath(path)!r}: {exc}") from exc
    return orientation if orientation in range(1, 9) else 1


def _to_rgb(image: Image.Image) -> tuple[Image.Image, str]:
    """Decoded image -> 8-bit ``RGB`` or ``RGBA`` image, and ICC handling."""
    mode = image.mode
    icc_status = "none"
    icc = image.info.get("icc_profile")
    if icc:
        converted = _icc_to_srgb(image, icc) if mode in ("RGB", "CMYK", "L") else None
        if converted is not None:
            return converted, "converted_to_srgb"
        icc_status = "srgb_or_not_applied"
    if mode in ("RGB", "RGBA"):
        return image, icc_status
    if mode in ("I;16", "I;16L", "I;16B", "I;16N", "I"):
        # Pillow's convert() clips 16-bit values to 0..255; scale instead.
        values = np.asarray(image).astype(np.int64).clip(0, 65535)
        grey = ((values * 255 + 32767) // 65535).astype(np.uint8)
        return Image.fromarray(grey, "L").convert("RGB"), icc_status
    if mode in ("LA", "La", "PA", "RGBa") or (mode == "P" and "transparency" in image.info):
        return image.convert("RGBA"), icc_status
    return image.convert("RGB"), icc_status


@functools.lru_cache(maxsize=16)
def _srgb_transform(icc: bytes, mode: str) -> Any:
    from PIL import ImageCms

    source = ImageCms.ImageCmsProfile(io.BytesIO(icc))
    description = (ImageCms.getProfileDescription(source) or "").lower()
    if "srgb" in description:
        return None  # already sRGB: skip an identity transform
    return ImageCms.buildTransform(
        source,
        ImageCms.createProfile("sRGB"),
        mode,
        "RGB",
        renderingIntent=ImageCms.Intent.RELATIVE_COLORIMETRIC,
    )


def _icc_to_srgb(image: Image.Image, icc: bytes) -> Image.Image | None:
    try:
        transform = _srgb_transform(bytes(icc), image.mode)
        if transform is None:
            return None
        from PIL import ImageCms

        return ImageCms.applyTransform(image, transform)
    except Exception:  # noqa: BLE001 - broken or unsupported profile: fall back
        return None


def _mask_array(mask_image: Image.Image, size: tuple[int, int], region: Region | None = None) -> np.ndarray:
    """Mask image -> boolean array (of ``region`` only, when given) resized (nearest) to ``size`` = (w, h)."""
    mask_image.load()
    mask_image = ImageOps.exif_transpose(mask_image)
    if region is not None:
        mask_image = mask_image.crop(_region_bounds(region, mask_image.size, mask_image.size))
    if mask_image.mode == "P":
        mask_image = mask_image.convert("RGBA")
    bands = mask_image.getbands()
    values = np.asarray(mask_image)
    if values.ndim == 2:
        skin = values != 0
    elif "A" in bands:
        alpha = bands.index("A")
        colour = [i for i in range(len(bands)) if i != alpha]
        skin = (values[..., colour] != 0).any(axis=-1) & (values[..., alpha] != 0)
    else:
        skin = (values != 0).any(axis=-1)
    if skin.shape[::-1] != size:
        skin_image = Image.fromarray(skin.astype(np.uint8) * 255, "L")
        skin = np.asarray(skin_image.resize(size, Image.Resampling.NEAREST)) != 0
    return np.asarray(skin)
