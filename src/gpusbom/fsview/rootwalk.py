"""``DirWalker``: the walk of an unpacked root filesystem (a directory, or a host's roots).

``FsView.from_directory`` walks a whole root with it, and ``host.walker`` subclasses it for
a host's install roots. It walks with directory file descriptors and ``lstat`` only: links
are never followed, nothing outside the root is opened, and ``/proc``, ``/sys``, ``/dev``
are skipped when the root is ``/``. Matched regular files are read with ``O_NOFOLLOW`` and
checked with ``fstat``; paths that cannot be read (``EACCES``) are listed in
``unreadable``.
"""

from __future__ import annotations

import errno
import operator
import os
import stat
from typing import Any

from ..errors import UnsafeArchiveError
from .spec import PathMatcher
from .types import ContentRef, Entry, EntryKind, Limits, Spool

_DIR = EntryKind.DIR
_FILE = EntryKind.FILE
_SYMLINK = EntryKind.SYMLINK
_HOST_SKIP = frozenset({"proc", "sys", "dev"})
_NO_NAMES: frozenset[str] = frozenset()
_NAME = operator.attrgetter("name")
_READ_CHUNK = 1 << 20


class DirWalker:
    """Records the entries below a root that a ``PathMatcher`` keeps (``walk``)."""

    DIR_FLAGS = (
        os.O_RDONLY
        | getattr(os, "O_DIRECTORY", 0)
        | getattr(os, "O_NOFOLLOW", 0)
        | getattr(os, "O_CLOEXEC", 0)
    )
    FILE_FLAGS = (
        os.O_RDONLY
        | getattr(os, "O_NOFOLLOW", 0)
        | getattr(os, "O_NONBLOCK", 0)
        | getattr(os, "O_CLOEXEC", 0)
    )
    MAX_DEPTH = 512
    #: (k, n): the next directory walked takes only every n-th of its entries from the k-th
    part: tuple[int, int] | None = None

    def __init__(self, matcher: PathMatcher, spool: Spool, limits: Limits, skip_host: bool) -> None:
        self.matcher = matcher
        self.spool = spool
        self.limits = limits
        self.skip_host = skip_host
        self.entries: dict[str, Entry] = {}
        self.unreadable: list[str] = []
        self.count = 0

    def _keep(self, e: Entry) -> None:
        self.entries[e.path] = e
        if len(self.entries) > self.limits.max_kept_records:
            raise UnsafeArchiveError(
                f"more than {self.limits.max_kept_records} kept records (directories, links, "
                "matched files)"
            )

    def walk(self, root: str) -> None:
        try:
            fd = os.open(root, self.DIR_FLAGS)
        except OSError as e:
            if e.errno == errno.EACCES:
                self.unreadable.append("/")
                return
            raise
        try:
            st = os.fstat(fd)
            self._keep(
                Entry(
                    "/",
                    _DIR,
                    mode=stat.S_IMODE(st.st_mode),
                    uid=st.st_uid,
                    gid=st.st_gid,
                    mtime=int(st.st_mtime),
                )
            )
            self._walk_fd(fd, "/", 0)
        finally:
            os.close(fd)

    def _walk_fd(self, dfd: int, path: str, depth: int) -> None:
        if depth > self.MAX_DEPTH:
            self.unreadable.append(path)
            return
        try:
            with os.scandir(dfd) as it:
                items = list(it)
        except OSError as e:
            if e.errno in (errno.EACCES, errno.EPERM):
                self.unreadable.append(path)
                return
            raise
        match = self.matcher.match if self.matcher else None
        # names no spec can match here are dropped by one C-level test, before any path
        # string is built: most files of a host or image match nothing
        prefilter = self.matcher.dir_prefilter(path) if match is not None else None
        prefix = "/" if path == "/" else path + "/"
        room = self.limits.max_path_length - len(prefix)  # longest name that fits
        skip = _HOST_SKIP if depth == 0 and self.skip_host else _NO_NAMES
        items.sort(key=_NAME)
        if self.part is not None:  # one slice of this directory (the host's parallel walk)
            items, self.part = items[self.part[0] :: self.part[1]], None
        n = 0
        try:
            for d in items:
                name = d.name
                if name in skip:
                    continue
                if len(name) > room:
                    self.unreadable.append(prefix + name)
                    continue
                n += 1
                try:
                    # is_file / is_dir / is_symlink (follow_symlinks=False) exclude each
                    # other: the commonest kind is tested first
                    if d.is_file(follow_symlinks=False):
                        if match is None or (prefilter is not None and prefilter(name) is None):
                            continue
                        p = prefix + name
                        spec = match(p)
                        if spec is None:
                            continue
                        cap = min(spec.max_size, self.limits.max_file_bytes)
                        self._capture(dfd, name, p, cap, spec.history, spec.analyzers)
                    elif d.is_dir(follow_symlinks=False):
                        p = prefix + name
                        st = d.stat(follow_symlinks=False)
                        self._keep(
                            Entry(
                                p,
                                _DIR,
                                mode=stat.S_IMODE(st.st_mode),
                                uid=st.st_uid,
                                gid=st.st_gid,
                                mtime=int(st.st_mtime),
                            )
                        )
                        try:
                            sub = os.open(name, self.DIR_FLAGS, dir_fd=dfd)
                        except OSError as e:
                            if e.errno in (errno.EACCES, errno.EPERM):
                                self.unreadable.append(p)
                                continue
                            if e.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
                                continue  # changed under us
                            raise
                        try:
                            self._walk_fd(sub, p, depth + 1)
                        finally:
                            os.close(sub)
                    elif d.is_symlink():
                        p = prefix + name
                        st = d.stat(follow_symlinks=False)
                        target = os.readlink(name, dir_fd=dfd)
                        self._keep(
                            Entry(
                                p,
                                _SYMLINK,
                                mode=stat.S_IMODE(st.st_mode),
                                linkname=target,
                                uid=st.st_uid,
                                gid=st.st_gid,
                                mtime=int(st.st_mtime),
                            )
                        )
                    else:
                        p = prefix + name
                        st = d.stat(follow_symlinks=False)
                        self._keep(
                            Entry(
                                p,
                                EntryKind.OTHER,
                                mode=stat.S_IMODE(st.st_mode),
                                uid=st.st_uid,
                                gid=st.st_gid,
                                mtime=int(st.st_mtime),
                            )
                        )
                except OSError as e:
                    if e.errno in (errno.EACCES, errno.EPERM):
                        self.unreadable.append(prefix + name)
                    elif e.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR, errno.ENXIO):
                        continue  # vanished or swapped while walking
                    else:
                        raise
        finally:
            self.count += n

    def _capture(
        self,
        dfd: int,
        name: str,
        path: str,
        max_size: int,
        history: bool,
        factories: tuple[Any, ...] = (),
    ) -> None:
        fd = os.open(name, self.FILE_FLAGS, dir_fd=dfd)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return  # swapped for something else after scandir
            size = st.st_size
            analysis = _analyze_fd(fd, size, factories) if factories else None
            content: ContentRef | None = None
            if size <= max_size:
                limits = self.limits
                if size <= limits.max_memory_content:
                    data = _read_fd(fd, max_size + 1)
                    content = ContentRef(data=data[:max_size]) if len(data) <= max_size else None
                elif self.spool.bytes + size <= limits.max_spool_bytes:
                    content = _spool_fd(fd, size, self.spool)
            self._keep(
                Entry(
                    path,
                    _FILE,
                    size=content.size if content else size,
                    mode=stat.S_IMODE(st.st_mode),
                    layer=0,
                    content=content,
                    matched=True,
                    uid=st.st_uid,
                    gid=st.st_gid,
                    mtime=int(st.st_mtime),
                    history=history,
                    analysis=analysis,
                )
            )
        finally:
            os.close(fd)


def _analyze_fd(fd: int, size: int, factories: tuple[Any, ...]) -> dict[str, Any] | None:
    """Feed the file open on ``fd`` (up to its fstat ``size``) to fresh analyzers, with
    ``pread`` (the file offset stays where it is for the capture that follows)."""
    from .layer import STREAM_CHUNK, Analyzers

    an = Analyzers(factories)
    off = 0
    while off < size:
        b = os.pread(fd, min(STREAM_CHUNK, size - off), off)
        if not b:
            break
        an.feed(b)
        off += len(b)
    return an.close()


def _read_fd(fd: int, limit: int) -> bytes:
    parts = []
    got = 0
    while got < limit:
        b = os.read(fd, min(_READ_CHUNK, limit - got))
        if not b:
            break
        parts.append(b)
        got += len(b)
    return b"".join(parts)


def _spool_fd(fd: int, size: int, spool: Spool) -> ContentRef:
    path = spool.new_path()
    out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
    written = 0
    try:
        while written < size:  # a file growing under us is cut at its fstat size
            b = os.read(fd, min(_READ_CHUNK, size - written))
            if not b:
                break
            os.write(out, b)  # regular files: full writes
            written += len(b)
    finally:
        os.close(out)
    spool.bytes += written
    return ContentRef(path=path, size=written)
