"""HIP through ctypes (libamdhip64) with the kernel compiled at run time by hiprtc.

hiprtc is its own library (libhiprtc) since ROCm 7.0; older releases also export it
from libamdhip64. The ISA (``gfx90a``...) comes from the KFD topology in sysfs, matched
to the HIP device by PCI address, and is passed to hiprtc as ``--offload-arch``.
Device attribute numbers are those of ``hipDeviceAttribute_t`` (ROCm 5.x/6.x/7.x).
"""

from __future__ import annotations

import ctypes
import glob
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
    pci_bus_id,
    register,
)

ATTR_CC_MAJOR = 23
ATTR_MAX_THREADS_PER_BLOCK = 56
ATTR_CC_MINOR = 61
ATTR_MULTIPROCESSOR_COUNT = 63
ATTR_PCI_BUS_ID = 67
ATTR_PCI_DEVICE_ID = 68
ATTR_PCI_DOMAIN_ID = 69
ATTR_MAX_SHARED_MEMORY_PER_BLOCK = 74
ATTR_WARP_SIZE = 87

HIP_ERROR_NO_DEVICE = 100
HIP_ERROR_INVALID_DEVICE = 101
HIP_ERROR_INSUFFICIENT_DRIVER = 35

HIP_LIBS = ["libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5",
            "/opt/rocm/lib/libamdhip64.so"]
HIPRTC_LIBS = ["libhiprtc.so", "libhiprtc.so.7", "libhiprtc.so.6", "libhiprtc.so.5",
               "/opt/rocm/lib/libhiprtc.so"]


def _fn(lib: ctypes.CDLL, name: str, *args: object, restype: object = c_int) -> Callable[..., Any]:
    """``lib.name`` with argument and result types set: an int (hipError_t) by default,
    bytes or None for ``restype=c_char_p``."""
    f = getattr(lib, name)
    f.argtypes = list(args)
    f.restype = restype
    return cast("Callable[..., Any]", f)


class _Hip:
    def __init__(self) -> None:
        lib = load_library(HIP_LIBS, "HIP runtime (ROCm not installed)")
        self.lib = lib
        try:
            self.hipInit = _fn(lib, "hipInit", c_uint)
            self.hipGetDeviceCount = _fn(lib, "hipGetDeviceCount", POINTER(c_int))
            self.hipDriverGetVersion = _fn(lib, "hipDriverGetVersion", POINTER(c_int))
            self.hipRuntimeGetVersion = _fn(lib, "hipRuntimeGetVersion", POINTER(c_int))
            self.hipDeviceGetName = _fn(lib, "hipDeviceGetName", c_char_p, c_int, c_int)
            self.hipDeviceGetAttribute = _fn(lib, "hipDeviceGetAttribute", POINTER(c_int), c_int, c_int)
            self.hipSetDevice = _fn(lib, "hipSetDevice", c_int)
            self.hipGetErrorName = _fn(lib, "hipGetErrorName", c_int, restype=c_char_p)
            self.hipModuleLoadData = _fn(lib, "hipModuleLoadData", POINTER(c_void_p), c_void_p)
            self.hipModuleGetFunction = _fn(lib, "hipModuleGetFunction", POINTER(c_void_p), c_void_p, c_char_p)
            self.hipModuleUnload = _fn(lib, "hipModuleUnload", c_void_p)
            self.hipMalloc = _fn(lib, "hipMalloc", POINTER(c_void_p), c_size_t)
            self.hipFree = _fn(lib, "hipFree", c_void_p)
            self.hipMemcpyHtoD = _fn(lib, "hipMemcpyHtoD", c_void_p, c_void_p, c_size_t)
            self.hipMemcpyDtoH = _fn(lib, "hipMemcpyDtoH", c_void_p, c_void_p, c_size_t)
            self.hipModuleLaunchKernel = _fn(lib, "hipModuleLaunchKernel", c_void_p, c_uint, c_uint, c_uint,
                                             c_uint, c_uint, c_uint, c_uint, c_void_p,
                                             POINTER(c_void_p), POINTER(c_void_p))
            self.hipDeviceSynchronize = _fn(lib, "hipDeviceSynchronize")
        except AttributeError as exc:
            raise ProbeSkipped(f"libamdhip64 lacks an entry point ({exc})") from None

    def name(self, code: int) -> str:
        try:
            s = self.hipGetErrorName(code)
            return s.decode(errors="replace") if s else f"hipError_{code}"
        except Exception:  # noqa: BLE001 - only names an error: a runtime without the name
            return f"hipError_{code}"  # function (or a ctypes failure) gives the number

    def check(self, rc: int, what: str) -> None:
        if rc != 0:
            raise ProbeError(rc, self.name(rc), what)

    def init(self) -> int:
        rc = self.hipInit(0)
        if rc in (HIP_ERROR_NO_DEVICE, HIP_ERROR_INVALID_DEVICE):
            raise ProbeSkipped(f"HIP runtime present but no HIP device (hipInit: {self.name(rc)}; "
                               "no AMD GPU, or /dev/kfd missing or not permitted)")
        self.check(rc, "hipInit")
        n = c_int()
        rc = self.hipGetDeviceCount(byref(n))
        if rc == HIP_ERROR_NO_DEVICE or (rc == 0 and n.value == 0):
            raise ProbeSkipped("the HIP runtime lists no device")
        self.check(rc, "hipGetDeviceCount")
        return n.value

    def attr(self, dev: int, a: int) -> int | None:
        v = c_int()
        return v.value if self.hipDeviceGetAttribute(byref(v), a, dev) == 0 else None


def _kfd_isa_by_pci() -> dict[str, str]:
    """PCI address -> ``gfxNNN`` from /sys/class/kfd/kfd/topology/nodes/*/properties."""
    out: dict[str, str] = {}
    for path in glob.glob("/sys/class/kfd/kfd/topology/nodes/*/properties"):
        props: dict[str, int] = {}
        try:
            with open(path, encoding="ascii", errors="replace") as f:
                for line in f:
                    k, _, v = line.strip().partition(" ")
                    if v.strip().lstrip("-").isdigit():
                        props[k] = int(v)
        except OSError:
            continue
        gfx = props.get("gfx_target_version", 0)
        if not gfx:
            continue  # a CPU node
        major, minor, step = gfx // 10000, (gfx // 100) % 100, gfx % 100
        loc = props.get("location_id", 0)
        addr = pci_bus_id(props.get("domain", 0), loc >> 8, (loc >> 3) & 0x1F, loc & 7)
        out[addr] = f"gfx{major}{minor:x}{step:x}"
    return out


@register
class HipBackend(Backend):
    id = "hip"
    display = "HIP (ctypes + hiprtc)"
    model = "HIP"
    runtime_libraries = ("libamdhip64.so",)

    def _facts(self, hip: _Hip, dev: int) -> tuple[str, dict[str, str]]:
        buf = ctypes.create_string_buffer(256)
        hip.check(hip.hipDeviceGetName(buf, 256, dev), "hipDeviceGetName")
        facts: dict[str, str] = {"vendor": "Advanced Micro Devices, Inc."}
        v = c_int()
        if hip.hipRuntimeGetVersion(byref(v)) == 0:
            facts["runtime-version"] = f"HIP {v.value // 10000000}.{(v.value // 100000) % 100}.{v.value % 100000}"
        if hip.hipDriverGetVersion(byref(v)) == 0:
            facts["driver-version"] = str(v.value)
        major, minor = hip.attr(dev, ATTR_CC_MAJOR), hip.attr(dev, ATTR_CC_MINOR)
        if major is not None and minor is not None:
            facts["compute-capability"] = f"{major}.{minor}"
        for key, a in (("simd-width", ATTR_WARP_SIZE), ("max-work-group-size", ATTR_MAX_THREADS_PER_BLOCK),
                       ("local-memory-bytes", ATTR_MAX_SHARED_MEMORY_PER_BLOCK),
                       ("compute-units", ATTR_MULTIPROCESSOR_COUNT)):
            val = hip.attr(dev, a)
            if val is not None:
                facts[key] = str(val)
        bus, slot, dom = (hip.attr(dev, ATTR_PCI_BUS_ID), hip.attr(dev, ATTR_PCI_DEVICE_ID),
                          hip.attr(dev, ATTR_PCI_DOMAIN_ID))
        if bus is not None and slot is not None:
            facts["pci-bus-id"] = pci_bus_id(dom or 0, bus, slot, 0)
            isa = _kfd_isa_by_pci().get(facts["pci-bus-id"])
            if isa:
                facts["isa"] = isa
        return buf.value.decode(errors="replace"), facts

    def enumerate(self) -> list[DeviceInfo]:
        hip = _Hip()
        n = hip.init()
        out = []
        for i in range(n):
            name, facts = self._facts(hip, i)
            out.append(DeviceInfo(str(i), name, facts))
        return out

    def run(self, device_id: str, kernels: K.KernelSet) -> RunOutcome:
        if kernels.hip is None:
            raise ProbeSkipped(f"kernel set {kernels.name} has no HIP kernel")
        hip = _Hip()
        hip.init()
        dev = int(device_id)
        _, facts = self._facts(hip, dev)
        hip.check(hip.hipSetDevice(dev), "hipSetDevice")
        t0 = time.perf_counter()
        code = _hiprtc_compile(hip, kernels, facts.get("isa"))
        facts["jit-ms"] = f"{(time.perf_counter() - t0) * 1000:.1f}"
        module = c_void_p()
        hip.check(hip.hipModuleLoadData(byref(module), code), "hipModuleLoadData")
        ptrs: list[c_void_p] = []
        try:
            fn = c_void_p()
            hip.check(hip.hipModuleGetFunction(byref(fn), module, kernels.entry.encode()), "hipModuleGetFunction")
            nbytes = L.NBYTES
            for _ in range(3):
                p = c_void_p()
                hip.check(hip.hipMalloc(byref(p), nbytes), "hipMalloc")
                ptrs.append(p)
            host = L.host_inputs()
            for p, src in zip(ptrs, host, strict=False):
                hip.check(hip.hipMemcpyHtoD(p, ctypes.addressof(src), nbytes), "hipMemcpyHtoD")
            params, _keep = L.kernel_params(ptrs, c_void_p)
            t1 = time.perf_counter()
            hip.check(hip.hipModuleLaunchKernel(fn, K.GROUPS, K.GROUPS, 1, K.TILE, K.TILE, 1, 0, None,
                                                params, None), "hipModuleLaunchKernel")
            hip.check(hip.hipDeviceSynchronize(), "hipDeviceSynchronize (kernel execution)")
            facts["kernel-ms"] = f"{(time.perf_counter() - t1) * 1000:.2f}"
            out = L.result_buffer()
            hip.check(hip.hipMemcpyDtoH(ctypes.addressof(out), ptrs[2], nbytes), "hipMemcpyDtoH")
            return RunOutcome(bytes(out), facts)
        finally:
            for p in ptrs:
                hip.hipFree(p)
            hip.hipModuleUnload(module)


def _hiprtc_compile(hip: _Hip, kernels: K.KernelSet, isa: str | None) -> ctypes.Array[ctypes.c_char]:
    try:
        rtc = load_library(HIPRTC_LIBS, "hiprtc library")
        rtc.hiprtcCreateProgram  # noqa: B018 - presence check
    except (ProbeSkipped, AttributeError):
        if not hasattr(hip.lib, "hiprtcCreateProgram"):
            raise ProbeSkipped("no hiprtc (libhiprtc.so not found): cannot compile the HIP kernel") from None
        rtc = hip.lib
    create = _fn(rtc, "hiprtcCreateProgram", POINTER(c_void_p), c_char_p, c_char_p, c_int,
                 POINTER(c_char_p), POINTER(c_char_p))
    compile_ = _fn(rtc, "hiprtcCompileProgram", c_void_p, c_int, POINTER(c_char_p))
    log_size = _fn(rtc, "hiprtcGetProgramLogSize", c_void_p, POINTER(c_size_t))
    get_log = _fn(rtc, "hiprtcGetProgramLog", c_void_p, c_char_p)
    code_size = _fn(rtc, "hiprtcGetCodeSize", c_void_p, POINTER(c_size_t))
    get_code = _fn(rtc, "hiprtcGetCode", c_void_p, c_char_p)
    destroy = _fn(rtc, "hiprtcDestroyProgram", POINTER(c_void_p))
    err = _fn(rtc, "hiprtcGetErrorString", c_int, restype=c_char_p)

    def check(rc: int, what: str, detail: str = "") -> None:
        if rc != 0:
            name = (err(rc) or b"").decode(errors="replace") or f"HIPRTC_ERROR_{rc}"
            raise ProbeError(rc, name, what + (f": {detail}" if detail else ""))

    prog = c_void_p()
    check(create(byref(prog), kernels.hip.encode(), b"gpusbom_probe.hip", 0, None, None),  # type: ignore[union-attr]
          "hiprtcCreateProgram")
    try:
        opts = [b"-O2"] + ([f"--offload-arch={isa}".encode()] if isa else [])
        arr = (c_char_p * len(opts))(*opts)
        rc = compile_(prog, len(opts), arr)
        if rc != 0:
            size = c_size_t()
            log = ""
            if log_size(prog, byref(size)) == 0 and size.value > 1:
                buf = ctypes.create_string_buffer(size.value)
                get_log(prog, buf)
                log = buf.value.decode(errors="replace").strip()[:2000]
            check(rc, "hiprtcCompileProgram", log)
        size = c_size_t()
        check(code_size(prog, byref(size)), "hiprtcGetCodeSize")
        code = ctypes.create_string_buffer(size.value)
        check(get_code(prog, code), "hiprtcGetCode")
        return code
    finally:
        destroy(byref(prog))
