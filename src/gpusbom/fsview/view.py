"""``FsView``: the read-only squashed filesystem of an image (or an unpacked root).

Link resolution is chroot-like: absolute symlink targets are relative to the
image root, ``..`` at the root stays at the root, symlinks in intermediate
components are resolved too, and more than ``Limits.max_symlink_hops`` hops
raise ``UnsafeArchiveError``. Nothing here touches the host filesystem except
captured content in ``Spool`` temp files (and ``from_directory``, which reads
only below its root, through directory file descriptors, never following links).
"""

from __future__ import annotations

import bisect
import errno
import functools
import operator
import os
import re
import stat
from collections.abc import Iterator
from typing import Any, BinaryIO

from ..errors import UnsafeArchiveError, ViewError
from ..model import LayerRef
from .spec import PathMatcher, glob_to_regex
from .types import ContentRef, Entry, EntryKind, Limits, Spool

_DIR = EntryKind.DIR
_FILE = EntryKind.FILE
_SYMLINK = EntryKind.SYMLINK
_HARDLINK = EntryKind.HARDLINK
_GLOB_CHARS = frozenset("*?[")
_HOST_SKIP = frozenset({"proc", "sys", "dev"})
_NO_NAMES: frozenset[str] = frozenset()
_NAME = operator.attrgetter("name")
_READ_CHUNK = 1 << 20


def _literal_prefix(name: str) -> str:
    """The part of a glob's base name before its first wildcard."""
    for i, ch in enumerate(name):
        if ch in "*?[":
            return name[:i]
    return name


#: a glob's literal directory holding more kept paths than this is searched through the
#: base-name index instead, when that has fewer candidates (``FsView._glob_raw``)
_BASE_INDEX_OVER = 64


@functools.lru_cache(maxsize=4096)
def _glob_rx(pattern: str) -> re.Pattern[str]:
    # collectors glob the same few hundred patterns on every scan
    return re.compile("^" + glob_to_regex(pattern) + "$")


@functools.lru_cache(maxsize=4096)
def _needles(pattern: str, skip: int) -> tuple[str, ...]:
    """"/" and the literal start of each component of ``pattern`` after the first ``skip``
    (``/`` joins the components: each starts right after one, ``**`` or not), longest
    first; the ones that say nothing (empty) are left out."""
    out = {"/" + lp for c in pattern.split("/")[1 + skip:] if c != "**"
           for lp in (_literal_prefix(c),) if lp}
    return tuple(sorted(out, key=lambda n: (-len(n), n)))


def _direct(paths: list[str], lo: int, hi: int, n: int) -> list[str]:
    """The paths of sorted ``paths[lo:hi]`` (all below one directory, whose path with its
    "/" is ``n`` long) that are that directory's own entries, not deeper ones."""
    out: list[str] = []
    i = lo
    while i < hi:
        p = paths[i]
        cut = p.find("/", n)
        if cut < 0:
            out.append(p)
            i += 1
        else:  # below entry p[:cut]: its subtree sorts before p[:cut] + "0"
            i = bisect.bisect_left(paths, p[:cut] + "0", i + 1, hi)
    return out


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


class FsView:
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

    def _sorted_paths(self) -> list[str]:
        if self._sorted is None:
            self._sorted = sorted(self._entries)
        return self._sorted

    def _glob_raw(self, pattern: str) -> list[str]:
        # the regex is compiled only where a candidate is left (``_matching``); a bad
        # pattern still fails here (glob_to_regex: translated once per pattern)
        glob_to_regex(pattern)
        # literal leading components narrow the scan to one sorted range
        comps = pattern.split("/")
        lit: list[str] = []
        for c in comps[1:-1]:
            if _GLOB_CHARS.intersection(c):
                break
            lit.append(c)
        paths = self._sorted_paths()
        candidates: list[str]
        if lit:
            prefix = "/" + "/".join(lit) + "/"
            lo = bisect.bisect_left(paths, prefix)
            hi = bisect.bisect_left(paths, prefix[:-1] + "0")  # "0" sorts right after "/"
            base = "" if "**" in comps[-1] else _literal_prefix(comps[-1])
            if base and len(lit) == len(comps) - 2:
                # every directory literal: a match starts with the directory and the base
                # name's literal part (a range of its own)
                lo = bisect.bisect_left(paths, prefix + base, lo, hi)
                hi = bisect.bisect_left(paths, prefix + base + "\U0010ffff", lo, hi)
            if base and hi - lo > _BASE_INDEX_OVER:
                # "/usr/lib/*/libamdhip64.so*": the paths whose base name starts with the
                # literal part, when they are fewer than the directory's (a host's library
                # directory keeps thousands; a GPU collector globs dozens of such names,
                # most with a copy or two: 48 globs of ROCm's, 10-20 ms of an H200 host's
                # scan, each a regex test of the whole directory)
                by_base, names = self._base_index()
                blo = bisect.bisect_left(names, base)
                bhi = bisect.bisect_left(names, base + "\U0010ffff")
                if bhi - blo < hi - lo:
                    return self._matching(pattern, len(lit), sorted(
                        p for n in names[blo:bhi] for p in by_base[n] if p.startswith(prefix)))
            last = comps[-1]
            if len(lit) == len(comps) - 2 and "**" not in last and "[" not in last:
                # "/usr/lib/*-linux-gnu*": only the directory's own entries can match (no
                # wildcard of the last component crosses "/"): each subdirectory's subtree is
                # skipped as one range (a host keeps tens of thousands of paths below /usr/lib)
                return self._matching(pattern, len(lit), _direct(paths, lo, hi, len(prefix)))
            return self._matching(pattern, len(lit), paths[lo:hi])
        base = "" if "**" in comps[-1] else _literal_prefix(comps[-1])
        if base:
            # "/**/libcudart.so*": only paths whose base name starts with the literal
            # part can match; a sorted (base name, path) index finds them without a
            # regex test of every kept path (host scans keep hundreds of thousands)
            by_base, names = self._base_index()
            lo = bisect.bisect_left(names, base)
            hi = bisect.bisect_left(names, base + "\U0010ffff")
            return self._matching(pattern, 0, sorted(
                p for n in names[lo:hi] for p in by_base[n]))
        candidates = paths
        last = comps[-1]
        cut = max(last.rfind("*"), last.rfind("?"))
        if 0 <= cut < len(last) - 1 and not any(c in last for c in "[]\\"):
            # "/**/*.egg-info": a match ends with the base name's literal tail; one string
            # test each drops the rest before the regex (a host keeps ~20,000 entries)
            # ("$" also matches before a final newline, as the regex test did)
            tails = (last[cut + 1 :], last[cut + 1 :] + "\n")
            candidates = [p for p in candidates if p.endswith(tails)]
        return self._matching(pattern, 0, candidates)

    @staticmethod
    def _matching(pattern: str, skip: int, candidates: list[str]) -> list[str]:
        """The ``candidates`` (sorted) that ``pattern`` matches. A match holds "/" and the
        literal start of each of the pattern's components (after the first ``skip``
        literal ones, which the candidates share): a substring test drops the rest, and a
        pattern left with none is not compiled (most of the patterns collectors glob have
        no match on a given view: "/**/tensorrt*.dist-info/METADATA" tested each of a
        host's hundreds of METADATA; 81 regexes compiled for an H200 host's scan)."""
        needles = _needles(pattern, skip)
        if needles and candidates:
            candidates = [p for p in candidates if all(n in p for n in needles)]
        if not candidates:
            return []
        match = _glob_rx(pattern).match
        return [p for p in candidates if match(p)]

    def _base_index(self) -> tuple[dict[str, list[str]], list[str]]:
        """Each base name's paths, and the distinct base names sorted (one pass over the
        entries and one sort of the names: sorting (base name, path) pairs took 35 ms of a
        host scan's 20,000 entries on a development VM)."""
        if self._by_base is None or self._basenames is None:
            by_base: dict[str, list[str]] = {}
            for p in self._entries:
                name = p[p.rfind("/") + 1 :]
                got = by_base.get(name)
                if got is None:
                    by_base[name] = [p]
                else:
                    got.append(p)
            self._by_base, self._basenames = by_base, sorted(by_base)
        return self._by_base, self._basenames

    def _no_base_name_can_match(self, pattern: str) -> bool:
        """Cheap reject: no kept entry's base name starts with the pattern's literal
        base-name prefix. Collectors glob a few hundred patterns per scan and most have
        nothing to find; compiling their regexes was a large part of a scan's fixed cost."""
        base = pattern.rsplit("/", 1)[-1]
        cut = len(base)
        for i, ch in enumerate(base):
            if ch in "*?[":
                cut = i
                break
        lit = base[:cut]
        if not lit:
            return False
        names = self._base_index()[1]
        i = bisect.bisect_left(names, lit)
        return i >= len(names) or not names[i].startswith(lit)

    def glob(self, pattern: str) -> list[str]:
        """Sorted real paths of kept entries matching the absolute glob ``pattern``.

        Symlinks in the literal leading directories of the pattern are resolved
        (``/usr/local/cuda/lib64/*.so`` finds files under ``/usr/local/cuda-12.4``).
        Collectors ask for some patterns more than once: each is answered once per view.
        """
        got = self._globbed.get(pattern)
        if got is None:
            got = self._globbed[pattern] = self._glob(pattern)
        return list(got)

    def _glob(self, pattern: str) -> list[str]:
        if self._no_base_name_can_match(pattern):
            return []
        out = set(self._glob_raw(pattern))
        comps = pattern.split("/")
        k = 1
        while k < len(comps) - 1 and not _GLOB_CHARS.intersection(comps[k]):
            k += 1
        if k > 1:
            lit = "/".join(comps[:k])
            try:
                real = self.realpath(lit)
            except UnsafeArchiveError:
                real = lit
            if real != lit:
                rest = "/".join(comps[k:])
                out.update(self._glob_raw(real.rstrip("/") + "/" + rest))
        return sorted(out)

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
        walker = _DirWalker(matcher, spool, limits, skip_host=os.path.realpath(root_s) == "/")
        walker.walk(
            os.path.realpath(root_s)
        )  # the root itself may be a link; nothing below is followed
        view = cls(walker.entries, [LayerRef(index=0, diff_id=None)], limits)
        view.unreadable = walker.unreadable
        view.file_count = walker.count
        return view


class _DirWalker:
    _DIR_FLAGS = (
        os.O_RDONLY
        | getattr(os, "O_DIRECTORY", 0)
        | getattr(os, "O_NOFOLLOW", 0)
        | getattr(os, "O_CLOEXEC", 0)
    )
    _FILE_FLAGS = (
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
            fd = os.open(root, self._DIR_FLAGS)
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
                            sub = os.open(name, self._DIR_FLAGS, dir_fd=dfd)
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
        fd = os.open(name, self._FILE_FLAGS, dir_fd=dfd)
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
