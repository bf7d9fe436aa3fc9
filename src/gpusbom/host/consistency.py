"""Consistency findings of a host: do the GPU stack's pieces agree with each other?

- the NVIDIA user-space driver (``libcuda.so.<ver>``, ``libnvidia-ml.so.<ver>``, NVML's
  driver version) against the kernel module version;
- ``nvidia-uvm`` against ``nvidia``;
- a CUDA toolkit release, or a framework built for a CUDA release, newer than the
  driver supports (``data/cuda_min_driver.json``: NVIDIA's CUDA release notes);
- forward-compat libraries older than the driver (never used);
- GPU health NVML reports (pending row remapping, remapping failures, pending page retirement);
- GPUs with no kernel driver bound; no GPU at all.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from importlib import resources
from typing import Any

from ..model import Component, ComponentType, Finding
from .discover import HostFacts

_USER_LIBS = ("libcuda", "libnvidia-ml", "libnvidia-ptxjitcompiler")


@lru_cache(maxsize=1)
def cuda_driver_table() -> dict[str, Any]:
    text = resources.files("gpusbom").joinpath("data/cuda_min_driver.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def _vt(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


def _major_minor(v: str) -> str | None:
    m = re.match(r"(\d+)\.(\d+)", v)
    return f"{m.group(1)}.{m.group(2)}" if m else None


def _product(c: Component) -> tuple[str | None, str | None]:
    # a device's own ``product`` property (its model name) when it provides no product
    return c.product_name or c.properties.get("product"), c.product_version


def _paths(c: Component) -> list[str]:
    return [e.path for e in c.evidence if e.path][:3]


def cuda_support(release: str, driver: str) -> tuple[str, str] | None:
    """(severity, why) when ``driver`` does not fully support CUDA ``release``; else None."""
    table = cuda_driver_table()
    mm = _major_minor(release)
    if mm is None:
        return None
    need = table["linux_x86_64_ga"].get(mm)
    if need is None:
        known = sorted(table["linux_x86_64_ga"], key=_vt)
        if _vt(mm) > _vt(known[-1]):
            need = table["linux_x86_64_ga"][known[-1]]  # newer than the table: at least this
        else:
            return None
    if _vt(driver) >= _vt(need):
        return None
    floor = table["minor_version_compatibility_floor"].get(mm.split(".")[0])
    if floor and _vt(driver) >= _vt(floor):
        return ("low", (f"CUDA {mm} needs driver >= {need} for full support; {driver} runs it only "
                       f"through minor-version compatibility (>= {floor}.x: no newer PTX JIT, "
                       "limited features)"))
    return ("high", (f"CUDA {mm} needs driver >= {need} (minor-version compatibility: >= "
                    f"{floor or '?'}.x); the driver is {driver}"))


def check(components: list[Component], facts: HostFacts) -> list[Finding]:
    out: list[Finding] = []
    kmod = facts.modules.get("nvidia")
    kver = facts.kernel_driver.get("nvidia")
    nvml_ver = (facts.nvml or {}).get("driver_version")
    driver = kver or nvml_ver
    # 1. user-space driver vs kernel module
    if kver:
        for c in components:
            prod, ver = _product(c)
            if prod in _USER_LIBS and ver and ver != kver:
                out.append(Finding(
                    id="host/driver-userspace-kernel-mismatch", kind="consistency", severity="high",
                    title=f"NVIDIA user-space driver {prod} {ver} does not match kernel module {kver}",
                    detail="CUDA applications fail with 'driver/library version mismatch' "
                           "(NVML) or CUDA_ERROR_SYSTEM_DRIVER_MISMATCH until both are the same "
                           "release (reboot or reload the module after a driver upgrade).",
                    components=tuple(x for x in (c.bom_ref, kmod.bom_ref if kmod else None) if x),
                    evidence=tuple(_paths(c) + ["/sys/module/nvidia/version"]),
                ))
        if nvml_ver and nvml_ver != kver:
            out.append(Finding(
                id="host/driver-nvml-kernel-mismatch", kind="consistency", severity="high",
                title=f"NVML reports driver {nvml_ver} but the kernel module is {kver}",
                components=(kmod.bom_ref,) if kmod else (),
                evidence=("/proc/driver/nvidia/version",),
            ))
    uvm = facts.modules.get("nvidia_uvm")
    if kmod and uvm and kmod.version and uvm.version and kmod.version != uvm.version:
        out.append(Finding(
            id="host/driver-uvm-mismatch", kind="consistency", severity="medium",
            title=f"nvidia-uvm {uvm.version} does not match nvidia {kmod.version}",
            components=(uvm.bom_ref, kmod.bom_ref),
            evidence=("/sys/module/nvidia_uvm/version", "/sys/module/nvidia/version"),
        ))
    # 2. toolkits and frameworks vs the driver
    if driver:
        for c in components:
            release = None
            what = ""
            if c.stack == "cuda" and c.properties.get("release"):
                release = c.properties["release"]
                what = f"CUDA toolkit {release}"
            bf = c.properties.get("built-for", "")
            if bf.startswith("cuda "):
                release = bf[5:]
                what = f"{c.name} {c.version or ''} (built for CUDA {release})".replace("  ", " ")
            if not release:
                continue
            res = cuda_support(release, driver)
            if res:
                sev, why = res
                out.append(Finding(
                    id="host/cuda-newer-than-driver", kind="consistency", severity=sev,
                    title=f"{what} is newer than driver {driver} supports",
                    detail=why + " (source: NVIDIA CUDA Toolkit Release Notes, table in "
                                 "gpusbom/data/cuda_min_driver.json)",
                    components=tuple(x for x in (c.bom_ref, kmod.bom_ref if kmod else None) if x),
                    evidence=tuple(_paths(c)),
                ))
            # forward-compat libraries
        for c in components:
            prod, ver = _product(c)
            if prod == "cuda-compat" and ver and _vt(ver) <= _vt(driver):
                out.append(Finding(
                    id="host/cuda-compat-unused", kind="consistency", severity="info",
                    title=f"CUDA forward-compat libraries {ver} are not newer than driver {driver}: "
                          "they are not used",
                    components=(c.bom_ref,), evidence=tuple(_paths(c)),
                ))
    # 3. health and binding
    nv_by_bus = {d.get("pci_bus_id"): d for d in (facts.nvml or {}).get("devices", [])}
    for dev in facts.devices:
        addr = dev.properties.get("pci:address", "")
        nv = nv_by_bus.get(addr) or {}
        rr = nv.get("remapped_rows") or {}
        if rr.get("failure") or rr.get("pending"):
            out.append(Finding(
                id="host/gpu-row-remapping", kind="health",
                severity="high" if rr.get("failure") else "medium",
                title=f"{dev.name} {addr}: row remapping "
                      + ("failed" if rr.get("failure") else "pending (reset the GPU)"),
                components=(dev.bom_ref,),
            ))
        rp = nv.get("retired_pages") or {}
        if rp.get("pending"):
            out.append(Finding(
                id="host/gpu-page-retirement-pending", kind="health", severity="medium",
                title=f"{dev.name} {addr}: page retirement pending (reset the GPU)",
                components=(dev.bom_ref,),
            ))
        drv = dev.properties.get("driver")
        if drv in (None, "none"):
            out.append(Finding(
                id="host/gpu-no-driver", kind="consistency", severity="medium",
                title=f"{dev.name} {addr}: no kernel driver bound", components=(dev.bom_ref,),
                evidence=(f"/sys/bus/pci/devices/{addr}/driver",),
            ))
        elif drv == "nouveau":
            out.append(Finding(
                id="host/gpu-nouveau", kind="consistency", severity="medium",
                title=f"{dev.name} {addr} is bound to nouveau: CUDA cannot use it",
                components=(dev.bom_ref,),
            ))
    if not any(d.type is ComponentType.DEVICE for d in facts.devices):
        out.append(Finding(
            id="host/no-gpu", kind="inventory", severity="info", title="no GPU devices found",
            detail="no display or accelerator PCI device of a GPU vendor in /sys/bus/pci/devices; "
                   "the installed stack is still inventoried",
            evidence=("/sys/bus/pci/devices",),
        ))
    return sorted(out, key=lambda f: (f.kind, f.id, f.title))
