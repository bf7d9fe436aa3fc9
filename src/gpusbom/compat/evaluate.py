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

Verdicts (:mod:`.states`): ``runs``, ``runs-with-jit``, ``unchecked``, ``not-applicable``,
``will-fail``. Device code is judged per binary (:mod:`.binaries`): the image's verdict is the
worst of the files for the GPU's vendor and of the runtime checks; an image with nothing for
the GPU's vendor is ``not-applicable``, one whose device code cannot be judged (none found,
the GPU's architecture unknown) is ``unchecked``. ``reasons`` is the chain, ``evidence`` the
paths behind it (the failing files first).

The CUDA and ROCm rules of one image on one target; the records are in ``verdicts.py``, the
per-file rules in ``binaries.py``, the targets in ``targets.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..model import Component, ScanResult, own_product_version
from . import require as req
from .binaries import JUDGES, code_files, cuda_coverage, display
from .reference_data import (
    driver_cuda,
    major_minor,
    min_driver,
    minor_floor,
    rocm_releases,
    rocm_window,
    vtuple,
)
from .states import FAIL, JIT, NA, RUNS, UNCHECKED, worst
from .targets import Gpu, GpuTarget, _paths, platform_from_string, platforms_from_host
from .verdicts import LibraryVerdict, Verdict

__all__ = ["FAIL", "JIT", "NA", "RUNS", "UNCHECKED", "LibraryVerdict", "Verdict",
           "check_against_host", "cuda_coverage", "evaluate", "evaluate_platform", "worst"]

FRAMEWORK_STACKS = frozenset(
    {"pytorch", "jax", "cupy", "tensorflow", "onnxruntime", "vllm", "triton"}
)
_VENDOR_STACKS = {"nvidia": frozenset({"cuda"}), "amd": frozenset({"rocm", "amdgpu"}),
                  "intel": frozenset({"oneapi", "intel-gpu", "level-zero"})}
_VENDOR_NAME = {"nvidia": "CUDA", "amd": "ROCm/HIP", "intel": "Intel oneAPI/Level Zero"}


def _csv(v: str | None) -> list[str]:
    return [x.strip() for x in (v or "").split(",") if x.strip()]


_display = display


def _is_framework(c: Component) -> bool:
    return c.stack in FRAMEWORK_STACKS


def vendors_present(image: ScanResult) -> set[str]:
    """The GPU vendors the image holds a runtime or device code for."""
    out: set[str] = set()
    for vendor, stacks in _VENDOR_STACKS.items():
        if code_files(image.components, vendor):
            out.add(vendor)
            continue
        for c in image.components:
            bf = c.properties.get("built-for", "")
            if any(p.stack in stacks for p in c.products) or (
                    _is_framework(c) and bf.split(" ")[0] == {"nvidia": "cuda", "amd": "rocm"}
                    .get(vendor, "-")):
                out.add(vendor)
                break
    env = image.target.env or {}
    if any(k in env for k in ("NVIDIA_REQUIRE_CUDA", "CUDA_VERSION")):
        out.add("nvidia")
    return out


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


def _nvidia(image: ScanResult, plat: GpuTarget) -> Verdict:
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
    # 4. kernel coverage, per binary
    _judge_files(v, image, plat, {"jit_driver": jit_driver}, "compute capability")
    _finish(v, image, plat)
    return v


def _judge_files(v: Verdict, image: ScanResult, plat: GpuTarget, ctx: dict[str, Any],
                 what: str) -> None:
    """Every file with device code for the GPU's vendor, judged by its vendor's judge; a GPU
    whose architecture is unknown leaves them unchecked."""
    gpu = plat.gpu
    files = code_files(image.components, gpu.vendor)
    known = gpu.cc is not None if gpu.vendor == "nvidia" else gpu.gfx is not None
    if not files:
        return
    if not known:
        v.verdict = worst([v.verdict, UNCHECKED])
        v.reasons.append(f"{what} of {gpu.label} unknown: the device code of {len(files)} "
                         "file(s) is not checked")
        return
    judge = JUDGES[gpu.vendor]
    for c, d in files:
        v.libraries.append(judge(c, d, gpu, ctx))


def _amd(image: ScanResult, plat: GpuTarget) -> Verdict:
    gpu = plat.gpu
    v = Verdict(image=_image_ref(image), target=plat.name, verdict=RUNS, host=plat.host,
                gpu=_gpu_dict(gpu), evidence=list(plat.evidence))
    v.reasons.extend(plat.notes)
    _judge_files(v, image, plat, {}, "gfx target")
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
    _finish(v, image, plat)
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


def _finish(v: Verdict, image: ScanResult, plat: GpuTarget) -> None:
    bad = v.failing
    for lib in bad:
        v.evidence.extend(lib.evidence)
    v.verdict = worst([v.verdict, *(lib.verdict for lib in v.libraries)])
    jit = [lib for lib in v.libraries if lib.verdict == JIT]
    ok = [lib for lib in v.libraries if lib.verdict == RUNS]
    v.reasons.extend(lib.reason for lib in bad)
    v.reasons.extend(lib.reason for lib in jit)
    code = [lib for lib in ok if lib.kind.endswith("-code")]
    if code:
        owners = len({lib.component for lib in code})
        v.reasons.append(f"{len(code)} binaries (of {owners} component(s)) have native code "
                         "for this GPU")
    v.reasons.extend(lib.reason for lib in ok if not lib.kind.endswith("-code"))
    if v.verdict == RUNS and not code_files(image.components, plat.gpu.vendor):
        # runtimes that fit are not kernels that run: without device code nothing is judged
        v.verdict = UNCHECKED
        v.reasons.insert(0, f"no {_VENDOR_NAME.get(plat.gpu.vendor, '')} device code found in "
                            "the image: its kernels cannot be judged (unchecked)")
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


def _not_applicable(image: ScanResult, plat: GpuTarget, present: set[str]) -> Verdict:
    vendor = plat.gpu.vendor
    v = Verdict(image=_image_ref(image), target=plat.name, verdict=NA, host=plat.host,
                driver=plat.driver, gpu=_gpu_dict(plat.gpu), evidence=list(plat.evidence))
    what = _VENDOR_NAME.get(vendor, vendor)
    if present:
        others = ", ".join(_VENDOR_NAME[x] for x in sorted(present))
        v.reasons.append(f"the image's GPU software is for {others} only: no {what} runtime and "
                         f"no device code for {plat.gpu.label} ({vendor}): not applicable")
        for other in sorted(present):
            v.evidence.extend(d.path for _c, d in code_files(image.components, other)[:6])
    else:
        v.reasons.append(f"no GPU runtime and no GPU device code in the image: nothing runs on "
                         f"{plat.gpu.label}: not applicable")
    v.evidence = list(dict.fromkeys(e for e in v.evidence if e))
    return v


def evaluate_platform(image: ScanResult, plat: GpuTarget) -> Verdict:
    vendor = plat.gpu.vendor
    present = vendors_present(image)
    if vendor not in present:
        return _not_applicable(image, plat, present)
    if vendor == "nvidia":
        return _nvidia(image, plat)
    if vendor == "amd":
        return _amd(image, plat)
    v = Verdict(image=_image_ref(image), target=plat.name, verdict=RUNS, host=plat.host,
                gpu=_gpu_dict(plat.gpu), evidence=list(plat.evidence))
    if vendor == "intel":
        from .intel_check import check_intel

        check_intel(image, plat, v)
        _finish(v, image, plat)
        return v
    v.verdict = UNCHECKED
    v.reasons.append(f"{vendor} GPU: the image holds {_VENDOR_NAME.get(vendor, vendor)} "
                     "software; its device code is not judged: unchecked")
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
    v = Verdict(image=_image_ref(image), target=f"{ref} (no GPU)", verdict=NA, host=ref)
    if vendors_present(image):
        v.verdict = FAIL
        v.reasons.append(f"{ref}: no NVIDIA, AMD or Intel GPU in the host scan; the image holds "
                         "GPU code or a GPU runtime")
    else:
        v.reasons.append(f"{ref}: no GPU; the image holds no GPU code: not applicable")
    return [v]
