"""Devices, kernel drivers and firmware of a host, from procfs, sysfs and NVML.

Sources (see shared research notes, "fingerprints"):
- PCI sysfs ``/sys/bus/pci/devices/*/{vendor,device,class,numa_node,driver}``;
- NVIDIA: ``/proc/driver/nvidia/version`` (open vs proprietary kernel module),
  ``/proc/driver/nvidia/gpus/<bus>/information`` and NVML;
- AMD: KFD topology ``/sys/class/kfd/kfd/topology/nodes/*/properties``
  (``gfx_target_version``), ``vbios_version`` and ``fw_version/*`` in the PCI device;
- Intel: the xe/i915 PCI driver, GuC/HuC status in debugfs (root only);
- kernel modules: ``/proc/modules``, ``/sys/module/<m>/version``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from packageurl import PackageURL

from ..model import Component, ComponentType, Evidence, EvidenceMethod
from .root import HostRoot

COLLECTOR = "host"
PCI = "/sys/bus/pci/devices"
KFD = "/sys/class/kfd/kfd/topology/nodes"

VENDORS = {
    "0x10de": ("nvidia", "NVIDIA Corporation"),
    "0x1002": ("amd", "Advanced Micro Devices, Inc."),
    "0x8086": ("intel", "Intel Corporation"),
    "0x1da3": ("habana", "Habana Labs"),
}
#: kernel modules worth reporting even when no device is bound to them
GPU_MODULES = (
    "nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_drm", "nvidia_peermem", "nvidia_fs",
    "gdrdrv", "nouveau", "amdgpu", "amdkfd", "i915", "xe", "habanalabs",
)
_MODULE_VENDOR = {"amdgpu": "amd", "amdkfd": "amd", "i915": "intel", "xe": "intel",
                  "habanalabs": "habana", "nouveau": "freedesktop"}
_NVRM = re.compile(r"NVRM version:\s+(?P<what>.*?Kernel Module.*?)\s+(?P<ver>\d+\.\d+(?:\.\d+)?)\s")


@dataclass
class HostFacts:
    """What the consistency checks need, besides the components."""

    kernel_driver: dict[str, str] = field(default_factory=dict)  # vendor -> module version
    nvidia_flavor: str | None = None  # open | proprietary
    nvml: dict[str, Any] | None = None
    devices: list[Component] = field(default_factory=list)
    modules: dict[str, Component] = field(default_factory=dict)  # module name -> component
    links: list[tuple[Component, Component]] = field(default_factory=list)  # a depends-on b
    notes: list[str] = field(default_factory=list)  # degraded-mode reasons


def _purl(vendor: str, name: str, version: str) -> str:
    """``pkg:generic/VENDOR/NAME@VERSION``, built (and escaped) by packageurl-python."""
    return str(PackageURL(type="generic", namespace=vendor, name=name, version=version))


def _ev(path: str | None, detail: str | None = None, method: str = "device") -> Evidence:
    return Evidence(collector=COLLECTOR, method=method, path=path, detail=detail)


def _kv(text: str, sep: str = ":") -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        k, s, v = line.partition(sep)
        if s:
            out[k.strip()] = v.strip()
    return out


def gfx_target(value: int) -> str:
    """KFD ``gfx_target_version`` (e.g. 90402) -> ``gfx942``; 90010 -> ``gfx90a``."""
    major, minor, step = value // 10000, (value // 100) % 100, value % 100
    return f"gfx{major}{minor:x}{step:x}"


def kernel_modules(root: HostRoot, facts: HostFacts) -> list[Component]:
    text = root.read_text("/proc/modules")
    loaded: dict[str, list[str]] = {}
    if text is None:
        facts.notes.append("/proc/modules not readable: loaded kernel modules unknown")
    else:
        for line in text.splitlines():
            f = line.split()
            if len(f) >= 4:
                users = [u for u in f[3].split(",") if u and u != "-"]
                loaded[f[0]] = users
    names = [m for m in GPU_MODULES if m in loaded or root.exists(f"/sys/module/{m}")]
    out: list[Component] = []
    nv_version = None
    nvrm = root.read_text("/proc/driver/nvidia/version")
    if nvrm:
        m = _NVRM.search(nvrm)
        if m:
            nv_version = m.group("ver")
            facts.nvidia_flavor = "open" if "Open Kernel Module" in m.group("what") else "proprietary"
    for name in names:
        vpath = f"/sys/module/{name}/version"
        version = root.read_value(vpath)
        evs = []
        if name in loaded:
            evs.append(_ev("/proc/modules", f"{name} loaded"))
        if version:
            evs.append(_ev(vpath, version, "version-file"))
        props = {"kernel-module": name, "location": f"/sys/module/{name}"}
        vendor = "nvidia" if name.startswith("nvidia") or name == "gdrdrv" else _MODULE_VENDOR.get(name, "linux")
        if name == "nvidia" and nv_version:
            first = nvrm.splitlines()[0].strip() if nvrm else None
            evs.append(_ev("/proc/driver/nvidia/version", first, "version-file"))
            if version and version != nv_version:
                props["disagreement"] = (f"/sys/module/nvidia/version {version} but "
                                         f"/proc/driver/nvidia/version {nv_version}")
            version = version or nv_version
        if name.startswith("nvidia") and facts.nvidia_flavor:
            props["nvidia:kernel-module-flavor"] = facts.nvidia_flavor
        taint = root.read_value(f"/sys/module/{name}/taint")
        if taint:
            props["taint"] = taint
        if not evs:
            evs.append(_ev(f"/sys/module/{name}", "module present"))
        if vendor in ("nvidia",):
            props.update({"stack": "nvidia-driver", "product": "nvidia-kernel-module"})
        elif vendor == "amd":
            props.update({"stack": "rocm", "product": "amdgpu-kernel-module"})
        elif vendor == "intel":
            props.update({"stack": "intel-gpu", "product": f"{name}-kernel-module"})
        c = Component(
            name=name.replace("_", "-"),
            version=version,
            type=ComponentType.DEVICE_DRIVER,
            purl=_purl(vendor, f"{name.replace('_', '-')}-kernel-module", version) if version else None,
            supplier={"nvidia": "NVIDIA Corporation", "amd": "Advanced Micro Devices, Inc.",
                      "intel": "Intel Corporation"}.get(vendor),
            description=f"Linux kernel module {name}",
            properties=props,
            evidence=evs,
            ecosystem="kernel-module",
        )
        if version and name in ("nvidia", "amdgpu", "i915", "xe"):
            facts.kernel_driver[vendor] = version
        facts.modules[name] = c
        out.append(c)
    seen: set[tuple[str, str]] = set()
    for name, c in facts.modules.items():
        for user in loaded.get(name, []):
            if user in facts.modules and (user, name) not in seen:
                seen.add((user, name))
                facts.links.append((facts.modules[user], c))
    # the NVIDIA modules all need nvidia.ko, also where /proc/modules hides its users
    for user in ("nvidia_uvm", "nvidia_modeset", "nvidia_drm", "nvidia_peermem"):
        if user in facts.modules and "nvidia" in facts.modules and (user, "nvidia") not in seen:
            facts.links.append((facts.modules[user], facts.modules["nvidia"]))
    return out


def _firmware(name: str, version: str, vendor: str, supplier: str, ev: Evidence,
              address: str, product: str) -> Component:
    return Component(
        name=name,
        version=version,
        type=ComponentType.FIRMWARE,
        purl=_purl(vendor, name, version),
        supplier=supplier,
        properties={"pci:address": address, "product": product, "location": f"{PCI}/{address}"},
        evidence=[ev],
        ecosystem="firmware",
    )


def pci_devices(root: HostRoot, facts: HostFacts) -> list[Component]:
    out: list[Component] = []
    addrs = root.listdir(PCI)
    if not addrs and not root.exists(PCI):
        facts.notes.append(f"{PCI} not present: PCI devices unknown")
    nvml_by_bus = {d.get("pci_bus_id"): d for d in (facts.nvml or {}).get("devices", [])}
    kfd = _kfd_nodes(root)
    for addr in addrs:
        base = f"{PCI}/{addr}"
        cls = root.read_value(f"{base}/class")
        vendor_id = root.read_value(f"{base}/vendor")
        if not cls or not vendor_id:
            continue
        vendor = VENDORS.get(vendor_id.lower())
        top = cls.lower()[:4]  # 0x03 display, 0x12 processing accelerator
        if top == "0x12" or (top == "0x03" and vendor is not None):
            out.extend(_device(root, facts, addr, base, cls, vendor_id, vendor, nvml_by_bus, kfd))
    return out


def _device(root: HostRoot, facts: HostFacts, addr: str, base: str, cls: str, vendor_id: str,
            vendor: tuple[str, str] | None, nvml_by_bus: dict[Any, dict[str, Any]],
            kfd: dict[str, dict[str, str]]) -> list[Component]:
    device_id = root.read_value(f"{base}/device") or "unknown"
    vkey, supplier = vendor or ("unknown", None)
    props: dict[str, str] = {
        "pci:address": addr, "pci:vendor-id": vendor_id, "pci:device-id": device_id,
        "pci:class": cls, "vendor": vkey,
    }
    for attr, key in (("subsystem_vendor", "pci:subsystem-vendor-id"),
                      ("subsystem_device", "pci:subsystem-device-id"),
                      ("numa_node", "numa-node"), ("current_link_speed", "pci:link-speed"),
                      ("current_link_width", "pci:link-width")):
        v = root.read_value(f"{base}/{attr}")
        if v is not None:
            props[key] = v
    link = root.readlink(f"{base}/driver")
    driver = link.rsplit("/", 1)[-1] if link else None
    props["driver"] = driver or "none"
    evs = [_ev(base, f"vendor={vendor_id} device={device_id} class={cls} driver={driver or 'none'}")]
    name = f"pci-{vendor_id[2:]}-{device_id.removeprefix('0x')}"
    firmware: list[Component] = []
    if vkey == "nvidia":
        info_path = f"/proc/driver/nvidia/gpus/{addr}/information"
        info = root.read_text(info_path)
        if info:
            kv = _kv(info)
            evs.append(_ev(info_path, kv.get("Model"), "version-file"))
            if kv.get("Model"):
                name = kv["Model"]
            for k, p in (("GPU UUID", "nvidia:uuid"), ("Video BIOS", "nvidia:vbios"),
                         ("GPU Firmware", "nvidia:gsp-firmware"), ("Device Minor", "nvidia:minor"),
                         ("Bus Type", "pci:bus-type")):
                if kv.get(k) and kv[k] not in ("N/A", "??.??.??.??.??"):
                    props[p] = kv[k]
        nv = nvml_by_bus.get(addr)
        if nv:
            evs.append(_ev(None, f"nvml index {nv.get('index')}"))
            name = nv.get("name") or name
            for k, p in (("uuid", "nvidia:uuid"), ("vbios_version", "nvidia:vbios"),
                         ("gsp_firmware_version", "nvidia:gsp-firmware"),
                         ("compute_capability", "cuda:compute-capability"),
                         ("architecture", "nvidia:architecture"),
                         ("inforom_image_version", "nvidia:inforom"),
                         ("memory_total_bytes", "memory-total-bytes"),
                         ("persistence_mode", "nvidia:persistence-mode")):
                if nv.get(k) is not None:
                    props[p] = str(nv[k])
            for k in ("mig_mode", "ecc_mode"):
                if isinstance(nv.get(k), dict):
                    props[f"nvidia:{k.replace('_', '-')}"] = (
                        f"current={nv[k]['current']} pending={nv[k]['pending']}")
            if isinstance(nv.get("retired_pages"), dict):
                rp = nv["retired_pages"]
                props["nvidia:retired-pages"] = (
                    f"sbe={rp.get('single_bit_ecc')} dbe={rp.get('double_bit_ecc')} "
                    f"pending={rp.get('pending')}")
            if isinstance(nv.get("remapped_rows"), dict):
                rr = nv["remapped_rows"]
                props["nvidia:remapped-rows"] = (
                    f"correctable={rr['correctable']} uncorrectable={rr['uncorrectable']} "
                    f"pending={rr['pending']} failure={rr['failure']}")
        src = _ev(info_path if info else base,
                  "nvml" if nv else "/proc/driver/nvidia/gpus information", "version-file")
        if props.get("nvidia:vbios"):
            firmware.append(_firmware("nvidia-vbios", props["nvidia:vbios"], "nvidia", supplier or "",
                                      src, addr, "vbios"))
        if props.get("nvidia:gsp-firmware"):
            firmware.append(_firmware("nvidia-gsp-firmware", props["nvidia:gsp-firmware"], "nvidia",
                                      supplier or "", src, addr, "gsp-firmware"))
    elif vkey == "amd":
        node = kfd.get(addr)
        if node:
            gtv = node.get("gfx_target_version")
            if gtv and gtv.isdigit() and int(gtv):
                props["amd:gfx-target"] = gfx_target(int(gtv))
                props["amd:gfx-target-version"] = gtv
            evs.append(_ev(node["_path"], f"gfx_target_version={gtv}", "version-file"))
        vb = root.read_value(f"{base}/vbios_version")
        if vb:
            props["amd:vbios"] = vb
            firmware.append(_firmware("amd-vbios", vb, "amd", supplier or "",
                                      _ev(f"{base}/vbios_version", vb, "version-file"), addr, "vbios"))
        for fw in root.listdir(f"{base}/fw_version"):
            v = root.read_value(f"{base}/fw_version/{fw}")
            if v and v not in ("0x00000000", "0"):
                n = "amdgpu-" + fw.removesuffix("_fw_version").replace("_", "-") + "-firmware"
                firmware.append(_firmware(n, v, "amd", supplier or "",
                                          _ev(f"{base}/fw_version/{fw}", v, "version-file"), addr, n))
        name = props.get("amd:gfx-target") and f"AMD GPU {props['amd:gfx-target']}" or name
    elif vkey == "intel":
        for card in root.listdir(f"{base}/drm"):
            if not card.startswith("card"):
                continue
            minor = card[4:]
            for gt in ("gt/uc", "gt0/uc"):
                for uc in ("guc", "huc"):
                    p = f"/sys/kernel/debug/dri/{minor}/{gt}/{uc}_info"
                    t = root.read_text(p)
                    if not t:
                        continue
                    ver = _uc_version(t)
                    if ver:
                        props[f"intel:{uc}"] = ver
                        firmware.append(_firmware(f"intel-{uc}-firmware", ver, "intel", supplier or "",
                                                  _ev(p, t.splitlines()[0].strip(), "version-file"),
                                                  addr, f"{uc}-firmware"))
        if driver in ("i915", "xe") and not any(p.startswith("intel:") for p in props):
            facts.notes.append(f"{addr}: GuC/HuC firmware versions need debugfs (root): skipped")
    dev = Component(
        name=name,
        version=None,
        type=ComponentType.DEVICE,
        supplier=supplier,
        description=f"PCI device {addr}",
        properties=props,
        evidence=evs,
        ecosystem="device",
    )
    facts.devices.append(dev)
    mod = facts.modules.get(driver.replace("-", "_")) if driver else None
    if mod is not None:
        facts.links.append((dev, mod))
    for part in firmware:
        facts.links.append((dev, part))
    return [dev, *firmware]


_UC_FOUND = re.compile(r"found\s+(\d+\.\d+(?:\.\d+)*)")
_UC_VERSION = re.compile(r"version:\s*(\d+\.\d+(?:\.\d+)*)")


def _uc_version(text: str) -> str | None:
    m = _UC_FOUND.search(text) or _UC_VERSION.search(text)
    return m.group(1) if m else None


def _kfd_nodes(root: HostRoot) -> dict[str, dict[str, str]]:
    """PCI address -> KFD node properties (GPU nodes only)."""
    out: dict[str, dict[str, str]] = {}
    for n in root.listdir(KFD):
        path = f"{KFD}/{n}/properties"
        text = root.read_text(path)
        if not text:
            continue
        props = _kv(text, " ")
        props["_path"] = path
        try:
            loc = int(props.get("location_id", "0"))
            dom = int(props.get("domain", "0"))
        except ValueError:
            continue
        if not loc or props.get("simd_count", "0") == "0":
            continue  # a CPU node
        addr = f"{dom:04x}:{loc >> 8:02x}:{(loc >> 3) & 0x1f:02x}.{loc & 7}"
        out[addr] = props
    return out


def kernel_component(root: HostRoot) -> Component | None:
    rel = root.read_value("/proc/sys/kernel/osrelease")
    if not rel:
        return None
    return Component(
        name="linux-kernel", version=rel, type=ComponentType.OPERATING_SYSTEM,
        purl=_purl("linux", "linux-kernel", rel),
        properties={"location": "/proc/sys/kernel/osrelease"},
        evidence=[_ev("/proc/sys/kernel/osrelease", rel, "version-file")],
        ecosystem="kernel",
    )


def discover(root: HostRoot, nvml: dict[str, Any] | None) -> tuple[list[Component], HostFacts]:
    facts = HostFacts(nvml=nvml)
    comps: list[Component] = []
    k = kernel_component(root)
    if k is not None:
        comps.append(k)
    comps.extend(kernel_modules(root, facts))
    comps.extend(pci_devices(root, facts))
    _ = EvidenceMethod  # methods are the kebab-case strings above
    return comps, facts
