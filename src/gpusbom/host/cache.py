"""A fresh scan of this host, kept for ``gpusbom check IMAGE --host``.

A host changes little between two checks. The scan is stored (gpusbom JSON, mode 0600) in
the user cache and reused while it is fresh: same boot (``/proc/sys/kernel/random/boot_id``:
a new driver or kernel module needs a reboot or a reload, see below), the same package
databases and library directories (their mtimes and sizes: installing or removing a
package, a wheel or a library touches at least one of them), the same loaded NVIDIA kernel
module, the same gpusbom, and at most ``MAX_AGE`` seconds old. Anything else rescans. The
stored scan is plain JSON read back by gpusbom's own SBOM reader (as hostile as any input),
at most ``MAX_BYTES``; one that does not read is removed and the host scanned again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..clock import wall

MAX_AGE = 900.0
#: the largest stored scan read back (a host's is a few MB)
MAX_BYTES = 256 << 20
FILE = "host-scan.json"

# package databases and the directories that libraries and Python packages land in
WATCHED = (
    "/var/lib/dpkg/status",
    "/var/lib/rpm",
    "/var/lib/rpm/rpmdb.sqlite",
    "/var/lib/rpm/Packages",
    "/usr/lib/sysimage/rpm",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf.d",
    "/etc/OpenCL/vendors",
    "/etc/vulkan/icd.d",
    "/usr/share/vulkan/icd.d",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib64",
    "/usr/local/lib",
    "/usr/local",
    "/opt",
    "/sys/module/nvidia/version",
    "/sys/module/amdgpu",
    "/proc/driver/nvidia/version",
)


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(4096)
    except OSError:
        return ""


def state_key() -> str | None:
    """What the host scan depends on, hashed; None when the boot id cannot be read."""
    from .. import __version__

    boot = _read("/proc/sys/kernel/random/boot_id").strip()
    if not boot:
        return None
    h = hashlib.sha256()
    h.update(f"{__version__}\n{boot}\n".encode())
    # the module's own files: a new gpusbom (or a development edit) rescans
    h.update(str(os.stat(__file__).st_mtime_ns).encode())
    h.update(_read("/sys/module/nvidia/version").encode())
    h.update(_read("/proc/driver/nvidia/version").encode())
    for p in (*WATCHED, *(d for d in sys.path if d.endswith("-packages"))):
        try:
            st = os.stat(p)
        except OSError:
            h.update(f"{p}:-\n".encode())
            continue
        h.update(f"{p}:{st.st_mtime_ns}:{st.st_size}\n".encode())
    return h.hexdigest()


def cached_host_scan(
    scan: Callable[[], Any],
    load: Callable[[str], Any],
    *,
    directory: Path | None = None,
    now: float | None = None,
) -> tuple[Any, bool]:
    """(this host's ScanResult, whether it came from the cache). ``scan()`` scans the host,
    ``load(path)`` reads a stored gpusbom JSON scan."""
    from ..fsview.layercache import default_dir, disabled_by_env

    key = state_key()
    if key is None or disabled_by_env():
        return scan(), False
    path = (directory or default_dir()) / FILE
    now = wall() if now is None else now
    from .._userdir import read_bounded
    from ..errors import GpusbomError

    try:
        meta = json.loads(read_bounded(path.with_suffix(".key"), 4096) or b"null")
        if (isinstance(meta, dict) and meta.get("key") == key
                and 0 <= now - float(meta.get("time", 0)) <= MAX_AGE
                and 0 < os.stat(path).st_size <= MAX_BYTES):
            return load(str(path)), True
    except (OSError, ValueError, TypeError, AttributeError, RecursionError, GpusbomError):
        # damaged or planted (the stored scan is read by gpusbom's JSON reader, which
        # treats it as any untrusted SBOM): dropped, and the host scanned
        for p in (path, path.with_suffix(".key")):
            with contextlib.suppress(OSError):
                p.unlink()
    result = scan()
    try:
        os.makedirs(path.parent, mode=0o700, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(result.to_dict(), f, sort_keys=True)
        os.replace(tmp, path)
        ktmp = path.with_suffix(f".ktmp{os.getpid()}")
        with open(ktmp, "w", encoding="utf-8") as f:
            json.dump({"key": key, "time": now}, f)
        os.replace(ktmp, path.with_suffix(".key"))
    except OSError:
        pass  # a read-only cache: the next check scans again
    return result, False
