"""What changed between two scans of one host or image."""

from __future__ import annotations

from collections.abc import Iterator

from ..model import ComponentType, ScanResult
from .types import Change

_DEVICE_FIELDS = (("model", None), ("compute capability", "cuda:compute-capability"),
                  ("gfx", "amd:gfx-target"), ("kernel driver", "driver"),
                  ("vbios", "nvidia:vbios"), ("gsp firmware", "nvidia:gsp-firmware"),
                  ("uuid", "nvidia:uuid"), ("mig", "nvidia:mig-mode"),
                  ("ecc", "nvidia:ecc-mode"), ("remapped rows", "nvidia:remapped-rows"))


def _components(r: ScanResult) -> dict[str, str]:
    out: dict[str, list[str]] = {}
    for c in r.components:
        if c.type == ComponentType.DEVICE:
            continue  # devices have their own section
        loc = c.properties.get("location")
        key = f"{c.ecosystem or c.type.value}:{c.name}" + (f" ({loc})" if loc else "")
        out.setdefault(key, []).append(c.version or "unknown")
    return {k: " + ".join(sorted(v)) for k, v in out.items()}


def _devices(r: ScanResult) -> dict[str, str]:
    out: dict[str, str] = {}
    for c in r.components:
        if c.type != ComponentType.DEVICE:
            continue
        key = c.properties.get("pci:address") or c.bom_ref or c.name
        bits = []
        for label, prop in _DEVICE_FIELDS:
            value = c.name if prop is None else c.properties.get(prop)
            if value:
                bits.append(f"{label}={value}")
        out[key] = ", ".join(bits)
    return out


def _driver(r: ScanResult) -> dict[str, str]:
    """Kernel modules and the user-space driver libraries (stack nvidia-driver, amdgpu...)."""
    out: dict[str, list[str]] = {}
    for c in r.components:
        if c.type == ComponentType.DEVICE_DRIVER:
            out.setdefault(f"kernel module {c.name}", []).append(c.version or "unknown")
            continue
        for p in c.products:
            if p.stack in ("nvidia-driver", "amdgpu") and p.name != "cuda-compat":
                out.setdefault(f"{p.stack} {p.name}", []).append(
                    p.version or c.version or "unknown")
    return {k: " + ".join(sorted(set(v))) for k, v in out.items()}


def _probes(r: ScanResult) -> dict[str, str]:
    out: dict[str, str] = {}
    for p in r.probes:
        key = p.label + (f" {p.device}" if p.device else "")
        detail = p.error_name or p.reason
        out[key] = p.outcome + (f" ({detail})" if detail and p.outcome != "pass" else "")
    return out


def _compare(section: str, old: dict[str, str], new: dict[str, str]) -> Iterator[Change]:
    for key in sorted(old.keys() | new.keys()):
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        change = "added" if a is None else "removed" if b is None else "changed"
        yield Change(section, change, key, a, b)


def diff(old: ScanResult, new: ScanResult) -> list[Change]:
    out: list[Change] = []
    for section, fn in (("driver", _driver), ("devices", _devices), ("probes", _probes),
                        ("components", _components)):
        out.extend(_compare(section, fn(old), fn(new)))
    return out
