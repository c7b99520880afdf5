"""Measuring one image: decoding it (and its mask), its skin-tone statistics and its overlay.

An item that is one person's box in a group photo is measured inside its box only (the colorimetry
functions' ``region``): its mask, its face and its image white are the box's. Its overlay covers the whole
photo (the display image it is laid over), the outside of the box dimmed.

Nothing here touches the database; :mod:`.storage` stores what
:func:`image_measure` returns.
"""

from __future__ import annotations

import io
import math
import os
from contextlib import ExitStack
from typing import Any

import numpy as np
from PIL import Image as PILImage

from colorimetry import region_crop

from ...colorimetry import (
    ImageDecodeError,
    LandmarkModelUnavailable,
    MaskSizeError,
    decode_image,
    measure_image,
    skin_tone_stats,
)
from ...models import Image
from ..media_files import local_copy
from .parameters import stats_options

#: Longest side of the stored overlay PNG (a 2-colour palette image: a few kB).
OVERLAY_MAX_SIDE = 640


def image_mask_kind(image: Image) -> str:
    """How ``image``'s mask is used: "skin", "silhouette" (any other kind) or "" (no mask)."""
    if not image.mask:
        return ""
    return "skin" if image.mask_kind == "skin" else "silhouette"


def _load_mask(image: Image, size: tuple[int, int]) -> np.ndarray:
    """The stored mask (oriented image size) as booleans resized (nearest) to ``size``."""
    with image.mask.open("rb") as handle:
        try:
            mask = PILImage.open(handle)
            mask.load()
        except (OSError, SyntaxError, ValueError) as exc:
            if isinstance(exc, FileNotFoundError):
                raise
            raise ImageDecodeError(f"cannot decode the mask: {exc}") from exc
    if mask.size != (image.width, image.height):
        raise MaskSizeError(
            f"mask is {mask.size[0]}x{mask.size[1]} pixels but the image is "
            f"{image.width}x{image.height} (after EXIF orientation); the mask must match the image"
        )
    grey = mask.convert("L")
    if grey.size != size:
        grey = grey.resize(size, PILImage.Resampling.NEAREST)
    return np.asarray(grey) != 0


def _open_rgb(image: Image, *, max_pixels: int) -> np.ndarray:
    """Oriented sRGB pixels (as labelers see them) box-reduced to at most ``max_pixels``."""
    from ..images import image_open_oriented_rgb

    short_side = min(image.width, image.height)
    hint = max(1, int(short_side * math.sqrt(min(1.0, max_pixels / (image.width * image.height)))))
    try:
        rgb = image_open_oriented_rgb(image, max_side=hint)
    except FileNotFoundError:
        raise
    except (OSError, SyntaxError, ValueError, EOFError, IndexError) as exc:
        raise ImageDecodeError(f"cannot decode the image: {exc}") from exc
    width, height = rgb.size
    factor = max(1, math.ceil(math.sqrt(width * height / max_pixels)))
    while math.ceil(width / factor) * math.ceil(height / factor) > max_pixels:
        factor += 1
    if factor > 1:
        rgb = rgb.reduce(factor)
    return np.asarray(rgb)


def _overlay_size(image: Image) -> tuple[int, int]:
    """The overlay's size: the oriented image scaled to at most ``OVERLAY_MAX_SIDE`` on its longer side (it is
    laid over the display image, scaled to it, so only its shape matters)."""
    scale = min(1.0, OVERLAY_MAX_SIDE / max(image.width, image.height))
    return max(1, round(image.width * scale)), max(1, round(image.height * scale))


def _resize_mask(mask: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """A boolean mask resized to ``size`` (width, height): box-averaged, skin where at least half is skin."""
    if (mask.shape[1], mask.shape[0]) == size:
        return mask
    grey = PILImage.fromarray(mask.astype(np.uint8) * 255, "L").resize(size, PILImage.Resampling.BOX)
    return np.asarray(grey) >= 128


def _overlay_png(image: Image, measured: np.ndarray) -> bytes:
    """A palette PNG to lay over the display image: non-skin dimmed, skin outlined.

    The skin is the pixels the statistics measured (``measured``: the analysed image's, or its box's, skin
    selection: the given mask, the detector's face regions or the rule-based pixels), resized to the overlay;
    nothing is chosen again. For a box, inside the box only: everything outside it is dimmed.
    """
    width, height = _overlay_size(image)
    full = (image.width, image.height)
    box = image.box
    skin = np.zeros((height, width), dtype=bool)
    if box is None:
        skin = _resize_mask(measured, (width, height))
    else:
        target = region_crop(skin, box, full)
        if target.size:
            target[:] = _resize_mask(measured, (target.shape[1], target.shape[0]))
    # Outline: skin pixels with a non-skin 4-neighbour (the frame edge is not an outline).
    padded = np.pad(skin, 1, mode="edge")
    interior = padded[:-2, 1:-1] & padded[2:, 1:-1] & padded[1:-1, :-2] & padded[1:-1, 2:]
    indices = np.where(skin, np.where(interior, 0, 2), 1).astype(np.uint8)

    overlay = PILImage.fromarray(indices, "P")
    # 0 skin: transparent; 1 not skin: dark, mostly opaque; 2 skin edge: cyan.
    overlay.putpalette([0, 0, 0, 16, 16, 20, 0, 210, 255])
    buffer = io.BytesIO()
    overlay.save(buffer, format="PNG", transparency=bytes([0, 185, 255]))
    return buffer.getvalue()


def _measure(image: Image, parameters: dict[str, Any], mask_kind: str, mask_out: list[np.ndarray]) -> dict[str, Any]:
    """The statistics of ``image``; the skin selection they measured is appended to ``mask_out``."""
    options = stats_options(parameters)
    max_pixels = parameters["max_pixels"]
    box = image.box
    if mask_kind == "silhouette":
        rgb = _open_rgb(image, max_pixels=max_pixels if box is None else _box_budget(image, max_pixels))
        silhouette = _load_mask(image, (rgb.shape[1], rgb.shape[0]))
        if box is not None:
            full = (image.width, image.height)
            rgb, silhouette = np.ascontiguousarray(region_crop(rgb, box, full)), region_crop(silhouette, box, full)
        stats = skin_tone_stats(rgb, _opaque=silhouette, _mask_out=mask_out, **options)
        stats["parameters"]["skin_detector"] += " within silhouette mask"
        stats.update(width=image.width, height=image.height, analysed_width=rgb.shape[1], analysed_height=rgb.shape[0])
        if box is not None:
            stats["region"] = list(box)
        return stats
    with ExitStack() as files:
        # Through the storage (issue 25): the stored file itself on the local disk, a temporary copy from a bucket.
        original = files.enter_context(local_copy(image.original.name, image.original.storage))
        mask_path = (
            files.enter_context(local_copy(image.mask.name, image.mask.storage)) if mask_kind == "skin" else None
        )
        return _measure_paths(
            image, str(original), None if mask_path is None else str(mask_path), max_pixels, options, box, mask_out
        )


def _measure_paths(
    image: Image,
    original: str,
    mask_path: str | None,
    max_pixels: int,
    options: dict[str, Any],
    box: tuple[int, int, int, int] | None,
    mask_out: list[np.ndarray],
) -> dict[str, Any]:
    try:
        if mask_path is not None:
            return _measure_masked(original, mask_path, max_pixels, options, box, mask_out)
        if box is not None:
            return measure_image(original, mask_path, max_pixels=max_pixels, region=box, _mask_out=mask_out, **options)
        return measure_image(original, mask_path, max_pixels=max_pixels, _mask_out=mask_out, **options)
    except (ImageDecodeError, MaskSizeError) as exc:
        # Say "image"/"mask" rather than disclose server paths to the lead.
        message = str(exc).replace(repr(os.fspath(original)), repr(image.original_filename))
        if mask_path is not None:
            message = message.replace(repr(os.fspath(mask_path)), "'mask'")
        raise type(exc)(message) from exc


def _box_budget(image: Image, max_pixels: int) -> int:
    """Pixels to decode of the whole photo so that its box gets about ``max_pixels`` (never more than the photo)."""
    share = (image.box_width * image.box_height) / (image.width * image.height)
    return max(max_pixels, min(image.width * image.height, math.ceil(max_pixels / share)))


def _measure_masked(
    original: str,
    mask_path: str,
    max_pixels: int,
    options: dict[str, Any],
    box: tuple[int, int, int, int] | None,
    mask_out: list[np.ndarray],
) -> dict[str, Any]:
    """A skin-masked image's statistics (the mask's pixels), and what the automatic detector would have read.

    The audit by labelled tone (issue 21) counts the detector's faces found on every image, masked ones
    too: one more detection per masked image (about 10 ms with the landmark model), decoded once.
    """
    if box is None:
        decoded = decode_image(original, mask_path, max_pixels=max_pixels)
    else:
        decoded = decode_image(original, mask_path, max_pixels=max_pixels, region=box)
    stats = skin_tone_stats(decoded.rgb, decoded.mask, _opaque=decoded.opaque, _mask_out=mask_out, **options)
    automatic = skin_tone_stats(decoded.rgb, None, _opaque=decoded.opaque, **options)
    stats.update(
        width=decoded.width,
        height=decoded.height,
        analysed_width=decoded.rgb.shape[1],
        analysed_height=decoded.rgb.shape[0],
        decode=decoded.decode,
        automatic={
            "face_found": "no_face" not in automatic["flags"],
            "ita_median": automatic["ita_median"],
            "face_method": automatic["face_method"],
            "skin_detector": automatic["parameters"]["skin_detector"],
        },
    )
    if decoded.region is not None:
        stats["region"] = list(decoded.region)
    return stats


def _failure_reason(exc: BaseException) -> str:
    if isinstance(exc, MaskSizeError):
        return f"mask size mismatch: {exc}"
    if isinstance(exc, LandmarkModelUnavailable):
        return f"the landmark model is not installed as shipped: {exc}"
    if isinstance(exc, ImageDecodeError):
        return f"corrupt or unreadable file: {exc}"
    if isinstance(exc, FileNotFoundError):
        return "file missing from storage"
    if isinstance(exc, PILImage.DecompressionBombError):
        return f"image too large to decode safely: {exc}"
    if isinstance(exc, OSError):
        return f"storage error after retries: {exc}"
    return f"{type(exc).__name__}: {exc}"


def image_measure(
    image: Image, parameters: dict[str, Any], mask_kind: str, *, final_attempt: bool
) -> tuple[dict[str, Any] | None, bytes, str]:
    """The statistics and overlay PNG of ``image``, or why they could not be computed.

    A decode error, a mask of the wrong size, a missing file or a degenerate image
    is a failure with its reason; other ``OSError`` (storage hiccups) propagate so
    the task is retried, unless ``final_attempt``.

    Returns
    -------
    tuple
        ``(stats, overlay, "")`` on success, ``(None, b"", reason)`` on failure.
    """
    try:
        measured: list[np.ndarray] = []
        stats = _measure(image, parameters, mask_kind, measured)
        overlay = _overlay_png(image, measured[0])
    except (
        ImageDecodeError,
        MaskSizeError,
        FileNotFoundError,
        PILImage.DecompressionBombError,
        LandmarkModelUnavailable,
    ) as exc:
        return None, b"", _failure_reason(exc)
    except OSError as exc:
        if not final_attempt:
            raise
        return None, b"", _failure_reason(exc)
    except ValueError as exc:  # e.g. a degenerate image the statistics refuse
        return None, b"", _failure_reason(exc)
    return stats, overlay, ""
