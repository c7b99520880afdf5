"""Giving the memory a release build has freed back to the system, between its stages.

glibc keeps the pages of freed blocks (large NumPy and row buffers included) in the process's heap, so
the build's RSS would only grow from stage to stage; ``malloc_trim(0)`` returns every free page. Measured
at 250,000 images x 4 labels: after the data card's agreement, 256 -> 232 MB. Nothing happens where the
C library has no ``malloc_trim`` (musl, macOS).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


def memory_release() -> None:
    """Collect garbage and give the heap's free pages back to the system (glibc only)."""
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
