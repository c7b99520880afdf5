"""Rule-based skin detection (used when no skin mask is given).

With a user mask the statistics use exactly the mask's pixels (the
segmentation is trusted). Without one, a documented rule-based detector is
used: the YCbCr box of Chai & Ngan (1999) [ChaiNgan1999], Cb in [77, 127] and Cr in
[133, 173], computed with the full-range JFIF/BT.601 transform (as Pillow's
and OpenCV's 8-bit YCbCr; *not* scikit-image's studio-range ``rgb2ycbcr``),
intersected with the Kovac et al. (2003) [Kovac2003] uniform-daylight RGB rules
(R > 95, G > 40, B > 20, max - min > 15, |R - G| > 15, R > G, R > B). Given
R > G and R > B, max = R and max - min > 15 follows from R - G > 15, so the
implemented rule is R > 95, G > 40, B > 20, R - G > 15, R > B, evaluated in
int16 (``abs(R - G)`` on uint8 would wrap). scikit-image's LBP face cascade
is not used: multi-scale detection costs more than the whole measurement.
"""

from __future__ import annotations

import numpy as np

__all__ = ["detect_skin"]


def detect_skin(rgb: np.ndarray) -> np.ndarray:
    """Rule-based skin mask: Chai & Ngan YCbCr box AND Kovac RGB rules.

    Parameters
    ----------
    rgb : numpy.ndarray
        ``H x W x 3`` ``uint8`` sRGB image.

    Returns
    -------
    numpy.ndarray
        ``H x W`` boolean mask.

    Examples
    --------
    >>> detect_skin(np.array([[[0xD7, 0xBD, 0x96], [0x60, 0x80, 0xC0]]], np.uint8))
    array([[ True, False]])
    """
    r = rgb[..., 0].astype(np.int16)
    g = rgb[..., 1].astype(np.int16)
    b = rgb[..., 2].astype(np.int16)
    r_minus_g = r - g
    skin = (r > 95) & (g > 40) & (b > 20) & (r_minus_g > 15) & (r > b)
    # Full-range BT.601 (JFIF) chroma, in units of 1/1024 to stay in int32:
    # Cb - 128 = -0.168736 R - 0.331264 G + 0.5 B
    # Cr - 128 =  0.5 R - 0.418688 G - 0.081312 B
    r32 = r.astype(np.int32)
    g32 = g.astype(np.int32)
    b32 = b.astype(np.int32)
    cb = -173 * r32 - 339 * g32 + 512 * b32
    cr = 512 * r32 - 429 * g32 - 83 * b32
    skin &= (cb >= (77 - 128) * 1024) & (cb <= (127 - 128) * 1024)
    skin &= (cr >= (133 - 128) * 1024) & (cr <= (173 - 128) * 1024)
    return skin
