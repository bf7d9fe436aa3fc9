"""Host scans: GPUs, kernel drivers, firmware and the installed GPU stack of a machine.

``scan_host(root)`` scans ``/`` or a mounted node root (procfs and sysfs from
``root/proc`` and ``root/sys``); ``snapshot_host(out)`` captures exactly what a
host scan reads so that ``scan_host(out)`` replays it.
"""

from __future__ import annotations

from .scan import HostScan, scan_host, scan_host_full
from .snapshot import snapshot_host

__all__ = ["HostScan", "scan_host", "scan_host_full", "snapshot_host"]
