"""``HostRoot``: reads procfs/sysfs/files of a host (``/``), a mounted node root or a snapshot.

Every read is relative to the root and is recorded (path and outcome), so a
snapshot can capture exactly what a scan read, and permission problems become
"skipped" reasons instead of errors.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass, field

#: where a snapshot keeps what is not a file of the host (NVML output, manifest)
SNAPSHOT_DIR = "gpusbom-snapshot"
MAX_READ = 1 << 20


@dataclass
class Skipped:
    path: str
    reason: str


@dataclass
class HostRoot:
    root: str = "/"
    read_files: dict[str, bytes] = field(default_factory=dict)  # host path -> content read
    links: dict[str, str] = field(default_factory=dict)  # host path -> link target read
    dirs: set[str] = field(default_factory=set)  # directories listed
    skipped: list[Skipped] = field(default_factory=list)
    present: set[str] = field(default_factory=set)  # paths whose existence was checked, found

    @property
    def live(self) -> bool:
        return os.path.realpath(self.root) == "/"

    def path(self, p: str) -> str:
        return os.path.join(self.root, p.lstrip("/"))

    def _skip(self, p: str, exc: OSError) -> None:
        if exc.errno in (errno.EACCES, errno.EPERM):
            reason = "permission denied (needs root)"
        else:
            reason = f"cannot read: {exc.strerror or exc}"
        if not any(s.path == p for s in self.skipped):
            self.skipped.append(Skipped(p, reason))

    def read_bytes(self, p: str, limit: int = MAX_READ) -> bytes | None:
        """Content of ``p`` (at most ``limit`` bytes); None when absent or unreadable."""
        try:
            with open(self.path(p), "rb") as f:
                data = f.read(limit)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ENODEV, errno.ENXIO):
                return None
            self._skip(p, exc)
            return None
        self.read_files[p] = data
        return data

    def read_text(self, p: str, limit: int = MAX_READ) -> str | None:
        data = self.read_bytes(p, limit)
        return None if data is None else data.decode("utf-8", "replace")

    def read_value(self, p: str) -> str | None:
        """A one-line sysfs attribute, stripped; None when absent/unreadable/empty."""
        t = self.read_text(p, 4096)
        if t is None:
            return None
        t = t.strip()
        return t or None

    def listdir(self, p: str) -> list[str]:
        try:
            names = sorted(os.listdir(self.path(p)))
        except FileNotFoundError:
            return []
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                return []
            self._skip(p, exc)
            return []
        self.dirs.add(p)
        return names

    def readlink(self, p: str) -> str | None:
        try:
            target = os.readlink(self.path(p))
        except OSError:
            return None
        self.links[p] = target
        return target

    def exists(self, p: str) -> bool:
        found = os.path.lexists(self.path(p))
        if found:
            self.present.add(p)
        return found

    def snapshot_file(self, name: str) -> str:
        return os.path.join(self.root, SNAPSHOT_DIR, name)
