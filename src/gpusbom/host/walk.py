"""A filesystem view of a host built from the directories collectors need.

A host is not an image: walking all of ``/`` would read network mounts, caches
and home directories. Only the install roots collectors look at are walked
(``HOST_ROOTS`` plus ``--paths``); links are recorded, never followed;
``/proc``, ``/sys``, ``/dev``, ``/run``, ``/tmp`` are never walked.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterable
from typing import Any

from ..fsview.spec import PathMatcher
from ..fsview.types import Entry, EntryKind, Limits, Spool
from ..fsview.view import FsView, _DirWalker
from ..model import LayerRef

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


class _HostWalker(_DirWalker):
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


def host_view(
    root: str,
    matcher: PathMatcher,
    spool: Spool,
    limits: Limits,
    extra: Iterable[str] = (),
    analyze_binaries: bool = False,
    workers: int = 1,
    started: Callable[[], None] | None = None,
) -> FsView:
    """The one-layer view of the walk roots below ``root``; ``view.unreadable`` lists EACCES.

    ``extra`` adds walk roots (``--paths``). OS package licenses (``/usr/share/doc``) are
    not read unless ``extra`` names that directory. ``workers`` > 1 walks the directories
    in that many forked processes (``host/parwalk.py``; the same view); ``started`` is
    called once they run (at once when there are none).
    """
    real_root = os.path.realpath(root)
    walker = _HostWalker(matcher, spool, limits, skip_host=True)
    walker.analyze = analyze_binaries
    walker._keep(Entry("/", EntryKind.DIR, mode=0o755))
    roots = expand_roots(real_root, [*HOST_ROOTS, *extra])
    if workers > 1:
        from .parwalk import walk_parallel

        walker.defer = []
        _walk_roots(walker, real_root, roots)
        walk_parallel(walker, real_root, roots, workers, started)
    else:
        if started is not None:
            started()
        _walk_roots(walker, real_root, roots)
    view = FsView(walker.entries, [LayerRef(index=0, diff_id=None)], limits)
    view.unreadable = walker.unreadable
    view.file_count = walker.count
    if walker.premade:
        view.premade = walker.premade
    return view


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
                dfd = os.open(parent, _DirWalker._DIR_FLAGS)
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
            fd = os.open(full, _DirWalker._DIR_FLAGS)
        except OSError as e:
            if e.errno in (errno.EACCES, errno.EPERM):
                walker.unreadable.append(top)
            continue
        try:
            walker._walk_fd(fd, top, top.count("/"))
        finally:
            os.close(fd)


def _keep_parents(walker: _DirWalker, path: str) -> None:
    parts = path.strip("/").split("/")[:-1]
    cur = ""
    for p in parts:
        cur += "/" + p
        if cur not in walker.entries:
            walker._keep(Entry(cur, EntryKind.DIR, mode=0o755))
