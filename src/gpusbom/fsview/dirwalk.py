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
    """One path of a layer directory, with its data read on demand."""

    __slots__ = ("_f", "_root", "gid", "kind", "linkname", "mode", "mtime", "name", "size",
                 "sparse", "uid")

    def __init__(
        self, root: int, name: str, kind: EntryKind, st: os.stat_result | None,
        linkname: str = "",
    ) -> None:
        self._root = root
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
        if self.kind is not EntryKind.FILE:
            return b""
        if self._f is None:
            self._f = _open_file(self._root, self.name)
        try:
            return os.read(self._f, self.size if n < 0 else n) if n != 0 else b""
        except OSError as e:
            raise LayerError(f"cannot read {self.name}: {e.strerror}") from None

    def close(self) -> None:
        if self._f is not None:
            os.close(self._f)
            self._f = None


def _open_dir(root: int, rel: str) -> int:
    fd = os.dup(root)
    try:
        for comp in [c for c in rel.split("/") if c]:
            nfd = os.open(comp, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nfd
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_file(root: int, rel: str) -> int:
    head, _, base = rel.rpartition("/")
    dfd = _open_dir(root, head)
    try:
        fd = os.open(base, _FILE_FLAGS, dir_fd=dfd)
    finally:
        os.close(dfd)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafeArchiveError(f"{rel} changed into a non-regular file while read")
    return fd


def _opaque(dfd: int) -> bool:
    for name in _OPAQUE_XATTRS:
        try:
            if os.getxattr(dfd, name) == b"y":
                return True
        except OSError:
            continue
    return False


def walk_layer_dir(path: str, name: str, limits: Limits | None = None) -> Iterator[DirMember]:
    """Members of the layer directory ``path`` (parents first); ``name`` is for messages."""
    limits = limits or Limits()
    try:
        root = os.open(path, _DIR_FLAGS)
    except OSError as e:
        raise LayerError(f"{name}: cannot open layer directory {path}: {e.strerror}") from None
    _EK = EntryKind
    seen_inodes: dict[tuple[int, int], str] = {}
    count = 0
    try:
        yield DirMember(root, ".", _EK.DIR, os.fstat(root))
        queue = [""]
        while queue:
            rel = queue.pop()
            try:
                dfd = _open_dir(root, rel)
            except OSError as e:
                raise LayerError(f"{name}: cannot open {rel or '/'}: {e.strerror}") from None
            try:
                if rel and _opaque(dfd):
                    yield DirMember(root, f"{rel}/.wh..wh..opq", _EK.FILE, None)
                with os.scandir(dfd) as it:
                    ents = sorted(it, key=lambda e: e.name)
                subdirs = []
                for ent in ents:
                    child = f"{rel}/{ent.name}" if rel else ent.name
                    count += 1
                    if count > limits.max_entries_per_layer:
                        raise UnsafeArchiveError(
                            f"{name}: more than {limits.max_entries_per_layer} entries"
                        )
                    if len(child) + 1 > limits.max_path_length:
                        raise UnsafeArchiveError(f"{name}: path longer than the limit: {child!r}")
                    st = os.stat(ent.name, dir_fd=dfd, follow_symlinks=False)
                    mode = st.st_mode
                    if stat.S_ISDIR(mode):
                        subdirs.append(child)
                        yield DirMember(root, child, _EK.DIR, st)
                    elif stat.S_ISREG(mode):
                        key = (st.st_dev, st.st_ino)
                        first = seen_inodes.get(key) if st.st_nlink > 1 else None
                        if first is not None:
                            yield DirMember(root, child, _EK.HARDLINK, st, first)
                            continue
                        if st.st_nlink > 1:
                            seen_inodes[key] = child
                        m = DirMember(root, child, _EK.FILE, st)
                        try:
                            yield m
                        finally:
                            m.close()
                    elif stat.S_ISLNK(mode):
                        target = os.readlink(ent.name, dir_fd=dfd)
                        yield DirMember(root, child, _EK.SYMLINK, st, target)
                    elif stat.S_ISCHR(mode) and st.st_rdev == 0:
                        wh = f"{rel}/.wh.{ent.name}" if rel else f".wh.{ent.name}"
                        yield DirMember(root, wh, _EK.FILE, None)
                    else:
                        yield DirMember(root, child, _EK.OTHER, st)
                queue.extend(reversed(subdirs))
            finally:
                os.close(dfd)
    finally:
        os.close(root)
