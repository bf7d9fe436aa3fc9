"""Where one ``scan --host -q -o json=/dev/null`` spends its time, stage by stage.

Runs the scan in this process with the pipeline's functions wrapped (nothing of gpusbom is
changed on disk) and prints to stderr, for each stage, when it started (``@``, seconds after
``main()`` began) and how long it took; for each walk worker (``host/parwalk.py``): how long
it lived, its walking and parsing (``host/premake.py``) time, the bytes it sent back and when
it ended::

    GPUSBOM_HOST_WALKERS=16 python benchmarks/host_stages.py

Run from a byte-compiled tree (``python -m compileall``), as ``benchmarks/host_scan.py``;
the figures are of one run: take several. README "Hosts, check, version" quotes them.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pickle as _pickle
import sys
import time
from typing import Any

T0 = time.perf_counter()
from gpusbom.cli.app import main as cli_main  # noqa: E402 - timed: the CLI's import

T1 = time.perf_counter()

import gpusbom.advisories.db as adb  # noqa: E402
import gpusbom.cli.output as co  # noqa: E402
import gpusbom.collect as col  # noqa: E402
import gpusbom.collectors._digests as dg  # noqa: E402
import gpusbom.host.parwalk as pw  # noqa: E402
import gpusbom.host.premake as pm  # noqa: E402
import gpusbom.host.source as hs  # noqa: E402
import gpusbom.host.walk as hw  # noqa: E402
import gpusbom.pipeline as pl  # noqa: E402
import gpusbom.scan as sc  # noqa: E402

ACC: dict[str, Any] = {}
WORKER = {"walk": 0.0, "make": 0.0, "tasks": 0, "born": 0.0}


def _add(key: str, dt: float) -> None:
    ACC[key] = ACC.get(key, 0.0) + dt


def _wrap(mod: Any, name: str, key: str | None = None) -> None:
    f = getattr(mod, name)
    key = key or name

    @functools.wraps(f)
    def g(*a: Any, **k: Any) -> Any:
        t = time.perf_counter()
        ACC.setdefault("@" + key, f"{t - T1:.3f}")
        try:
            return f(*a, **k)
        finally:
            _add(key, time.perf_counter() - t)

    setattr(mod, name, g)


for _mod, _name in [(sc, "run"), (adb, "load_active"), (sc, "_freeze_loaded"), (pl, "scan"),
                    (col, "build_matcher"), (hs, "open_host_view"), (pw, "_plan"),
                    (pm, "warm"), (pw, "_gather"), (hw, "walk_parallel"),
                    (hs, "_import_later_stages"), (pl, "_build"), (col, "run_collectors"),
                    (dg, "attach_declared_digests"), (pl, "analyse"), (co, "emit")]:
    _wrap(_mod, _name)

_start_nvml = hs.start_nvml


def _timed_nvml(*a: Any, **k: Any) -> Any:
    t = time.perf_counter()
    ACC["@start_nvml"] = f"{t - T1:.3f}"
    answer = _start_nvml(*a, **k)

    def wait() -> Any:
        w = time.perf_counter()
        try:
            return answer()
        finally:
            ACC["nvml: waited for after the walk"] = time.perf_counter() - w

    return wait


hs.start_nvml = _timed_nvml
_run_one = col._run_one


def _timed_run_one(cls: Any, ctx: Any) -> Any:
    t = time.perf_counter()
    try:
        return _run_one(cls, ctx)
    finally:
        _add("collector " + cls.id, time.perf_counter() - t)


col._run_one = _timed_run_one
_fork = os.fork


def _timed_fork() -> int:
    t = time.perf_counter()
    pid = _fork()
    if pid == 0:
        WORKER["born"] = time.perf_counter()
    else:
        _add("forks", time.perf_counter() - t)
        ACC["@last fork"] = f"{time.perf_counter() - T1:.3f}"
    return pid


os.fork = _timed_fork
_walk_task = pw._walk_task


#: the pieces this worker walked: [walk seconds, parse seconds, piece, start after birth]
PIECES: list[list[Any]] = []


def _timed_walk_task(*a: Any) -> None:
    t = time.perf_counter()
    try:
        _walk_task(*a)
    finally:
        WORKER["walk"] += time.perf_counter() - t
        WORKER["tasks"] += 1
        PIECES.append([time.perf_counter() - t, 0.0, a[3], t - WORKER["born"]])


pw._walk_task = _timed_walk_task
_make = pm.make


def _timed_make(entries: Any) -> Any:
    t = time.perf_counter()
    try:
        return _make(entries)
    finally:
        WORKER["make"] += time.perf_counter() - t
        if PIECES:
            PIECES[-1][1] = time.perf_counter() - t


pm.make = _timed_make


class _Pickle:
    """``pickle`` as the walk uses it: a worker's one ``dumps`` reports the worker."""

    HIGHEST_PROTOCOL = _pickle.HIGHEST_PROTOCOL

    @staticmethod
    def dumps(obj: Any, protocol: int | None = None) -> bytes:
        b = _pickle.dumps(obj, protocol=protocol)
        now = time.perf_counter()
        sys.stderr.write(
            f"  worker {os.getpid()}: lived {now - WORKER['born']:.3f} tasks {WORKER['tasks']} "
            f"walk {WORKER['walk']:.3f} parse {WORKER['make']:.3f} bytes {len(b)} "
            f"ended @{now - T1:.3f}\n")
        # its longest pieces (walk+parse, when it took them): a worker that ends well after
        # the others shows which piece held it (Triton's bundled tools did, once)
        top = sorted(PIECES, key=lambda x: -(x[0] + x[1]))[:3]
        sys.stderr.write("    longest: " + "; ".join(
            f"{w:.3f}+{m:.3f} @{at:.3f} {task[0]}[{task[3]}/{task[4]}]"
            for w, m, task, at in top) + "\n")
        return b

    @staticmethod
    def loads(b: bytes) -> Any:
        t = time.perf_counter()
        try:
            return _pickle.loads(b)  # noqa: S301 - the walk's own workers
        finally:
            _add("reading back (unpickle)", time.perf_counter() - t)


pw.pickle = _Pickle  # type: ignore[assignment]


def main() -> None:
    with contextlib.suppress(SystemExit):
        cli_main(["scan", "--host", "-q", "-o", "json=/dev/null"])
    t2 = time.perf_counter()
    sys.stderr.write(f"import of the CLI {T1 - T0:.3f} s, main() {t2 - T1:.3f} s, "
                     f"CPU {time.process_time():.3f} s (this process)\n")
    for k, v in ACC.items():
        sys.stderr.write(f"  {k:36s} {v:.3f}\n" if isinstance(v, float) else f"  {k:36s} {v}\n")
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
