"""Attaching probe results to a ScanResult.

``run_probes()`` (runner.py) returns ``ProbeResult``s; ``attach_probes()`` hangs them
on the device components of a ScanResult (creating the components it cannot find);
``probe_scan()`` builds a stand-alone host ScanResult holding only the probed devices.

Hook for the host scan (``scan --host``): after the host collectors have produced their
``ComponentType.DEVICE`` components, call ``attach_probes(result, run_probes(...),
create_devices=True)``. A probe result is matched to a device component by PCI
address (properties ``pci:address`` / ``pci-bus-id``) or UUID (``nvidia:uuid`` / ``uuid``);
what matches nothing gets its own device component.
"""

from __future__ import annotations

import os
import socket

from ..model import (
    Component,
    ComponentType,
    Evidence,
    ProbeOutcome,
    ProbeResult,
    ScanResult,
    Target,
    ToolInfo,
)

PROBE_VERSION = "1"
COLLECTOR_ID = "probe"
_PCI_KEYS = ("pci:address", "pci-bus-id", "pci:bus-id", "device:pci-bus-id")
_UUID_KEYS = ("uuid", "device:uuid", "gpu-uuid", "nvidia:uuid")

_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "ppc64le": "ppc64le", "s390x": "s390x"}

_SUPPLIERS = {
    "nvidia": "NVIDIA Corporation",
    "advanced micro devices": "Advanced Micro Devices, Inc.",
    "amd": "Advanced Micro Devices, Inc.",
    "intel": "Intel Corporation",
}


def _norm_pci(v: str | None) -> str | None:
    if not v:
        return None
    v = v.strip().lower()
    parts = v.split(":")
    if len(parts) == 2:  # bus:dev.fn without a domain
        v = "0000:" + v
    elif len(parts) == 3 and len(parts[0]) > 4:  # nvidia-smi's 8-digit domain
        v = parts[0][-4:] + ":" + parts[1] + ":" + parts[2]
    return v


def _norm_uuid(v: str | None) -> str | None:
    if not v:
        return None
    v = v.strip().lower()
    for prefix in ("gpu-", "mig-"):
        v = v.removeprefix(prefix)
    return v.replace("-", "")


def _keys_of_facts(facts: dict[str, str]) -> list[tuple[str, str]]:
    keys = []
    pci = _norm_pci(facts.get("pci-bus-id"))
    if pci:
        keys.append(("pci", pci))
    uid = _norm_uuid(facts.get("uuid"))
    if uid:
        keys.append(("uuid", uid))
    return keys


def _keys_of_component(c: Component) -> list[tuple[str, str]]:
    keys = []
    for k in _PCI_KEYS:
        pci = _norm_pci(c.properties.get(k))
        if pci:
            keys.append(("pci", pci))
    for k in _UUID_KEYS:
        uid = _norm_uuid(c.properties.get(k))
        if uid:
            keys.append(("uuid", uid))
    return keys


def _supplier(facts: dict[str, str]) -> str | None:
    vendor = (facts.get("vendor") or "").lower()
    for needle, name in _SUPPLIERS.items():
        if needle in vendor:
            return name
    return facts.get("vendor") or None


#: which backend's device name to prefer for a new component
_NAME_PREFERENCE = {"cuda": 0, "hip": 1, "level-zero": 2, "opencl": 3, "sycl": 4, "vulkan": 5}


def attach_probes(result: ScanResult, probes: list[ProbeResult], *, create_devices: bool = True) -> None:
    """Attach ``probes`` to ``result``: device results to device components (``device_ref``).

    Existing DEVICE components are matched by PCI address or UUID; results that match
    none are grouped by the same keys and, with ``create_devices``, get a new device
    component each group. Backend-level results (no device) stay unattached.
    """
    index: dict[tuple[str, str], Component] = {}
    for c in result.components:
        if c.type is ComponentType.DEVICE:
            for k in _keys_of_component(c):
                index.setdefault(k, c)
    taken = {c.bom_ref for c in result.components if c.bom_ref}
    groups: dict[tuple[str, str], list[ProbeResult]] = {}
    order: list[tuple[str, str]] = []
    for p in probes:
        if p.device is None:
            continue
        keys = _keys_of_facts(p.facts)
        hit = next((index[k] for k in keys if k in index), None)
        if hit is not None:
            p.device_ref = hit.bom_ref
            hit.evidence.append(_probe_evidence(p))
            continue
        if not create_devices:
            continue
        gk = next((k for k in keys if k in groups), None) or (keys[0] if keys else ("probe", p.label))
        if gk not in groups:
            groups[gk] = []
            order.append(gk)
        groups[gk].append(p)
        for k in keys:  # the other keys of this device lead to the same group
            groups.setdefault(k, groups[gk])
    seen: set[int] = set()
    for gk in order:
        members = groups[gk]
        if id(members) in seen:
            continue
        seen.add(id(members))
        c = _device_component(members)
        c.assign_ref(taken)
        result.components.append(c)
        for p in members:
            p.device_ref = c.bom_ref
    result.probes.extend(probes)
    result.tool.collectors.setdefault(COLLECTOR_ID, PROBE_VERSION)


def _probe_evidence(p: ProbeResult) -> Evidence:
    detail = f"{p.label} {p.outcome}"
    if p.outcome == ProbeOutcome.FAIL.value and p.max_abs_error is not None:
        detail += f" (max abs error {p.max_abs_error:g})"
    elif p.error_name:
        detail += f" ({p.error_name})"
    return Evidence(collector=COLLECTOR_ID, method="probe", detail=detail)


def _device_component(members: list[ProbeResult]) -> Component:
    first = min(members, key=lambda p: (_NAME_PREFERENCE.get(p.backend, 9), p.device_id or ""))
    facts: dict[str, str] = {}
    for p in members:
        for k in ("pci-bus-id", "uuid", "vendor"):
            if k in p.facts and k not in facts:
                facts[k] = p.facts[k]
    pci = _norm_pci(facts.get("pci-bus-id"))
    props = {"device:source": "probe"}
    if pci:
        props["pci-bus-id"] = pci
    if facts.get("uuid"):
        props["uuid"] = facts["uuid"]
    if facts.get("vendor"):
        props["vendor"] = facts["vendor"]
    evidence = [Evidence(collector=COLLECTOR_ID, method="device",
                         path=f"/sys/bus/pci/devices/{pci}" if pci else None,
                         detail=", ".join(f"{p.label}: {p.device}" for p in members))]
    evidence += [_probe_evidence(p) for p in members]
    return Component(
        name=first.device or "unknown device",
        version=None,
        type=ComponentType.DEVICE,
        supplier=_supplier(facts),
        properties=props,
        evidence=evidence,
        ecosystem=None,
    )


def probe_failures(probes: list[ProbeResult]) -> list[ProbeResult]:
    """Results a gate should refuse (``require probe pass``): fail, error and timeout."""
    bad = {ProbeOutcome.FAIL.value, ProbeOutcome.ERROR.value, ProbeOutcome.TIMEOUT.value}
    return [p for p in probes if p.outcome in bad]


def _os_release() -> dict[str, str]:
    from ..collectors.osrelease import parse_os_release

    for path in ("/etc/os-release", "/usr/lib/os-release"):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                return parse_os_release(f.read())
        except OSError:
            continue
    return {}


def probe_scan(probes: list[ProbeResult], *, timestamp: str | None = None) -> ScanResult:
    """A stand-alone host ScanResult: the probed devices and the probe results, nothing else."""
    from .. import __version__

    host = socket.gethostname() or "localhost"
    uname = os.uname()
    result = ScanResult(
        target=Target(kind="host", reference=host, source="host", name=host,
                      platform=f"{uname.sysname.lower()}/{_ARCH.get(uname.machine, uname.machine)}",
                      os_release=_os_release()),
        tool=ToolInfo(name="gpusbom", version=__version__, collectors={}),
        timestamp=timestamp,
    )
    attach_probes(result, probes, create_devices=True)
    return result
