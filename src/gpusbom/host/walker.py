"""The walk of a host's install roots, one directory at a time (``host/walk.py`` builds the
view with it, in this process or in workers: ``host/parwalk.py``): the roots, what is
never walked, and the walker that records what collectors need.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from typing import Any

from ..fsview.rootwalk import DirWalker
from ..fsview.types import Entry, EntryKind

#: roots walked below the scanned root (globs on the first level of home directories)
HOST_ROOTS: tuple[str, ...] = (
    "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/usr", "/opt", "/etc",
    "/var/lib/dpkg", "/var/lib/rpm", "/var/lib/apk", "/usr/lib/sysimage/rpm",
    "/root/.local", "/root/miniconda3", "/root/anaconda3", "/root/miniforge3", "/root/.conda",
    "/home/*/.local", "/home/*/miniconda3", "/home/*/anaconda3", "/home/*/miniforge3",
    "/home/*/.conda",
    # /usr/share is skipped but for what GPU collectors read there
    "/usr/share/vulkan", "/usr/share/glvnd", "/usr/share/egl", "/usr/share/OpenCL",
    "/usr/share/nvidia",
)
#: never walked (absolute paths below the scanned root)
SKIP_PATHS = frozenset({
    "/proc", "/sys", "/dev", "/run", "/tmp", "/var/tmp", "/var/cache", "/var/log",  # noqa: S108 - skipped, not used
    "/usr/share",
    "/usr/src", "/usr/lib/modules", "/lib/modules", "/usr/lib/firmware", "/lib/firmware",
    "/etc/ssl/private", "/root/.ssh", "/etc/ssh",
})
#: directory names never descended into, anywhere
SKIP_NAMES = frozenset({"__pycache__", ".cache", ".git", "node_modules", ".ssh", ".gnupg"})


class _HostWalker(DirWalker):
    #: feed matched files to the specs' stream analyzers (GPU binary analysis); off by
    #: default on hosts: reading every large library costs seconds (13 s on an H200 node)
    analyze = False
    #: when a list: directories are not descended into but recorded here as (path, depth),
    #: for the parallel walk (``host/parwalk.py``) to hand to its workers
    defer: list[tuple[str, int]] | None = None
    #: what the parallel walk's workers parsed (``collectors/_premade.py``)
    premade: dict[tuple[str, str], Any] | None = None

    def _capture(self, dfd: int, name: str, path: str, max_size: int, history: bool,
                 *factories: Any) -> None:
        if self.analyze and factories:
            super()._capture(dfd, name, path, max_size, history, *factories)
        else:
            super()._capture(dfd, name, path, max_size, history)

    def _walk_fd(self, dfd: int, path: str, depth: int) -> None:
        if path in SKIP_PATHS or path.rsplit("/", 1)[-1] in SKIP_NAMES:
            return
        if self.defer is not None:
            self.defer.append((path, depth))
            return
        super()._walk_fd(dfd, path, depth)

    def walk_one(self, dfd: int, path: str, depth: int) -> None:
        """The entries of directory ``path`` (already checked against the skip lists);
        its subdirectories are walked, or deferred when ``defer`` is set."""
        super()._walk_fd(dfd, path, depth)


def expand_roots(root: str, patterns: Iterable[str]) -> list[str]:
    """Absolute host paths (relative to ``root``) of the walk roots that exist, glob-expanded."""
    out: list[str] = []
    for pat in patterns:
        pat = "/" + pat.strip("/")
        if "*" not in pat:
            cands = [pat]
        else:
            head, _, tail = pat.partition("*")  # one level: /home/*/.local
            parent = head.rstrip("/") or "/"
            try:
                names = sorted(os.listdir(os.path.join(root, parent.lstrip("/"))))
            except OSError:
                names = []
            cands = [f"{parent.rstrip('/')}/{n}{tail}" for n in names]
        for c in cands:
            if os.path.lexists(os.path.join(root, c.lstrip("/"))) and c not in out:
                out.append(c)
    # drop roots inside other roots (/usr/local under /usr)
    out.sort()
    kept: list[str] = []
    for c in out:
        skipped_above = any(c.startswith(s + "/") for s in SKIP_PATHS)
        if skipped_above or not any(c.startswith(k + "/") for k in kept):
            kept.append(c)
    return kept


def _walk_roots(walker: _HostWalker, real_root: str, roots: list[str]) -> None:
    for top in roots:
        _keep_parents(walker, top)
        full = os.path.join(real_root, top.lstrip("/"))
        try:
            st = os.lstat(full)
        except OSError as e:
            if e.errno in (errno.EACCES, errno.EPERM):
                walker.unreadable.append(top)
            continue
        if stat.S_ISLNK(st.st_mode):
            walker._keep(Entry(top, EntryKind.SYMLINK, mode=0o777, linkname=os.readlink(full)))
            continue
        if not stat.S_ISDIR(st.st_mode):
            parent = os.path.dirname(full)
            try:
                dfd = os.open(parent, DirWalker.DIR_FLAGS)
            except OSError as e:
                if e.errno in (errno.EACCES, errno.EPERM):
                    walker.unreadable.append(top)
                continue  # a link in the parent (never followed) or gone
            try:
                spec = walker.matcher.match(top)
                if spec is not None:
                    walker._capture(dfd, os.path.basename(full), top, spec.max_size, spec.history)
            except OSError as e:
                if e.errno in (errno.EACCES, errno.EPERM):
                    walker.unreadable.append(top)
            finally:
                os.close(dfd)
            continue
        walker._keep(Entry(top, EntryKind.DIR, mode=stat.S_IMODE(st.st_mode), uid=st.st_uid,
                           gid=st.st_gid, mtime=int(st.st_mtime)))
        try:
            fd = os.open(full, DirWalker.DIR_FLAGS)
        except OSError as e:
            if e.errno in (errno.EACCES, errno.EPERM):
                walker.unreadable.append(top)
            continue
        try:
            walker._walk_fd(fd, top, top.count("/"))
        finally:
            os.close(fd)


def _keep_parents(walker: DirWalker, path: str) -> None:
    parts = path.strip("/").split("/")[:-1]
    cur = ""
    for p in parts:
        cur += "/" + p
        if cur not in walker.entries:
            walker._keep(Entry(cur, EntryKind.DIR, mode=0o755))
