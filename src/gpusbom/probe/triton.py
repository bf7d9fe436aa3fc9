"""Triton: the matmul written in Triton's language, compiled by the host's own Triton for
the GPU it probes, launched through the CUDA driver.

This proves the chain an image's Triton kernels depend on: Triton's compiler, the
``ptxas`` it bundles (``triton/backends/nvidia/bin``) targeting this GPU's architecture,
and the driver loading and running the cubin. The children run in the interpreter that
owns the ``triton`` package (``run_probes(python=...)``, ``gpusbom probe --python``).

The kernel is compiled with ``triton.compile`` for an explicit ``GPUTarget`` (the
device's compute capability, read through the driver), so neither PyTorch nor Triton's
own launcher is loaded: the cubin is run by the same driver-API code as the CUDA probe.
Triton appends scratch-buffer pointer parameters to every kernel (one or two, by
release); they are counted from the PTX entry and passed NULL, which Triton itself does
when the kernel's scratch sizes are 0 (checked). Devices, their order and isolation are
the CUDA backend's. AMD GPUs (Triton's HIP backend) are not probed here.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import re
import sys
import tempfile
import threading
import time
from typing import Any

from . import kernel as K
from .base import DeviceInfo, ProbeError, ProbeSkipped, RunOutcome, register
from .cuda import CudaBackend, launch_image

_ENTRY_PARAMS = re.compile(r"\.entry\s+(\w+)\s*\((.*?)\)", re.DOTALL)


def _triton() -> Any:
    try:
        import triton
    except ImportError:
        raise ProbeSkipped(f"Triton is not installed for {sys.executable} "
                           "(choose the interpreter that has it with --python)") from None
    return triton


def _facts(triton: Any) -> dict[str, str]:
    facts = {"programming-model": "Triton", "triton-version": str(getattr(triton, "__version__", "?")),
             "python": sys.executable}
    ptxas = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")
    if os.path.exists(ptxas):
        facts["ptxas"] = ptxas
    return facts


def _load_kernel(source: str, entry: str) -> Any:
    """Import the kernel source as a module file (Triton's JIT reads a kernel's source)."""
    d = tempfile.mkdtemp(prefix="gpusbom-triton-")
    path = os.path.join(d, "gpusbom_probe_triton_kernel.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location("gpusbom_probe_triton_kernel", path)
    if spec is None or spec.loader is None:
        raise ProbeError(None, "TRITON_KERNEL_IMPORT", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, entry)


def compile_kernel(source: str, entry: str, arch: int) -> tuple[bytes, Any, int]:
    """(cubin, Triton's kernel metadata, number of trailing scratch parameters) for
    ``entry(A, B, C, n, TILE=16)`` compiled by this interpreter's Triton for ``sm_<arch>``."""
    triton = _triton()
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn = _load_kernel(source, entry)
    ptr = "*fp32"
    params = inspect.signature(ASTSource.__init__).parameters
    if "constexprs" in params:  # Triton 3.3 and later
        src = ASTSource(fn=fn, signature={"A": ptr, "B": ptr, "C": ptr, "n": "i32", "TILE": "constexpr"},
                        constexprs={"TILE": K.TILE})
    else:  # Triton 3.0 - 3.2
        src = ASTSource(fn=fn, signature={"A": ptr, "B": ptr, "C": ptr, "n": "i32"},
                        constants={"TILE": K.TILE})
    try:
        compiled = triton.compile(src, target=GPUTarget("cuda", arch, 32))
    except Exception as exc:  # noqa: BLE001 - Triton's compiler and ptxas raise their own types
        raise ProbeError(None, f"TRITON_COMPILE_{type(exc).__name__}", str(exc)[:2000]) from None
    md = compiled.metadata
    ptx = compiled.asm.get("ptx", "")
    m = _ENTRY_PARAMS.search(ptx)
    if m is None:
        raise ProbeError(None, "TRITON_NO_ENTRY", f"no .entry in the PTX Triton produced for {entry}")
    n_params = m.group(2).count(".param")
    extra = n_params - 4
    if extra < 0:
        raise ProbeError(None, "TRITON_UNEXPECTED_SIGNATURE", f"{n_params} kernel parameters")
    for size_attr in ("global_scratch_size", "profile_scratch_size"):
        if int(getattr(md, size_attr, 0) or 0) != 0:  # would need a real buffer
            raise ProbeError(None, "TRITON_NEEDS_SCRATCH", f"{size_attr}={getattr(md, size_attr)}")
    return bytes(compiled.asm["cubin"]), md, extra


@register
class TritonBackend(CudaBackend):
    id = "triton"
    display = "Triton (CUDA)"
    model = "Triton"
    runtime_libraries = ("libcuda.so",)
    python_package = "triton"

    def enumerate(self) -> list[DeviceInfo]:
        triton = _triton()
        try:
            devs = super().enumerate()
        except ProbeSkipped as exc:
            raise ProbeSkipped(f"Triton {getattr(triton, '__version__', '')} is installed, but: "
                               f"{exc.reason}") from None
        for d in devs:
            d.facts.update(_facts(triton))
        return devs

    def run(self, device_id: str, kernels: K.KernelSet) -> RunOutcome:
        if kernels.triton is None:
            raise ProbeSkipped(f"kernel set {kernels.name} has no Triton kernel")
        # Triton's import (~0.5 s) overlaps the driver's initialisation
        imported: list[Any] = []
        th = threading.Thread(target=lambda: imported.append(_triton_or_error()), daemon=True)
        th.start()
        name, facts, ctx, dev, drv = self.open_device(device_id)
        try:
            th.join()
            if isinstance(imported[0], BaseException):
                raise imported[0]
            facts.update(_facts(imported[0]))
            drv.check(drv.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
            cc = facts.get("compute-capability", "")
            major, _, minor = cc.partition(".")
            if not (major.isdigit() and minor.isdigit()):
                raise ProbeError(None, "TRITON_NO_ARCH", "the driver gave no compute capability")
            t0 = time.perf_counter()
            cubin, md, extra = compile_kernel(kernels.triton, kernels.entry, int(major) * 10 + int(minor))
            facts["compile-ms"] = f"{(time.perf_counter() - t0) * 1000:.1f}"
            facts["triton-target"] = f"sm_{major}{minor}"
            warps = int(md.num_warps)
            outcome = launch_image(drv, cubin, kernels.entry, facts, what="Triton cubin",
                                   block=(warps * 32, 1, 1), shared_bytes=int(md.shared), null_params=extra)
            outcome.device = name
            return outcome
        finally:
            drv.cuDevicePrimaryCtxRelease(dev)


def _triton_or_error() -> Any:
    try:
        return _triton()
    except ProbeSkipped as exc:
        return exc
