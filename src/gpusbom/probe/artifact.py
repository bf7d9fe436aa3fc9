"""``gpusbom probe --artifact PATH``: try to load a model artifact on the real GPU, in a child.

What is loaded (in ``python -m gpusbom.probe.artifact PATH OUT.json``, a child process with a
deadline, as the other probes):

* a cubin (a Triton cache entry's ``<kernel>.cubin``, or a directory holding one):
  ``cuModuleLoadDataEx`` on device 0 in its primary context; ``CUDA_ERROR_NO_BINARY_FOR_GPU``
  (209) when the SASS is for another GPU;
* a TensorRT engine (``.engine``, ``.plan``, ``.trt``): ``tensorrt.Runtime`` of the
  ``tensorrt`` package in the child's interpreter, ``deserialize_cuda_engine``; skipped when the
  package is not installed. An engine may carry plugin libraries that TensorRT loads: probe
  only engines you trust.

The outcome (``pass``, ``error`` with the driver's code and name, ``skipped``, ``timeout``)
is the evidence: path, SHA-256 of the bytes loaded, device, what was called.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["probe_artifact", "resolve"]

PLAN_EXT = (".engine", ".plan", ".trt")


def resolve(path: str) -> tuple[str, str]:
    """(kind, file) of what ``path`` names: ``cubin`` or ``tensorrt``; a directory names the
    first ``*.cubin`` in it. Raises ``ValueError``."""
    p = Path(path)
    if p.is_dir():
        cubins = sorted(p.rglob("*.cubin"))
        if not cubins:
            raise ValueError(f"{path}: no .cubin in this directory")
        p = cubins[0]
    if not p.is_file():
        raise ValueError(f"{path}: no such file")
    if p.suffix == ".cubin":
        return "cubin", str(p)
    if p.suffix in PLAN_EXT:
        return "tensorrt", str(p)
    raise ValueError(f"{path}: not a cubin or a TensorRT engine (.cubin, .engine, .plan, .trt)")


def probe_artifact(path: str, *, timeout: float = 60.0, python: str | None = None) -> dict[str, Any]:
    """Load ``path`` in a child process; the evidence record (never raises for the load)."""
    kind, file = resolve(path)
    with open(file, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    rec: dict[str, Any] = {"artifact": path, "file": file, "kind": kind, "sha256": digest}
    with tempfile.TemporaryDirectory(prefix="gpusbom-artifact-") as tmp:
        out = os.path.join(tmp, "out.json")
        t0 = time.perf_counter()
        try:
            subprocess.run([python or sys.executable, "-m", "gpusbom.probe.artifact", kind, file,  # noqa: S603 - our own module, argv list
                            out], timeout=timeout, check=False, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            rec.update(outcome="timeout", message=f"no answer in {timeout:g} s")
            return rec
        rec["wall-ms"] = f"{(time.perf_counter() - t0) * 1000:.0f}"
        try:
            with open(out, encoding="utf-8") as f:
                rec.update(json.load(f))
        except (OSError, ValueError):
            rec.update(outcome="error", message="the child died without an answer")
    return rec


def _load_cubin(file: str) -> dict[str, Any]:
    import ctypes

    from .cuda import CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CudaBackend

    name, facts, _ctx, dev, drv = CudaBackend().open_device("0")
    try:
        drv.check(drv.cuCtxSetCurrent(_ctx), "cuCtxSetCurrent")
        image = Path(file).read_bytes()
        log = ctypes.create_string_buffer(4096)
        opts = (ctypes.c_int * 2)(CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
        vals = (ctypes.c_void_p * 2)(ctypes.cast(log, ctypes.c_void_p), ctypes.c_void_p(len(log)))
        module = ctypes.c_void_p()
        rc = drv.cuModuleLoadDataEx(ctypes.byref(module), image, 2, opts, vals)
        base = {"device": name, "facts": facts, "call": "cuModuleLoadDataEx"}
        if rc != 0:
            return {"outcome": "error", "code": rc, "name": drv.error_name(rc),
                    "message": log.value.decode(errors="replace").strip(), **base}
        drv.cuModuleUnload(module)
        return {"outcome": "pass", **base}
    finally:
        drv.cuDevicePrimaryCtxRelease(dev)


def _load_plan(file: str) -> dict[str, Any]:
    from .base import ProbeSkipped

    try:
        import tensorrt as trt  # type: ignore[import-not-found]
    except ImportError:
        raise ProbeSkipped("the tensorrt package is not installed in this interpreter") from None
    logger = trt.Logger(trt.Logger.ERROR)
    engine = trt.Runtime(logger).deserialize_cuda_engine(Path(file).read_bytes())
    ver = getattr(trt, "__version__", "?")
    if engine is None:
        return {"outcome": "error", "call": f"tensorrt {ver} deserialize_cuda_engine",
                "message": "deserialize_cuda_engine returned None (engine built for another "
                           "TensorRT version or GPU)"}
    return {"outcome": "pass", "call": f"tensorrt {ver} deserialize_cuda_engine"}


def main(argv: list[str]) -> int:
    from .base import ProbeError, ProbeSkipped

    if len(argv) != 3 or argv[0] not in ("cubin", "tensorrt"):
        print("usage: python -m gpusbom.probe.artifact cubin|tensorrt FILE OUT.json",
              file=sys.stderr)
        return 2
    kind, file, out = argv
    try:
        payload = _load_cubin(file) if kind == "cubin" else _load_plan(file)
    except ProbeSkipped as exc:
        payload = {"outcome": "skipped", "message": exc.reason}
    except ProbeError as exc:
        payload = {"outcome": "error", "code": exc.code, "name": exc.name, "message": exc.message}
    except Exception as exc:  # noqa: BLE001 - anything else is an error of this probe
        payload = {"outcome": "error", "name": type(exc).__name__, "message": str(exc)[:2000]}
    with open(out + ".tmp", "w", encoding="utf-8") as f:
        json.dump(payload, f)
    os.replace(out + ".tmp", out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
