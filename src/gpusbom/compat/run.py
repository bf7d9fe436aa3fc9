"""``gpusbom check``: will an image run on given GPUs and drivers? The library side of the
command (see docs/check.md): the image and the hosts are read or scanned, each pair gets a
verdict; the CLI writes the ``CheckReport``."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import InputError, UsageError
from ..model import ScanResult
from ..safetext import loads_json
from .report import CheckReport


@dataclass(frozen=True)
class CheckRequest:
    """The image (a reference or a scan/SBOM file of it), and exactly one target: a host's
    scan file (``against``), this machine (``host``), every host of an ``inventory``, or
    what-if ``gpus`` (with ``driver``)."""

    image: str
    against: str | None = None
    host: bool = False
    inventory: str | None = None
    gpus: Sequence[str] = ()
    driver: str | None = None


def check_request(req: CheckRequest) -> None:
    """Usage errors, before anything is read."""
    given = [x for x in (req.against is not None, req.host, req.inventory is not None,
                         bool(req.gpus)) if x]
    if len(given) != 1:
        raise UsageError("give exactly one target: --against FILE, --host, --inventory DB or "
                         "--gpu MODEL|sm_XY|gfxNNN [--driver VERSION]")
    if req.driver is not None and not req.gpus:
        raise UsageError("--driver goes with --gpu (a host scan carries its own driver)")
    if req.gpus:
        from . import platform_from_string

        for g in req.gpus:  # a bad target is a usage error before the image is read
            platform_from_string(g, req.driver)


def run_check(req: CheckRequest) -> CheckReport:
    """The verdict of the image on every target."""
    from . import check_against_host, evaluate

    check_request(req)
    hosts: list[ScanResult] = []
    if req.against is not None:
        hosts = [_load_host(req.against)]
    elif req.inventory is not None:
        hosts = _inventory_hosts(req.inventory)
    img = _load_image(req.image)
    if req.host:
        from ..host import scan_host
        from ..host.cache import cached_host_scan

        # a fresh scan of this host (same boot, package databases, driver) is reused
        hosts = [cached_host_scan(lambda: scan_host("/"), _load_host)[0]]
    if req.gpus:
        verdicts = evaluate(img, list(req.gpus), driver=req.driver)
    else:
        verdicts = [v for h in hosts for v in check_against_host(img, h)]
    return CheckReport(image=img, verdicts=verdicts)


def _sniff(path: str) -> str | None:
    """'gpusbom' for a gpusbom JSON scan, 'sbom' for a CycloneDX/SPDX SBOM, None otherwise."""
    if not os.path.isfile(path):
        return None
    from ..sbomin import sniff

    kind = sniff(path)
    return None if kind is None else "gpusbom" if kind == "gpusbom" else "sbom"


def _load_file(path: str, kind: str) -> ScanResult:
    if kind == "gpusbom":
        try:
            with open(path, encoding="utf-8") as f:
                return ScanResult.from_dict(loads_json(f.read()))
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"{path}: not a gpusbom scan: {exc}") from exc
    try:
        from ..sbomin import load_sbom
    except ImportError as exc:
        raise InputError(f"{path}: reading CycloneDX/SPDX needs gpusbom.sbomin, which this "
                         "build lacks; give a gpusbom JSON scan") from exc
    result: ScanResult = load_sbom(path)
    return result


def _load_image(ref: str) -> ScanResult:
    kind = _sniff(ref)
    if kind is not None:
        return _load_file(ref, kind)
    from ..scan import scan

    return scan(ref)


def _load_host(path: str) -> ScanResult:
    kind = _sniff(path)
    if kind is None:
        if not os.path.exists(path):
            raise InputError(f"--against {path}: no such file")
        raise InputError(f"--against {path}: not a gpusbom JSON scan or a CycloneDX/SPDX SBOM")
    host = _load_file(path, kind)
    if host.target.kind not in ("host", ""):
        raise InputError(f"--against {path}: a scan of {host.target.kind} "
                         f"{host.target.reference!r}, not of a host")
    return host


def _inventory_hosts(url: str) -> list[ScanResult]:
    try:
        from ..inventory import Store
    except ImportError as exc:
        raise InputError(f"--inventory {url}: this build has no inventory store") from exc
    got = Store(url).latest_scans(kind="host")
    hosts = [h[-1] if isinstance(h, tuple) else h for h in got]
    if not hosts:
        raise InputError(f"--inventory {url}: no host scans stored")
    return hosts
