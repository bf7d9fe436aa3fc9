"""OpenCL through pyopencl: every platform the ICD loader lists, every device of each.

Device ids are ``PLATFORM:DEVICE`` indices in the loader's order.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import time
from typing import Any

from .. import settings
from . import kernel as K
from .base import Backend, DeviceInfo, ProbeError, ProbeSkipped, RunOutcome, pci_bus_id, register

#: used when pyopencl cannot name a status code (cl.h values)
ERROR_NAMES = {
    -1: "CL_DEVICE_NOT_FOUND", -2: "CL_DEVICE_NOT_AVAILABLE", -3: "CL_COMPILER_NOT_AVAILABLE",
    -4: "CL_MEM_OBJECT_ALLOCATION_FAILURE", -5: "CL_OUT_OF_RESOURCES", -6: "CL_OUT_OF_HOST_MEMORY",
    -11: "CL_BUILD_PROGRAM_FAILURE", -30: "CL_INVALID_VALUE", -33: "CL_INVALID_DEVICE",
    -34: "CL_INVALID_CONTEXT", -36: "CL_INVALID_COMMAND_QUEUE", -45: "CL_INVALID_PROGRAM_EXECUTABLE",
    -46: "CL_INVALID_KERNEL_NAME", -54: "CL_INVALID_WORK_GROUP_SIZE",
    -1001: "CL_PLATFORM_NOT_FOUND_KHR",
}


def _cl() -> Any:
    try:
        import pyopencl as cl
    except ImportError as exc:
        raise ProbeSkipped(f"pyopencl is not installed ({exc})") from None
    except OSError as exc:  # the wheel's loader could not be opened
        raise ProbeSkipped(f"no OpenCL ICD loader ({exc})") from None
    return cl


def _error_name(cl: Any, code: int | None) -> str | None:
    if code is None:
        return None
    if code in ERROR_NAMES:
        return ERROR_NAMES[code]
    for k, v in vars(cl.status_code).items():
        if isinstance(v, int) and v == code and k.isupper():
            return f"CL_{k}"
    return f"CL_ERROR_{code}"


def _as_probe_error(cl: Any, exc: Exception, what: str) -> ProbeError:
    code = getattr(exc, "code", None)
    if not isinstance(code, int):
        inner = exc.args[0] if exc.args else None
        code = getattr(inner, "code", None)
    text = str(exc).strip()
    return ProbeError(code if isinstance(code, int) else None, _error_name(cl, code),
                      f"{what}: {text[:2000]}")


def _platforms(cl: Any) -> list[Any]:
    try:
        plats = cl.get_platforms()
    except cl.Error as exc:
        code = getattr(exc, "code", None)
        if code == -1001:
            raise ProbeSkipped("the OpenCL ICD loader lists no platform (CL_PLATFORM_NOT_FOUND_KHR)") from None
        raise _as_probe_error(cl, exc, "clGetPlatformIDs") from None
    if not plats:
        raise ProbeSkipped("the OpenCL ICD loader lists no platform")
    return list(plats)


def _devices(cl: Any, platform: Any) -> list[Any]:
    try:
        return list(platform.get_devices())
    except cl.Error as exc:
        if getattr(exc, "code", None) == -1:  # CL_DEVICE_NOT_FOUND: an empty platform
            return []
        raise _as_probe_error(cl, exc, f"clGetDeviceIDs on {platform.name}") from None


def _info(dev: Any, cl: Any, name: str) -> Any:
    param = getattr(cl.device_info, name, None)
    if param is None:
        return None
    try:
        return dev.get_info(param)
    except Exception:  # noqa: BLE001 - an extension the device lacks
        return None


def _facts(cl: Any, platform: Any, dev: Any) -> dict[str, str]:
    f: dict[str, str] = {
        "platform": platform.name.strip(),
        "platform-version": platform.version.strip(),
        "vendor": dev.vendor.strip(),
        "runtime-version": dev.version.strip(),
        "driver-version": dev.driver_version.strip(),
        "opencl-c-version": dev.opencl_c_version.strip(),
        "device-type": ",".join(n.lower() for n in ("GPU", "CPU", "ACCELERATOR", "CUSTOM")
                                if dev.type & getattr(cl.device_type, n, 0)) or str(dev.type),
        "max-work-group-size": str(dev.max_work_group_size),
        "local-memory-bytes": str(dev.local_mem_size),
        "compute-units": str(dev.max_compute_units),
        "global-memory-bytes": str(dev.global_mem_size),
    }
    ext = dev.extensions.split()
    if "cl_nv_device_attribute_query" in ext:
        major, minor = _info(dev, cl, "COMPUTE_CAPABILITY_MAJOR_NV"), _info(dev, cl, "COMPUTE_CAPABILITY_MINOR_NV")
        if major is not None and minor is not None:
            f["compute-capability"] = f"{major}.{minor}"
            f["isa"] = f"sm_{major}{minor}"
        warp = _info(dev, cl, "WARP_SIZE_NV")
        if warp:
            f["simd-width"] = str(warp)
        bus, slot = _info(dev, cl, "PCI_BUS_ID_NV"), _info(dev, cl, "PCI_SLOT_ID_NV")
        if bus is not None and slot is not None:
            domain = _info(dev, cl, "PCI_DOMAIN_ID_NV") or 0
            # CL_DEVICE_PCI_SLOT_ID_NV is the PCI device number (seen on an H200: 6 for 00:06.0)
            f["pci-bus-id"] = pci_bus_id(int(domain), int(bus), int(slot), 0)
    if "cl_amd_device_attribute_query" in ext:
        wave = _info(dev, cl, "WAVEFRONT_WIDTH_AMD")
        if wave:
            f["simd-width"] = str(wave)
        board = _info(dev, cl, "BOARD_NAME_AMD")
        if board:
            f["board-name"] = str(board).strip()
        f["isa"] = dev.name.split(":")[0].strip()  # "gfx90a:sramecc+:xnack-"
        topo = _info(dev, cl, "TOPOLOGY_AMD")
        if topo is not None and all(hasattr(topo, a) for a in ("bus", "device", "function")):
            f["pci-bus-id"] = pci_bus_id(0, int(topo.bus), int(topo.device), int(topo.function))
    return f


#: set by the runner for an isolated child (the ICD loader then lists one platform and,
#: on NVIDIA, the driver one GPU): the platform's name and the device's PCI address
ENV_PLATFORM = settings.env_name("opencl_platform")
ENV_PCI = settings.env_name("opencl_pci")


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _icd_library(platform: Any) -> str | None:
    """The vendor ICD library behind ``platform``: an ICD platform object starts with a
    pointer to its dispatch table (cl_icd_dispatch), whose entries are the vendor's own
    functions; ``dladdr`` names the library holding ``clGetPlatformInfo``."""
    try:
        pid = int(platform.int_ptr)
        psize = ctypes.sizeof(ctypes.c_void_p)
        table = ctypes.c_void_p.from_address(pid).value if pid else None
        fn = ctypes.c_void_p.from_address(table + psize).value if table else None
        if not fn:
            return None
        dladdr = ctypes.CDLL(None).dladdr
        dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
        dladdr.restype = ctypes.c_int
        info = _DlInfo()
        if dladdr(fn, ctypes.byref(info)) == 0 or not info.dli_fname:
            return None
        path = os.path.realpath(os.fsdecode(info.dli_fname))
    except Exception:  # noqa: BLE001 - isolation is an optimisation only
        return None
    if not os.path.isfile(path) or os.path.basename(path).startswith("libOpenCL"):
        return None  # the loader itself (a wrapping loader): no isolation
    return path


_LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64",
             "/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu", "/lib64", "/usr/lib", "/lib",
             "/usr/local/lib")


def _resolve_lib(lib: str) -> str:
    """The real file behind an ICD library name (``libpocl.so.2`` in an .icd file or in
    OCL_ICD_FILENAMES, a path from dladdr), so the speculative child and isolate() name the
    same library the same way; the name itself when it cannot be found here."""
    if os.path.isabs(lib):
        return os.path.realpath(lib) if os.path.exists(lib) else lib
    dirs = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d] + list(_LIB_DIRS)
    for d in dirs:
        p = os.path.join(d, lib)
        if os.path.exists(p):
            return os.path.realpath(p)
    return lib


def _vendors_dir(workdir: str, lib: str) -> str:
    """A vendors directory holding one .icd file naming ``lib`` (ocl-icd and the Khronos
    loader both read OCL_ICD_VENDORS; ocl-icd lists nothing for OCL_ICD_FILENAMES beside an
    empty vendors directory). Named by the library's real file, so the speculative child
    (which knows the name from the .icd file or OCL_ICD_FILENAMES) and isolate() (the path
    from dladdr) agree; written once, never rewritten under a running child."""
    real = _resolve_lib(lib)
    vendors = os.path.join(workdir, "icd-" + hashlib.sha1(
        os.path.basename(real).encode(), usedforsecurity=False).hexdigest()[:12])
    os.makedirs(vendors, exist_ok=True)
    path = os.path.join(vendors, "vendor.icd")
    if not os.path.exists(path):
        tmp = path + f".{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(real + "\n")
        os.replace(tmp, path)
    return vendors


def _find(cl: Any, device_id: str) -> tuple[Any, Any]:
    try:
        pi, di = (int(x) for x in device_id.split(":"))
    except ValueError:
        raise ProbeError(None, "INVALID_DEVICE_ID", f"bad OpenCL device id {device_id!r}") from None
    plats = _platforms(cl)
    want = (settings.raw("opencl_platform") or None)
    if want:  # isolated: the loader lists only this platform (find it by name, not index)
        named = [i for i, p in enumerate(plats) if p.name.strip() == want]
        if named:
            pi = named[0]
    if pi >= len(plats):
        raise ProbeError(-33, "CL_INVALID_DEVICE", f"no platform {pi}")
    devs = _devices(cl, plats[pi])
    pci = (settings.raw("opencl_pci") or None)
    if pci:  # isolated to one GPU: find it by PCI address
        for i, d in enumerate(devs):
            try:
                if _facts(cl, plats[pi], d).get("pci-bus-id") == pci:
                    di = i
                    break
            except Exception:  # noqa: BLE001, S112 - pyopencl's vendor errors: a device whose
                continue  # facts the ICD cannot give is not the one the PCI address names
        else:
            raise ProbeError(-33, "CL_INVALID_DEVICE",
                             f"no device at {pci} on {plats[pi].name.strip()}")
    if di >= len(devs):
        raise ProbeError(-33, "CL_INVALID_DEVICE", f"no device {di} on {plats[pi].name}")
    return plats[pi], devs[di]


@register
class OpenCLBackend(Backend):
    id = "opencl"
    display = "OpenCL (pyopencl)"
    model = "OpenCL"
    runtime_libraries = ("libOpenCL",)

    def enumerate(self) -> list[DeviceInfo]:
        cl = _cl()
        out: list[DeviceInfo] = []
        plats = _platforms(cl)
        icds = [_icd_library(p) for p in plats]
        for pi, plat in enumerate(plats):
            icd = icds[pi]
            for di, dev in enumerate(_devices(cl, plat)):
                try:
                    facts = _facts(cl, plat, dev)
                except cl.Error as exc:
                    raise _as_probe_error(cl, exc, "clGetDeviceInfo") from None
                if icd:
                    facts["_icd"] = icd
                    facts["icd"] = icd
                    if icds.count(icd) == 1:  # the ICD's only platform: index 0 when isolated
                        facts["_icd-di"] = str(di)
                out.append(DeviceInfo(f"{pi}:{di}", dev.name.strip(), facts))
        if not out:
            raise ProbeSkipped("no OpenCL device on any platform")
        return out

    def isolate(self, device_id: str, facts: dict[str, str],
                workdir: str | None = None) -> tuple[str, dict[str, str]]:
        # the ICD loader initialises every vendor's platform (PoCL loads LLVM, NVIDIA every
        # GPU): show the child only its platform's ICD and, on NVIDIA, only its GPU
        lib, name = facts.get("_icd"), facts.get("platform")
        if not lib or not name or not workdir:
            return device_id, {}
        # a vendors directory holding this one .icd file (ocl-icd and the Khronos loader
        # both read OCL_ICD_VENDORS; ocl-icd lists nothing for OCL_ICD_FILENAMES beside an
        # empty vendors directory)
        vendors = _vendors_dir(workdir, lib)
        extra = {"OCL_ICD_VENDORS": vendors, ENV_PLATFORM: name}
        if os.environ.get("OCL_ICD_FILENAMES"):
            # the caller's list would add its platforms
            extra["OCL_ICD_FILENAMES"] = _resolve_lib(lib)
        if facts.get("_icd-di") is not None and "nvidia" not in facts.get("vendor", "").lower():
            # the ICD's only platform: the child sees it as platform 0, no name needed (the
            # same key as a speculative child's, which is then kept)
            del extra[ENV_PLATFORM]
            return f"0:{facts['_icd-di']}", extra
        pci = facts.get("pci-bus-id")
        if pci and "CUDA_VISIBLE_DEVICES" not in os.environ and \
                "nvidia" in facts.get("vendor", "").lower():
            from .cuda import nvidia_proc_uuids

            uuid = nvidia_proc_uuids().get(pci)
            if uuid:
                extra.update({"CUDA_VISIBLE_DEVICES": uuid, ENV_PCI: pci})
        return device_id, extra

    def speculate(self, workdir: str | None = None) -> list[tuple[str, dict[str, str]]]:
        # PoCL (OpenCL on the CPU) loads LLVM when initialised: its child starts at once,
        # beside the enumeration child, as isolate() would start it for a one-device
        # platform; kept when the enumeration agrees, killed otherwise
        if not workdir:
            return []
        listed = os.environ.get("OCL_ICD_FILENAMES")
        libs: list[str] = []
        if listed:
            libs = [x for x in listed.split(":") if x]
        else:
            vendors_dir = os.environ.get("OCL_ICD_VENDORS") or "/etc/OpenCL/vendors"
            try:
                names = sorted(os.listdir(vendors_dir))
            except OSError:
                return []
            for n in names:
                if not n.endswith(".icd"):
                    continue
                try:
                    with open(os.path.join(vendors_dir, n), encoding="utf-8") as f:
                        libs.append(f.readline().strip())
                except (OSError, UnicodeDecodeError):
                    continue
        out: list[tuple[str, dict[str, str]]] = []
        for lib in libs:
            if not lib or "pocl" not in os.path.basename(lib).lower():
                continue
            env = {"OCL_ICD_VENDORS": _vendors_dir(workdir, lib)}
            if listed:
                env["OCL_ICD_FILENAMES"] = _resolve_lib(lib)
            out.append(("0:0", env))
        return out

    def run(self, device_id: str, kernels: K.KernelSet) -> RunOutcome:
        if kernels.opencl is None:
            raise ProbeSkipped(f"kernel set {kernels.name} has no OpenCL kernel")
        t0 = time.perf_counter()
        cl = _cl()
        import numpy as np

        plat, dev = _find(cl, device_id)
        facts = _facts(cl, plat, dev)
        facts["init-ms"] = f"{(time.perf_counter() - t0) * 1000:.1f}"
        if not dev.available:
            raise ProbeError(-2, "CL_DEVICE_NOT_AVAILABLE", f"{dev.name.strip()} reports itself unavailable")
        step = "clCreateContext"
        try:
            t1 = time.perf_counter()
            ctx = cl.Context([dev])
            queue = cl.CommandQueue(ctx)
            facts["context-ms"] = f"{(time.perf_counter() - t1) * 1000:.1f}"
            step = "clBuildProgram"
            t0 = time.perf_counter()
            prog = cl.Program(ctx, kernels.opencl).build()
            facts["jit-ms"] = f"{(time.perf_counter() - t0) * 1000:.1f}"
            knl = getattr(prog, kernels.entry)
            step = "clGetKernelWorkGroupInfo"
            mult = knl.get_work_group_info(
                cl.kernel_work_group_info.PREFERRED_WORK_GROUP_SIZE_MULTIPLE, dev)
            facts["preferred-work-group-multiple"] = str(mult)
            try:  # OpenCL 2.1+ sub-groups
                sg = knl.get_sub_group_info(
                    dev, cl.kernel_sub_group_info.MAX_SUB_GROUP_SIZE_FOR_NDRANGE, (K.TILE, K.TILE))
                if sg:
                    facts["sub-group-size"] = str(sg)
                    facts.setdefault("simd-width", str(sg))
            except Exception:  # noqa: BLE001, S110 - no sub-group support
                pass
            step = "clCreateBuffer"
            a, b = K.inputs()
            a_np = np.frombuffer(a, dtype=np.float32)
            b_np = np.frombuffer(b, dtype=np.float32)
            mf = cl.mem_flags
            a_d = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a_np)
            b_d = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=b_np)
            c_host = np.full(K.N * K.N, np.nan, dtype=np.float32)
            c_d = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=c_host)
            step = "clEnqueueNDRangeKernel"
            g = K.GROUPS * K.TILE
            t1 = time.perf_counter()
            knl(queue, (g, g), (K.TILE, K.TILE), a_d, b_d, c_d, np.uint32(K.N))
            step = "clFinish"
            queue.finish()
            facts["kernel-ms"] = f"{(time.perf_counter() - t1) * 1000:.2f}"
            step = "clEnqueueReadBuffer"
            cl.enqueue_copy(queue, c_host, c_d)
            queue.finish()
        except cl.Error as exc:
            raise _as_probe_error(cl, exc, step) from None
        return RunOutcome(c_host.tobytes(), facts)
