"""An image layer stored as a directory (containers-storage overlay ``diff`` or vfs
directories), walked as layer members for ``fsview.layer.index_members``: no tar, no
decompression.

Everything below the layer root is reached through directory file descriptors, one path
component at a time with ``O_NOFOLLOW``: a symlink in the layer is recorded as a symlink and
never followed onto the host. Overlay whiteouts (a character device 0:0) become ``.wh.NAME``
members, and an opaque directory (xattr ``trusted.overlay.opaque`` or
``user.overlay.opaque`` = ``y``) gets a ``.wh..wh..opq`` member, as in an OCI layer tar.
A second name of the same inode is a hard link to the first, as tar writes it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator

from ..errors import LayerError, UnsafeArchiveError
from .types import EntryKind, Limits

__all__ = ["DirMember", "walk_layer_dir"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_OPAQUE_XATTRS = ("trusted.overlay.opaque", "user.overlay.opaque")


class DirMember:
    """One path of a layer directory, with its data read on demand (through the directory's
    descriptor, which stays open while the member is being indexed)."""

    __slots__ = ("_dir", "_f", "gid", "kind", "linkname", "mode", "mtime", "name", "size",
                 "sparse", "uid")

    def __init__(
        self, dirfd: int, name: str, kind: EntryKind, st: os.stat_result | None,
        linkname: str = "",
    ) -> None:
        self._dir = dirfd
        self._f: int | None = None
        self.name = name
        self.kind = kind
        self.linkname = linkname
        self.sparse = False
        if st is None:
            self.size = self.mode = self.uid = self.gid = self.mtime = 0
        else:
            self.size = st.st_size if kind is EntryKind.FILE else 0
            self.mode = st.st_mode & 0o7777
            self.uid, self.gid, self.mtime = st.st_uid, st.st_gid, int(st.st_mtime)

    def read(self, n: int = -1) -> bytes:
        if self.kind is not EntryKind.FILE or n == 0:
            return b""
        if self._f is None:
            base = self.name.rsplit("/", 1)[-1]
            try:
                fd = os.open(base, _FILE_FLAGS, dir_fd=self._dir)
            except OSError as e:
                raise LayerError(f"cannot open {self.name}: {e.strerror}") from None
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                raise UnsafeArchiveError(f"{self.name} changed into a non-regular file while read")
            self._f = fd
        want = self.size if n < 0 else n
        parts = []
        try:
            while want > 0:
                chunk = os.read(self._f, min(want, 1 << 24))
                if not chunk:
                    break
                parts.append(chunk)
                want -= len(chunk)
        except OSError as e:
            raise LayerError(f"cannot read {self.name}: {e.strerror}") from None
        return b"".join(parts)

    def close(self) -> None:
        if self._f is not None:
            os.close(self._f)
            self._f = None


def _opaque(dfd: int) -> bool:
    for name in _OPAQUE_XATTRS:
        try:
            if os.getxattr(dfd, name) == b"y":
                return True
        except OSError:
            continue
    return False


def _listing(dfd: int, rel: str, name: str, limits: Limits, seen_inodes: dict[tuple[int, int], str],
             count: list[int], subdirs: list[str]) -> Iterator[DirMember]:
    """Members of one directory (its subdirectories' names go to ``subdirs``)."""
    _EK = EntryKind
    if rel and _opaque(dfd):
        yield DirMember(dfd, f"{rel}/.wh..wh..opq", _EK.FILE, None)
    with os.scandir(dfd) as it:
        ents = sorted(it, key=lambda e: e.name)
    for ent in ents:
        child = f"{rel}/{ent.name}" if rel else ent.name
        count[0] += 1
        if count[0] > limits.max_entries_per_layer:
            raise UnsafeArchiveError(f"{name}: more than {limits.max_entries_per_layer} entries")
        if len(child) + 1 > limits.max_path_length:
            raise UnsafeArchiveError(f"{name}: path longer than the limit: {child!r}")
        st = os.stat(ent.name, dir_fd=dfd, follow_symlinks=False)
        mode = st.st_mode
        if stat.S_ISDIR(mode):
            subdirs.append(ent.name)
            yield DirMember(dfd, child, _EK.DIR, st)
        elif stat.S_ISREG(mode):
            key = (st.st_dev, st.st_ino)
            first = seen_inodes.get(key) if st.st_nlink > 1 else None
            if first is not None:
                yield DirMember(dfd, child, _EK.HARDLINK, st, first)
                continue
            if st.st_nlink > 1:
                seen_inodes[key] = child
            m = DirMember(dfd, child, _EK.FILE, st)
            try:
                yield m
            finally:
                m.close()
        elif stat.S_ISLNK(mode):
            yield DirMember(dfd, child, _EK.SYMLINK, st, os.readlink(ent.name, dir_fd=dfd))
        elif stat.S_ISCHR(mode) and st.st_rdev == 0:
            wh = f"{rel}/.wh.{ent.name}" if rel else f".wh.{ent.name}"
            yield DirMember(dfd, wh, _EK.FILE, None)
        else:
            yield DirMember(dfd, child, _EK.OTHER, st)


def walk_layer_dir(path: str, name: str, limits: Limits | None = None) -> Iterator[DirMember]:
    """Members of the layer directory ``path`` (parents first); ``name`` is for messages.

    Depth first with one open descriptor per level of the current path (each subdirectory
    is opened relative to its parent with ``O_NOFOLLOW``); running out of descriptors on an
    absurdly deep tree is a ``LayerError``."""
    limits = limits or Limits()
    try:
        root = os.open(path, _DIR_FLAGS)
    except OSError as e:
        raise LayerError(f"{name}: cannot open layer directory {path}: {e.strerror}") from None
    seen_inodes: dict[tuple[int, int], str] = {}
    count = [0]
    # (descriptor, path relative to the layer root, subdirectory names not yet visited)
    stack: list[tuple[int, str, list[str]]] = []
    try:
        yield DirMember(root, ".", EntryKind.DIR, os.fstat(root))
        subdirs: list[str] = []
        yield from _listing(root, "", name, limits, seen_inodes, count, subdirs)
        stack.append((root, "", subdirs[::-1]))
        while stack:
            dfd, rel, pending = stack[-1]
            if not pending:
                stack.pop()
                if dfd != root:
                    os.close(dfd)
                continue
            sub = pending.pop()
            child = f"{rel}/{sub}" if rel else sub
            try:
                cfd = os.open(sub, _DIR_FLAGS, dir_fd=dfd)
            except OSError as e:
                raise LayerError(f"{name}: cannot open {child}: {e.strerror}") from None
            subdirs = []
            stack.append((cfd, child, subdirs))
            yield from _listing(cfd, child, name, limits, seen_inodes, count, subdirs)
            subdirs.reverse()
    except OSError as e:
        raise LayerError(f"{name}: {e.strerror or e}") from None
    finally:
        for dfd, _, _ in stack:
            if dfd != root:
                os.close(dfd)
        os.close(root)
