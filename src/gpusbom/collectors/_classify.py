"""The binary classifier engine: applies :mod:`gpusbom.catalog.classifiers` to files
as their layer streams (not a collector: the leading ``_`` keeps the registry from
importing it as one).

One :class:`ClassifierScanner` per file and row group (the rows whose globs the file name
matches), fed every chunk once:

* ``rodata`` rows: their ``anchor`` is searched with ``bytes.find`` in each chunk (plus a
  512-byte overlap with the previous one) and the row regex is matched at each hit; a
  presence row stops at its first match, a version row after :data:`MAX_VALUES` values;
* ``symbol`` rows: the chunks are *referenced* (not copied) while the file is no larger
  than the largest ``capture`` of its rows; at the end of the stream, when the getter's
  name occurs in the file, :func:`gpusbom.binary.getters.read_getter` decodes it from
  those chunks. Larger files drop the references at once (memory stays bounded), except
  for rows with a ``head``: then only the chunks of the first ``head`` bytes and of the
  section header table (whose offset the ELF header gives) stay referenced, a sparse view
  whose holes read as the end of the file (``libcublasLt.so``: 749 MB, its getter at
  16 MB);
* ``before_fatbin`` rodata rows stop at the first CUDA fatbin header in the file (a static
  library's strings lie in ``.rodata``, before ``.nv_fatbin``, which is most of a
  framework library's bytes): the search costs the bytes before the device code only.

Files that do not start with the ELF magic are not looked at (``done`` after 4 bytes).
The result lands in ``Entry.analysis["classify/<row ids>"]``; :func:`hits` turns it into
:class:`Hit` objects (version by the row's rule) for the collectors. Nothing is executed.
"""

from __future__ import annotations

import bisect
import fnmatch
import functools
import io
import os
import posixpath
import re
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..catalog.classifiers import ROWS, Row, apply_rule
from ..fsview.spec import PathSpec

__all__ = [
    "EXEC_GLOBS",
    "ClassifierScanner",
    "Hit",
    "hits",
    "is_executable_path",
    "paths_for",
]

#: Directories whose files are analysed as executables (ELF ``ET_EXEC`` or PIE).
EXEC_GLOBS = ("/**/bin/*", "/**/sbin/*", "/**/libexec/**")
#: Largest shared library checked for a static CUDA runtime (its chunks are referenced
#: until the end of the stream, then searched once for the getter's name).
STATIC_LIB_CAPTURE = 16 << 20
#: Largest executable searched (bigger ones keep only their GPU code analysis).
EXEC_LIMIT = 512 << 20
MAX_VALUES = 8
_OVERLAP = 512
#: a CUDA fatbin's header: magic 0xBA55ED50, version 1, header size 16 (little-endian)
_FATBIN_HEADER = b"\x50\xed\x55\xba\x01\x00\x10\x00"
#: bytes kept before the section header table in a sparse capture (``.shstrtab`` lies there)
_SHSTRTAB_SLACK = 64 << 10
_SO_RX = re.compile(r"\.so(?:\.[0-9][0-9A-Za-z.]*)?$")


#: bytes of one file that a symbol row keeps in memory; the rest of what it keeps goes to an
#: unnamed temporary file (libcublasLt's 64 MiB head, libnccl's 32 MiB: held while the rest
#: of the library streams, they were most of a layer worker's memory)
KEEP_IN_MEMORY = 4 << 20


class _Spilled:
    """A kept chunk that lies in the scanner's temporary file (read back on demand)."""

    __slots__ = ("_fd", "_len", "_off")

    def __init__(self, fd: int, off: int, n: int) -> None:
        self._fd, self._off, self._len = fd, off, n

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, s: slice) -> bytes:
        start, stop, _ = s.indices(self._len)
        return os.pread(self._fd, max(0, stop - start), self._off + start)

    def data(self) -> bytes:
        return self[0 : self._len]


class _Kept:
    """The chunks a scanner keeps of one file, at their file offsets: referenced while they
    add up to :data:`KEEP_IN_MEMORY`, then written to an unnamed temporary file (removed
    when closed, or by the system if the process dies)."""

    def __init__(self) -> None:
        self.items: list[tuple[int, bytes | _Spilled]] = []
        self._mem = 0
        self._file: Any = None
        self._end = 0

    def append(self, start: int, chunk: bytes) -> None:
        if self._mem + len(chunk) <= KEEP_IN_MEMORY:
            self.items.append((start, chunk))
            self._mem += len(chunk)
            return
        if self._file is None:
            self._file = tempfile.TemporaryFile(buffering=0)  # noqa: SIM115 - see close()
        self._file.write(chunk)
        self.items.append((start, _Spilled(self._file.fileno(), self._end, len(chunk))))
        self._end += len(chunk)

    def keep_before(self, head: int) -> None:
        """Drop the chunks from ``head`` on (their bytes stay in the file unread)."""
        kept = [(s, c) for s, c in self.items if s < head]
        self._mem = sum(len(c) for _, c in kept if isinstance(c, bytes))
        self.items = kept

    def close(self) -> None:
        self.items = []
        if self._file is not None:
            self._file.close()
            self._file = None


class _Chunks(io.RawIOBase):
    """A seekable read-only view of byte chunks at known file offsets (no copy of the data).

    The chunks may leave holes (a sparse capture keeps a file's head and its section
    header table only): a read stops at a hole, as it would at the end of a truncated file,
    so whatever needs those bytes fails cleanly instead of reading made-up ones."""

    def __init__(self, chunks: list[tuple[int, bytes | _Spilled]], size: int | None = None) -> None:
        self._chunks = [c for _, c in chunks]
        self._starts = [s for s, _ in chunks]
        end = self._starts[-1] + len(self._chunks[-1]) if chunks else 0
        self._size = max(end, size or 0)
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self._pos, 2: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def tell(self) -> int:
        return self._pos

    def read(self, n: int | None = -1) -> bytes:
        if n is None or n < 0:
            n = self._size - self._pos
        out: list[bytes] = []
        while n > 0 and self._pos < self._size:
            i = bisect.bisect_right(self._starts, self._pos) - 1
            if i < 0:
                break
            c = self._chunks[i]
            at = self._pos - self._starts[i]
            if at >= len(c):
                break  # a hole: not kept
            piece = c[at : at + n]
            out.append(piece)
            self._pos += len(piece)
            n -= len(piece)
        return b"".join(out)

    def readinto(self, b: Any) -> int:
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)


class ClassifierScanner:
    """Stream analyzer applying ``rows`` to one file (see the module docstring)."""

    def __init__(self, rows: tuple[Row, ...], capture: int, limit: int | None = None) -> None:
        self.rows = rows
        #: the result key (one per row group: several groups may analyse one file)
        self.key = "classify/" + ",".join(r.id for r in rows)
        #: files larger than this are not searched at all (``done`` once it is passed)
        self.limit = limit
        self._seen = 0
        self.rodata = [r for r in rows if r.evidence == "rodata"]
        self.symbols = [r for r in rows if r.evidence == "symbol"]
        self.capture = capture
        self.done = False
        self._elf: bool | None = None
        self._etype = 0
        #: framework libraries (rows with ``head: fatbin``): keep the bytes before the first
        #: fatbin header (at most ``head``) and from the section header table to the end
        self._until_fatbin = any(r.head_until_fatbin for r in self.symbols)
        self._head_done = False
        keep = self.symbols and (capture or self._until_fatbin)
        self._chunks: _Kept | None = _Kept() if keep else None
        self._kept = 0
        #: sparse capture of larger files (rows with ``head``): the first ``head`` bytes and
        #: the section header table (with the bytes just before it: ``.shstrtab``)
        self.head = max((r.head for r in self.symbols), default=0)
        self._sparse = False
        self._shwin = (0, 0)
        self._tail = b""
        self._found: dict[str, list[str]] = {}
        self._closed_rows: set[str] = set()
        self._fatbin_rows = any(r.before_fatbin for r in self.rodata)
        self._fatbin_seen = False

    def feed(self, chunk: bytes) -> None:
        if self.done or not chunk:
            return
        if self._elf is None:
            self._elf = chunk[:4] == b"\x7fELF"
            if not self._elf:
                self.done = True
                return
            order = "little" if chunk[5:6] != b"\x02" else "big"
            self._etype = int.from_bytes(chunk[16:18], order)  # type: ignore[arg-type]
            if self.head and chunk[4:5] == b"\x02" and len(chunk) >= 64:
                shoff = int.from_bytes(chunk[0x28:0x30], order)  # type: ignore[arg-type]
                shsize = int.from_bytes(chunk[0x3A:0x3C], order) * int.from_bytes(  # type: ignore[arg-type]
                    chunk[0x3C:0x3E], order  # type: ignore[arg-type]
                )
                self._shwin = (max(0, shoff - _SHSTRTAB_SLACK), shoff + min(shsize, 1 << 20))
        start = self._seen
        self._seen += len(chunk)
        if self.limit is not None and self._seen > self.limit:
            self._drop()
            self._found, self.done = {}, True
            return
        if self._chunks is not None and self._until_fatbin:
            self._keep_until_fatbin(start, chunk)
        elif self._chunks is not None:
            if not self._sparse and self._kept + len(chunk) <= self.capture:
                self._chunks.append(start, chunk)
                self._kept += len(chunk)
            elif self.head and self._shwin[1] > self._shwin[0]:
                if not self._sparse:  # past the capture: keep the head only from now on
                    self._sparse = True
                    self._chunks.keep_before(self.head)
                lo, hi = self._shwin
                if start < self.head or (start + len(chunk) > lo and start < hi):
                    self._chunks.append(start, chunk)
            else:
                self._drop()
        if self.rodata:
            if self._in_chunk(chunk):
                # no anchor (nor fatbin header) starts in the overlap with the previous
                # chunk: every hit lies in ``chunk``, where a row's regex (anchored at its
                # hit, never looking behind it) matches as in the joined buffer; the chunk
                # is not copied (a 209 MB libnccl was copied once per scanner)
                buf = chunk
                tail = chunk[-_OVERLAP:] if len(chunk) >= _OVERLAP else (self._tail + chunk)[-_OVERLAP:]
            else:
                buf = self._tail + chunk if self._tail else chunk
                tail = buf[-_OVERLAP:]
            self._search_rows(buf)
            self._tail = tail
        if self._chunks is None and len(self._closed_rows) == len(self.rodata):
            self.done = True

    def _keep_until_fatbin(self, start: int, chunk: bytes) -> None:
        """Keep ``chunk`` while no fatbin header has been seen (and the head is not full),
        and from the section header table's window to the end of the file."""
        if self._chunks is None:
            return
        if not self._head_done:
            if start >= self.head:
                self._head_done = True
            else:
                self._chunks.append(start, chunk)
                if chunk.find(_FATBIN_HEADER) >= 0:
                    self._head_done = True  # the device code follows: not kept
                return
        lo = self._shwin[0]
        if self._shwin[1] > lo and start + len(chunk) > lo:
            self._chunks.append(start, chunk)
        elif self._shwin[1] <= lo:  # no section header table: nothing to resolve symbols by
            self._drop()

    def _search_rows(self, buf: bytes) -> None:
        """Search ``buf`` for every open rodata row; a row whose strings precede the device
        code is searched only up to the first fatbin header and then closed."""
        fb = -1
        if self._fatbin_rows and not self._fatbin_seen:
            fb = buf.find(_FATBIN_HEADER)
            self._fatbin_seen = fb >= 0
        for row in self.rodata:
            if row.id in self._closed_rows:
                continue
            if row.before_fatbin and fb >= 0:
                self._search(row, buf[:fb])
                self._closed_rows.add(row.id)  # the device code follows: no .rodata
            else:
                self._search(row, buf)

    def _in_chunk(self, chunk: bytes) -> bool:
        """Whether the rodata rows can be searched in ``chunk`` alone (see ``feed``)."""
        tail = self._tail
        if tail and self._fatbin_rows and not self._fatbin_seen and \
                (tail + chunk[: len(_FATBIN_HEADER) - 1]).find(_FATBIN_HEADER) >= 0:
            return False
        for row in self.rodata:
            if row.id in self._closed_rows:
                continue
            if not _forward_only(row.pattern):
                return False
            if tail and (tail + chunk[: len(row.anchor) - 1]).find(row.anchor) >= 0:
                return False  # a hit that starts before the chunk: the joined buffer
        return True

    def _search(self, row: Row, buf: bytes) -> None:
        rx = _compiled(row.pattern)
        vals = self._found.setdefault(row.id, [])
        at = buf.find(row.anchor)
        while at >= 0:
            m = rx.match(buf, at)
            if m is not None:
                v = (m.group("v") if "v" in rx.groupindex else m.group(0)).decode("ascii", "replace")
                if v not in vals:
                    vals.append(v)
                if row.rule == "presence" or len(vals) >= MAX_VALUES:
                    self._closed_rows.add(row.id)
                    return
            at = buf.find(row.anchor, at + 1)

    def close(self) -> dict[str, Any] | None:
        if not self._elf:
            return None
        out: dict[str, Any] = {"etype": self._etype}
        rodata = {k: v for k, v in self._found.items() if v}
        if rodata:
            out["rodata"] = rodata
        kept, self._chunks = self._chunks, None
        if kept is not None:
            try:
                if kept.items:
                    getters = self._getters(kept.items, self._seen)
                    if getters:
                        out["getters"] = getters
            finally:
                kept.close()
        return {self.key: out} if len(out) > 1 else None

    def _drop(self) -> None:
        """Keep nothing more of this file (and free what was kept)."""
        if self._chunks is not None:
            self._chunks.close()
            self._chunks = None

    def _getters(self, chunks: list[tuple[int, bytes | _Spilled]], size: int) -> dict[str, Any]:
        from ..binary.getters import read_getter

        out: dict[str, Any] = {}
        rows = [r for r in self.symbols
                if size <= r.capture or (self._sparse and r.head) or r.head_until_fatbin]
        # one pass over what was kept for every row's name (kept bytes may lie in a
        # temporary file: a framework library's head is read back once, not once per row)
        present = _present([c for _, c in chunks], {r.symbol.encode() for r in rows})
        for row in rows:
            if row.symbol.encode() not in present:
                continue
            r = read_getter(
                _Chunks(chunks, size),  # type: ignore[arg-type]
                row.symbol,
                kind=row.getter,
                name=row.symbol,
                tables=row.tables,
            )
            rec: dict[str, Any] = {"symbol": row.symbol}
            if r.error:
                rec["error"] = r.error
            else:
                rec["table"] = r.table
                rec["address"] = r.address
                rec["candidates"] = [
                    {"value": c.value, "at": c.address, "insn": c.insn, "depth": c.depth,
                     **({"words": list(c.words)} if c.words else {})}
                    for c in r.candidates[:MAX_VALUES]
                ]
                if row.getter == "pointer" and r.notes:
                    # why a pointer led to no words (.bss, no section, a hole)
                    rec["notes"] = list(r.notes[:MAX_VALUES])
            out[row.id] = rec
        return out


def _present(chunks: list[bytes | _Spilled], needles: set[bytes]) -> set[bytes]:
    """The ``needles`` that occur in the chunks (joined), each chunk read once."""
    found: set[bytes] = set()
    if not needles:
        return found
    longest = max(len(n) for n in needles)
    prev = b""
    for piece in chunks:
        c = piece if isinstance(piece, bytes) else piece.data()
        edge = prev[-longest:] + c[:longest]
        for n in needles - found:
            if n in c or n in edge:
                found.add(n)
        if found == needles:
            break
        prev = c
    return found


_RX_CACHE: dict[bytes, re.Pattern[bytes]] = {}
_FORWARD: dict[bytes, bool] = {}
#: what lets a regex see before the position it is matched at, or tell a buffer's start
_LOOKS_BACK = re.compile(rb"\(\?<|\\[bBAZ]|\$|(?<!\[)\^")


def _forward_only(pattern: bytes) -> bool:
    """Whether ``pattern``'s match at a position depends only on the bytes from there on."""
    ok = _FORWARD.get(pattern)
    if ok is None:
        ok = _FORWARD[pattern] = _LOOKS_BACK.search(pattern) is None
    return ok


def _compiled(pattern: bytes) -> re.Pattern[bytes]:
    rx = _RX_CACHE.get(pattern)
    if rx is None:
        rx = _RX_CACHE[pattern] = re.compile(pattern, re.DOTALL)
    return rx


# -- path specs --------------------------------------------------------------------------------

_FACTORIES: dict[tuple[str, ...], Callable[[], ClassifierScanner]] = {}


def _factory(
    rows: tuple[Row, ...], capture: int, limit: int | None = None
) -> Callable[[], ClassifierScanner]:
    key = (*(r.id for r in rows), str(capture), str(limit))
    f = _FACTORIES.get(key)
    if f is None:

        def f() -> ClassifierScanner:
            return ClassifierScanner(rows, capture, limit)

        f.__name__ = "classifier:" + ",".join(r.id for r in rows)
        _FACTORIES[key] = f
    return f


def _named_rows(glob: str, rows: Iterable[Row]) -> tuple[Row, ...]:
    return tuple(r for r in rows if glob in r.globs)


def paths_for(products: Iterable[str] | None = None) -> tuple[PathSpec, ...]:
    """PathSpecs streaming matched files through the rows of ``products`` (all: None).

    Nothing is kept (``max_size=0``): the scanners reference chunks only while they need
    them. Factories are shared, so several collectors asking for the same rows analyse a
    file once."""
    want = set(products) if products is not None else None
    rows = tuple(r for r in ROWS if want is None or r.product in want)
    specs: list[PathSpec] = []
    named = sorted({g for r in rows for g in r.globs if g not in ("*.so*", "<executable>")})
    for g in named:
        grp = _named_rows(g, rows)
        cap = max((r.capture for r in grp if r.evidence == "symbol"), default=0)
        specs.append(PathSpec("/**/" + g, max_size=0, stream=_factory(grp, cap)))
    static = _named_rows("*.so*", rows)
    if static:
        # every shared library: only the small ones (a static CUDA runtime in a 1 GB
        # framework library is left to its own rows; searching every byte costs ~1 s/GB)
        f = _factory(static, STATIC_LIB_CAPTURE, STATIC_LIB_CAPTURE)
        specs += [PathSpec(p, max_size=0, stream=f) for p in ("/**/*.so", "/**/*.so.*")]
    execs = _named_rows("<executable>", rows)
    if execs:
        cap = max(r.capture for r in execs)
        f = _factory(execs, cap, EXEC_LIMIT)
        specs += [PathSpec(p, max_size=0, stream=f) for p in EXEC_GLOBS]
    return tuple(specs)


# -- results -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Hit:
    """One row's finding on one file: ``version`` None for presence rows (or an implausible
    constant, then ``raw`` still says what was read)."""

    row: Row
    path: str
    version: str | None
    raw: str
    detail: str
    method: str  # "elf-rodata" or "elf-symbol"


def is_executable_path(path: str) -> bool:
    base = posixpath.basename(path)
    if _SO_RX.search(base):
        return False
    return any(f"/{d}/" in path for d in ("bin", "sbin", "libexec"))


@functools.lru_cache(maxsize=1024)
def _literal_head(glob: str) -> str:
    """What every name ``glob`` matches starts with (its text before the first wildcard)."""
    cut = min((i for i in (glob.find("*"), glob.find("?"), glob.find("[")) if i >= 0),
              default=len(glob))
    return glob[:cut]


def _applies(row: Row, path: str, etype: int) -> bool:
    base = posixpath.basename(path)
    for g in row.globs:
        if g == "<executable>":
            if is_executable_path(path) and etype in (2, 3):
                return True
        # fnmatch compiles each glob to a regular expression on first use: not for names
        # that cannot match (most rows' globs, for most libraries)
        elif base.startswith(_literal_head(g)) and fnmatch.fnmatchcase(base, g):
            if row.elf == "exec" and etype not in (2, 3):
                continue
            if row.elf == "lib" and etype != 3:
                continue
            return True
    return False


def hits(analysis: dict[str, Any] | None, path: str, products: Iterable[str] | None = None) -> list[Hit]:
    """The classifier findings in an entry's ``analysis`` for ``path`` (rows of
    ``products``, all when None), in row order."""
    rodata: dict[str, Any] = {}
    getters: dict[str, Any] = {}
    etype = 0
    for key, c in (analysis or {}).items():
        if not key.startswith("classify/") or not isinstance(c, dict):
            continue
        etype = int(c.get("etype") or etype)
        rodata.update(c.get("rodata") or {})
        getters.update(c.get("getters") or {})
    if not (rodata or getters):
        return []
    want = set(products) if products is not None else None
    out: list[Hit] = []
    for row in ROWS:
        if want is not None and row.product not in want:
            continue
        if not _applies(row, path, etype):
            continue
        if row.evidence == "rodata":
            for raw in rodata.get(row.id) or ():
                ver = apply_rule(row.rule, raw) if row.rule != "presence" else None
                detail = f"{row.id}: {raw!r}" if row.rule == "presence" else f"{row.id}: {raw}"
                out.append(Hit(row, path, ver, str(raw), detail, "elf-rodata"))
        else:
            g = getters.get(row.id)
            if not isinstance(g, dict) or g.get("error"):
                continue
            if row.rule == "presence":  # the symbol is defined here: the product is
                detail = f"{row.symbol} ({g.get('table')}) at {int(g.get('address') or 0):#x}"
                out.append(Hit(row, path, None, row.symbol, detail, "elf-symbol"))
                continue
            for cand in g.get("candidates") or ():
                if row.getter == "pointer":
                    # the words stored where the getter's pointer leads ({12, 2, 5})
                    words = cand.get("words") or ()
                    if not words:
                        continue
                    raw = ".".join(str(int(w)) for w in words)
                    shown = f"{int(cand['value']):#x} -> {{{', '.join(raw.split('.'))}}}"
                else:
                    raw = str(int(cand["value"]))
                    shown = raw
                ver = apply_rule(row.rule, raw if row.getter == "pointer" else int(raw))
                if ver is None:
                    continue
                detail = (
                    f"{row.symbol} ({g.get('table')}) at {int(g.get('address') or 0):#x}: "
                    f"{cand['insn']} at {int(cand['at']):#x} = {shown}"
                )
                out.append(Hit(row, path, ver, raw, detail, "elf-symbol"))
                break
    return out
