"""Measuring skin tone in an image file: decode, then statistics."""

from __future__ import annotations

import os
from typing import Any

from .decode import DEFAULT_MAX_PIXELS, decode_image
from .stats import skin_tone_stats

__all__ = ["measure_image"]


def measure_image(
    path: str | os.PathLike[str],
    mask_path: str | os.PathLike[str] | None = None,
    *,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    region: tuple[int, int, int, int] | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Measure skin tone in an image file, optionally restricted by a mask file.

    The file is decoded by :func:`colorimetry.decode.decode_image` (at most
    ``max_pixels`` analysed pixels, EXIF orientation applied, converted to
    8-bit sRGB; see there), then measured by
    :func:`colorimetry.stats.skin_tone_stats`. Fully transparent pixels are
    excluded from the automatic skin detectors.

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
        Measure inside this part of the image only (full-resolution pixels
        after the EXIF orientation), e.g. one person's box in a group photo:
        the mask, the face detector and the image white all see the region
        alone. :func:`colorimetry.decode.decode_image` says how it is decoded.
    **options
        Keyword arguments of :func:`skin_tone_stats` (thresholds, mapping).

    Returns
    -------
    dict
        The mapping of :func:`skin_tone_stats` plus ``width`` and ``height``
        (oriented, full resolution), ``analysed_width``, ``analysed_height``
        and ``decode`` (format, mode, JPEG draft scale, reduce factor, EXIF
        orientation, ICC handling); with a ``region``, ``region`` too (as a
        list).

    Raises
    ------
    ImageDecodeError
        The image or mask file is corrupt, truncated or not an image.
    MaskSizeError
        The mask's size differs from the oriented image's size (checked from
        the file headers, before decoding).
    ValueError
        ``region`` is not inside the image.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from PIL import Image
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     p = pathlib.Path(tmp) / "patch.png"
    ...     Image.new("RGB", (16, 16), (0xD7, 0xBD, 0x96)).save(p)
    ...     stats = measure_image(p)
    ...     masked = measure_image(p, p)  # the patch as its own mask: every pixel
    >>> stats["ita_median"], stats["flags"][:2]  # no face in a plain patch: no number
    (None, ['no_face', 'too_little_skin'])
    >>> round(masked["ita_median"], 2), masked["width"], masked["flags"]
    (50.32, 16, [])
    """
    decoded = decode_image(path, mask_path, max_pixels=max_pixels, region=region)
    result = skin_tone_stats(decoded.rgb, decoded.mask, _opaque=decoded.opaque, **options)
    result.update(
        width=decoded.width,
        height=decoded.height,
        analysed_width=decoded.rgb.shape[1],
        analysed_height=decoded.rgb.shape[0],
        decode=decoded.decode,
    )
    if decoded.region is not None:
        result["region"] = list(decoded.region)
    return result
