"""``gpusbom gate``: a policy applied to images, a host or existing SBOMs (the library side
of the command; the CLI parses options and writes the ``GateReport``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import InputError, UsageError

if TYPE_CHECKING:
    from .advisories.db import AdvisoryDB
    from .model import ScanResult
    from .policy.report import GateReport


@dataclass(frozen=True)
class GateRequest:
    """What to gate and how. ``host``: this machine; ``root``: a mounted root or snapshot."""

    targets: Sequence[str] = ()
    policy: str = "default"
    host: bool = False
    root: str | None = None
    probe: bool = False
    probe_timeout: float = 20.0
    strict: bool = False
    platform: str | None = None


    @property
    def host_root(self) -> str | None:
        return (self.root or "/") if self.host or self.root else None


def check_request(req: GateRequest) -> None:
    """Usage errors, before anything is read."""
    if req.host_root and req.targets:
        raise UsageError("--host/--root gate a machine: give no image or SBOM")
    if not req.host_root and not req.targets:
        raise UsageError("nothing to gate: give an image, SBOM files, or --host "
                         "(see gpusbom gate --help)")
    if req.probe and not req.host:
        raise UsageError("--probe needs --host (it runs kernels on this machine's GPUs)")
    if req.probe and req.root not in (None, "/"):
        raise UsageError("--probe runs kernels on this machine's GPUs: not with --root")


def run_gate(req: GateRequest) -> GateReport:
    """Scan (or read) every target, match today's advisories, and apply the policy."""
    from .advisories.db import load_active
    from .policy import evaluate, load_policy
    from .policy.report import GateReport

    check_request(req)
    pol = load_policy(req.policy)  # a bad policy is exit 3 before any scan
    db = load_active()
    loaded: list[tuple[str, ScanResult]] = []
    if req.host_root:
        loaded.append((f"host:{req.host_root}", _scan_host(req, db)))
    for t in req.targets:
        loaded.append((t, _load_target(t, db, req.platform)))
    decisions = [evaluate(pol, r, target=name, strict=req.strict, db=db) for name, r in loaded]
    return GateReport(policy=pol, decisions=decisions, scans=loaded)


def _scan_host(req: GateRequest, db: AdvisoryDB) -> ScanResult:
    from .pipeline import HostOptions, ProbeOptions, ScanRequest, scan

    return scan(ScanRequest(host=HostOptions(root=req.host_root or "/"), advisory_db=db,
                            probe=ProbeOptions(timeout=req.probe_timeout) if req.probe
                            else None))


def _load_target(target: str, db: AdvisoryDB, platform: str | None) -> ScanResult:
    """An SBOM file (sniffed, or forced with ``sbom:``) matched as ``scan --sbom`` does, else
    an image reference scanned."""
    from .sbomin import sniff

    path = target.removeprefix("sbom:")
    kind = sniff(path) if os.path.isfile(path) else None
    if target.startswith("sbom:"):
        if not os.path.isfile(path):
            raise InputError(f"{path}: SBOM file not found")
        if kind is None:
            raise InputError(f"{path}: not a CycloneDX, SPDX or gpusbom JSON SBOM")
    from .pipeline import ScanRequest, scan

    if kind is None:
        return scan(ScanRequest(reference=target, platform=platform, advisory_db=db))
    return scan(ScanRequest(sbom=path, advisory_db=db))
