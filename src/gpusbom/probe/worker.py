"""The child process that touches a GPU runtime: ``python -m gpusbom.probe.worker``.

    python -m gpusbom.probe.worker enumerate BACKEND OUT.json
    python -m gpusbom.probe.worker run BACKEND DEVICE_ID OUT.json

It writes one JSON object to OUT.json (never to stdout, which drivers may write to):
``{"status": "ok", ...}``, ``{"status": "skipped", "reason"}`` or
``{"status": "error", "code", "name", "message"}``. A crash or a hang leaves no file;
the parent (``runner``) turns that into ``error`` / ``timeout``.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any

from .base import ProbeError, ProbeSkipped, backend, mapped_libraries


def _enumerate(backend_id: str) -> dict[str, Any]:
    be = backend(backend_id)
    devs = be.enumerate()
    payload: dict[str, Any] = {
        "status": "ok", "devices": [{"id": d.id, "name": d.name, "facts": d.facts} for d in devs]}
    if be.problems:
        payload["problems"] = [{"name": name, "message": msg} for name, msg in be.problems]
    return payload


def _run(backend_id: str, device_id: str) -> dict[str, Any]:
    from . import kernel as K

    ks = K.kernels()
    t0 = time.perf_counter()
    # the CPU reference is computed while the runtime initialises (ctypes and the
    # runtimes release the GIL while they wait on the driver)
    ref: list[list[int]] = []
    th = threading.Thread(target=lambda: ref.append(K.reference()), daemon=True)
    th.start()
    be = backend(backend_id)
    outcome = be.run(device_id, ks)
    th.join()
    err = K.max_abs_error(outcome.result, ref[0] if ref else None)
    facts = dict(outcome.facts)
    if be.model:
        facts.setdefault("programming-model", be.model)
    libs = mapped_libraries(be.runtime_libraries)
    if libs:
        facts["runtime-library"] = ",".join(libs)
    facts["run-ms"] = f"{(time.perf_counter() - t0) * 1000:.1f}"
    payload: dict[str, Any] = {"status": "ok", "kernel": ks.name, "max_abs_error": err,
                               "facts": facts}
    if outcome.device is not None:
        payload["device"] = outcome.device
    return payload


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[0] not in ("enumerate", "run"):
        print(__doc__, file=sys.stderr)
        return 2
    out_path = argv[-1]
    try:
        payload = _enumerate(argv[1]) if argv[0] == "enumerate" else _run(argv[1], argv[2])
    except ProbeSkipped as exc:
        payload = {"status": "skipped", "reason": exc.reason}
    except ProbeError as exc:
        payload = {"status": "error", "code": exc.code, "name": exc.name, "message": exc.message}
    except Exception as exc:  # noqa: BLE001 - anything else is an error of this probe
        payload = {"status": "error", "code": None, "name": type(exc).__name__,
                   "message": str(exc)[:2000]}
    tmp = out_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(payload, f, allow_nan=True)
    os.replace(tmp, out_path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
