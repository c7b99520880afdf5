"""Giving the memory a release build has freed back to the system, between its stages.

glibc keeps the pages of freed blocks (large NumPy and row buffers included) in the process's heap, so
the build's RSS would only grow from stage to stage; ``malloc_trim(0)`` returns every free page. Measured
at 250,000 images x 4 labels: after the data card's agreement, 256 -> 232 MB. Nothing happens where the
C library has no ``malloc_trim`` (musl, macOS).

:func:`build_memory` is the setting a build runs in: Arrow's buffers from the C library's allocator (whose
free pages ``malloc_trim`` gives back; Arrow's default jemalloc pool keeps them), and glibc's thresholds
fixed, so that a large block freed is returned to the system instead of raising the threshold under
which later large blocks stay in the heap. Measured at 250,000 images x 4 labels (with the smaller
fetches and text batches of the same change): the tables' plateau 313 -> 282 MB.
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import ctypes.util
import functools
import gc
from collections.abc import Callable, Iterator

#: glibc's ``mallopt`` parameters (malloc.h) and the values a build sets: blocks from 256 KiB are mapped
#: apart (and unmapped when freed), free memory above 1 MiB at the top of the heap is given back.
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 256 * 1024
TRIM_THRESHOLD_BYTES = 1024 * 1024


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


@functools.cache
def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


def _malloc_fixed_thresholds() -> None:
    """Fix glibc's mmap and trim thresholds (once per process; nothing elsewhere)."""
    libc = _libc()
    mallopt = getattr(libc, "mallopt", None) if libc is not None else None
    if mallopt is not None and _malloc_trim() is not None:  # glibc
        mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)


#: Below this many labels a build's working memory is a few MB: collecting and trimming between its stages
#: gives nothing back and costs about 0.03 s a time in a process with many live objects (six times a build).
SMALL_BUILD_LABELS = 20_000
#: Whether :func:`memory_release` collects and trims: inside a large build only. Outside a build (the data
#: card's facts for a page or a test, ``release_write`` called alone) the process's memory is not the build's
#: to manage, and a full collection walks every live object of it (5 s of the test suite in one process).
_release_between_stages: contextvars.ContextVar[bool] = contextvars.ContextVar("release_between_stages", default=False)


@contextlib.contextmanager
def build_memory(n_labels: int | None = None) -> Iterator[None]:
    """Run a release build with Arrow on the system allocator and glibc's thresholds fixed (see the module);
    ``n_labels``, the project's labels, tells a small build (memory is not given back between its stages).

    Arrow's previous default pool is restored on exit; the thresholds stay fixed (glibc cannot go back to
    its adaptive ones), which only makes the process give memory back sooner."""
    import pyarrow as pa

    _malloc_fixed_thresholds()
    large = n_labels is None or n_labels >= SMALL_BUILD_LABELS
    token = _release_between_stages.set(large)
    previous = pa.default_memory_pool()
    pa.set_memory_pool(pa.system_memory_pool())
    try:
        yield
    finally:
        pa.set_memory_pool(previous)
        memory_release()  # a large build's memory back to the system (a small build's: nothing)
        _release_between_stages.reset(token)


def memory_release() -> None:
    """Collect garbage and give the heap's free pages back to the system (glibc only), between the stages of a
    large build; in a small build (``build_memory(n_labels)`` below :data:`SMALL_BUILD_LABELS`) and outside a
    build, nothing."""
    if not _release_between_stages.get():
        return
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
