"""SYCL through dpctl (Intel's Data Parallel Control), when it is installed.

Devices are enumerated through dpctl. The kernel is built from the OpenCL C source
with ``dpctl.program.create_program_from_source``, which dpctl supports only for
devices behind its OpenCL backend; devices behind Level Zero or CUDA report
``skipped`` (their kernel would need SPIR-V), and so do OpenCL devices without USM
(PoCL): dpctl's launch takes USM allocations only. OpenCL runtimes installed as wheels
into the interpreter (Intel's ``intel-opencl-rt``: the CPU device) are made visible to
the ICD loader (``runtime_icds``). The children run in the interpreter that has dpctl.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
from typing import Any

from . import kernel as K
from .base import Backend, DeviceInfo, ProbeError, ProbeSkipped, RunOutcome, register


def runtime_icds(prefix: str | None = None) -> list[str]:
    """OpenCL runtimes installed as Python wheels into the interpreter's prefix (Intel's
    ``intel-opencl-rt`` puts ``etc/OpenCL/vendors/intel-cpu.icd`` and ``lib/libintelocl.so``
    there): the libraries, for ``OCL_ICD_FILENAMES``. The system's ICD loader does not
    look in a virtual environment, so without this dpctl would not see them."""
    prefix = prefix or sys.prefix
    vendors = os.path.join(prefix, "etc", "OpenCL", "vendors")
    out: list[str] = []
    try:
        names = sorted(os.listdir(vendors))
    except OSError:
        return out
    for name in names:
        if not name.endswith(".icd"):
            continue
        try:
            with open(os.path.join(vendors, name), encoding="utf-8", errors="replace") as f:
                lib = f.read(4096).strip()
        except OSError:
            continue
        # the wheel's .icd holds its build prefix: the library is in this prefix's lib/
        local = os.path.join(prefix, "lib", os.path.basename(lib))
        if os.path.exists(local):
            out.append(local)
        elif os.path.isabs(lib) and os.path.exists(lib):
            out.append(lib)
    return out


def _dpctl() -> Any:
    extra = [p for p in runtime_icds() if p not in os.environ.get("OCL_ICD_FILENAMES", "").split(":")]
    if extra:  # read by the ICD loader when dpctl's SYCL runtime first lists platforms
        old = os.environ.get("OCL_ICD_FILENAMES")
        os.environ["OCL_ICD_FILENAMES"] = ":".join(extra + ([old] if old else []))
    try:
        import dpctl
    except ImportError:
        raise ProbeSkipped(f"dpctl is not installed for {sys.executable} (the SYCL probe needs it; "
                           "choose the interpreter that has it with --python)") from None
    return dpctl


def _devices(dpctl: Any) -> list[Any]:
    try:
        devs = list(dpctl.get_devices())
    except Exception as exc:  # noqa: BLE001 - dpctl raises its own SyclDeviceCreationError
        raise ProbeError(None, type(exc).__name__, str(exc)) from None
    if not devs:
        raise ProbeSkipped("dpctl lists no SYCL device")
    return devs


def _facts(d: Any) -> dict[str, str]:
    f: dict[str, str] = {"programming-model": "SYCL", "python": sys.executable}
    try:
        import dpctl

        f["runtime"] = f"dpctl {dpctl.__version__}"
        f["platform"] = str(d.sycl_platform.name)
        f["device-type"] = str(d.device_type).rsplit(".", 1)[-1]
    except Exception:  # noqa: BLE001, S110 - facts this dpctl does not offer
        pass
    for key, attr in (("vendor", "vendor"), ("driver-version", "driver_version"),
                      ("runtime-version", "backend"), ("max-work-group-size", "max_work_group_size"),
                      ("local-memory-bytes", "local_mem_size"), ("compute-units", "max_compute_units")):
        try:
            v = getattr(d, attr)
        except Exception:  # noqa: BLE001, S112 - an attribute this dpctl lacks
            continue
        f[key] = str(v)
    with contextlib.suppress(Exception):  # dpctl's own error types: no sub-group sizes
        f["simd-width"] = ",".join(str(s) for s in d.sub_group_sizes)
    return f


@register
class SyclBackend(Backend):
    id = "sycl"
    display = "SYCL (dpctl)"
    model = "SYCL"
    runtime_libraries = ("libsycl.so",)
    python_package = "dpctl"

    def enumerate(self) -> list[DeviceInfo]:
        dpctl = _dpctl()
        return [DeviceInfo(str(i), d.name, _facts(d)) for i, d in enumerate(_devices(dpctl))]

    def run(self, device_id: str, kernels: K.KernelSet) -> RunOutcome:
        if kernels.opencl is None:
            raise ProbeSkipped(f"kernel set {kernels.name} has no OpenCL C kernel")
        dpctl = _dpctl()
        import dpctl.memory as dpmem
        import dpctl.program as dpprog
        import numpy as np

        d = _devices(dpctl)[int(device_id)]
        facts = _facts(d)
        if "opencl" not in str(d.backend).lower():
            raise ProbeSkipped(f"SYCL device behind {d.backend}: the probe kernel needs SPIR-V there")
        if not getattr(d, "has_aspect_usm_device_allocations", True):
            raise ProbeSkipped(f"the SYCL device's OpenCL platform ({facts.get('platform', '?')}) has no "
                               "USM device allocations, which dpctl's kernel launch needs")
        try:
            q = dpctl.SyclQueue(d)
            prog = dpprog.create_program_from_source(q, kernels.opencl)
            knl = prog.get_sycl_kernel(kernels.entry)
            a, b = K.inputs()
            nbytes = K.N * K.N * 4
            bufs = [dpmem.MemoryUSMDevice(nbytes, queue=q) for _ in range(3)]
            bufs[0].copy_from_host(np.frombuffer(a, dtype=np.uint8))
            bufs[1].copy_from_host(np.frombuffer(b, dtype=np.uint8))
            bufs[2].copy_from_host(np.full(K.N * K.N, np.nan, dtype=np.float32).view(np.uint8))
            g = K.GROUPS * K.TILE
            q.submit(knl, [*bufs, ctypes.c_uint32(K.N)], [g, g], [K.TILE, K.TILE]).wait()
            out = np.empty(nbytes, dtype=np.uint8)
            bufs[2].copy_to_host(out)
        except Exception as exc:  # noqa: BLE001 - dpctl's own exception types
            raise ProbeError(None, type(exc).__name__, str(exc)[:2000]) from None
        return RunOutcome(out.tobytes(), facts)
