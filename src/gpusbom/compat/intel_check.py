"""``check`` on an Intel GPU: each file's SYCL device code judged (:func:`.intel.judge_intel`),
plus whether the image carries an Intel GPU runtime to load it through.

:func:`judge_intel_file` has the signature of :data:`gpusbom.compat.binaries.JUDGES`."""

from __future__ import annotations

from typing import Any

from ..devicecode import DeviceCode
from ..model import Component, ScanResult
from .binaries import _verdict, code_files
from .intel import judge_intel, runtime_present
from .states import FAIL
from .targets import Gpu, GpuTarget
from .verdicts import LibraryVerdict, Verdict

__all__ = ["check_intel", "judge_intel_file"]


def judge_intel_file(c: Component, d: DeviceCode, gpu: Gpu, ctx: dict[str, Any]) -> LibraryVerdict:
    verdict, text = judge_intel(d, gpu.intel or "", gpu.label)
    return _verdict(c, d, "intel-code", verdict, text)


def check_intel(image: ScanResult, plat: GpuTarget, v: Verdict) -> None:
    """Add the per-file and runtime verdicts of an Intel target to ``v``."""
    gpu = plat.gpu
    if not gpu.intel:
        v.reasons.append(f"{gpu.label}: its Intel GPU family is not known (gpusbom/data/"
                         "intel_gpus.json): AOT images cannot be matched")
    files = code_files(image.components, "intel")
    for c, d in files:
        v.libraries.append(judge_intel_file(c, d, gpu, {}))
    if files and not runtime_present(image.components):
        v.libraries.append(LibraryVerdict(
            "Intel GPU runtime", "intel-runtime", FAIL,
            "no Intel GPU runtime in the image (SYCL runtime, Level Zero loader or the "
            "compute-runtime driver: libsycl, libze_loader, libze_intel_gpu / libigdrcl): the "
            "SYCL code cannot be loaded", []))
