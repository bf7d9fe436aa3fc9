"""The data tables the rules read (``gpusbom/data/*.json``, each citing its source) and the
version arithmetic over them.

- ``cuda_min_driver.json``: CUDA release -> minimum Linux driver; minor-version floors;
- ``cuda_ptx_isa.json``: PTX ISA version -> CUDA release;
- ``gpu_models.json``: GPU model -> compute capability / gfx, data-center or not, NVML brand;
- ``rocm_kmd.json``: ROCm user space vs amdgpu kernel driver window.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache, lru_cache
from importlib import resources
from typing import Any


@cache
def load(name: str) -> dict[str, Any]:
    text = resources.files("gpusbom").joinpath(f"data/{name}").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def vtuple(v: str) -> tuple[int, ...]:
    """``580.159.04`` -> (580, 159, 4); ``12.4`` -> (12, 4)."""
    return tuple(int(x) for x in re.findall(r"\d+", v))


def major_minor(v: str | None) -> str | None:
    if not v:
        return None
    m = re.match(r"\s*(\d+)\.(\d+)", v)
    if m:
        return f"{int(m.group(1))}.{int(m.group(2))}"
    m = re.match(r"\s*(\d+)\s*$", v)
    return m.group(1) if m else None


# ------------------------------------------------------------------------------ CUDA driver


def min_driver(cuda: str) -> str | None:
    """Minimum Linux x86_64 driver of a CUDA release (major.minor), None when unknown."""
    got: str | None = load("cuda_min_driver.json")["linux_x86_64_ga"].get(major_minor(cuda) or "")
    return got


def minor_floor(major: str) -> str | None:
    got: str | None = load("cuda_min_driver.json")["minor_version_compatibility_floor"].get(major)
    return got


def driver_cuda(driver: str) -> str | None:
    """The newest CUDA release (major.minor) a driver supports, from the minimum-driver table;
    None when the driver is older than every release in it."""
    best: str | None = None
    d = vtuple(driver)
    for rel, need in load("cuda_min_driver.json")["linux_x86_64_ga"].items():
        if d >= vtuple(need) and (best is None or vtuple(rel) > vtuple(best)):
            best = rel
    return best


def newest_known_cuda() -> str:
    releases: list[str] = list(load("cuda_min_driver.json")["linux_x86_64_ga"])
    return max(releases, key=vtuple)


def ptx_isa_cuda(isa: str) -> str | None:
    """The CUDA release that introduced a PTX ISA version (None: newer than the table)."""
    got: str | None = load("cuda_ptx_isa.json")["ptx_isa_to_cuda"].get(major_minor(isa) or "")
    return got


def driver_ptx_isa(driver: str) -> str | None:
    """The newest PTX ISA a driver can JIT-compile."""
    cuda = driver_cuda(driver)
    if cuda is None:
        return None
    best: str | None = None
    for isa, rel in load("cuda_ptx_isa.json")["ptx_isa_to_cuda"].items():
        if vtuple(rel) <= vtuple(cuda) and (best is None or vtuple(isa) > vtuple(best)):
            best = isa
    return best


def driver_can_jit(driver: str, isa: str) -> bool | None:
    """True/False whether the driver JIT-compiles PTX of this ISA; None when unknown."""
    need = ptx_isa_cuda(isa)
    have = driver_cuda(driver)
    if have is None:
        return None
    if need is None:
        known = load("cuda_ptx_isa.json")["ptx_isa_to_cuda"]
        newest_isa = max(known, key=vtuple)
        if vtuple(isa) > vtuple(newest_isa):
            # newer than the table: a driver newer than the table's newest CUDA may know it
            return False if vtuple(have) <= vtuple(known[newest_isa]) else None
        return None
    return vtuple(have) >= vtuple(need)


# ------------------------------------------------------------------------------ GPU models


@dataclass(frozen=True)
class GpuModel:
    name: str
    vendor: str  # nvidia | amd | intel
    cc: str | None = None  # "9.0"
    gfx: str | None = None  # "gfx942"
    data_center: bool | None = None
    brand: str | None = None
    aliases: tuple[str, ...] = field(default_factory=tuple)
    pci_device_ids: tuple[str, ...] = field(default_factory=tuple)


_NOISE = re.compile(
    r"\b(nvidia|amd|instinct|geforce|radeon|tesla|sxm\d*|pcie|nvl\d*|hbm\d*e?|\d+\s*gb|"
    r"accelerator|graphics|generation)\b|[-_]",
    re.IGNORECASE,
)


def _norm(name: str) -> str:
    return " ".join(_NOISE.sub(" ", name).lower().split())


@lru_cache(maxsize=1)
def gpu_models() -> tuple[GpuModel, ...]:
    out = []
    for m in load("gpu_models.json")["models"]:
        out.append(GpuModel(
            name=m["name"], vendor=m["vendor"], cc=m.get("cc"), gfx=m.get("gfx"),
            data_center=m.get("data_center"), brand=m.get("brand"),
            aliases=tuple(m.get("aliases", ())), pci_device_ids=tuple(m.get("pci_device_ids", ())),
        ))
    return tuple(out)


def find_model(name: str, pci_device_id: str | None = None) -> GpuModel | None:
    """A model by name or alias (``H200``, ``NVIDIA H200``, ``H100 80GB HBM3``,
    ``Instinct MI300X``), else by PCI device id."""
    want = _norm(name)
    if want:
        for m in gpu_models():
            for alias in (m.name, *m.aliases):
                if _norm(alias) == want:
                    return m
        # a longer marketing name: "H100 80GB HBM3", "A100-SXM4-40GB" -> the first alias it starts with
        best: tuple[int, GpuModel] | None = None
        for m in gpu_models():
            for alias in (m.name, *m.aliases):
                a = _norm(alias)
                if a and (want == a or want.startswith(a + " ")) and (best is None or len(a) > best[0]):
                    best = (len(a), m)
        if best:
            return best[1]
    if pci_device_id:
        pid = pci_device_id.lower()
        for m in gpu_models():
            if pid in m.pci_device_ids:
                return m
    return None


# ------------------------------------------------------------------------------ ROCm


def rocm_releases() -> list[str]:
    rel: list[str] = load("rocm_kmd.json")["releases"]
    return rel


def rocm_window() -> int:
    w: int = load("rocm_kmd.json")["window"]
    return w
