"""NVIDIA devices through NVML (``nvidia-ml-py``), as plain JSON-able data.

NVML reads what the loaded kernel driver knows; it never creates a CUDA
context. ``pynvml`` is imported lazily: without it (or without a driver) the
host scan goes on with sysfs and ``/proc/driver/nvidia`` alone.
The same dict is what ``host-snapshot`` records as ``nvml.json``.

``query_beside`` asks in a forked process while the scan walks: importing ``pynvml`` (a
5,000-line module: 90 ms to compile where it has no bytecode) and its calls took the
scanning process's interpreter lock for up to 0.12 s on an H200 host, when they ran on a
thread beside the walk, and the scanning process could read back none of the walk's
results meanwhile.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Any, TypeVar

from .. import _fork, _wire

_T = TypeVar("_T")
#: what the query process's answer may name: plain data only
_NO_CLASSES = _wire.allow(())

ARCHITECTURES = {
    2: "Kepler", 3: "Maxwell", 4: "Pascal", 5: "Volta", 6: "Turing", 7: "Ampere",
    8: "Ada", 9: "Hopper", 10: "Blackwell",
}


def _s(v: Any) -> Any:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else v


def norm_bus_id(bus: str) -> str:
    """NVML ``00000000:1A:00.0`` -> sysfs ``0000:1a:00.0``."""
    bus = bus.strip().lower()
    dom, _, rest = bus.partition(":")
    if rest and len(dom) > 4:
        dom = dom[-4:]
    return f"{dom}:{rest}" if rest else bus


def query() -> tuple[dict[str, Any] | None, str | None]:
    """(data, None) or (None, why not)."""
    try:
        import pynvml  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError:
        return None, "NVML not queried: nvidia-ml-py (pynvml) is not installed"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - no driver, no library, no permission
        return None, f"NVML not available: {exc}"
    try:
        return _query(pynvml), None
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def query_beside() -> Callable[[], tuple[dict[str, Any] | None, str | None]]:
    """``query`` started now in a forked process (this process must have no other thread
    then); the returned function waits for its answer. A query process that dies (the
    driver's library crashed it) is an answer too: NVML not available."""
    return in_child(query, lambda status: (
        None, f"NVML not available: its query process ended abnormally (status {status})"))


def in_child(fn: Callable[[], _T], died: Callable[[int], _T]) -> Callable[[], _T]:
    """``fn()`` run in a forked process, started now; the returned function waits for its
    value (plain data back through a pipe, read by ``gpusbom._wire``: it can name no class)
    or raises what it raised (a builtin or gpusbom error; any other as a RuntimeError); ``died(wait status)`` when
    the process ended without an answer. Without ``fork`` (or a pipe or a process to
    spare), ``fn`` runs when its value is asked for."""
    try:
        r, w = os.pipe()
    except (AttributeError, OSError):
        return fn
    try:
        pid = _fork.fork()
    except (AttributeError, OSError):
        os.close(r)
        os.close(w)
        return fn
    if pid == 0:  # pragma: no cover - the child (its coverage is not collected)
        code = 0
        try:
            os.close(r)
            try:
                payload: tuple[str, Any] = ("ok", fn())
            except BaseException as exc:  # noqa: BLE001 - sent to the parent and raised there
                payload = ("error", _wire.portable(exc))
            try:
                data = _wire.dumps(payload)
            except Exception:  # noqa: BLE001 - not picklable: the parent hears nothing
                data, code = b"", 1
            _fork.write_all(w, data)
        except BaseException:  # noqa: BLE001 - whatever happens, the child ends here
            code = 1
        finally:
            os._exit(code)
    os.close(w)

    def wait() -> _T:
        chunks = []
        try:
            while True:
                chunk = os.read(r, 1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
        finally:
            os.close(r)
        _, status = os.waitpid(pid, 0)
        data = b"".join(chunks)
        if not data:
            return died(status)
        try:
            kind, value = _wire.loads(data, _NO_CLASSES)
        except (_wire.WireError, TypeError, ValueError):
            return died(status)
        if kind == "error":
            raise value
        return value  # type: ignore[no-any-return]

    return wait


def _query(nv: Any) -> dict[str, Any]:
    errors: list[str] = []

    def call(what: str, fn: Any, *args: Any) -> Any:
        try:
            return _s(fn(*args))
        except Exception as exc:  # noqa: BLE001 - NotSupported, NoPermission, old library
            name = type(exc).__name__
            errors.append(f"{what}: {name}: {exc}")
            return None

    out: dict[str, Any] = {
        "driver_version": call("driver_version", nv.nvmlSystemGetDriverVersion),
        "nvml_version": call("nvml_version", nv.nvmlSystemGetNVMLVersion),
        "cuda_driver_version": call(
            "cuda_driver_version", getattr(nv, "nvmlSystemGetCudaDriverVersion_v2", None)
            or nv.nvmlSystemGetCudaDriverVersion),
        "devices": [],
        "errors": errors,
    }
    count = call("device_count", nv.nvmlDeviceGetCount) or 0
    for i in range(int(count)):
        h = call(f"{i}: handle", nv.nvmlDeviceGetHandleByIndex, i)
        if h is None:
            continue
        d: dict[str, Any] = {"index": i}
        pci = call(f"{i}: pci", nv.nvmlDeviceGetPciInfo, h)
        if pci is not None:
            d["pci_bus_id"] = norm_bus_id(_s(pci.busId))
            d["pci_device_id"] = f"0x{pci.pciDeviceId:08x}"
            d["pci_subsystem_id"] = f"0x{pci.pciSubSystemId:08x}"
        d["name"] = call(f"{i}: name", nv.nvmlDeviceGetName, h)
        d["uuid"] = call(f"{i}: uuid", nv.nvmlDeviceGetUUID, h)
        d["vbios_version"] = call(f"{i}: vbios", nv.nvmlDeviceGetVbiosVersion, h)
        d["inforom_image_version"] = call(
            f"{i}: inforom", nv.nvmlDeviceGetInforomImageVersion, h)
        if hasattr(nv, "nvmlDeviceGetGspFirmwareVersion"):
            d["gsp_firmware_version"] = call(f"{i}: gsp", nv.nvmlDeviceGetGspFirmwareVersion, h)
        if hasattr(nv, "nvmlDeviceGetGspFirmwareMode"):
            mode = call(f"{i}: gsp mode", nv.nvmlDeviceGetGspFirmwareMode, h)
            if mode is not None:
                d["gsp_firmware_enabled"] = bool(mode[0])
        cc = call(f"{i}: compute capability", nv.nvmlDeviceGetCudaComputeCapability, h)
        if cc is not None:
            d["compute_capability"] = f"{cc[0]}.{cc[1]}"
        arch = call(f"{i}: architecture", nv.nvmlDeviceGetArchitecture, h)
        if arch is not None:
            d["architecture"] = ARCHITECTURES.get(int(arch), str(arch))
        mem = call(f"{i}: memory", nv.nvmlDeviceGetMemoryInfo, h)
        if mem is not None:
            d["memory_total_bytes"] = int(mem.total)
        mig = call(f"{i}: mig", nv.nvmlDeviceGetMigMode, h)
        if mig is not None:
            d["mig_mode"] = {"current": int(mig[0]), "pending": int(mig[1])}
        ecc = call(f"{i}: ecc", nv.nvmlDeviceGetEccMode, h)
        if ecc is not None:
            d["ecc_mode"] = {"current": int(ecc[0]), "pending": int(ecc[1])}
        sb = call(f"{i}: retired pages sbe", nv.nvmlDeviceGetRetiredPages, h,
                  getattr(nv, "NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS", 0))
        db = call(f"{i}: retired pages dbe", nv.nvmlDeviceGetRetiredPages, h,
                  getattr(nv, "NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR", 1))
        if sb is not None or db is not None:
            pend = call(f"{i}: retired pages pending",
                        nv.nvmlDeviceGetRetiredPagesPendingStatus, h)
            d["retired_pages"] = {
                "single_bit_ecc": len(sb or []), "double_bit_ecc": len(db or []),
                "pending": bool(pend) if pend is not None else None,
            }
        rr = call(f"{i}: remapped rows", getattr(nv, "nvmlDeviceGetRemappedRows", None), h)
        if rr is not None:
            d["remapped_rows"] = {
                "correctable": int(rr[0]), "uncorrectable": int(rr[1]),
                "pending": bool(rr[2]), "failure": bool(rr[3]),
            }
        pm = call(f"{i}: persistence", nv.nvmlDeviceGetPersistenceMode, h)
        if pm is not None:
            d["persistence_mode"] = int(pm)
        out["devices"].append({k: v for k, v in d.items() if v is not None})
    return out
