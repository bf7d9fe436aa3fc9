"""Allocator settings for streaming work (glibc only), applied by the CLI at start-up.

Inflating layers hands 1-4 MiB chunks from thread to thread. With glibc's defaults each such
buffer is a fresh ``mmap`` (or grows and trims the heap), so the kernel zero-fills ~700,000
pages per GB of layer data: measured on a 1.26 GB image, about half of the decompression
time went to page faults (inflate alone: 1.38 s -> 0.80 s with these settings; a whole scan
1.95 s -> 1.6 s on 2 cores). Raising the mmap and trim thresholds lets freed buffers be
reused; capping the arenas keeps what is retained bounded (a few arenas x the trim threshold,
whatever the image size; peak RSS stayed ~155 MiB).

A user who sets any ``MALLOC_*`` variable, or ``GPUSBOM_MALLOC_TUNE=0``, keeps their own.
"""

from __future__ import annotations

import os
import sys

from . import settings

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8

MMAP_THRESHOLD = 16 << 20
TRIM_THRESHOLD = 32 << 20
ARENA_MAX = 4
#: the arenas on 2 CPUs or fewer: each keeps what its threads freed (up to the trim
#: threshold), and more arenas than cores buy no parallelism there (nvidia-wheels on the
#: 2-core VM, with the shallower layer queues of ``fsview.threadstream``: peak RSS
#: 111 -> 98 MiB, wall and CPU time the same)
ARENA_MAX_SMALL = 2

_done = False
_tuned = False  # tune_allocator applied its settings


def tune_allocator() -> bool:
    """Apply the settings once; True when they were applied."""
    global _done
    if _done:
        return False
    _done = True
    if not sys.platform.startswith("linux") or not settings.get("malloc_tune"):
        return False
    if any(k.startswith("MALLOC_") for k in os.environ):
        return False
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return False  # musl and others: no mallopt semantics to rely on
        import ctypes

        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (AttributeError, OSError, ValueError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    ok = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    ok = bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)) and ok
    ok = bool(mallopt(M_ARENA_MAX, ARENA_MAX_SMALL if _few_cpus() else ARENA_MAX)) and ok
    global _tuned
    _tuned = ok
    return ok


def _few_cpus() -> bool:
    try:
        return len(os.sched_getaffinity(0)) <= 2
    except (AttributeError, OSError):
        return (os.cpu_count() or 1) <= 2


def release_free() -> None:
    """Give the allocator's free memory back to the system (glibc's ``malloc_trim``), once
    the layers are read: with the thresholds above, the arenas keep what the layer threads
    freed, and the collectors and the outputs then allocate on top of it (the scan's peak
    RSS was there). Nothing where :func:`tune_allocator` did not apply its settings."""
    if not _tuned:
        return
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (AttributeError, OSError):  # pragma: no cover - glibc has it since 2.0
        pass
