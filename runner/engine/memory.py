"""Two settings of glibc's allocator that keep a long sweep's resident memory flat (measured with
perf/sweep_perf.py memory). Elsewhere (musl, macOS) both do nothing."""

from __future__ import annotations

import ctypes
import sys

__all__ = ["return_free_memory", "steady_allocator"]

_M_MMAP_THRESHOLD = -3  # mallopt's parameter number (malloc.h)


def _glibc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt  # noqa: B018 - glibc has it, musl's libc.so.6 stand-in may not
        libc.malloc_trim  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _glibc()


def steady_allocator() -> None:
    """Keep serving allocations of 128 KiB and more from their own mappings, for good.

    That is glibc's starting threshold, but it rises after the first large free (to as much as 32 MiB),
    and from then on the resume index's growing arrays are reallocated inside the heap, each move
    leaving a hole that later small allocations only partly fill: in a 50k-call sweep the heap kept
    growing by 15 MB that nothing used. With the threshold fixed, growing an array is an mremap and
    freeing a large buffer returns it to the system."""
    if _LIBC is not None:
        _LIBC.mallopt(_M_MMAP_THRESHOLD, 128 << 10)


def return_free_memory() -> None:
    """Give the free pages inside the heap back to the system (malloc_trim). A sweep's heap holds
    10-20 MB of such pages between the peaks of answers in flight; trimming every 2 s (2-4 ms each,
    on a worker thread) kept a 200k-call run's peak 8 MB lower and its end 14 MB lower."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
