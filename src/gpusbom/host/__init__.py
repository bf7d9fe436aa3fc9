"""Host scans: GPUs, kernel drivers, firmware and the installed GPU stack of a machine.

A host root is a source of the one pipeline (``gpusbom.pipeline``; ``host/source.py``: the
view, and host facts as an enricher). ``scan_host(root)`` scans ``/`` or a mounted node
root (procfs and sysfs from ``root/proc`` and ``root/sys``); ``snapshot_host(out)``
captures exactly what a host scan reads so that ``scan_host(out)`` replays it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .snapshot import snapshot_host

if TYPE_CHECKING:
    from ..advisories.db import AdvisoryDB
    from ..fsview.types import Limits, ProgressSink
    from ..model import ScanResult


def scan_host(root: str = "/", *, paths: Sequence[str] = (),
              collectors: Sequence[str] | None = None, limits: Limits | None = None,
              progress: ProgressSink | None = None, use_nvml: bool = True,
              analyze_binaries: bool = False, advisory_db: AdvisoryDB | None = None,
              advisories: bool = True) -> ScanResult:
    """Scan the host (``/``) or a mounted node root / host snapshot at ``root``."""
    from ..fsview.types import Limits
    from ..pipeline import HostOptions, ScanRequest, scan

    host = HostOptions(root=root, paths=tuple(paths), use_nvml=use_nvml,
                       analyze_binaries=analyze_binaries)
    return scan(ScanRequest(host=host, collectors=collectors, limits=limits or Limits(),
                            advisory_db=advisory_db, advisories=advisories), progress)


__all__ = ["scan_host", "snapshot_host"]
