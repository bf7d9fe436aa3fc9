"""Data types shared by the layer reader, the squasher and the view."""

from __future__ import annotations

import copy
import enum
import io
import os
from array import array
from dataclasses import dataclass, field, fields, replace
from typing import Any, BinaryIO, Protocol

from ..model import LayerRef

#: bytes the stream analyzers of one process may hold back, all files together, while they
#: work beside the reader (the SHA-256 of GPU binaries, ``binary.stream``): the more, the
#: less the reader waits for them. 64 MiB where layers are read in the scanning process;
#: a forked layer worker (``sources.image.layers``) lowers it to
#: :data:`ANALYZER_BACKLOG_WORKER`, the most it held before, which its memory share in
#: ``sources.schedule`` was measured with.
ANALYZER_BACKLOG = 64 << 20
ANALYZER_BACKLOG_WORKER = 16 << 20
#: the most held back on a machine of 2 CPUs or fewer (:func:`analyzer_backlog`)
ANALYZER_BACKLOG_SMALL = 8 << 20


def few_cpus() -> bool:
    """This process may run on 2 CPUs or fewer (its affinity mask; asked once)."""
    global _FEW_CPUS
    if _FEW_CPUS is None:
        try:
            cpus = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cpus = os.cpu_count() or 1
        _FEW_CPUS = cpus <= 2
    return _FEW_CPUS


_FEW_CPUS: bool | None = None


def analyzer_backlog() -> int:
    """The backlog in effect: :data:`ANALYZER_BACKLOG`, at most :data:`ANALYZER_BACKLOG_SMALL`
    on 2 CPUs or fewer. There the hashing threads share the cores with the reader and the
    parser, so bytes held ahead of them make nothing faster: they only raise the peak
    memory, the more the faster the parser is (see ``fsview.threadstream``)."""
    return min(ANALYZER_BACKLOG, ANALYZER_BACKLOG_SMALL) if few_cpus() else ANALYZER_BACKLOG


class StreamAnalyzer(Protocol):
    """Looks at a matched file's bytes as the layer streams (see ``PathSpec.stream``).

    ``feed`` gets consecutive chunks of the file's data, in order, once; ``close`` returns a
    small JSON-able result (or None), stored as ``Entry.analysis``. Implementations must be
    cheap (C-speed scans, small state), bounded, and must not raise for any input.
    """

    def feed(self, chunk: bytes) -> None: ...

    def close(self) -> dict[str, Any] | None: ...


class EntryKind(enum.Enum):
    FILE = "file"
    DIR = "dir"
    SYMLINK = "symlink"
    HARDLINK = "hardlink"
    OTHER = "other"  # device, fifo, socket


@dataclass(frozen=True)
class Limits:
    """Bounds that keep hostile input from exhausting memory, disk or time."""

    max_header_bytes: int = 1 << 20  # pax / GNU long name / long link payload
    max_path_length: int = 4096
    max_entries_per_layer: int = 2_000_000
    max_kept_records: int = 3_000_000  # dirs, links and matched files over all layers
    max_memory_content: int = 1 << 20  # a captured file larger than this goes to a temp file
    # no collector keeps a file larger than this (package databases included: real ones are
    # tens of MB, an rpmdb a few hundred); ``gpusbom scan --max-file-size`` raises it
    max_file_bytes: int = 2 << 30
    max_spool_bytes: int = 4 << 30  # total bytes of captured content in temp files
    max_layer_uncompressed: int = 128 << 30
    max_compression_ratio: int = 1000  # checked once more than 1 GiB was decompressed
    max_symlink_hops: int = 40
    # hash the uncompressed bytes of compressed layers against the config's diff_ids too
    # (the blob digest is always checked; this doubles the CPU cost of a scan)
    verify_diff_ids: bool = False
    # the whole scan's process tree stays within this (``--max-memory``): it sizes the layer
    # worker pool and the parallel inflaters (``sources.schedule``)
    max_memory: int = 1 << 30
    # threads granted to inflate this layer (set per layer by the scheduler; 0/1: one)
    inflate_threads: int = 0
    # rapidgzip's chunk (KiB) for this layer's inflate threads (set by the scheduler with
    # them; 0: ``fsview.decompress.parallel_chunk_kib()``)
    inflate_chunk_kib: int = 0
    # keyed hash for ``LayerIndex.shadow_hashes`` that stays valid across processes (set
    # when layer results are cached, see ``fsview.layercache``); None: ``hash()``
    shadow_key: bytes | None = None


class ContentRef:
    """Captured content of one file: bytes in memory or a temp file owned by a Spool."""

    __slots__ = ("_data", "_path", "size")

    def __init__(self, data: bytes | None = None, path: str | None = None, size: int = 0) -> None:
        self._data = data
        self._path = path
        self.size = size if data is None else len(data)

    def open(self) -> BinaryIO:
        if self._data is not None:
            return io.BytesIO(self._data)
        assert self._path is not None  # noqa: S101 - type narrowing of an invariant
        return open(self._path, "rb")  # noqa: SIM115 - caller closes

    def read(self) -> bytes:
        if self._data is not None:
            return self._data
        with self.open() as f:
            return f.read()

    @property
    def spooled_path(self) -> str | None:
        """A temp-file path holding the content (for tools that need a file name)."""
        return self._path


@dataclass(slots=True)
class Entry:
    """One path as recorded from one layer (or the squashed result)."""

    path: str  # normalised absolute path, no trailing slash ("/" for the root)
    kind: EntryKind
    size: int = 0
    mode: int = 0
    linkname: str | None = None  # symlink target as written; hard link: absolute path
    layer: int = 0  # index into the image's layers
    content: ContentRef | None = None  # set only for captured regular files
    matched: bool = False  # the path matched a PathSpec (content may still be absent: too large)
    uid: int = 0
    gid: int = 0
    mtime: int = 0
    history: bool = False  # the matching PathSpec asked for per-layer history
    analysis: dict[str, Any] | None = None  # merged results of the spec's stream analyzers


@dataclass
class LayerIndex:
    """What one layer holds, as far as the scan cares.

    ``entries`` are kept for every directory and link and for every regular
    file matching a PathSpec. ``whiteouts`` are paths this layer deletes;
    ``opaque_dirs`` are directories whose lower-layer contents it hides.
    ``history`` holds entries for paths whose spec asked for history.
    """

    ref: LayerRef
    entries: dict[str, Entry] = field(default_factory=dict)
    whiteouts: set[str] = field(default_factory=set)
    opaque_dirs: set[str] = field(default_factory=set)
    file_count: int = 0  # all entries seen, kept or not
    uncompressed_bytes: int = 0
    # hash() of the paths of regular files that were not kept (unmatched): lets squash
    # drop lower-layer entries those files replace. Valid only in the process whose
    # fsview.layer.shadow_salt() equals shadow_salt (str hashes are salted per process).
    shadow_hashes: array[int] = field(default_factory=lambda: array("q"))
    shadow_salt: int = 0
    # set when shadow_hashes are keyed hashes (``fsview.layercache``) rather than hash()
    shadow_key: bytes | None = None


class ProgressSink(Protocol):
    """Callbacks for a progress display (the CLI renders them with rich)."""

    def layer_started(self, index: int, total: int, size: int | None, name: str) -> None: ...

    def advance(self, nbytes: int) -> None: ...

    def layer_done(self, index: int) -> None: ...


class NullProgress:
    def layer_started(self, index: int, total: int, size: int | None, name: str) -> None:
        pass

    def advance(self, nbytes: int) -> None:
        pass

    def layer_done(self, index: int) -> None:
        pass


class Spool:
    """Owns a private temp directory for large captured files; removed on close. The
    directory is made when first asked for: most small scans spool nothing (making it,
    with ``tempfile``'s first probe of the temp directory, and removing it took ~1 ms).
    Workers forked to spool into it get it made before the fork (``dir`` read there);
    asked for first in a forked process, it raises instead of making one nobody removes."""

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self._pid = os.getpid()
        self._dir: str | None = None
        self._closed = False
        self._n = 0
        self.bytes = 0

    @property
    def dir(self) -> str:
        if self._dir is None:
            if self._closed:
                raise ValueError("spool is closed")
            if os.getpid() != self._pid:
                # a forked worker would make a directory of its own, which this spool never
                # removes: whoever forks workers that spool reads ``dir`` before the fork
                raise RuntimeError("a spool's directory is made by the process that owns it")
            import tempfile

            self._dir = tempfile.mkdtemp(prefix="gpusbom-")
        return self._dir

    def new_path(self) -> str:
        self._n += 1
        return os.path.join(self.dir, f"f{self._n:07d}")

    def close(self) -> None:
        self._closed = True
        if self._dir is not None:
            import shutil

            shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> Spool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def with_layer_index(li: LayerIndex, index: int) -> LayerIndex:
    """A copy of ``li`` whose entries (and ref) say they come from layer ``index``."""

    def remap(value: Any) -> Any:
        if isinstance(value, Entry):
            return replace(value, layer=index)
        if isinstance(value, dict):
            return {k: remap(v) for k, v in value.items()}
        if isinstance(value, list):
            return [remap(v) for v in value]
        if isinstance(value, set):
            return set(value)
        return value

    new = copy.copy(li)
    for f in fields(li):
        setattr(new, f.name, remap(getattr(li, f.name)))
    new.ref = replace(li.ref, index=index)
    return new
