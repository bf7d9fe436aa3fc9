"""Compatibility targets: one GPU kind and the host's drivers (:class:`GpuTarget`), from a
target string (``h100``, ``sm_90``, ``gfx942``, ``mi300x@rocm6.2``: :func:`platform_from_string`)
or from a host scan (:func:`platforms_from_host`: its GPUs, the NVIDIA driver and the ROCm
kernel driver the scan found). :mod:`.evaluate` judges an image against them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..model import Component, ComponentType, ScanResult
from .arch import ComputeCapability, GfxTarget
from .reference_data import find_model

__all__ = ["Gpu", "GpuTarget", "platform_from_string", "platforms_from_host"]

def _paths(c: Component) -> list[str]:
    return list(dict.fromkeys(e.path for e in c.evidence if e.path))


@dataclass(frozen=True)
class Gpu:
    """One kind of GPU: what the rules need to know about it."""

    label: str  # "NVIDIA H200", "H100", "sm_90", "gfx90a:xnack-"
    vendor: str  # nvidia | amd | intel | unknown
    cc: ComputeCapability | None = None
    gfx: GfxTarget | None = None
    data_center: bool | None = None
    brand: str | None = None
    model: str | None = None  # the gpu_models.json entry it matched
    count: int = 1
    addresses: tuple[str, ...] = ()
    intel: str | None = None  # Intel GPU family (pvc, dg2, bmg, ...): gpusbom.compat.intel


    def describe(self) -> str:
        arch = self.cc.sm if self.cc else (str(self.gfx) if self.gfx else "")
        head = self.label if not arch or arch == self.label else f"{self.label} ({arch})"
        return f"{self.count} x {head}" if self.count > 1 else head


@dataclass(frozen=True)
class GpuTarget:
    """A GPU kind plus the drivers it runs under."""

    gpu: Gpu
    driver: str | None = None  # NVIDIA kernel driver version
    rocm_kmd: str | None = None  # ROCm release of the amdgpu kernel driver (major.minor)
    host: str | None = None  # host reference, when from a host scan
    evidence: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        parts = [self.gpu.describe()]
        if self.gpu.vendor == "nvidia":
            parts.append(f"driver {self.driver}" if self.driver else "driver unknown")
        if self.host:
            parts.append(f"[{self.host}]")
        return ", ".join(parts[:2]) + (f" {parts[2]}" if len(parts) > 2 else "")


_SM_RX = re.compile(r"^(sm_|compute_)?\d{2,3}$|^\d{1,2}\.\d$", re.IGNORECASE)


def platform_from_string(target: str, driver: str | None = None) -> GpuTarget:
    """``H100``, ``NVIDIA H200``, ``sm_90``, ``9.0``, ``gfx90a:xnack-``, ``MI300X``."""
    from ..errors import UsageError

    t = target.strip()
    if not t:
        raise UsageError("empty GPU target")
    if _SM_RX.match(t):
        cc = ComputeCapability.parse(t)
        if cc is None:
            raise UsageError(f"GPU target {target!r}: not a compute capability")
        return GpuTarget(Gpu(label=cc.sm, vendor="nvidia", cc=cc), driver=driver)
    if t.lower().startswith("gfx"):
        g = GfxTarget.parse(t)
        if g is None:
            raise UsageError(f"GPU target {target!r}: not a gfx target id (gfx90a, gfx90a:xnack-)")
        return GpuTarget(Gpu(label=str(g), vendor="amd", gfx=g, data_center=None), driver=None)
    from .intel import lookup_device

    hit = lookup_device(t)
    if hit is not None:
        return GpuTarget(Gpu(label=hit[1], vendor="intel", intel=hit[0]), driver=None)
    m = find_model(t)
    if m is None:
        raise UsageError(
            f"GPU target {target!r}: unknown model; give sm_XY, gfxNNN, or a model of "
            "gpusbom/data/gpu_models.json (H100, H200, B200, A100, L4, RTX 4090, MI300X, ...), "
            "an Intel GPU (pvc, dg2, bmg, lnl-m, ptl-h) or an Intel PCI id (intel:0x0bd5)"
        )
    if m.vendor == "nvidia":
        cc = ComputeCapability.parse(m.cc or "")
        gpu = Gpu(label=m.name, vendor="nvidia", cc=cc, data_center=m.data_center,
                  brand=m.brand, model=m.name)
        return GpuTarget(gpu, driver=driver)
    g = GfxTarget.parse(m.gfx or "")
    return GpuTarget(Gpu(label=m.name, vendor=m.vendor, gfx=g, data_center=m.data_center,
                        model=m.name))


def _host_driver(host: ScanResult) -> tuple[str | None, list[str]]:
    for c in host.components:
        if c.properties.get("kernel-module") == "nvidia" and c.version:
            return c.version, ["/sys/module/nvidia/version"]
    for c in host.components:
        if c.product_name == "libcuda":
            ver = c.product_version
            if ver:
                return ver, _paths(c)[:1]
    return None, []


_DKMS_ROCM = re.compile(r"\.(\d)(\d{2})(\d{2})(?:[-~+].*)?$")


def _host_rocm_kmd(host: ScanResult) -> tuple[str | None, list[str]]:
    """The ROCm release of the amdgpu kernel driver: the amdgpu-dkms package version encodes
    it (``1:6.10.5.60400-2084815.24.04`` -> 6.4)."""
    for c in host.components:
        if c.name == "amdgpu-dkms" and c.version:
            m = _DKMS_ROCM.search(c.version.split("-")[0])
            if m:
                return f"{int(m.group(1))}.{int(m.group(2))}", _paths(c)[:1]
    return None, []


def platforms_from_host(host: ScanResult) -> list[GpuTarget]:
    """One platform per kind of GPU on a host scan (identical GPUs grouped)."""
    ref = host.target.reference or host.target.name or "host"
    driver, dpaths = _host_driver(host)
    kmd, kpaths = _host_rocm_kmd(host)
    groups: dict[tuple[Any, ...], list[Component]] = {}
    for c in host.components:
        if c.type is not ComponentType.DEVICE:
            continue
        vendor = c.properties.get("vendor", "unknown")
        if vendor not in ("nvidia", "amd", "intel"):
            continue
        key = (vendor, c.name, c.properties.get("cuda:compute-capability"),
               c.properties.get("amd:gfx-target"))
        groups.setdefault(key, []).append(c)
    out = []
    for (vendor, name, ccs, gfxs), comps in sorted(groups.items(), key=lambda kv: str(kv[0])):
        first = comps[0]
        model = find_model(name, first.properties.get("pci:device-id"))
        cc = ComputeCapability.parse(ccs) if ccs else None
        notes = []
        if vendor == "nvidia" and cc is None and model and model.cc:
            cc = ComputeCapability.parse(model.cc)
            notes.append(f"compute capability {model.cc} from the model table ({model.name}): "
                         "the host scan did not report one")
        gfx = GfxTarget.parse(gfxs) if gfxs else None
        if vendor == "amd" and gfx is None and model and model.gfx:
            gfx = GfxTarget.parse(model.gfx)
        addrs = tuple(sorted(c.properties.get("pci:address", "") for c in comps))
        intel_fam = None
        if vendor == "intel":
            from .intel import pci_family

            hit = pci_family(first.properties.get("pci:device-id") or "")
            intel_fam = hit[0] if hit else None
            if hit is None:
                notes.append(f"Intel PCI id {first.properties.get('pci:device-id')} is not in "
                             "gpusbom/data/intel_gpus.json: its device code is not judged")
        gpu = Gpu(intel=intel_fam,
            label=name, vendor=vendor, cc=cc, gfx=gfx,
            data_center=model.data_center if model else None,
            brand=model.brand if model else None,
            model=model.name if model else None, count=len(comps), addresses=addrs,
        )
        ev = [p for c in comps for p in _paths(c)[:2]]
        out.append(GpuTarget(gpu, driver=driver if vendor == "nvidia" else None,
                            rocm_kmd=kmd if vendor == "amd" else None, host=ref,
                            evidence=tuple(dict.fromkeys(ev + (dpaths if vendor == "nvidia"
                                                               else kpaths))),
                            notes=tuple(notes)))
    return out
