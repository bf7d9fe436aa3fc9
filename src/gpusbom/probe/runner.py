"""Runs the probe: every backend, every device, each in its own child process.

Per backend one child enumerates the devices; then one child per device launches the
kernel, all devices of all backends at once. Where a backend can name its devices
without loading the runtime (CUDA: the GPUs in ``/proc/driver/nvidia/gpus``), their
children start at once; when they cover every device, no enumeration child runs unless
one of them fails (the device list then comes from their answers, and results carry no
``enumerate-ms``). Each child has its own deadline
(``timeout``, 20 s by default): a hung kernel, a driver that never returns or a
crash in a driver takes down that child only, is reported as ``timeout`` / ``error``,
and the probe goes on with the others.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import importlib.util
import json
import logging
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ..model import ProbeOutcome, ProbeResult
from . import kernel as K
from .base import BACKEND_MODULES, backend

log = logging.getLogger(__name__)
_T0 = time.perf_counter()

DEFAULT_TIMEOUT = 20.0
ALL_BACKENDS: tuple[str, ...] = tuple(BACKEND_MODULES)
_KILL_GRACE = 5.0


@dataclass
class _Child:
    args: list[str]
    out: str
    err: str
    proc: subprocess.Popen[bytes] | None = None
    start: float = 0.0
    seconds: float = 0.0
    timed_out: bool = False
    stuck: bool = False  # did not exit even after SIGKILL
    waited: bool = False
    python: str = sys.executable  # the interpreter it runs in


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    # the child must import this very gpusbom, installed or not
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def _has_package(python: str, package: str) -> bool:
    """Whether the interpreter at ``python`` (a venv's or the system's) has ``package``
    installed, read from its site directories without starting it."""
    prefix = os.path.dirname(os.path.dirname(os.path.abspath(python)))
    patterns = [os.path.join(prefix, "lib", "python3*", "site-packages", package),
                os.path.join(prefix, "lib", "python3*", "dist-packages", package),
                os.path.join(prefix, "lib", "python3", "dist-packages", package)]
    if prefix == "/usr":
        patterns.append(os.path.join("/usr/local/lib", "python3*", "dist-packages", package))
    return any(os.path.isfile(os.path.join(d, "__init__.py"))
               for pat in patterns for d in glob.glob(pat))


def interpreter_for(package: str | None, python: str | None = None) -> str:
    """The interpreter a backend's children run in: ``python`` when given; else this one
    when it has ``package``; else the first of ``$VIRTUAL_ENV``/``$CONDA_PREFIX``'s python,
    ``python3`` and ``python`` on PATH that has it; else this one (whose child then reports
    the package missing, naming ``--python``)."""
    if python:
        return python
    if package is None or importlib.util.find_spec(package) is not None:
        return sys.executable
    candidates = [os.path.join(os.environ[v], "bin", "python") for v in ("VIRTUAL_ENV", "CONDA_PREFIX")
                  if os.environ.get(v)]
    candidates += [p for p in (shutil.which("python3"), shutil.which("python")) if p]
    for cand in candidates:
        if os.access(cand, os.X_OK) and _has_package(cand, package):
            return cand
    return sys.executable


def _start(child: _Child, env: dict[str, str]) -> None:
    with open(child.err, "wb") as err:
        child.start = time.perf_counter()
        child.proc = subprocess.Popen(  # noqa: S603 - our own worker module, argv list, no shell
            [child.python, "-m", "gpusbom.probe.worker", *child.args, child.out],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
            env=env, start_new_session=True, close_fds=True,
        )
    log.debug("probe: +%.3f s started %s", child.start - _T0, " ".join(child.args))


_POLL = 0.002  # seconds between looks at a child's answer file


def _reap_later(child: _Child, deadline: float) -> None:
    """A child whose answer is in may still be tearing its runtime down (freeing device
    memory, closing the driver): reap it in the background, killed at its deadline."""
    proc = child.proc
    assert proc is not None  # noqa: S101 - type narrowing of an invariant

    def reap() -> None:
        try:
            proc.wait(timeout=max(0.0, deadline - time.perf_counter()))
        except subprocess.TimeoutExpired:
            _kill(child)

    threading.Thread(target=reap, name=f"gpusbom-probe-reap-{proc.pid}", daemon=True).start()


def _wait(child: _Child, timeout: float) -> None:
    """Wait until the child has answered (its answer file is in place: written with an
    atomic rename) or exited, or its deadline passed (then it is killed).

    The child's time ends with its answer, not with its exit: runtime teardown after the
    answer is not part of the probe, and the child is reaped in the background."""
    proc = child.proc
    assert proc is not None  # noqa: S101 - type narrowing of an invariant
    if child.waited:  # already waited for (a speculative child): keep its time
        return
    child.waited = True
    deadline = child.start + timeout
    while True:
        if proc.poll() is not None:
            break
        if os.path.exists(child.out):
            child.seconds = time.perf_counter() - child.start
            log.debug("probe: +%.3f s answered %s (%.3f s)", time.perf_counter() - _T0,
                      " ".join(child.args), child.seconds)
            _reap_later(child, deadline)
            return
        now = time.perf_counter()
        if now >= deadline:
            child.timed_out = True
            # in the driver, uninterruptibly, when even SIGKILL does not end it: left behind
            child.stuck = not _kill(child)
            break
        time.sleep(min(_POLL, deadline - now))
    child.seconds = time.perf_counter() - child.start


def _payload(child: _Child) -> dict[str, Any] | None:
    try:
        with open(child.out, encoding="utf-8") as f:
            return json.load(f)  # type: ignore[no-any-return]
    except (OSError, ValueError):
        return None


def _stderr_tail(child: _Child, n: int = 400) -> str:
    try:
        with open(child.err, "rb") as f:
            data = f.read()
    except OSError:
        return ""
    text = data.decode(errors="replace").strip()
    return text[-n:]


def _crash(child: _Child) -> tuple[int | None, str, str]:
    rc = child.proc.returncode if child.proc else None
    if rc is not None and rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"SIG{-rc}"
        what = f"probe process killed by {name}"
    else:
        name = "PROBE_PROCESS_FAILED"
        what = f"probe process exited with status {rc} and no result"
    tail = _stderr_tail(child)
    return rc, name, what + (f": {tail}" if tail else "")


def _timeout_reason(child: _Child, timeout: float, what: str) -> str:
    s = f"{what} did not finish within {timeout:g} s; killed"
    if child.stuck:
        s += " (the process did not exit after SIGKILL: stuck in the driver)"
    return s


def _backend_result(backend_id: str, child: _Child, timeout: float) -> ProbeResult | list[dict[str, Any]]:
    """A backend-level ProbeResult, or the enumerated devices."""
    secs = round(child.seconds, 3)
    if child.timed_out:
        return ProbeResult(backend_id, ProbeOutcome.TIMEOUT.value, seconds=secs,
                           reason=_timeout_reason(child, timeout, "device enumeration"))
    p = _payload(child)
    if p is None:
        code, name, reason = _crash(child)
        return ProbeResult(backend_id, ProbeOutcome.ERROR.value, seconds=secs, error_code=code,
                           error_name=name, reason=reason)
    if p["status"] == "skipped":
        return ProbeResult(backend_id, ProbeOutcome.SKIPPED.value, seconds=secs, reason=p["reason"])
    if p["status"] == "error":
        return ProbeResult(backend_id, ProbeOutcome.ERROR.value, seconds=secs, error_code=p.get("code"),
                           error_name=p.get("name"), reason=p.get("message") or None)
    return list(p["devices"])


def _problems(backend_id: str, child: _Child) -> list[ProbeResult]:
    """Backend-level errors an enumeration reported beside the devices it listed."""
    p = _payload(child) or {}
    return [ProbeResult(backend_id, ProbeOutcome.ERROR.value, seconds=round(child.seconds, 3),
                        error_name=str(x.get("name") or "") or None, reason=str(x.get("message") or ""))
            for x in p.get("problems") or [] if isinstance(x, dict)]


def _device_result(backend_id: str, dev: dict[str, Any], child: _Child, timeout: float,
                   kernel_name: str) -> ProbeResult:
    r = ProbeResult(backend_id, ProbeOutcome.ERROR.value, device=dev["name"], device_id=dev["id"],
                    kernel=kernel_name, facts=dict(dev.get("facts") or {}),
                    seconds=round(child.seconds, 3))
    if child.timed_out:
        r.outcome = ProbeOutcome.TIMEOUT.value
        r.reason = _timeout_reason(child, timeout, "the kernel")
        return r
    p = _payload(child)
    if p is None:
        r.error_code, r.error_name, r.reason = _crash(child)
        return r
    if p["status"] == "skipped":
        r.outcome, r.reason = ProbeOutcome.SKIPPED.value, p["reason"]
    elif p["status"] == "error":
        r.error_code, r.error_name, r.reason = p.get("code"), p.get("name"), p.get("message") or None
    else:
        r.facts.update(p.get("facts") or {})
        r.kernel = p.get("kernel") or kernel_name
        err = float(p["max_abs_error"])
        if err == 0.0:
            r.outcome = ProbeOutcome.PASS.value
            r.max_abs_error = 0.0
        elif math.isfinite(err):
            r.outcome, r.max_abs_error = ProbeOutcome.FAIL.value, err
            r.reason = f"result differs from the CPU reference: max abs error {err:g}"
        else:
            r.outcome = ProbeOutcome.FAIL.value
            r.reason = "result holds NaN or elements the kernel never wrote"
    return r


def _kill(child: _Child) -> bool:
    """SIGKILL the child's own process group (it runs in a new session) and wait a grace
    period; False when it did not exit even then (stuck in the driver: left behind). Also
    stops a speculative child whose answer nobody asked for."""
    proc = child.proc
    if proc is None or proc.poll() is not None:
        return True
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    try:
        proc.wait(timeout=_KILL_GRACE)
    except subprocess.TimeoutExpired:
        return False
    return True


def _public(facts: dict[str, Any] | None) -> dict[str, str]:
    """Device facts without the runner-only ones (``_``-prefixed: e.g. an ICD path)."""
    return {k: v for k, v in (facts or {}).items() if not str(k).startswith("_")}


def _speculative_devices(be: Any, spec: dict[tuple[str, tuple[tuple[str, str], ...]], _Child],
                         timeout: float) -> list[dict[str, Any]] | None:
    """The device list from speculative children that cover every device, once all have
    answered ``ok`` (None otherwise: the runner enumerates after all)."""
    for c in spec.values():
        _wait(c, timeout)
    answers: list[tuple[str, dict[str, str], dict[str, Any]]] = []
    for (child_id, extra), c in spec.items():
        p = None if c.timed_out else _payload(c)
        if p is None or p.get("status") != "ok" or not p.get("device"):
            return None
        answers.append((child_id, dict(extra), p))
    try:
        devs = be.devices_from_runs(answers)
    except Exception:  # noqa: BLE001 - unsure: enumerate
        return None
    if not devs:
        return None
    return [{"id": d.id, "name": d.name, "facts": dict(d.facts)} for d in devs]


def _probe_backend(backend_id: str, timeout: float, tmp: str, env: dict[str, str],
                   kernel_name: str, python: str | None = None) -> list[ProbeResult]:
    tag = backend_id.replace("-", "_")
    be = backend(backend_id)
    new_child = functools.partial(_Child, python=interpreter_for(be.python_package, python))
    # device children the backend can name before enumeration answers start now
    try:
        guesses = [] if be.launch_skip else be.speculate(tmp)
    except Exception:  # noqa: BLE001 - a guess that fails costs nothing but the head start
        guesses = []
    enum = new_child(["enumerate", backend_id], os.path.join(tmp, f"{tag}.enum.json"),
                  os.path.join(tmp, f"{tag}.enum.err"))
    # when the guesses name every device, no enumeration child initialises the runtime
    # beside them (it slows each child's own initialisation): their answers list the devices
    covers_all = bool(guesses) and be.speculation_covers_all
    if not covers_all:
        _start(enum, env)
    spec: dict[tuple[str, tuple[tuple[str, str], ...]], _Child] = {}
    for i, (child_id, extra) in enumerate(guesses):
        key = (child_id, tuple(sorted(extra.items())))
        if key in spec:
            continue
        c = new_child(["run", backend_id, child_id], os.path.join(tmp, f"{tag}.s{i}.json"),
                   os.path.join(tmp, f"{tag}.s{i}.err"))
        _start(c, {**env, **extra} if extra else env)
        spec[key] = c
    children: list[tuple[dict[str, Any], _Child]] = []
    try:
        devs = _speculative_devices(be, spec, timeout) if covers_all else None
        if devs is not None:
            keys = [(be.isolate(d["id"], dict(d.get("facts") or {}), tmp)) for d in devs]
            keyed = [(cid, tuple(sorted(extra.items()))) for cid, extra in keys]
            if sorted(keyed) == sorted(spec) and len(set(keyed)) == len(keyed):
                children = [(d, spec.pop(k)) for d, k in zip(devs, keyed, strict=False)]
            else:
                devs = None
        if devs is None:
            if covers_all:  # a child failed or was unsure: enumerate after all
                _start(enum, env)
            _wait(enum, timeout)
            got = _backend_result(backend_id, enum, timeout)
            if isinstance(got, ProbeResult):
                if be.model:
                    got.facts.setdefault("programming-model", be.model)
                return [got]
            if be.launch_skip:
                return [ProbeResult(backend_id, ProbeOutcome.SKIPPED.value, device=d["name"],
                                    device_id=d["id"], facts=_public(d.get("facts")),
                                    reason=be.launch_skip) for d in got]
            for i, dev in enumerate(got):
                child_id, extra = be.isolate(dev["id"], dict(dev.get("facts") or {}), tmp)
                started = spec.pop((child_id, tuple(sorted(extra.items()))), None)
                if started is None:
                    started = new_child(["run", backend_id, child_id],
                                     os.path.join(tmp, f"{tag}.{i}.json"),
                                     os.path.join(tmp, f"{tag}.{i}.err"))
                    _start(started, {**env, **extra} if extra else env)
                children.append((dev, started))
    finally:
        for c in spec.values():  # guessed, but not a device the runtime listed
            _kill(c)
    for _, c in children:
        _wait(c, timeout)
    results = [_device_result(backend_id, dev, c, timeout, kernel_name) for dev, c in children]
    for r in results:
        r.facts = _public(r.facts)
        if enum.proc is not None:  # absent when the device children listed the devices
            r.facts["enumerate-ms"] = f"{enum.seconds * 1000:.0f}"
    if enum.proc is not None:
        results += _problems(backend_id, enum)
    for r in results:
        if be.model:
            r.facts.setdefault("programming-model", be.model)
    return results


def run_probes(backends: Sequence[str] | None = None, *,
               timeout: float = DEFAULT_TIMEOUT, python: str | None = None) -> list[ProbeResult]:
    """Probe every device of every backend (or of ``backends``); never raises for a device.

    ``python``: the interpreter for the backends that run a Python package (Triton, SYCL
    through dpctl); by default the one that has the package (``interpreter_for``).
    Without the ``probe`` extra (pyopencl, numpy, vulkan): ``MissingExtraError``."""
    from ..extras import require

    require("probe")
    ids = list(dict.fromkeys(backends or ALL_BACKENDS))
    unknown = [b for b in ids if b not in BACKEND_MODULES]
    if unknown:
        raise ValueError(f"unknown probe backend(s): {', '.join(unknown)}; "
                         f"choose from: {', '.join(ALL_BACKENDS)}")
    if timeout <= 0:
        raise ValueError("the probe timeout must be positive")
    kernel_name = K.kernels().name
    env = _child_env()
    with tempfile.TemporaryDirectory(prefix="gpusbom-probe-") as tmp, \
            ThreadPoolExecutor(max_workers=len(ids)) as pool:
        futures = [pool.submit(_probe_backend, b, timeout, tmp, env, kernel_name, python) for b in ids]
        results = [r for f in futures for r in f.result()]
    return results
