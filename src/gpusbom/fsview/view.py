"""``FsView``: the read-only squashed filesystem of an image (or an unpacked root).

Link resolution is chroot-like: absolute symlink targets are relative to the
image root, ``..`` at the root stays at the root, symlinks in intermediate
components are resolved too, and more than ``Limits.max_symlink_hops`` hops
raise ``UnsafeArchiveError``. Nothing here touches the host filesystem except
captured content in ``Spool`` temp files (and ``from_directory``, which reads
only below its root, through directory file descriptors, never following links).

The glob over the entries is ``viewglob.GlobIndex`` (which ``FsView`` inherits), the walk
of an unpacked root ``rootwalk.DirWalker``.
"""

from __future__ import annotations

import bisect
import errno
import os
from collections.abc import Iterator
from typing import Any, BinaryIO

from ..errors import UnsafeArchiveError, ViewError
from ..model import LayerRef
from .rootwalk import DirWalker
from .spec import PathMatcher
from .types import ContentRef, Entry, EntryKind, Limits, Spool
from .viewglob import GlobIndex

_DIR = EntryKind.DIR
_FILE = EntryKind.FILE
_SYMLINK = EntryKind.SYMLINK
_HARDLINK = EntryKind.HARDLINK


class NotCapturedError(ViewError, LookupError):
    """The file exists but its content was not kept (no spec matched it, or it was too large)."""


def _parent(path: str) -> str:
    i = path.rfind("/")
    return path[:i] if i > 0 else "/"


def _join(parent: str, name: str) -> str:
    return "/" + name if parent == "/" else parent + "/" + name


def _loop_message(chain: list[str]) -> str:
    first: dict[str, int] = {}
    for i, p in enumerate(chain):
        if p in first:
            cyc = chain[first[p] : i + 1]
            return f"symlink loop at {cyc[0]} ({' -> '.join(cyc)})"
        first[p] = i
    shown = chain if len(chain) <= 8 else chain[:4] + ["..."] + chain[-3:]
    return f"symlink loop at {chain[0]} ({' -> '.join(shown)}): more than {len(chain) - 1} hops"


class FsView(GlobIndex):
    """Read-only view of a squashed filesystem; see ``docs/CONTRACTS.md``."""

    def __init__(
        self,
        entries: dict[str, Entry],
        layers: list[LayerRef],
        limits: Limits | None = None,
        *,
        history: dict[str, list[Entry]] | None = None,
        children: dict[str, set[str]] | None = None,
    ) -> None:
        self._entries = entries
        self.layers = list(layers)
        self.limits = limits or Limits()
        self._history = history or {}
        self._children = children
        self._sorted: list[str] | None = None
        self._basenames: list[str] | None = None  # the distinct base names, sorted
        self._by_base: dict[str, list[str]] | None = None  # base name -> its paths
        self._globbed: dict[str, list[str]] = {}  # pattern -> glob(): entries never change
        self._by_index = {ref.index: ref for ref in self.layers}
        #: no layer has a diff_id (a host or a directory): layer_of is None for every path
        self._no_diff_ids = all(ref.diff_id is None for ref in self.layers)
        self.unreadable: list[str] = []  # paths from_directory could not read (EACCES)
        self.file_count = 0  # entries seen while building the view, kept or not
        #: (kind, path) -> a parse of that file made while walking (``collectors/_premade.py``)
        self.premade: dict[tuple[str, str], Any] = {}

    # -- resolution ----------------------------------------------------------------------------

    def _resolve(self, path: str, follow: bool) -> tuple[str, Entry | None]:
        """Resolve ``path`` inside the root; returns (real path, entry or None)."""
        entries = self._entries
        todo = path.split("/")
        todo.reverse()
        cur: list[str] = []
        chain: list[str] = []  # link paths followed, for the loop message
        max_hops = self.limits.max_symlink_hops
        found = True
        while todo:
            comp = todo.pop()
            if comp == "" or comp == ".":
                continue
            if comp == "..":
                if cur:
                    cur.pop()
                continue
            if not found:  # lexical rest of a missing path (non-strict realpath)
                cur.append(comp)
                continue
            p = "/" + comp if not cur else "/" + "/".join(cur) + "/" + comp
            e = entries.get(p)
            more = False
            for c in todo:
                if c != "" and c != ".":
                    more = True
                    break
            if e is None:
                if more and not self._implicit_dir(p):
                    found = False
                cur.append(comp)
                continue
            kind = e.kind
            if kind is _SYMLINK and (more or follow):
                chain.append(p)
                if len(chain) > max_hops:
                    raise UnsafeArchiveError(_loop_message(chain))
                target = e.linkname or ""
                if target.startswith("/"):
                    cur.clear()
                todo.extend(reversed(target.split("/")))
                continue
            if more and kind is not _DIR:
                found = False  # a file in the middle of the path
            cur.append(comp)
        real = "/" + "/".join(cur)
        if not found:
            return real, None
        e = entries.get(real)
        if e is None and (real == "/" or self._implicit_dir(real)):
            e = Entry(real, _DIR)
        return real, e

    def _implicit_dir(self, path: str) -> bool:
        """Whether ``path`` holds some entry (a directory, recorded or not)."""
        ch = self._children
        if ch is not None:
            return path in ch
        # without the children map (a host's view, a directory's): an entry below ``path``
        # is the first sorted path after ``path + "/"`` (a host scan kept 20,000-100,000
        # entries: building the map took 20-25 ms of it, for a few hundred look-ups)
        paths = self._sorted_paths()
        if path == "/":
            return len(paths) > (1 if "/" in self._entries else 0)
        pre = path + "/"
        i = bisect.bisect_left(paths, pre)
        return i < len(paths) and paths[i].startswith(pre)

    def _child_names(self, real: str) -> list[str]:
        """The sorted names of directory ``real``'s entries (recorded or implicit)."""
        ch = self._children
        if ch is not None:
            return sorted(k.rsplit("/", 1)[1] for k in ch.get(real, ()))
        # from the sorted paths: each child's subtree is one range, skipped at once
        paths = self._sorted_paths()
        pre = "/" if real == "/" else real + "/"
        n = len(pre)
        names: set[str] = set()
        i = bisect.bisect_left(paths, pre)
        end = len(paths)
        while i < end:
            p = paths[i]
            if not p.startswith(pre):
                break
            cut = p.find("/", n)
            if cut < 0:
                if len(p) > n:
                    names.add(p[n:])
                i += 1
            else:  # below child p[n:cut]: its subtree sorts before p[:cut] + "0"
                names.add(p[n:cut])
                i = bisect.bisect_left(paths, p[:cut] + "0", i + 1)
        return sorted(names)

    def lookup(self, path: str, follow: bool = True) -> Entry | None:
        """The entry at ``path`` (symlinks resolved inside the root when ``follow``)."""
        entry = self._resolve(path, follow)[1]
        if entry is not None and follow and entry.kind is _HARDLINK and entry.content is None:
            target = self._entries.get(entry.linkname or "")
            if target is not None and target.kind is _FILE and target.layer <= entry.layer:
                return target
        return entry

    def realpath(self, path: str) -> str:
        return self._resolve(path, True)[0]

    def exists(self, path: str) -> bool:
        try:
            return self.lookup(path) is not None
        except UnsafeArchiveError:
            return False

    def is_file(self, path: str) -> bool:
        try:
            e = self.lookup(path)
        except UnsafeArchiveError:
            return False
        return e is not None and e.kind in (_FILE, _HARDLINK)

    def is_dir(self, path: str) -> bool:
        try:
            e = self.lookup(path)
        except UnsafeArchiveError:
            return False
        return e is not None and e.kind is _DIR

    # -- content ---------------------------------------------------------------------------------

    def _content(self, path: str) -> ContentRef:
        e = self.lookup(path)
        if e is None:
            raise FileNotFoundError(errno.ENOENT, "no such file in the image", path)
        if e.kind is _DIR:
            raise IsADirectoryError(errno.EISDIR, "is a directory", path)
        if e.content is None:
            raise NotCapturedError(f"{path}: content not captured ({self._why_not(e)})")
        return e.content

    def _why_not(self, e: Entry) -> str:
        if not e.matched:
            return "no path spec matched it"
        cap = self.limits.max_file_bytes
        if e.size > cap:
            need = -(-e.size // (1 << 20))  # MiB, rounded up
            return (f"{e.size} bytes, larger than the {cap >> 20} MiB bound on a file gpusbom "
                    f"reads: pass --max-file-size {need}M or more to read it")
        return (f"{e.size} bytes: larger than the collector reads from such a file, or the "
                f"{self.limits.max_spool_bytes >> 20} MiB budget for captured content was spent")

    def read_bytes(self, path: str) -> bytes:
        return self._content(path).read()

    def read_text(self, path: str) -> str:
        return self.read_bytes(path).decode("utf-8", errors="replace")

    def open(self, path: str) -> BinaryIO:
        return self._content(path).open()

    def analysis(self, path: str) -> dict[str, Any] | None:
        """What the stream analyzers of the matching ``PathSpec`` found in the file at
        ``path`` (links resolved), or None (no analyzer, nothing found, or no such file)."""
        try:
            e = self.lookup(path)
        except UnsafeArchiveError:
            return None
        if e is None:
            return None
        if e.analysis is None and e.kind is _HARDLINK:
            target = self._entries.get(e.linkname or "")
            if target is not None and target.kind is _FILE:
                return target.analysis
        return e.analysis

    # -- listing ---------------------------------------------------------------------------------

    def listdir(self, path: str) -> list[str]:
        real, e = self._resolve(path, True)
        if e is None:
            raise FileNotFoundError(errno.ENOENT, "no such directory in the image", path)
        if e.kind is not _DIR:
            raise NotADirectoryError(errno.ENOTDIR, "not a directory", path)
        return self._child_names(real)

    def entries(self) -> Iterator[Entry]:
        entries = self._entries
        for p in self._sorted_paths():
            yield entries[p]

    def __len__(self) -> int:
        return len(self._entries)

    def layer_of(self, path: str) -> str | None:
        if self._no_diff_ids:  # no look-up: whatever the entry, its layer has no diff_id
            return None
        try:
            e = self.lookup(path)
        except UnsafeArchiveError:
            return None
        if e is None:
            return None
        ref = self._by_index.get(e.layer)
        return None if ref is None else ref.diff_id

    def history(self, path: str) -> list[Entry]:
        """Versions of ``path`` from each layer that wrote it, oldest first."""
        real, e = self._resolve(path, True)
        if e is None:
            return []
        h = self._history.get(real)
        if h:
            return list(h)
        return [e]

    # -- unpacked root filesystems -----------------------------------------------------------

    @classmethod
    def from_directory(
        cls,
        root: str | os.PathLike[str],
        matcher: PathMatcher,
        spool: Spool,
        limits: Limits | None = None,
    ) -> FsView:
        """A one-layer view of the unpacked root filesystem at ``root``.

        Walks with directory file descriptors and ``lstat`` only: links are never
        followed, nothing outside ``root`` is opened, and ``/proc``, ``/sys``,
        ``/dev`` are skipped when ``root`` is ``/``. Matched regular files are read
        with ``O_NOFOLLOW`` and checked with ``fstat``. Paths that cannot be read
        (``EACCES``) are listed in ``view.unreadable``.
        """
        limits = limits or Limits()
        root_s = os.fspath(root)
        walker = DirWalker(matcher, spool, limits, skip_host=os.path.realpath(root_s) == "/")
        walker.walk(
            os.path.realpath(root_s)
        )  # the root itself may be a link; nothing below is followed
        view = cls(walker.entries, [LayerRef(index=0, diff_id=None)], limits)
        view.unreadable = walker.unreadable
        view.file_count = walker.count
        return view
