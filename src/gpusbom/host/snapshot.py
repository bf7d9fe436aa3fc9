"""``host-snapshot``: capture exactly what a host scan reads, for tests and support.

Written below ``out`` at the same paths as on the host:
- the procfs/sysfs files the scan read (as regular files), sysfs ``driver`` links;
- the files collectors matched (package databases, dist-info METADATA/RECORD, version
  files, headers, ICD files...), largest last, within ``max_bytes`` (default 64 MiB);
  what did not fit is listed in the manifest;
- libraries and other binaries as EMPTY placeholder files: their names (sonames carry
  versions) are what is recorded, never their content;
- symlinks collectors need (``libcuda.so.1 -> libcuda.so.580.x``, ``/usr/local/cuda``);
- ``gpusbom-snapshot/nvml.json`` (NVML's answers, when NVML was queried),
  ``host.json`` and ``manifest.json``.
Never captured: files that are not world-readable, and anything that looks like a
secret (shadow files, keys, credentials), whatever a collector asked for.
``gpusbom scan --root OUT`` replays the scan.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
import platform
from collections.abc import Sequence
from typing import Any

from ..fsview.types import EntryKind
from .root import SNAPSHOT_DIR
from .source import HostView

DEFAULT_MAX_BYTES = 64 << 20
#: whole paths never captured
SECRET_PATHS = (
    "/etc/shadow*", "/etc/gshadow*", "/etc/sudoers*", "/etc/ssl/private/*", "*/.ssh/*",
    "*/.gnupg/*", "*/.docker/config.json", "/proc/*/environ", "/proc/*/cmdline",
)
#: file names never captured (matched on the base name only)
SECRET_NAMES = (
    "*.key", "*.pem", "*.p12", "*.pfx", "id_rsa*", "id_dsa*", "id_ed25519*", "id_ecdsa*",
    ".netrc", ".pypirc", ".git-credentials", "*credential*", "*secret*", "*token*",
    "*password*", "*.kdbx",
)


def is_secret(path: str) -> bool:
    name = path.rsplit("/", 1)[-1].lower()
    return (any(fnmatch.fnmatchcase(path, g) for g in SECRET_PATHS)
            or any(fnmatch.fnmatchcase(name, g) for g in SECRET_NAMES))


def _is_binary_name(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return ".so" in name or name.endswith((".a", ".o", ".bin", ".node"))


class _Writer:
    def __init__(self, out: str, max_bytes: int) -> None:
        self.out = out
        self.max_bytes = max_bytes
        self.bytes = 0
        self.files = 0
        self.placeholders = 0
        self.links = 0
        self.skipped: list[dict[str, str]] = []

    def dest(self, path: str) -> str:
        d = os.path.join(self.out, path.lstrip("/"))
        if not os.path.abspath(d).startswith(os.path.abspath(self.out) + os.sep):
            raise ValueError(f"path escapes the snapshot: {path}")
        return d

    def skip(self, path: str, reason: str) -> None:
        self.skipped.append({"path": path, "reason": reason})

    def file(self, path: str, data: bytes, *, placeholder: bool = False) -> None:
        if not placeholder and is_secret(path):
            self.skip(path, "looks like a secret: never captured")
            return
        if not placeholder and self.bytes + len(data) > self.max_bytes:
            self.skip(path, f"size limit ({self.max_bytes} bytes) reached; {len(data)} bytes")
            return
        d = self.dest(path)
        if os.path.lexists(d):
            if os.path.isdir(d) and not os.path.islink(d):
                return
            os.unlink(d)
        os.makedirs(os.path.dirname(d), exist_ok=True)
        with open(d, "wb") as f:
            if not placeholder:
                f.write(data)
        if placeholder:
            self.placeholders += 1
        else:
            self.bytes += len(data)
            self.files += 1

    def link(self, path: str, target: str) -> None:
        d = self.dest(path)
        if os.path.lexists(d):
            return
        os.makedirs(os.path.dirname(d), exist_ok=True)
        os.symlink(target, d)
        self.links += 1

    def mkdir(self, path: str) -> None:
        d = self.dest(path)
        if not os.path.lexists(d):
            os.makedirs(d, exist_ok=True)


def _capture(hv: HostView, w: _Writer) -> None:
    root = hv.root
    for p in sorted(root.dirs | root.present):
        with contextlib.suppress(OSError, ValueError):
            w.mkdir(p)
    for p, target in sorted(root.links.items()):
        w.link(p, target)
    for p, data in sorted(root.read_files.items()):
        w.file(p, data)
    view = hv.fs
    files: list[tuple[int, str, Any]] = []
    links: list[Any] = []
    for e in view.entries():
        if e.kind is EntryKind.FILE and e.matched:
            files.append((e.size or 0, e.path, e))
        elif e.kind is EntryKind.SYMLINK:
            links.append(e)
    for _size, path, e in sorted(files, key=lambda x: (x[0], x[1])):
        if not (e.mode & 0o004):
            w.skip(path, "not world-readable: not captured")
            continue
        if e.content is None or _is_binary_name(path):
            w.file(path, b"", placeholder=True)
            continue
        data = view.read_bytes(path)
        if data[:4] == b"\x7fELF":
            w.file(path, b"", placeholder=True)
        else:
            w.file(path, data)
    matcher_hit = {p for _s, p, _e in files}
    for e in links:
        keep = False
        try:
            real = view.lookup(e.path)
            keep = real is not None and (real.kind is EntryKind.DIR or real.path in matcher_hit)
        except Exception:  # noqa: BLE001 - a loop or a dangling link: not needed
            keep = False
        if keep:
            try:
                w.link(e.path, e.linkname or "")
            except (OSError, ValueError):
                w.skip(e.path, "link could not be recreated")


def snapshot_host(
    out: str,
    *,
    root: str = "/",
    paths: Sequence[str] = (),
    max_bytes: int = DEFAULT_MAX_BYTES,
    use_nvml: bool = True,
) -> dict[str, Any]:
    """Write the snapshot of ``root`` into ``out`` (absent or empty); return the manifest."""
    from ..errors import UsageError

    if os.path.exists(out) and (not os.path.isdir(out) or os.listdir(out)):
        raise UsageError(f"--out {out}: exists and is not an empty directory")
    os.makedirs(out, exist_ok=True)
    w = _Writer(out, max_bytes)
    from ..pipeline import HostOptions, ScanRequest, scan_open

    # the pipeline up to the result (its unknowns go in the manifest), matching nothing;
    # the host view's files are read while it is open
    req = ScanRequest(host=HostOptions(root=root, paths=tuple(paths), use_nvml=use_nvml),
                      advisories=False)
    with scan_open(req) as scanned:
        hv = scanned.view.host
        assert hv is not None  # noqa: S101 - a host request gives a host view
        _capture(hv, w)
    unknowns = scanned.result.unknowns
    meta = os.path.join(out, SNAPSHOT_DIR)
    os.makedirs(meta, exist_ok=True)
    if hv.nvml is not None:
        with open(os.path.join(meta, "nvml.json"), "w", encoding="utf-8") as f:
            json.dump(hv.nvml, f, indent=2, sort_keys=True)
            f.write("\n")
    host = {"machine": platform.machine() if hv.root.live else None,
            "source_root": root}
    with open(os.path.join(meta, "host.json"), "w", encoding="utf-8") as f:
        json.dump(host, f, indent=2, sort_keys=True)
        f.write("\n")
    manifest = {
        "schema": "gpusbom/host-snapshot/1",
        "files": w.files, "bytes": w.bytes, "placeholders": w.placeholders, "links": w.links,
        "max_bytes": max_bytes, "nvml": hv.nvml is not None,
        "skipped": w.skipped,
        "scan_unknowns": [u.reason + (f" ({u.path})" if u.path else "")
                          for u in unknowns],
    }
    with open(os.path.join(meta, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2, sort_keys=True)
        f.write("\n")
    return manifest
