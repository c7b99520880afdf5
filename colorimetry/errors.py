"""Exceptions of :mod:`colorimetry`."""

__all__ = ["ImageDecodeError", "MaskSizeError"]


class ImageDecodeError(ValueError):
    """The file is not a decodable image (corrupt, truncated, unknown format)."""


class MaskSizeError(ValueError):
    """The mask's size differs from the (EXIF-oriented) image's size."""
