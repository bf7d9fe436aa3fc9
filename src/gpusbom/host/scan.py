"""``scan_host``: devices, drivers, firmware and the installed GPU stack of a host."""

from __future__ import annotations

import os
import platform as _platform
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .. import __version__
from ..analyses import match_advisories
from ..fsview.types import Limits, NullProgress, ProgressSink, Spool
from ..model import Component, Relationship, ScanResult, Target, ToolInfo, Unknown
from ..safetext import loads_json
from . import consistency, discover, nvml
from .root import SNAPSHOT_DIR, HostRoot
from .walk import host_view

_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "ppc64le": "ppc64le", "s390x": "s390x"}


@dataclass
class HostScan:
    result: ScanResult
    root: HostRoot
    view: Any  # FsView
    nvml: dict[str, Any] | None


def _load_nvml(root: HostRoot, use_nvml: bool) -> tuple[dict[str, Any] | None, str | None]:
    recorded = root.snapshot_file("nvml.json")
    if os.path.isfile(recorded):
        with open(recorded, encoding="utf-8") as f:
            data: dict[str, Any] = loads_json(f.read())
        return data, None
    if not root.live:
        return None, "NVML not queried: a mounted root's GPUs are not this machine's (no nvml.json)"
    if not use_nvml:
        return None, "NVML not queried (--no-nvml)"
    return nvml.query()


def _host_target(root: HostRoot, reference: str) -> Target:
    info: dict[str, Any] = {}
    meta = root.snapshot_file("host.json")
    if os.path.isfile(meta):
        with open(meta, encoding="utf-8") as f:
            info = loads_json(f.read())
    machine = info.get("machine") or (_platform.machine() if root.live else None)
    hostname = root.read_value("/proc/sys/kernel/hostname") or info.get("hostname")
    from ..identity import machine_id_hash

    # the root bom-ref names the machine by a hash of its machine-id (identity.py)
    machine_id = root.read_value("/etc/machine-id") or info.get("machine_id")
    return Target(
        kind="host",
        reference=reference,
        source="host",
        name=hostname or "host",
        platform=f"linux/{_ARCH.get(machine, machine)}" if machine else None,
        host_id=machine_id_hash(machine_id) if isinstance(machine_id, str) and machine_id else None,
    )


def scan_host_full(
    root: str = "/",
    *,
    paths: Sequence[str] = (),
    collectors: Sequence[str] | None = None,
    limits: Limits | None = None,
    progress: ProgressSink | None = None,
    use_nvml: bool = True,
    analyze_binaries: bool = False,
    while_open: Callable[[HostScan], None] | None = None,
    advisory_db: Any = None,
    advisories: bool = True,
) -> HostScan:
    """The host scan; ``while_open`` sees it while captured file content is still readable.
    ``advisories=False``: no advisory matching (``host-snapshot`` only reads the files)."""
    from ..collectors.osrelease import read_os_release
    from ..scan import build_matcher, run_collectors, select_collectors

    if not os.path.isdir(root):
        from ..errors import SourceNotFoundError

        raise SourceNotFoundError(f"--root {root}: no such directory")
    limits = limits or Limits()
    _ = progress or NullProgress()
    classes = select_collectors(collectors)
    matcher = build_matcher(classes)
    hroot = HostRoot(root)
    reference = "host:/" if hroot.live else f"host:{root}"
    nvml_data, nvml_why = _load_nvml(hroot, use_nvml)
    with Spool(limits) as spool:
        view = host_view(root, matcher, spool, limits, extra=paths,
                         analyze_binaries=analyze_binaries)
        target = _host_target(hroot, reference)
        target.os_release = read_os_release(view)
        components, unknowns = run_collectors(view, target, classes)
        host_comps, facts = discover.discover(hroot, nvml_data)
        hs = _finish(components=components, unknowns=unknowns, host_comps=host_comps,
                     facts=facts, classes=classes, target=target, hroot=hroot, view=view,
                     nvml_data=nvml_data, nvml_why=nvml_why)
        if advisories:
            match_advisories(hs.result, advisory_db)
        if while_open is not None:
            while_open(hs)
    return hs


def _finish(*, components: list[Component], unknowns: list[Unknown], host_comps: list[Component],
            facts: discover.HostFacts, classes: Any, target: Target, hroot: HostRoot, view: Any,
            nvml_data: dict[str, Any] | None, nvml_why: str | None) -> HostScan:
    from ..clock import scan_timestamp
    from ..safetext import sanitize_result
    from ..scan import link_components
    from ..stack import summarize

    components.extend(host_comps)
    # host file names need not be UTF-8: escaped once, before refs are hashed
    sanitize_result((components, target))
    relationships = link_components(components)
    rels = {(r.source, r.type, r.target) for r in relationships}
    # user-space driver libraries depend on the kernel module
    kmod = facts.modules.get("nvidia")
    pairs: list[tuple[Component, Component]] = list(facts.links)
    if kmod is not None:
        for c in components:
            if c.properties.get("product") in ("libcuda", "libnvidia-ml",
                                                 "libnvidia-ptxjitcompiler"):
                pairs.append((c, kmod))
    for a, b in pairs:
        rels.add((a.bom_ref, "depends-on", b.bom_ref))
    relationships = [Relationship(s, t, d) for s, t, d in sorted(rels)]
    findings = consistency.check(components, facts)
    if nvml_why and any(d.properties.get("vendor") == "nvidia" for d in facts.devices):
        unknowns.append(Unknown("host", nvml_why))
    for s in hroot.skipped:
        unknowns.append(Unknown("host", f"skipped: {s.reason}", s.path))
    for p in view.unreadable:
        unknowns.append(Unknown("host", "skipped: permission denied (needs root)", p))
    for note in facts.notes:
        unknowns.append(Unknown("host", note))
    sanitize_result(unknowns)
    result = ScanResult(
        stacks=summarize(components),
        target=target,
        components=components,
        relationships=relationships,
        unknowns=unknowns,
        tool=ToolInfo(name="gpusbom", version=__version__,
                      collectors={**{c.id: c.version for c in classes}, "host": "1"}),
        timestamp=scan_timestamp(),
        findings=findings,
    )
    return HostScan(result=result, root=hroot, view=view, nvml=nvml_data)


def scan_host(root: str = "/", **kwargs: Any) -> ScanResult:
    """Scan the host (``/``) or a mounted node root / host snapshot at ``root``."""
    return scan_host_full(root, **kwargs).result


__all__ = ["SNAPSHOT_DIR", "HostScan", "scan_host", "scan_host_full"]
