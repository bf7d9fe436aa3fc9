"""Level Zero through ctypes (libze_loader.so.1): drivers and devices, with their properties.

The kernel launch needs a SPIR-V module. gpusbom does not ship one yet (it has no
SPIR-V compiler in its build and will not ship an opaque blob it cannot rebuild), so
every Level Zero device reports ``skipped: no SPIR-V kernel`` after enumeration,
with the facts the driver reports. Structure layouts and ``stype`` values follow
ze_api.h (Level Zero 1.x).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from ctypes import POINTER, Structure, byref, c_char, c_int, c_uint8, c_uint32, c_uint64, c_void_p
from typing import cast

from . import kernel as K
from .base import (
    Backend,
    DeviceInfo,
    ProbeError,
    ProbeSkipped,
    RunOutcome,
    load_library,
    pci_bus_id,
    register,
    uuid_text,
)

ZE_STRUCTURE_TYPE_DRIVER_PROPERTIES = 0x1
ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES = 0x3
ZE_STRUCTURE_TYPE_DEVICE_COMPUTE_PROPERTIES = 0x4
ZE_STRUCTURE_TYPE_PCI_EXT_PROPERTIES = 0x10008

ERROR_NAMES = {
    0x70000001: "ZE_RESULT_ERROR_DEVICE_LOST",
    0x70000002: "ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY",
    0x70000003: "ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY",
    0x70000004: "ZE_RESULT_ERROR_MODULE_BUILD_FAILURE",
    0x70010000: "ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS",
    0x70010001: "ZE_RESULT_ERROR_NOT_AVAILABLE",
    0x70020000: "ZE_RESULT_ERROR_DEPENDENCY_UNAVAILABLE",
    0x78000001: "ZE_RESULT_ERROR_UNINITIALIZED",
    0x78000002: "ZE_RESULT_ERROR_UNSUPPORTED_VERSION",
    0x78000003: "ZE_RESULT_ERROR_UNSUPPORTED_FEATURE",
    0x78000004: "ZE_RESULT_ERROR_INVALID_ARGUMENT",
    0x7FFFFFFE: "ZE_RESULT_ERROR_UNKNOWN",
}
DEVICE_TYPES = {1: "gpu", 2: "cpu", 3: "fpga", 4: "mca", 5: "vpu"}


class DriverProperties(Structure):
    _fields_ = [("stype", c_uint32), ("pNext", c_void_p), ("uuid", c_uint8 * 16),
                ("driverVersion", c_uint32)]


class DeviceProperties(Structure):
    _fields_ = [("stype", c_uint32), ("pNext", c_void_p), ("type", c_uint32), ("vendorId", c_uint32),
                ("deviceId", c_uint32), ("flags", c_uint32), ("subdeviceId", c_uint32),
                ("coreClockRate", c_uint32), ("maxMemAllocSize", c_uint64),
                ("maxHardwareContexts", c_uint32), ("maxCommandQueuePriority", c_uint32),
                ("numThreadsPerEU", c_uint32), ("physicalEUSimdWidth", c_uint32),
                ("numEUsPerSubslice", c_uint32), ("numSubslicesPerSlice", c_uint32),
                ("numSlices", c_uint32), ("timerResolution", c_uint64),
                ("timestampValidBits", c_uint32), ("kernelTimestampValidBits", c_uint32),
                ("uuid", c_uint8 * 16), ("name", c_char * 256)]


class ComputeProperties(Structure):
    _fields_ = [("stype", c_uint32), ("pNext", c_void_p), ("maxTotalGroupSize", c_uint32),
                ("maxGroupSizeX", c_uint32), ("maxGroupSizeY", c_uint32), ("maxGroupSizeZ", c_uint32),
                ("maxGroupCountX", c_uint32), ("maxGroupCountY", c_uint32), ("maxGroupCountZ", c_uint32),
                ("maxSharedLocalMemory", c_uint32), ("numSubGroupSizes", c_uint32),
                ("subGroupSizes", c_uint32 * 8)]


class PciAddress(Structure):
    _fields_ = [("domain", c_uint32), ("bus", c_uint32), ("device", c_uint32), ("function", c_uint32)]


class PciSpeed(Structure):
    _fields_ = [("genVersion", c_int), ("width", c_int), ("maxBandwidth", ctypes.c_int64)]


class PciProperties(Structure):
    _fields_ = [("stype", c_uint32), ("pNext", c_void_p), ("address", PciAddress), ("maxSpeed", PciSpeed)]


def _name(rc: int) -> str:
    return ERROR_NAMES.get(rc, f"ZE_RESULT_0x{rc:08x}")


def _fn(lib: ctypes.CDLL, name: str, *args: object) -> Callable[..., int]:
    """``lib.name`` with its argument types set; returns a ze_result_t (an int)."""
    f = getattr(lib, name)
    f.argtypes = list(args)
    f.restype = c_uint32
    return cast("Callable[..., int]", f)


def _devices() -> list[DeviceInfo]:
    lib = load_library(["libze_loader.so.1", "libze_loader.so"], "Level Zero loader")
    ze_init = _fn(lib, "zeInit", c_uint32)
    driver_get = _fn(lib, "zeDriverGet", POINTER(c_uint32), POINTER(c_void_p))
    driver_api = _fn(lib, "zeDriverGetApiVersion", c_void_p, POINTER(c_uint32))
    driver_props = _fn(lib, "zeDriverGetProperties", c_void_p, POINTER(DriverProperties))
    device_get = _fn(lib, "zeDeviceGet", c_void_p, POINTER(c_uint32), POINTER(c_void_p))
    device_props = _fn(lib, "zeDeviceGetProperties", c_void_p, POINTER(DeviceProperties))
    compute_props = _fn(lib, "zeDeviceGetComputeProperties", c_void_p, POINTER(ComputeProperties))
    pci_props = _fn(lib, "zeDevicePciGetPropertiesExt", c_void_p, POINTER(PciProperties)) \
        if hasattr(lib, "zeDevicePciGetPropertiesExt") else None

    rc = ze_init(0)
    if rc == 0x78000001:  # no driver loaded
        raise ProbeSkipped("the Level Zero loader found no driver (zeInit: ZE_RESULT_ERROR_UNINITIALIZED)")
    if rc == 0x70010000:
        raise ProbeSkipped("no permission to open the GPU (zeInit: ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS)")
    if rc != 0:
        raise ProbeError(rc, _name(rc), "zeInit")
    n = c_uint32(0)
    rc = driver_get(byref(n), None)
    if rc != 0:
        raise ProbeError(rc, _name(rc), "zeDriverGet")
    if n.value == 0:
        raise ProbeSkipped("the Level Zero loader lists no driver")
    drivers = (c_void_p * n.value)()
    driver_get(byref(n), drivers)
    out: list[DeviceInfo] = []
    for di in range(n.value):
        drv = drivers[di]
        api = c_uint32()
        dp = DriverProperties(stype=ZE_STRUCTURE_TYPE_DRIVER_PROPERTIES)
        base: dict[str, str] = {}
        if driver_api(drv, byref(api)) == 0:
            base["runtime-version"] = f"Level Zero {api.value >> 16}.{api.value & 0xFFFF}"
        if driver_props(drv, byref(dp)) == 0:
            base["driver-version"] = str(dp.driverVersion)
        m = c_uint32(0)
        if device_get(drv, byref(m), None) != 0 or m.value == 0:
            continue
        devs = (c_void_p * m.value)()
        device_get(drv, byref(m), devs)
        for i in range(m.value):
            p = DeviceProperties(stype=ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES)
            rc = device_props(devs[i], byref(p))
            if rc != 0:
                raise ProbeError(rc, _name(rc), "zeDeviceGetProperties")
            facts = dict(base)
            facts["vendor-id"] = f"0x{p.vendorId:04x}"
            facts["device-id"] = f"0x{p.deviceId:04x}"
            facts["device-type"] = DEVICE_TYPES.get(p.type, str(p.type))
            facts["uuid"] = uuid_text(bytes(p.uuid))
            facts["eu-simd-width"] = str(p.physicalEUSimdWidth)
            facts["compute-units"] = str(p.numSlices * p.numSubslicesPerSlice * p.numEUsPerSubslice)
            cp = ComputeProperties(stype=ZE_STRUCTURE_TYPE_DEVICE_COMPUTE_PROPERTIES)
            if compute_props(devs[i], byref(cp)) == 0:
                facts["max-work-group-size"] = str(cp.maxTotalGroupSize)
                facts["local-memory-bytes"] = str(cp.maxSharedLocalMemory)
                sizes = [str(cp.subGroupSizes[k]) for k in range(min(cp.numSubGroupSizes, 8))]
                if sizes:
                    facts["simd-width"] = ",".join(sizes)
            if pci_props is not None:
                pp = PciProperties(stype=ZE_STRUCTURE_TYPE_PCI_EXT_PROPERTIES)
                if pci_props(devs[i], byref(pp)) == 0:
                    a = pp.address
                    facts["pci-bus-id"] = pci_bus_id(a.domain, a.bus, a.device, a.function)
            out.append(DeviceInfo(f"{di}:{i}", p.name.decode(errors="replace"), facts))
    if not out:
        raise ProbeSkipped("no Level Zero device on any driver")
    return out


@register
class LevelZeroBackend(Backend):
    id = "level-zero"
    display = "oneAPI Level Zero (ctypes)"
    model = "Level Zero"
    runtime_libraries = ("libze_loader.so",)
    launch_skip = ("no SPIR-V kernel: gpusbom ships no SPIR-V module yet, so Level Zero devices "
                   "are enumerated but no kernel is launched")

    def enumerate(self) -> list[DeviceInfo]:
        return _devices()

    def run(self, device_id: str, kernels: K.KernelSet) -> RunOutcome:
        raise ProbeSkipped(self.launch_skip or "no SPIR-V kernel")
