"""CUDA through the driver API (libcuda.so.1) with ctypes: no toolkit, no runtime library.

The kernel is PTX that the driver JIT-compiles for the device. Every entry point
that has a ``_v2`` ABI is called by that name (the unversioned symbols are the
legacy 32-bit ABI), and every function gets its argtypes.
"""

from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Callable
from ctypes import POINTER, byref, c_char_p, c_int, c_size_t, c_uint, c_void_p
from typing import Any, cast

from . import _launch as L
from . import kernel as K
from .base import (
    Backend,
    DeviceInfo,
    ProbeError,
    ProbeSkipped,
    RunOutcome,
    load_library,
    register,
    uuid_text,
)

CUresult = c_int
CUdevice = c_int
CUdeviceptr = ctypes.c_uint64

#: fallback names when cuGetErrorName is unavailable (cuda.h values)
ERROR_NAMES = {
    0: "CUDA_SUCCESS", 1: "CUDA_ERROR_INVALID_VALUE", 2: "CUDA_ERROR_OUT_OF_MEMORY",
    3: "CUDA_ERROR_NOT_INITIALIZED", 4: "CUDA_ERROR_DEINITIALIZED",
    34: "CUDA_ERROR_STUB_LIBRARY", 35: "CUDA_ERROR_INSUFFICIENT_DRIVER",
    46: "CUDA_ERROR_DEVICE_UNAVAILABLE", 100: "CUDA_ERROR_NO_DEVICE",
    101: "CUDA_ERROR_INVALID_DEVICE", 102: "CUDA_ERROR_DEVICE_NOT_LICENSED",
    200: "CUDA_ERROR_INVALID_IMAGE", 201: "CUDA_ERROR_INVALID_CONTEXT",
    209: "CUDA_ERROR_NO_BINARY_FOR_GPU", 218: "CUDA_ERROR_INVALID_PTX",
    222: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", 300: "CUDA_ERROR_INVALID_SOURCE",
    304: "CUDA_ERROR_OPERATING_SYSTEM", 400: "CUDA_ERROR_INVALID_HANDLE",
    500: "CUDA_ERROR_NOT_FOUND", 700: "CUDA_ERROR_ILLEGAL_ADDRESS",
    701: "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", 702: "CUDA_ERROR_LAUNCH_TIMEOUT",
    719: "CUDA_ERROR_LAUNCH_FAILED", 800: "CUDA_ERROR_NOT_PERMITTED",
    801: "CUDA_ERROR_NOT_SUPPORTED", 802: "CUDA_ERROR_SYSTEM_NOT_READY",
    803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
    804: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", 999: "CUDA_ERROR_UNKNOWN",
}

# CUdevice_attribute values (cuda.h)
ATTR_MAX_THREADS_PER_BLOCK = 1
ATTR_MAX_SHARED_MEMORY_PER_BLOCK = 8
ATTR_WARP_SIZE = 10
ATTR_MULTIPROCESSOR_COUNT = 16
ATTR_PCI_BUS_ID = 33
ATTR_PCI_DEVICE_ID = 34
ATTR_PCI_DOMAIN_ID = 50
ATTR_CC_MAJOR = 75
ATTR_CC_MINOR = 76
ATTR_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97

CU_JIT_WALL_TIME = 2
CU_JIT_ERROR_LOG_BUFFER = 5
CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6


class CUuuid(ctypes.Structure):
    _fields_ = [("bytes", ctypes.c_ubyte * 16)]


def _sig(lib: ctypes.CDLL, name: str, *args: object) -> Callable[..., int]:
    """``lib.name`` with its argument types set; returns a CUresult (an int)."""
    fn = getattr(lib, name)
    fn.argtypes = list(args)
    fn.restype = CUresult
    return cast("Callable[..., int]", fn)


class _Driver:
    def __init__(self) -> None:
        self.lib = load_library(["libcuda.so.1", "libcuda.so"], "CUDA driver (NVIDIA driver not installed)")
        lib = self.lib
        try:
            self.cuInit = _sig(lib, "cuInit", c_uint)
            self.cuDriverGetVersion = _sig(lib, "cuDriverGetVersion", POINTER(c_int))
            self.cuDeviceGetCount = _sig(lib, "cuDeviceGetCount", POINTER(c_int))
            self.cuDeviceGet = _sig(lib, "cuDeviceGet", POINTER(CUdevice), c_int)
            self.cuDeviceGetName = _sig(lib, "cuDeviceGetName", c_char_p, c_int, CUdevice)
            self.cuDeviceGetAttribute = _sig(lib, "cuDeviceGetAttribute", POINTER(c_int), c_int, CUdevice)
            self.cuDeviceTotalMem = _sig(lib, "cuDeviceTotalMem_v2", POINTER(c_size_t), CUdevice)
            self.cuDeviceGetPCIBusId = _sig(lib, "cuDeviceGetPCIBusId", c_char_p, c_int, CUdevice)
            uuid_name = "cuDeviceGetUuid_v2" if hasattr(lib, "cuDeviceGetUuid_v2") else "cuDeviceGetUuid"
            self.cuDeviceGetUuid = _sig(lib, uuid_name, POINTER(CUuuid), CUdevice)
            self.cuDevicePrimaryCtxRetain = _sig(lib, "cuDevicePrimaryCtxRetain", POINTER(c_void_p), CUdevice)
            rel = "cuDevicePrimaryCtxRelease_v2" if hasattr(lib, "cuDevicePrimaryCtxRelease_v2") \
                else "cuDevicePrimaryCtxRelease"
            self.cuDevicePrimaryCtxRelease = _sig(lib, rel, CUdevice)
            self.cuCtxSetCurrent = _sig(lib, "cuCtxSetCurrent", c_void_p)
            self.cuCtxSynchronize = _sig(lib, "cuCtxSynchronize")
            self.cuModuleLoadDataEx = _sig(lib, "cuModuleLoadDataEx", POINTER(c_void_p), c_char_p, c_uint,
                                           POINTER(c_int), POINTER(c_void_p))
            self.cuModuleGetFunction = _sig(lib, "cuModuleGetFunction", POINTER(c_void_p), c_void_p, c_char_p)
            self.cuModuleUnload = _sig(lib, "cuModuleUnload", c_void_p)
            self.cuMemAlloc = _sig(lib, "cuMemAlloc_v2", POINTER(CUdeviceptr), c_size_t)
            self.cuMemFree = _sig(lib, "cuMemFree_v2", CUdeviceptr)
            self.cuMemcpyHtoD = _sig(lib, "cuMemcpyHtoD_v2", CUdeviceptr, c_void_p, c_size_t)
            self.cuMemcpyDtoH = _sig(lib, "cuMemcpyDtoH_v2", c_void_p, CUdeviceptr, c_size_t)
            self.cuLaunchKernel = _sig(lib, "cuLaunchKernel", c_void_p, c_uint, c_uint, c_uint, c_uint, c_uint,
                                       c_uint, c_uint, c_void_p, POINTER(c_void_p), POINTER(c_void_p))
        except AttributeError as exc:
            raise ProbeSkipped(f"libcuda lacks a driver API entry point ({exc}); too old or a stub") from None
        self._get_error_name = None
        if hasattr(lib, "cuGetErrorName"):
            self._get_error_name = _sig(lib, "cuGetErrorName", c_int, POINTER(c_char_p))

    def error_name(self, code: int) -> str:
        if self._get_error_name is not None:
            s = c_char_p()
            if self._get_error_name(code, byref(s)) == 0 and s.value:
                return s.value.decode(errors="replace")
        return ERROR_NAMES.get(code, f"CUDA_ERROR_{code}")

    def check(self, rc: int, what: str) -> None:
        if rc != 0:
            raise ProbeError(rc, self.error_name(rc), what)

    def init(self) -> None:
        rc = self.cuInit(0)
        if rc == 100:
            raise ProbeSkipped("no CUDA device visible to the driver (cuInit: CUDA_ERROR_NO_DEVICE)")
        if rc == 34:
            raise ProbeSkipped("libcuda.so is the toolkit's stub library, not a driver (CUDA_ERROR_STUB_LIBRARY)")
        self.check(rc, "cuInit")

    def attr(self, dev: int, attr: int) -> int | None:
        v = c_int()
        return v.value if self.cuDeviceGetAttribute(byref(v), attr, dev) == 0 else None


def _nvidia_driver_version() -> str | None:
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8", errors="replace") as f:
            first = f.readline()
    except OSError:
        return None
    for tok in first.split():
        if tok.count(".") >= 1 and tok.replace(".", "").isdigit():
            return tok
    return None


def nvidia_proc_uuids(root: str = "/proc/driver/nvidia/gpus") -> dict[str, str | None]:
    """PCI address (lower case) -> ``GPU-...`` UUID of every GPU the NVIDIA kernel driver
    lists in procfs (None where the UUID is hidden or unreadable); {} without the driver."""
    out: dict[str, str | None] = {}
    try:
        names = os.listdir(root)
    except OSError:
        return out
    for name in names:
        uuid = None
        try:
            with open(os.path.join(root, name, "information"), encoding="utf-8",
                      errors="replace") as f:
                for line in f:
                    key, _, val = line.partition(":")
                    if key.strip() == "GPU UUID":
                        val = val.strip()
                        if val.startswith("GPU-") and "?" not in val:
                            uuid = val
                        break
        except OSError:
            pass
        out[name.lower()] = uuid
    return out


def _version(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


@register
class CudaBackend(Backend):
    id = "cuda"
    display = "CUDA driver API"
    model = "CUDA"
    runtime_libraries = ("libcuda.so",)

    def _device_facts(self, drv: _Driver, dev: int) -> tuple[str, dict[str, str]]:
        buf = ctypes.create_string_buffer(256)
        drv.check(drv.cuDeviceGetName(buf, 256, dev), "cuDeviceGetName")
        name = buf.value.decode(errors="replace")
        facts: dict[str, str] = {"vendor": "NVIDIA Corporation"}
        ver = c_int()
        if drv.cuDriverGetVersion(byref(ver)) == 0:
            facts["runtime-version"] = f"CUDA {_version(ver.value)}"
        dv = _nvidia_driver_version()
        if dv:
            facts["driver-version"] = dv
        major, minor = drv.attr(dev, ATTR_CC_MAJOR), drv.attr(dev, ATTR_CC_MINOR)
        if major is not None and minor is not None:
            facts["compute-capability"] = f"{major}.{minor}"
            facts["isa"] = f"sm_{major}{minor}"
        for key, attr in (("simd-width", ATTR_WARP_SIZE),
                          ("max-work-group-size", ATTR_MAX_THREADS_PER_BLOCK),
                          ("local-memory-bytes", ATTR_MAX_SHARED_MEMORY_PER_BLOCK),
                          ("local-memory-optin-bytes", ATTR_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
                          ("compute-units", ATTR_MULTIPROCESSOR_COUNT)):
            v = drv.attr(dev, attr)
            if v is not None:
                facts[key] = str(v)
        mem = c_size_t()
        if drv.cuDeviceTotalMem(byref(mem), dev) == 0:
            facts["global-memory-bytes"] = str(mem.value)
        bus = ctypes.create_string_buffer(32)
        if drv.cuDeviceGetPCIBusId(bus, 32, dev) == 0:
            facts["pci-bus-id"] = bus.value.decode().lower()
        u = CUuuid()
        if drv.cuDeviceGetUuid(byref(u), dev) == 0:
            facts["uuid"] = "GPU-" + uuid_text(bytes(u.bytes))
        return name, facts

    def enumerate(self) -> list[DeviceInfo]:
        drv = _Driver()
        drv.init()
        count = c_int()
        drv.check(drv.cuDeviceGetCount(byref(count)), "cuDeviceGetCount")
        if count.value == 0:
            raise ProbeSkipped("the CUDA driver lists no device")
        out: list[DeviceInfo] = []
        for i in range(count.value):
            dev = CUdevice()
            drv.check(drv.cuDeviceGet(byref(dev), i), "cuDeviceGet")
            name, facts = self._device_facts(drv, dev.value)
            out.append(DeviceInfo(str(i), name, facts))
        return out

    def isolate(self, device_id: str, facts: dict[str, str],
                workdir: str | None = None) -> tuple[str, dict[str, str]]:
        # cuInit initialises every visible GPU: show the child only its own (by UUID)
        if facts.get("uuid"):
            return "0", {"CUDA_VISIBLE_DEVICES": facts["uuid"]}
        return device_id, {}

    def speculate(self, workdir: str | None = None) -> list[tuple[str, dict[str, str]]]:
        # the kernel driver lists its GPUs, with their UUIDs, without loading libcuda:
        # one child per GPU starts at once, beside the enumeration child
        if "CUDA_VISIBLE_DEVICES" in os.environ:
            return []  # the driver's view is narrowed: let enumeration decide
        uuids = nvidia_proc_uuids()
        if not uuids or any(u is None for u in uuids.values()):
            return []
        return [("0", {"CUDA_VISIBLE_DEVICES": u}) for _, u in sorted(uuids.items()) if u]

    # one child per GPU the kernel driver lists (each by UUID): nothing left to enumerate
    speculation_covers_all = True

    def devices_from_runs(
        self, answers: list[tuple[str, dict[str, str], dict[str, Any]]]
    ) -> list[DeviceInfo] | None:
        devs: list[tuple[str, str, dict[str, str]]] = []
        for _child_id, extra, p in answers:
            facts = {str(k): str(v) for k, v in (p.get("facts") or {}).items()}
            uuid, bus = facts.get("uuid"), facts.get("pci-bus-id")
            if not p.get("device") or not bus or not uuid \
                    or uuid != extra.get("CUDA_VISIBLE_DEVICES"):
                return None  # not the GPU the child was started for (MIG, say): enumerate
            devs.append((bus, str(p["device"]), facts))
        # cuDeviceGet's order: CUDA_DEVICE_ORDER=PCI_BUS_ID, or FASTEST_FIRST (the
        # default), which is PCI order among GPUs alike; unlike GPUs: ask enumeration
        if os.environ.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID" and len(
            {(name, f.get("compute-capability"), f.get("compute-units")) for _, name, f in devs}
        ) > 1:
            return None
        devs.sort(key=lambda d: d[0])
        return [DeviceInfo(str(i), name, facts) for i, (_, name, facts) in enumerate(devs)]

    def run(self, device_id: str, kernels: K.KernelSet) -> RunOutcome:
        if kernels.cuda_ptx is None:
            raise ProbeSkipped(f"kernel set {kernels.name} has no PTX kernel")
        name, facts, ctx, dev, drv = self.open_device(device_id)
        try:
            drv.check(drv.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
            image = kernels.cuda_ptx.encode() + b"\0"
            outcome = launch_image(drv, image, kernels.entry, facts, what="PTX JIT")
            outcome.device = name
            return outcome
        finally:
            drv.cuDevicePrimaryCtxRelease(dev)

    def open_device(self, device_id: str) -> tuple[str, dict[str, str], c_void_p, CUdevice, _Driver]:
        """Driver initialised, the device's facts, and its retained primary context
        (release it with ``cuDevicePrimaryCtxRelease(dev)``)."""
        t0 = time.perf_counter()
        drv = _Driver()
        drv.init()
        t1 = time.perf_counter()
        dev = CUdevice()
        drv.check(drv.cuDeviceGet(byref(dev), int(device_id)), "cuDeviceGet")
        name, facts = self._device_facts(drv, dev.value)
        facts["init-ms"] = f"{(t1 - t0) * 1000:.1f}"
        ctx = c_void_p()
        t2 = time.perf_counter()
        drv.check(drv.cuDevicePrimaryCtxRetain(byref(ctx), dev), "cuDevicePrimaryCtxRetain")
        facts["context-ms"] = f"{(time.perf_counter() - t2) * 1000:.1f}"
        return name, facts, ctx, dev, drv


def launch_image(drv: _Driver, image: bytes, entry: str, facts: dict[str, str], *, what: str,
                 block: tuple[int, int, int] = (K.TILE, K.TILE, 1), shared_bytes: int = 0,
                 null_params: int = 0) -> RunOutcome:
    """Load a PTX or cubin image into the current context and run ``entry(A, B, C, n)`` on
    a GROUPS x GROUPS grid of ``block``; ``null_params`` trailing pointer parameters get NULL
    (Triton's scratch-buffer parameters). ``facts`` gets jit-ms and kernel-ms."""
    t0 = time.perf_counter()
    log = ctypes.create_string_buffer(4096)
    opts = (c_int * 2)(CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
    vals = (c_void_p * 2)(ctypes.cast(log, c_void_p), c_void_p(len(log)))
    module = c_void_p()
    rc = drv.cuModuleLoadDataEx(byref(module), image, 2, opts, vals)
    if rc != 0:
        raise ProbeError(rc, drv.error_name(rc),
                         f"cuModuleLoadDataEx ({what}): " + log.value.decode(errors="replace").strip())
    facts["jit-ms"] = f"{(time.perf_counter() - t0) * 1000:.1f}"
    ptrs: list[CUdeviceptr] = []
    try:
        fn = c_void_p()
        drv.check(drv.cuModuleGetFunction(byref(fn), module, entry.encode()), "cuModuleGetFunction")
        nbytes = L.NBYTES
        for _ in range(3):
            p = CUdeviceptr()
            drv.check(drv.cuMemAlloc(byref(p), nbytes), "cuMemAlloc_v2")
            ptrs.append(p)
        host = L.host_inputs()
        for p, src in zip(ptrs, host, strict=False):
            drv.check(drv.cuMemcpyHtoD(p, ctypes.addressof(src), nbytes), "cuMemcpyHtoD_v2")
        params, _keep = L.kernel_params(ptrs, CUdeviceptr, null_params)
        t1 = time.perf_counter()
        drv.check(drv.cuLaunchKernel(fn, K.GROUPS, K.GROUPS, 1, *block, shared_bytes, None, params, None),
                  "cuLaunchKernel")
        drv.check(drv.cuCtxSynchronize(), "cuCtxSynchronize (kernel execution)")
        facts["kernel-ms"] = f"{(time.perf_counter() - t1) * 1000:.2f}"
        out = L.result_buffer()
        drv.check(drv.cuMemcpyDtoH(ctypes.addressof(out), ptrs[2], nbytes), "cuMemcpyDtoH_v2")
        return RunOutcome(bytes(out), facts)
    finally:
        for p in ptrs:
            drv.cuMemFree(p)
        drv.cuModuleUnload(module)
