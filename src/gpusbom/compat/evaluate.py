"""Will this image run on that GPU with that driver? Verdicts from an image scan and a target.

Reads only the internal model (``ScanResult``):

* image side: GPU code per component (``cuda:sass``, ``cuda:ptx``, ``cuda:ptx-isa``,
  ``hip:gfx`` from the gpu-binaries collector, fused into the owning package), CUDA runtimes
  (``cudart`` products), what frameworks were built for (``built-for``: ``cuda 13.0``,
  ``rocm 6.2``), forward-compat libraries (``cuda-compat``), ROCm releases, the image env
  (``NVIDIA_REQUIRE_*``, ``CUDA_VERSION``, ``NVIDIA_DISABLE_REQUIRE``);
* target side: a :class:`GpuTarget`: one GPU kind (model, compute capability or gfx, data
  center or not, NVML brand) and the host's drivers; from a host scan
  (:func:`platforms_from_host`) or from target strings (:func:`platform_from_string`).

Verdicts: ``runs``; ``runs-with-jit`` (some code needs the driver to compile PTX or SPIR-V at
first launch: slow start, and the JIT can still fail); ``will-fail``. The verdict of a target is
the worst of its checks; ``reasons`` is the chain, ``evidence`` the paths behind it.

One module a little over 500 lines: the CUDA and ROCm rules of one image on one target,
sharing the ``Verdict`` record and its reasons; the targets are in ``targets.py``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from ..model import Component, ScanResult, own_product_version
from . import require as req
from .arch import (
    ComputeCapability,
    CudaCode,
    code_gfx_runs_on,
    ptx_jits_for,
    sass_runs_on,
)
from .reference_data import (
    driver_can_jit,
    driver_cuda,
    driver_ptx_isa,
    major_minor,
    min_driver,
    minor_floor,
    ptx_isa_cuda,
    rocm_releases,
    rocm_window,
    vtuple,
)
from .targets import Gpu, GpuTarget, _paths, platform_from_string, platforms_from_host

RUNS = "runs"
JIT = "runs-with-jit"
FAIL = "will-fail"
_RANK = {RUNS: 0, JIT: 1, FAIL: 2}
FRAMEWORK_STACKS = frozenset(
    {"pytorch", "jax", "cupy", "tensorflow", "onnxruntime", "vllm", "triton"}
)


def worst(verdicts: Iterable[str]) -> str:
    out = RUNS
    for v in verdicts:
        if _RANK[v] > _RANK[out]:
            out = v
    return out


# ------------------------------------------------------------------------------ verdicts


@dataclass
class LibraryVerdict:
    """The verdict of one component (library, wheel, framework, runtime) on one target."""

    name: str
    kind: str  # cuda-code | hip-code | cuda-runtime | rocm-runtime
    verdict: str
    reason: str
    evidence: list[str] = field(default_factory=list)
    component: str = ""  # bom-ref


@dataclass
class Verdict:
    image: str
    target: str
    verdict: str
    reasons: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    libraries: list[LibraryVerdict] = field(default_factory=list)
    gpu: dict[str, Any] = field(default_factory=dict)
    driver: str | None = None
    host: str | None = None

    def summary(self) -> dict[str, int]:
        out = {RUNS: 0, JIT: 0, FAIL: 0}
        for lib in self.libraries:
            out[lib.verdict] += 1
        return out

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["summary"] = self.summary()
        return d




def _code_paths(c: Component) -> list[str]:
    own = [e.path for e in c.evidence if e.path and e.collector == "gpu-binaries"]
    return list(dict.fromkeys(own)) or _paths(c)[:3]


def _csv(v: str | None) -> list[str]:
    return [x.strip() for x in (v or "").split(",") if x.strip()]


def _display(c: Component) -> str:
    ver = own_product_version(c) or c.version
    return f"{c.name} {ver}" if ver else c.name


def _is_framework(c: Component) -> bool:
    return c.stack in FRAMEWORK_STACKS


# --- CUDA kernel coverage


def cuda_coverage(c: Component, cc: ComputeCapability, jit_driver: str | None) -> LibraryVerdict:
    sass = [x for x in (CudaCode.parse(s) for s in _csv(c.properties.get("cuda:sass"))) if x]
    ptx = [x for x in (CudaCode.parse(s) for s in _csv(c.properties.get("cuda:ptx"))) if x]
    isas = _csv(c.properties.get("cuda:ptx-isa"))
    name = _display(c)
    kind = "cuda-code"
    ev = _code_paths(c)
    hit = [s for s in sass if sass_runs_on(s, cc)]
    if hit:
        best = max(hit, key=lambda s: (s.cc, s.variant != ""))
        return LibraryVerdict(name, kind, RUNS, f"{name}: SASS {best.name} runs on {cc.sm}",
                              ev, c.bom_ref)
    no_sass = (f"no SASS for {cc.sm}" + (f" (has {', '.join(s.name for s in sass)})"
                                           if sass else ""))
    usable = [p for p in ptx if ptx_jits_for(p, cc)]
    if not usable:
        why = (f"no PTX at or below {cc.sm}" + (f" (has {', '.join(p.name for p in ptx)})"
                                                 if ptx else "")) if ptx else "no PTX"
        return LibraryVerdict(
            name, kind, FAIL,
            f"{name}: {no_sass}; {why}: CUDA_ERROR_NO_BINARY_FOR_GPU "
            "('no kernel image is available for execution on the device')", ev, c.bom_ref)
    best_p = max(usable, key=lambda p: p.cc)
    if not isas:
        return LibraryVerdict(name, kind, JIT,
                              f"{name}: {no_sass}; PTX {best_p.name} is JIT-compiled at first "
                              "launch (PTX ISA version not recorded)", ev, c.bom_ref)
    newest = max(isas, key=vtuple)
    oldest = min(isas, key=vtuple)
    if jit_driver is None:
        return LibraryVerdict(
            name, kind, JIT,
            f"{name}: {no_sass}; PTX {best_p.name} (ISA {newest}) is JIT-compiled at first launch;"
            f" the driver must support CUDA {ptx_isa_cuda(newest) or '> ' + newest} (driver not "
            "given)", ev, c.bom_ref)
    can_new = driver_can_jit(jit_driver, newest)
    can_old = driver_can_jit(jit_driver, oldest)
    max_isa = driver_ptx_isa(jit_driver)
    if can_old is False:
        need = ptx_isa_cuda(oldest)
        return LibraryVerdict(
            name, kind, FAIL,
            f"{name}: {no_sass}; PTX {best_p.name} is ISA {oldest}, newer than driver "
            f"{jit_driver} can JIT (up to ISA {max_isa}; ISA {oldest} needs a CUDA "
            f"{need or 'newer'} driver): CUDA_ERROR_UNSUPPORTED_PTX_VERSION", ev, c.bom_ref)
    text = (f"{name}: {no_sass}; PTX {best_p.name} (ISA {newest}) is JIT-compiled by driver "
            f"{jit_driver} (up to ISA {max_isa}) at first launch")
    if can_new is False or can_old is None:
        text += (f"; PTX ISA {newest} is newer than the driver JITs: if that is the PTX "
                 "loaded, CUDA_ERROR_UNSUPPORTED_PTX_VERSION")
    return LibraryVerdict(name, kind, JIT, text, ev, c.bom_ref)


def _code_components(image: ScanResult) -> tuple[list[Component], list[Component]]:
    cuda, hip = [], []
    for c in image.components:
        p = c.properties
        if p.get("cuda:sass") or p.get("cuda:ptx"):
            cuda.append(c)
        if p.get("hip:gfx"):
            hip.append(c)
    return cuda, hip


# --- CUDA runtimes


@dataclass(frozen=True)
class _Runtime:
    label: str
    need: str  # "12.4" or "12" (major only)
    component: Component


def _cuda_runtimes(image: ScanResult) -> list[_Runtime]:
    out: list[_Runtime] = []
    seen: set[tuple[str, str]] = set()
    for c in image.components:
        # a product without its own version has the component's when it is the component's
        # own product (the first), else none
        versions = [v for i, p in enumerate(c.products) if p.name == "cudart"
                    for v in [p.version or (c.version if i == 0 else None)] if v]
        for v in versions:
            mm = major_minor(v)
            loc = c.properties.get("location", "")
            if mm and "." in mm and (mm, loc) not in seen:
                seen.add((mm, loc))
                out.append(_Runtime(f"cudart {v} ({c.name})" if c.name != "cudart"
                                    else f"cudart {v}", mm, c))
        bf = c.properties.get("built-for", "")
        if bf.startswith("cuda") and _is_framework(c):
            need = bf[4:].strip()
            if need:
                out.append(_Runtime(f"{_display(c)} (built for CUDA {need})", need, c))
    if not out:
        for c in image.components:
            if c.product_name == "cuda-toolkit" and c.properties.get("release"):
                rel = c.properties["release"]
                if major_minor(rel):
                    out.append(_Runtime(f"CUDA toolkit {rel}", major_minor(rel) or rel, c))
    return out


def _runtime_check(rt: _Runtime, driver: str, via: str) -> LibraryVerdict:
    ev = _paths(rt.component)[:3]
    have = driver_cuda(driver)
    need = rt.need
    major = need.split(".")[0]
    if have is None:
        return LibraryVerdict(rt.label, "cuda-runtime", FAIL,
                              f"{rt.label}: driver {driver}{via} predates every CUDA release in "
                              "the table (CUDA 11.0 needs 450.51.05)", ev, rt.component.bom_ref)
    hmaj = have.split(".")[0]
    if "." not in need:  # major only: any minor of that major (minor-version compatibility)
        if int(hmaj) >= int(major):  # a CUDA M.0 driver runs every M.x (minor compat)
            return LibraryVerdict(rt.label, "cuda-runtime", RUNS,
                                  f"{rt.label}: driver {driver}{via} supports CUDA {have}",
                                  ev, rt.component.bom_ref)
    elif vtuple(have) >= vtuple(need):
        return LibraryVerdict(rt.label, "cuda-runtime", RUNS,
                              f"{rt.label}: driver {driver}{via} supports CUDA {have} >= {need}",
                              ev, rt.component.bom_ref)
    floor = minor_floor(major)
    if hmaj == major and floor and vtuple(driver) >= vtuple(floor):
        return LibraryVerdict(
            rt.label, "cuda-runtime", RUNS,
            f"{rt.label}: driver {driver}{via} supports CUDA {have} < {need}; runs through CUDA "
            f"minor-version compatibility (CUDA {major}.x needs driver >= {floor}): APIs that need "
            f"a newer driver return cudaErrorCallRequiresNewerDriver, and PTX built by CUDA "
            f"{need} does not JIT on this driver", ev, rt.component.bom_ref)
    want = min_driver(need) if "." in need else minor_floor(major)
    return LibraryVerdict(
        rt.label, "cuda-runtime", FAIL,
        f"{rt.label}: needs a driver for CUDA {need} (>= {want or 'unknown'}); driver {driver}"
        f"{via} supports CUDA {have}: 'CUDA driver version is insufficient for CUDA runtime "
        "version'", ev, rt.component.bom_ref)


def _compat(image: ScanResult) -> list[Component]:
    out = []
    for c in image.components:
        if any(p.name == "cuda-compat" for p in c.products):
            out.append(c)
    return out


def _compat_version(c: Component) -> str | None:
    for p in c.products:
        if p.name == "cuda-compat" and p.version:
            return p.version
    return own_product_version(c) or c.version


# --- the whole image on one platform


def _nvidia(image: ScanResult, plat: GpuTarget, cuda_code: list[Component]) -> Verdict:
    gpu = plat.gpu
    v = Verdict(image=_image_ref(image), target=plat.name, verdict=RUNS, driver=plat.driver,
                host=plat.host, gpu=_gpu_dict(gpu), evidence=list(plat.evidence))
    v.reasons.extend(plat.notes)
    env = image.target.env or {}
    driver = plat.driver
    # 1. NVIDIA_REQUIRE_* at container start
    reqs, note = req.requirements(env)
    if note:
        v.reasons.append(note)
    facts = req.Facts(cuda=driver_cuda(driver) if driver else None, driver=driver,
                      arch=str(gpu.cc) if gpu.cc else None, brand=gpu.brand)
    fails = []
    for r in reqs:
        out = req.evaluate(r, facts)
        if out.ok:
            v.reasons.append(f"NVIDIA_REQUIRE: {out.message()} (cuda={facts.cuda or '?'}, "
                             f"driver={driver or '?'}, arch={facts.arch or '?'}, "
                             f"brand={gpu.brand or '?'})")
        else:
            fails.append(out)
            v.reasons.append(f"NVIDIA_REQUIRE: nvidia-container-cli refuses to start the "
                             f"container: {out.message()} (cuda={facts.cuda or '?'}, "
                             f"driver={driver or '?'}, brand={gpu.brand or '?'})")
    if fails:
        v.verdict = FAIL
    # 2. forward compatibility: compat libraries newer than the host driver replace libcuda
    jit_driver = driver
    via = ""
    compat = _compat(image)
    if driver and compat:
        newer = [(c, _compat_version(c)) for c in compat]
        newer = [(c, cv) for c, cv in newer
                 if cv and vtuple(cv)[:1] > vtuple(driver)[:1]]
        if not newer:
            vers = ", ".join(filter(None, (_compat_version(c) for c in compat)))
            v.reasons.append(f"cuda-compat {vers} is not newer than driver {driver}: "
                             "not used (the container toolkit only mounts compat libraries of "
                             "a higher driver branch)")
        else:
            c, cv = max(newer, key=lambda t: vtuple(t[1] or ""))
            assert cv is not None  # noqa: S101 - type narrowing of an invariant
            v.evidence.extend(_paths(c)[:2])
            branches = _csv(c.properties.get("driver-branches"))
            if not branches:
                from ..collectors._gpu import parse_require_cuda

                branches = list(parse_require_cuda(env.get("NVIDIA_REQUIRE_CUDA", "")).branches)
            branch = str(vtuple(driver)[0])
            if gpu.data_center is False:
                v.verdict = FAIL
                v.reasons.append(
                    f"cuda-compat {cv} is newer than driver {driver} and replaces libcuda in the "
                    f"container, but {gpu.label} is not a data-center GPU: CUDA fails with "
                    "cudaErrorCompatNotSupportedOnDevice (804, 'forward compatibility was "
                    "attempted on non supported HW')")
            elif branches and branch not in branches:
                v.verdict = FAIL
                v.reasons.append(
                    f"cuda-compat {cv} supports driver branches {', '.join(branches)} "
                    f"(NVIDIA_REQUIRE_CUDA); the host driver {driver} is branch {branch}: CUDA "
                    "fails with cudaErrorSystemDriverMismatch (803)")
            else:
                cond = ("" if gpu.data_center else
                        f" (only if {gpu.label} is a data-center GPU: else error 804)")
                if not branches:
                    cond += " (NVIDIA_REQUIRE_CUDA lists no supported branch: not verified)"
                v.reasons.append(
                    f"forward compatibility: cuda-compat {cv} (CUDA {driver_cuda(cv)}) replaces "
                    f"libcuda of driver {driver} on {gpu.label}{cond}")
                jit_driver = cv
                via = f" (cuda-compat {cv} over {driver})"
    # 3. CUDA runtimes vs the (effective) driver
    for rt in _cuda_runtimes(image):
        if not driver:
            v.reasons.append(f"{rt.label}: driver not given: not checked")
            continue
        lv = _runtime_check(rt, jit_driver or driver, via)
        v.libraries.append(lv)
    # 4. kernel coverage
    if gpu.cc is None:
        if cuda_code:
            v.reasons.append(f"compute capability of {gpu.label} unknown: kernels not checked")
    else:
        for c in cuda_code:
            v.libraries.append(cuda_coverage(c, gpu.cc, jit_driver))
    _finish(v, image)
    return v


def _amd(image: ScanResult, plat: GpuTarget, hip_code: list[Component]) -> Verdict:
    gpu = plat.gpu
    v = Verdict(image=_image_ref(image), target=plat.name, verdict=RUNS, host=plat.host,
                gpu=_gpu_dict(gpu), evidence=list(plat.evidence))
    v.reasons.extend(plat.notes)
    if gpu.gfx is None:
        v.reasons.append(f"gfx target of {gpu.label} unknown: code objects not checked")
    else:
        for c in hip_code:
            results = [(t, *code_gfx_runs_on(t, gpu.gfx)) for t in _csv(c.properties.get("hip:gfx"))]
            name = _display(c)
            ev = _code_paths(c)
            runs = [r for r in results if r[1] == "runs"]
            jit = [r for r in results if r[1] == "jit"]
            if runs:
                v.libraries.append(LibraryVerdict(name, "hip-code", RUNS, f"{name}: {runs[0][2]}",
                                                  ev, c.bom_ref))
            elif jit:
                v.libraries.append(LibraryVerdict(name, "hip-code", JIT, f"{name}: {jit[0][2]}",
                                                  ev, c.bom_ref))
            else:
                have = ", ".join(r[0] for r in results)
                close = [r[2] for r in results if r[0].split(":")[0] == gpu.gfx.processor]
                why = close[0] if close else f"no code object for {gpu.gfx.processor} (has {have})"
                v.libraries.append(LibraryVerdict(
                    name, "hip-code", FAIL,
                    f"{name}: {why}: hipErrorNoBinaryForGpu ('no kernel image is available')",
                    ev, c.bom_ref))
    # ROCm user space vs the amdgpu kernel driver
    user = _rocm_user(image)
    rels = rocm_releases()
    for label, rel, _c in user:
        if plat.rocm_kmd is None:
            v.reasons.append(f"{label}: ROCm release of the amdgpu kernel driver unknown: the "
                             f"±{rocm_window()} release window is not checked")
            continue
        if rel in rels and plat.rocm_kmd in rels:
            gap = abs(rels.index(rel) - rels.index(plat.rocm_kmd))
            ok = gap <= rocm_window()
            v.reasons.append(
                f"{label} with the amdgpu driver of ROCm {plat.rocm_kmd}: {gap} release(s) apart, "
                + ("within" if ok else "OUTSIDE (unsupported)")
                + f" AMD's documented ±{rocm_window()} window")
        else:
            v.reasons.append(f"{label}: ROCm {rel} or {plat.rocm_kmd} not in the release table")
    _finish(v, image)
    return v


def _rocm_user(image: ScanResult) -> list[tuple[str, str, Component]]:
    out = []
    for c in image.components:
        p = c.properties
        if c.stack == "rocm" and p.get("release"):
            mm = major_minor(p["release"])
            if mm:
                out.append((f"ROCm {p['release']}", mm, c))
        bf = p.get("built-for", "")
        if bf.startswith("rocm ") and _is_framework(c):
            mm = major_minor(bf[5:])
            if mm:
                out.append((f"{_display(c)} (built for ROCm {mm})", mm, c))
    return out


def _finish(v: Verdict, image: ScanResult) -> None:
    for lib in v.libraries:
        if lib.verdict != RUNS:
            v.evidence.extend(lib.evidence)
    v.verdict = worst([v.verdict, *(lib.verdict for lib in v.libraries)])
    bad = [lib for lib in v.libraries if lib.verdict == FAIL]
    jit = [lib for lib in v.libraries if lib.verdict == JIT]
    ok = [lib for lib in v.libraries if lib.verdict == RUNS]
    v.reasons.extend(lib.reason for lib in bad)
    v.reasons.extend(lib.reason for lib in jit)
    code = [lib for lib in ok if lib.kind.endswith("-code")]
    if code:
        v.reasons.append(f"{len(code)} component(s) with GPU code have native code for this GPU")
    v.reasons.extend(lib.reason for lib in ok if not lib.kind.endswith("-code"))
    cuda_code, hip_code = _code_components(image)
    if not (v.libraries or cuda_code or hip_code or _cuda_runtimes(image) or _rocm_user(image)):
        v.reasons.append("no GPU code and no GPU runtime found in the image: nothing GPU-specific "
                         "to check")
    v.evidence = list(dict.fromkeys(e for e in v.evidence if e))


def _image_ref(image: ScanResult) -> str:
    t = image.target
    return t.reference or t.name or "image"


def _gpu_dict(gpu: Gpu) -> dict[str, Any]:
    return {
        "label": gpu.label, "vendor": gpu.vendor, "model": gpu.model,
        "compute_capability": str(gpu.cc) if gpu.cc else None,
        "gfx": str(gpu.gfx) if gpu.gfx else None, "data_center": gpu.data_center,
        "brand": gpu.brand, "count": gpu.count, "pci_addresses": list(gpu.addresses),
    }


def evaluate_platform(image: ScanResult, plat: GpuTarget) -> Verdict:
    cuda_code, hip_code = _code_components(image)
    vendor = plat.gpu.vendor
    if vendor == "nvidia":
        v = _nvidia(image, plat, cuda_code)
        if not cuda_code and hip_code and not _cuda_runtimes(image):
            v.verdict = FAIL
            v.reasons.insert(0, "the image's GPU code is for AMD GPUs only (HIP): nothing runs "
                                f"on {plat.gpu.label}")
        return v
    if vendor == "amd":
        v = _amd(image, plat, hip_code)
        if cuda_code and not hip_code:
            v.verdict = FAIL
            v.reasons.insert(0, "the image's GPU code is CUDA only: nothing runs on an AMD GPU")
        return v
    v = Verdict(image=_image_ref(image), target=plat.name, verdict=RUNS, host=plat.host,
                gpu=_gpu_dict(plat.gpu), evidence=list(plat.evidence))
    if cuda_code or hip_code:
        v.verdict = FAIL
        v.reasons.append(f"the image's GPU code is for {'CUDA' if cuda_code else 'HIP'}: "
                         f"it does not run on {plat.gpu.label} ({vendor})")
    else:
        v.reasons.append(f"{vendor} GPU: SPIR-V and AOT device code are not inventoried yet: "
                         "not checked")
    return v


def evaluate(image: ScanResult, targets: list[str], *, driver: str | None = None) -> list[Verdict]:
    """One verdict per target string (``H100``, ``sm_90``, ``gfx90a:xnack-``, ...).

    ``driver``: the NVIDIA driver version to assume (what-if); without it the runtime-vs-driver
    rules are skipped and PTX JIT is reported without its ISA check."""
    return [evaluate_platform(image, platform_from_string(t, driver)) for t in targets]


def check_against_host(image: ScanResult, host: ScanResult) -> list[Verdict]:
    """One verdict per kind of GPU on the host (its driver, its GPUs)."""
    plats = platforms_from_host(host)
    if plats:
        return [evaluate_platform(image, p) for p in plats]
    ref = host.target.reference or "host"
    cuda_code, hip_code = _code_components(image)
    v = Verdict(image=_image_ref(image), target=f"{ref} (no GPU)", verdict=RUNS, host=ref)
    if cuda_code or hip_code or _cuda_runtimes(image):
        v.verdict = FAIL
        v.reasons.append(f"{ref}: no NVIDIA, AMD or Intel GPU in the host scan; the image holds "
                         "GPU code or a GPU runtime")
    else:
        v.reasons.append(f"{ref}: no GPU; the image holds no GPU code")
    return [v]
