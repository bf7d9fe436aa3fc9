"""SYCL through dpctl (Intel's Data Parallel Control), when it is installed.

Devices are enumerated through dpctl. The kernel is built from the OpenCL C source
with ``dpctl.program.create_program_from_source``, which dpctl supports only for
devices behind its OpenCL backend; devices behind Level Zero or CUDA report
``skipped`` (their kernel would need SPIR-V). Not exercised in CI (no dpctl there).
"""

from __future__ import annotations

from typing import Any

from . import kernel as K
from .base import Backend, DeviceInfo, ProbeError, ProbeSkipped, RunOutcome, register


def _dpctl() -> Any:
    try:
        import dpctl
    except ImportError:
        raise ProbeSkipped("dpctl is not installed (SYCL probe needs it)") from None
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
    f: dict[str, str] = {}
    for key, attr in (("vendor", "vendor"), ("driver-version", "driver_version"),
                      ("runtime-version", "backend"), ("max-work-group-size", "max_work_group_size"),
                      ("local-memory-bytes", "local_mem_size"), ("compute-units", "max_compute_units")):
        try:
            v = getattr(d, attr)
        except Exception:  # noqa: BLE001, S112 - an attribute this dpctl lacks
            continue
        f[key] = str(v)
    try:
        f["simd-width"] = ",".join(str(s) for s in d.sub_group_sizes)
    except Exception:  # noqa: BLE001, S110 - no sub-group sizes
        pass
    return f


@register
class SyclBackend(Backend):
    id = "sycl"
    display = "SYCL (dpctl)"

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
            q.submit(knl, [*bufs, np.uint32(K.N)], [g, g], [K.TILE, K.TILE]).wait()
            out = np.empty(nbytes, dtype=np.uint8)
            bufs[2].copy_to_host(out)
        except Exception as exc:  # noqa: BLE001 - dpctl's own exception types
            raise ProbeError(None, type(exc).__name__, str(exc)[:2000]) from None
        return RunOutcome(out.tobytes(), facts)
