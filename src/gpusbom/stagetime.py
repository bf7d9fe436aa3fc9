"""Per-stage timings of one command: wall and CPU seconds of each stage of a scan.

``gpusbom scan --debug`` (or ``GPUSBOM_DEBUG_INFLATE=1``) prints one line per stage on
stderr at the end: start-up (the interpreter, imports and options, up to the scan), the
advisory database, the image's layers (read, inflated, analysed: the layer workers' own
timelines follow under ``GPUSBOM_DEBUG_INFLATE``), the squash, the collectors, the
analyses, and each output written. ``benchmarks/big_image.py`` and ``benchmarks/ci.py``
read these lines. Stages may nest (an output inside "outputs"); CPU seconds are the whole
process's (every thread), so a stage that waits on worker processes shows little CPU.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator

_enabled: bool | None = None
_rows: list[tuple[str, float, float, float]] = []  # (stage, start offset, wall, CPU)
_T0 = time.perf_counter()


def enable() -> None:
    global _enabled
    _enabled = True


def enabled() -> bool:
    global _enabled
    if _enabled is None:
        from . import settings

        _enabled = bool(settings.get("debug_inflate"))
    return _enabled


@contextlib.contextmanager
def stage(name: str) -> Iterator[None]:
    """Time the block as stage ``name`` (nothing is recorded unless enabled)."""
    if not enabled():
        yield
        return
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        yield
    finally:
        _rows.append((name, t0 - _T0, time.perf_counter() - t0, time.process_time() - c0))


def record(name: str, wall: float, cpu: float) -> None:
    """Record stage ``name`` measured elsewhere (a forked child's wall and CPU seconds)."""
    if enabled():
        _rows.append((name, -1.0, wall, cpu))


def _process_age() -> float:
    """Seconds since this process started (/proc/self/stat), -1 where unknown."""
    try:
        with open("/proc/self/stat") as f:
            start = int(f.read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
        with open("/proc/uptime") as f:
            return float(f.read().split()[0]) - start
    except (OSError, ValueError, IndexError):
        return -1.0


def startup(name: str = "start-up") -> None:
    """Record the time from the process's start until now as stage ``name``."""
    if enabled():
        age = _process_age()
        _rows.append((name, -1.0, age, time.process_time()))


def report() -> None:
    """Print the recorded stages on stderr (and forget them)."""
    if not enabled() or not _rows:
        return
    for name, _start, wall, cpu in _rows:
        print(f"gpusbom: stage {name}: {wall:.3f} s wall, {cpu:.3f} CPU-s", file=sys.stderr)
    _rows.clear()
