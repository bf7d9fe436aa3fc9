"""Per-binary verdicts: each file's device code judged on one GPU.

The image side is :attr:`Component.device_code` (:mod:`gpusbom.devicecode`): one record per
file with its own targets. A component read from an older scan or an SBOM without per-file
records is judged on its properties (the union of its files), as one pseudo-file named after
its first path, and the reason says so.

A judge per vendor (:data:`JUDGES`: ``nvidia`` -> :func:`judge_cuda`, ``amd`` ->
:func:`judge_hip`) turns one file into a :class:`LibraryVerdict`; the image's verdict is the
worst of the files for the GPU's vendor (those the workload would load there), together with
the runtime checks (:mod:`.evaluate`). Another vendor's judge is added to :data:`JUDGES`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..devicecode import CODE_KEYS, DeviceCode
from ..model import Component, own_product_version
from .arch import ComputeCapability, CudaCode, code_gfx_runs_on, ptx_jits_for, sass_runs_on
from .reference_data import driver_can_jit, driver_ptx_isa, ptx_isa_cuda, vtuple
from .states import FAIL, JIT, RUNS
from .targets import Gpu
from .verdicts import LibraryVerdict

__all__ = ["JUDGES", "code_files", "cuda_coverage", "judge_cuda", "judge_hip", "label"]

NO_BINARY = ("CUDA_ERROR_NO_BINARY_FOR_GPU / cudaErrorNoKernelImageForDevice (209, 'no kernel "
             "image is available for execution on the device')")


def _csv(v: str | None) -> list[str]:
    return [x.strip() for x in (v or "").split(",") if x.strip()]


def display(c: Component) -> str:
    ver = own_product_version(c) or c.version
    return f"{c.name} {ver}" if ver else c.name


def _pseudo(c: Component) -> DeviceCode | None:
    """A component without per-file records but with GPU-code properties (an older scan, an
    SBOM without nested files): its union as one record."""
    targets = {k: v for k, v in c.properties.items() if k.split(":", 1)[0] in ("cuda", "hip")
               and ":" in k and v}
    if not any(k in CODE_KEYS for k in targets):
        return None
    own = [e.path for e in c.evidence if e.path and e.collector == "gpu-binaries"]
    paths = own or [e.path for e in c.evidence if e.path]
    return DeviceCode(path=paths[0] if paths else "", targets=targets, kind="union",
                      detail="union of the component's files: per-file targets not recorded")


def code_files(components: list[Component], vendor: str) -> list[tuple[Component, DeviceCode]]:
    """Every file with device code for ``vendor``, with the component owning it."""
    out: list[tuple[Component, DeviceCode]] = []
    for c in components:
        codes = list(c.device_code)
        if not codes:
            p = _pseudo(c)
            codes = [p] if p is not None else []
        out.extend((c, d) for d in codes if vendor in d.vendors)
    return out


def label(c: Component, d: DeviceCode) -> str:
    """How a reason names a file: its path, after the package owning it when there is one."""
    if d.kind == "union":
        return f"{display(c)} (union of its files{', ' + d.path if d.path else ''})"
    own_file = c.ecosystem in (None, "generic") and len(c.device_code) == 1
    if own_file and d.path:
        return d.path
    # a package's own version (twolibs 1.0), not that of a product it provides
    owner = f"{c.name} {c.version}" if c.version else c.name
    return f"{owner} {d.path}".strip()


def _verdict(c: Component, d: DeviceCode, kind: str, verdict: str, text: str) -> LibraryVerdict:
    name = label(c, d)
    ev = [d.path] if d.path else [e.path for e in c.evidence if e.path][:3]
    return LibraryVerdict(name, kind, verdict, f"{name}: {text}", ev, c.bom_ref, file=d.path,
                          targets=dict(sorted(d.targets.items())))


def judge_cuda(c: Component, d: DeviceCode, gpu: Gpu, ctx: dict[str, Any]) -> LibraryVerdict:
    """One file's SASS/PTX on a compute capability; ``ctx['jit_driver']`` the driver that JITs."""
    assert gpu.cc is not None  # noqa: S101 - callers judge only GPUs of a known cc
    cc = gpu.cc
    jit_driver: str | None = ctx.get("jit_driver")
    sass = [x for x in (CudaCode.parse(s) for s in d.values("cuda:sass")) if x]
    ptx = [x for x in (CudaCode.parse(s) for s in d.values("cuda:ptx")) if x]
    isas = d.values("cuda:ptx-isa")
    k = "cuda-code"
    hit = [s for s in sass if sass_runs_on(s, cc)]
    if hit:
        best = max(hit, key=lambda s: (s.cc, s.variant != ""))
        return _verdict(c, d, k, RUNS, f"SASS {best.name} runs on {cc.sm}")
    no_sass = (f"no SASS for {cc.sm}" + (f" (has {', '.join(s.name for s in sass)})"
                                           if sass else ""))
    usable = [p for p in ptx if ptx_jits_for(p, cc)]
    if not usable:
        why = (f"no PTX at or below {cc.sm}" + (f" (has {', '.join(p.name for p in ptx)})"
                                                 if ptx else "")) if ptx else "no PTX"
        return _verdict(c, d, k, FAIL, f"{no_sass}; {why}: {NO_BINARY}")
    best_p = max(usable, key=lambda p: p.cc)
    if not isas:
        return _verdict(c, d, k, JIT, f"{no_sass}; PTX {best_p.name} is JIT-compiled at first "
                                      "launch (PTX ISA version not recorded)")
    newest, oldest = max(isas, key=vtuple), min(isas, key=vtuple)
    if jit_driver is None:
        return _verdict(c, d, k, JIT,
                        f"{no_sass}; PTX {best_p.name} (ISA {newest}) is JIT-compiled at first "
                        f"launch; the driver must support CUDA "
                        f"{ptx_isa_cuda(newest) or '> ' + newest} (driver not given)")
    can_new, can_old = driver_can_jit(jit_driver, newest), driver_can_jit(jit_driver, oldest)
    max_isa = driver_ptx_isa(jit_driver)
    if can_old is False:
        need = ptx_isa_cuda(oldest)
        return _verdict(c, d, k, FAIL,
                        f"{no_sass}; PTX {best_p.name} is ISA {oldest}, newer than driver "
                        f"{jit_driver} can JIT (up to ISA {max_isa}; ISA {oldest} needs a CUDA "
                        f"{need or 'newer'} driver): CUDA_ERROR_UNSUPPORTED_PTX_VERSION")
    text = (f"{no_sass}; PTX {best_p.name} (ISA {newest}) is JIT-compiled by driver "
            f"{jit_driver} (up to ISA {max_isa}) at first launch")
    if can_new is False or can_old is None:
        text += (f"; PTX ISA {newest} is newer than the driver JITs: if that is the PTX "
                 "loaded, CUDA_ERROR_UNSUPPORTED_PTX_VERSION")
    return _verdict(c, d, k, JIT, text)


def cuda_coverage(c: Component, cc: ComputeCapability, jit_driver: str | None) -> LibraryVerdict:
    """A component's union judged as one binary (kept for callers of the union rule)."""
    d = _pseudo(c) or DeviceCode(path="", kind="union")
    return judge_cuda(c, d, Gpu(label=cc.sm, vendor="nvidia", cc=cc), {"jit_driver": jit_driver})


def judge_hip(c: Component, d: DeviceCode, gpu: Gpu, ctx: dict[str, Any]) -> LibraryVerdict:
    """One file's code objects on a gfx target."""
    assert gpu.gfx is not None  # noqa: S101 - callers judge only GPUs of a known gfx
    results = [(t, *code_gfx_runs_on(t, gpu.gfx)) for t in d.values("hip:gfx")]
    runs = [r for r in results if r[1] == "runs"]
    jit = [r for r in results if r[1] == "jit"]
    if runs:
        return _verdict(c, d, "hip-code", RUNS, runs[0][2])
    if jit:
        return _verdict(c, d, "hip-code", JIT, jit[0][2])
    have = ", ".join(r[0] for r in results)
    close = [r[2] for r in results if r[0].split(":")[0] == gpu.gfx.processor]
    why = close[0] if close else f"no code object for {gpu.gfx.processor} (has {have})"
    return _verdict(c, d, "hip-code", FAIL,
                    f"{why}: hipErrorNoBinaryForGpu ('no kernel image is available')")


Judge = Callable[[Component, DeviceCode, Gpu, dict[str, Any]], LibraryVerdict]

#: vendor -> the judge of one file's device code on a GPU of that vendor
JUDGES: dict[str, Judge] = {"nvidia": judge_cuda, "amd": judge_hip}
