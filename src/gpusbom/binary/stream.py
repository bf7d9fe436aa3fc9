"""Streaming GPU code scanners: list what a file's device code was built for while it streams.

The layer reader feeds every chunk of a matched file to a :class:`StreamAnalyzer` once, in
order (see ``gpusbom.fsview``), so a 1 GB CUDA library is neither kept in memory nor spooled
to disk. The scanners here find the same structures as the seekable decoders of
:mod:`gpusbom.binary.fatbin` and :mod:`gpusbom.binary.hipbundle` and decode their headers with
the same parsers; they differ in how they *find* them: there is no section table yet when the
data streams by (ELF puts it at the end), so containers are found by their magic bytes
anywhere in the stream and then validated:

* CUDA fatbin container: ``50 ed 55 ba`` + version 1 + a sane header size, and a first entry
  header whose sizes fit the container. Entries are then walked by their size fields: the
  scanner only collects the 64-byte entry headers and *skips* the payloads (no buffering).
* Clang offload bundle: ``__CLANG_OFFLOAD_BUNDLE__`` with 1..4096 entries whose ids look like
  target ids (``hipv4-amdgcn-amd-amdhsa--gfx90a``); the code objects are skipped by the
  bundle's extent.
* Compressed bundle: ``CCOB`` with a known version and method and a zstd / zlib stream start;
  only the first compressed bytes are collected (growing geometrically, at most
  :data:`MAX_CCOB_INPUT`) and decompressed with the bounded prefix decoder of hipbundle.

A candidate that fails validation is not an error (the magic bytes also occur in host code
and in string tables): scanning resumes one byte after it. A structure that validated but is
then malformed or truncated is counted in ``errors``; nothing here raises for bad data, and
the state is bounded (a few header bytes, sets of target names, capped counts) whatever the
size fields say.

Cost: a search for the magics over the bytes outside fatbin payloads (``memchr`` of the
rarest byte of a magic; see :func:`_rare_find`), a few Python steps per entry.
Files that start with neither an ELF, fatbin or bundle magic are not scanned at all. In ELF
files laid out with separate code (see :func:`executable_ranges`) the executable segments are
not searched either: device code containers are data and never linked there.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Literal

from gpusbom.binary.elf import ELF_MAGIC, BinaryFormatError
from gpusbom.binary.fatbin import (
    CONTAINER_HEADER_SIZE,
    ENTRY_HEADER_MIN,
    FATBIN_MAGIC,
    MAX_CONTAINER_HEADER,
    MAX_FATBIN_ENTRIES,
    CudaTargetsBuilder,
    parse_container_header,
    parse_entry_header,
)
from gpusbom.binary.hipbundle import (
    BUNDLE_MAGIC,
    CCOB_MAGIC,
    MAX_BUNDLE_ENTRIES,
    MAX_BUNDLES,
    MAX_HEADER_BYTES,
    ccob_entries,
    ccob_header_size,
    hip_targets,
    parse_bundle_header,
    parse_ccob_header,
)
from gpusbom.fsview import types as _fstypes

__all__ = [
    "MAX_CCOB_INPUT",
    "CudaFatbinScanner",
    "GpuCodeScanner",
    "HipBundleScanner",
    "executable_ranges",
]

_FAT = FATBIN_MAGIC.to_bytes(4, "little")
_HEADS = (ELF_MAGIC, _FAT, BUNDLE_MAGIC[:4], CCOB_MAGIC)

#: Caps on what one file may make the scanner hold or count.
MAX_CONTAINERS = 1 << 16
MAX_TARGET_IDS = 4096
#: Most compressed bytes of one CCOB bundle collected to reach its header.
MAX_CCOB_INPUT = 4 << 20
#: Bytes a file may have searched twice (candidates that were not structures after all).
MAX_REPLAY = 64 << 20
_BUNDLE_FIRST = 256  # bytes first collected for a bundle header; grows x4 on demand
_CCOB_FIRST = 16 << 10
_MAX_ERRORS_KEPT = 8
_NO_LIMIT = 1 << 62
_ID_RX = re.compile(r"[A-Za-z0-9_.]+-[!-~]*\Z")

# candidate kinds
_K_FAT, _K_BUNDLE, _K_CCOB, _K_HIPREG = 0, 1, 2, 3
#: A host binary with HIP device code imports this from the HIP runtime: its name is in the
#: dynamic string table, near the start of the file, before any ``.hip_fatbin``. Bundles are
#: only looked for in ELF files once it was seen (in the first :data:`HIP_GATE_WINDOW` bytes),
#: which spares CUDA and CPU libraries two of the three searches.
_HIPREG = b"__hipRegisterFatBinary"
HIP_GATE_WINDOW = 256 << 20


#: Most leading bytes of an ELF file looked at for its program header table; a table that
#: ends past them (it normally sits right after the 64-byte ELF header) disables the skip.
MAX_PHDR_PREFIX = 64 << 10
#: Executable byte ranges shorter than this are searched anyway (not worth a state change).
MIN_SKIP = 4096
_PT_LOAD = 1
_PF_X = 1


def executable_ranges(head: bytes | bytearray) -> list[tuple[int, int]] | None:
    """File ranges ``[start, end)`` of an ELF file that hold only executable code, from the
    program header table in ``head`` (the file's first bytes): sorted, disjoint, each at least
    :data:`MIN_SKIP` long. None when ``head`` is too short to tell (it needs the ELF header and
    the whole table); ``[]`` when nothing may be skipped (not separate-code, or malformed).

    The rule, from the layouts of real libraries (checked with pyelftools):

    * Separate-code layout -- GNU ld ``-z separate-code`` (the x86-64 default since binutils
      2.31), lld and mold: the first ``PT_LOAD`` (offset 0: ELF header, dynamic symbols,
      ``.rodata``, ``.nv_fatbin``, ``.hip_fatbin``) is read-only and the ``PF_X`` segment holds
      only code (``.init .plt .text .fini``). Seen in torch 2.5.1's ``libtorch_cuda.so``
      (``.nv_fatbin`` at 0x40a3118 in the R segment 0x3a93000.., code 0xde1000..0x3a92355),
      ``libtorch_cpu.so``, ``libtorch_cuda_linalg.so``, ``libtorch_python.so`` and Debian's
      ``librocrand.so.1.1`` (``.hip_fatbin`` at 0xc53000 in the R segment 0x1b000..): no
      non-executable section inside a ``PF_X`` segment in any of them.
    * Merged layout (gold, old GNU ld, ``-z noseparate-code``), which NVIDIA ships: one
      ``R+X`` ``PT_LOAD`` from offset 0 holds the ELF header, ``.rodata`` *and* ``.nv_fatbin``
      with ``.text`` (``libcublas.so.12`` / ``libcublasLt.so.12`` 12.9, cuDNN 9 libraries,
      ``libcusparseLt``, ``libnvjpeg.so.12`` / ``.13``, ``libnvjpeg2k.so.0``). These files
      also have non-X ``PT_LOAD`` segments (RW data, a read-only ``.nvFatBinSegment`` tail),
      so "there is a non-X segment" does not tell the layouts apart.

    Hence: only when a non-``PF_X`` ``PT_LOAD`` maps offset 0 (the ELF header is not mapped
    executable) are the ``PF_X`` ``PT_LOAD`` ranges skipped, less any byte that another
    program header (any type) also covers. Anything odd -- a table outside ``head``, bad
    sizes, more than 4096 entries -- skips nothing.
    """
    if len(head) < 64 or head[:4] != ELF_MAGIC:
        return None
    cls, enc = head[4], head[5]
    if cls not in (1, 2) or enc not in (1, 2):
        return []
    order: Literal["little", "big"] = "little" if enc == 1 else "big"

    def u(off: int, n: int) -> int:
        return int.from_bytes(head[off : off + n], order)

    if cls == 2:
        phoff, phentsize, phnum, entsize = u(32, 8), u(54, 2), u(56, 2), 56
    else:
        phoff, phentsize, phnum, entsize = u(28, 4), u(42, 2), u(44, 2), 32
    end = phoff + phentsize * phnum
    if phnum == 0 or phnum > 4096 or phentsize < entsize or phoff < 52 or end > MAX_PHDR_PREFIX:
        return []
    if len(head) < end:
        return None
    execs: list[tuple[int, int]] = []
    others: list[tuple[int, int]] = []
    ro_head = False
    for k in range(phnum):
        at = phoff + k * phentsize
        ptype = u(at, 4)
        if cls == 2:
            flags, offset, filesz = u(at + 4, 4), u(at + 8, 8), u(at + 32, 8)
        else:
            offset, filesz, flags = u(at + 4, 4), u(at + 16, 4), u(at + 24, 4)
        if filesz == 0:
            continue
        if ptype == _PT_LOAD and flags & _PF_X:
            execs.append((offset, offset + filesz))
        else:
            others.append((offset, offset + filesz))
            if ptype == _PT_LOAD and offset == 0:
                ro_head = True
    if not ro_head or not execs:
        return []
    # exclusive executable bytes: each PF_X range less every other header's range
    out: list[tuple[int, int]] = []
    for a, b in execs:
        pieces = [(a, b)]
        for c, d in others:
            pieces = [q for x, y in pieces for q in ((x, min(y, c)), (max(x, d), y)) if q[0] < q[1]]
        out.extend(pieces)
    out.sort()
    merged: list[tuple[int, int]] = []
    for a, b in out:
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return [(a, b) for a, b in merged if b - a >= MIN_SKIP]


#: Ranges shorter than this are searched with ``bytes.find`` alone.
_FIND_MIN = 64
#: One candidate (the rare byte) per this many bytes or more: not rare here, ``bytes.find``.
_DENSE = 512
#: The byte of each needle that is looked for first (the rarest in real CUDA and torch
#: libraries: 0xed is ~1 in 2,000 bytes of libcublasLt.so.12, ``R`` ~1 in 1,000).
_RARE = {_FAT: 1, _HIPREG: 5, BUNDLE_MAGIC: 4, CCOB_MAGIC: 2}

def _rare_find(buf: bytes, needle: bytes, start: int, end: int) -> int:
    """``buf.find(needle, start, end)``, faster on machine code and data: the positions of the
    needle's rarest byte are found with ``bytes.find`` of that one byte (``memchr``, several
    GB/s) and each is checked for the whole needle.

    ``bytes.find`` on a 4-byte needle runs at ~1.3 GB/s over machine code (its skip loop
    stops at every byte that shares a bloom slot with the needle). A numpy compare of the
    rarest byte (~3 GB/s) was used before; its fixed cost per call (an array view, a compare,
    a count, a list of positions: tens of microseconds) dominated where containers lie close
    together: the ``torch/`` + ``nvidia/`` layer of a 13 GB image made 59,000 searches, 3.2
    CPU-s under the interpreter lock on a 16-core H200 host. Where the rare byte is not rare
    (more than one in :data:`_DENSE` bytes: hostile, or odd data), the rest of the range goes
    to ``bytes.find``. Same result as ``bytes.find``, always."""
    size = len(needle)
    r = _RARE.get(needle, 0)
    last = min(end, len(buf)) - size  # the last start a match may have
    if start < 0 or last - start < _FIND_MIN:
        return buf.find(needle, start, end)
    rare = needle[r : r + 1]
    find = buf.find
    stop = last + r + 1
    k = find(rare, start + r, stop)
    tries = 0
    while k >= 0:
        s = k - r
        if buf[s : s + size] == needle:
            return s
        tries += 1
        if tries >= 64 and k - start < tries * _DENSE:
            return find(needle, s + 1, end)
        k = find(rare, k + 1, stop)
    return -1


#: bytes of a file gathered before they go to its hashing thread as one job: the layer reader
#: hands over 0.06-4 MiB pieces, and each job costs hand-offs under the interpreter lock
#: (a future, a wake-up, the lock taken back by the hashing thread)
_HASH_BATCH = 4 << 20
#: files smaller than this are hashed by the scanning thread at their end
_HASH_INLINE_MAX = 256 << 10
#: hashing threads per process; each file is hashed by one of them (its jobs in order),
#: consecutive files by different ones: a layer full of big libraries (CUDA's, torch's:
#: 3.5 GB of them in one layer) hashes at ~1 GB/s per thread, which one thread made the
#: layer's bound on a many-core host
_HASH_THREADS = 3


class _HashState:
    """The hashing threads of one process and the jobs in flight on them."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.pools = [ThreadPoolExecutor(1, thread_name_prefix="gpusbom-sha256") for _ in range(_HASH_THREADS)]
        self.next = itertools.count()
        self.lock = threading.Lock()
        self.inflight: deque[tuple[Future[Any], int]] = deque()
        self.inflight_bytes = 0

    def submit(self, pool: ThreadPoolExecutor, fn: Callable[..., Any], *args: Any, n: int) -> Future[Any]:
        """Run ``fn(*args)`` on ``pool`` once fewer than ``fsview.types.ANALYZER_BACKLOG``
        bytes wait (``n``: the bytes it hashes); waits on the oldest jobs first."""
        limit = _fstypes.ANALYZER_BACKLOG
        while True:
            with self.lock:
                inflight = self.inflight
                while inflight and inflight[0][0].done():
                    self.inflight_bytes -= inflight.popleft()[1]
                if not inflight or self.inflight_bytes + n <= limit:
                    fut = pool.submit(fn, *args)
                    inflight.append((fut, n))
                    self.inflight_bytes += n
                    return fut
                oldest = inflight[0][0]
            oldest.result()


_state: _HashState | None = None
_state_lock = threading.Lock()


def _hash_state() -> _HashState:
    """This process's hashing threads (made after a fork, never inherited: a forked layer
    worker would own threads, and jobs, that do not exist there)."""
    global _state
    with _state_lock:
        if _state is None or _state.pid != os.getpid():
            _state = _HashState()
        return _state


def _update_all(h: Any, pieces: list[bytes], err: list[BaseException]) -> None:
    # one update per piece: joining them would copy under the interpreter lock
    if err:
        return  # a digest with bytes missing is never reported (see _finish)
    try:
        for b in pieces:
            h.update(b)
    except BaseException as e:  # noqa: BLE001 - kept for _finish, which raises it
        err.append(e)


def _finish(h: Any, pieces: list[bytes], err: list[BaseException]) -> str:
    _update_all(h, pieces, err)
    if err:
        raise err[0]
    return str(h.hexdigest())


class _Sha256:
    """SHA-256 of a stream, updated on a thread of its own: hashlib releases the interpreter
    lock, so the hash of a big binary runs beside the device-code search and the inflate
    instead of after them. Pieces are gathered into jobs of :data:`_HASH_BATCH` bytes and
    hashed in order (one single-thread executor per file, FIFO); at most
    ``fsview.types.ANALYZER_BACKLOG`` bytes of all files wait (bounded memory). A file under
    :data:`_HASH_INLINE_MAX` is hashed inline at its end (a hand-off would cost more).

    :meth:`digest_later` ends the file without waiting: the hash of its last bytes goes on
    while the next file streams, and the digest is a future."""

    __slots__ = ("_h", "_batch", "_batch_bytes", "_pool", "_state", "_handed", "_err")

    def __init__(self, first: bytes) -> None:
        self._h = hashlib.sha256()
        self._err: list[BaseException] = []  # an update job's failure, raised by the digest
        self._batch: list[bytes] = []
        self._batch_bytes = 0
        self._pool: ThreadPoolExecutor | None = None
        self._state: _HashState | None = None
        self._handed = False
        self.update(first)

    def update(self, chunk: bytes) -> None:
        self._batch.append(chunk)
        self._batch_bytes += len(chunk)
        if self._batch_bytes >= _HASH_BATCH:
            self._submit(_update_all)

    def _submit(self, fn: Callable[[Any, list[bytes], list[BaseException]], Any]) -> Future[Any]:
        batch, n = self._batch, self._batch_bytes
        self._batch, self._batch_bytes = [], 0
        if self._state is None:
            self._state = st = _hash_state()
            self._pool = st.pools[next(st.next) % len(st.pools)]
        assert self._pool is not None  # noqa: S101 - set with _state
        self._handed = True
        return self._state.submit(self._pool, fn, self._h, batch, self._err, n=n)

    def digest_later(self) -> str | Future[str]:
        """The hex digest of everything fed: a future while the hashing threads are at it."""
        if not self._handed and self._batch_bytes < _HASH_INLINE_MAX:
            return _finish(self._h, self._batch, self._err)  # a small file: no hand-off
        return self._submit(_finish)

    def hexdigest(self) -> str:
        d = self.digest_later()
        return d if isinstance(d, str) else d.result()


class _NeedMore(Exception):
    def __init__(self, n: int) -> None:
        self.n = n


def _zero(data: bytes | bytearray) -> bool:
    return not data.strip(b"\0")


def _compressed_start(method: str, data: bytes | bytearray) -> bool:
    if method == "zstd":
        return data[:4] == b"\x28\xb5\x2f\xfd"
    return len(data) >= 2 and data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0


class _StreamScanner:
    """The chunk loop: scan for magics, collect header bytes, skip payloads.

    The state is one *step*: skip ``_skip`` bytes, then collect bytes into ``_acc`` until it
    holds ``_need`` bytes and call ``_handler(acc, eof)``; with no step pending, search.
    A handler sets the next step (``_step``), goes back to searching (``_search``) or gives
    bytes back to be processed again (``_replay``: a candidate that turned out not to be one).
    """

    def __init__(
        self, *, cuda: bool, hip: bool, name: str = "<stream>", sha256: bool = False
    ) -> None:
        self.name = name
        # SHA-256 of every byte of a binary (ELF, fatbin, bundle), updated from the chunks
        # as they stream by: the file is not read twice. Reported only with device code.
        self._want_hash = sha256
        self._hasher: _Sha256 | None = None
        self._cuda = cuda
        self._hip = hip
        self._plain = hip  # look for uncompressed bundles (off inside a v1 CCOB bundle)
        self._hip_gate = False  # ELF: bundles are looked for only after _HIPREG was seen
        self._off = False  # not a binary (or nothing left to look for): feed is a no-op
        self._head: bytes | None = b""  # first bytes until the file type is known
        self._pos = 0  # stream offset of the next byte to process
        self._skip = 0
        self._need = 0
        self._acc = bytearray()
        self._acc_pos = 0  # stream offset of _acc[0]
        self._handler: Callable[[bytearray, bool], None] | None = None
        self._tail = b""  # last bytes searched (for magics across chunk boundaries)
        self._work: list[bytes] = []
        self._replay_budget = MAX_REPLAY
        self._elf_head: bytearray | None = None  # ELF: first bytes, until the skip is known
        self._code: list[tuple[int, int]] = []  # executable ranges not to search (reversed)
        self._set_needles()
        # results
        self._fat = CudaTargetsBuilder()
        self._containers = 0
        self._cuda_errors: list[str] = []
        self._cuda_error_count = 0
        self._ids: set[str] = set()
        self._bundles = 0
        self._hip_compressed: set[str] = set()
        self._hip_errors: list[str] = []
        self._hip_error_count = 0
        # the container / bundle being walked
        self._c_pos = 0
        self._c_hsize = 0
        self._c_left = 0
        self._b_kind = _K_BUNDLE
        self._ccob: Any = None

    # -- set-up ------------------------------------------------------------------------------

    def _set_needles(self) -> None:
        needles: list[tuple[int, bytes]] = []
        if self._cuda:
            needles.append((_K_FAT, _FAT))
        if self._hip_gate:
            if self._pos < HIP_GATE_WINDOW:
                needles.append((_K_HIPREG, _HIPREG))
        elif self._hip:
            if self._plain:
                needles.append((_K_BUNDLE, BUNDLE_MAGIC))
            needles.append((_K_CCOB, CCOB_MAGIC))
        self._needles = needles
        self._keep = max((len(n) for _, n in needles), default=1) - 1

    def _error(self, cuda: bool, msg: str) -> None:
        if cuda:
            self._cuda_error_count += 1
            if len(self._cuda_errors) < _MAX_ERRORS_KEPT:
                self._cuda_errors.append(f"{self.name}: {msg}")
        else:
            self._hip_error_count += 1
            if len(self._hip_errors) < _MAX_ERRORS_KEPT:
                self._hip_errors.append(f"{self.name}: {msg}")

    # -- the StreamAnalyzer protocol ---------------------------------------------------------

    def feed(self, chunk: bytes) -> None:
        if not chunk:
            return
        if self._hasher is not None:
            self._hasher.update(chunk if isinstance(chunk, bytes) else bytes(chunk))
        if self._off:
            return
        if self._head is not None:
            head = self._head + bytes(chunk[:4])
            if len(head) < 4:
                self._head = head
                return
            if head[:4] not in _HEADS:
                self._off = True
                self._head = None
                return
            if head[:4] == ELF_MAGIC:
                self._elf_head = bytearray()
                if self._hip:
                    self._hip_gate = True
                    self._set_needles()
            if self._head:  # bytes held back from earlier (tiny) chunks
                chunk = self._head + bytes(chunk)
            self._head = None
            if self._want_hash:  # a binary: hash it from its first byte
                self._hasher = _Sha256(bytes(chunk))
        if self._elf_head is not None:
            self._elf_prefix(chunk)
        self._work.append(bytes(chunk) if not isinstance(chunk, bytes) else chunk)
        try:
            self._run()
        except Exception as exc:  # noqa: BLE001 - a scanner bug must not stop a scan
            self._error(self._cuda, f"internal error: {exc!r}")
            self._work.clear()
            self._off = True

    def _elf_prefix(self, chunk: bytes) -> None:
        """Collect the ELF file's first bytes until :func:`executable_ranges` can decide."""
        head = self._elf_head
        assert head is not None  # noqa: S101 - type narrowing of an invariant
        head += chunk[: MAX_PHDR_PREFIX - len(head)]
        ranges = executable_ranges(head)
        if ranges is None and len(head) < MAX_PHDR_PREFIX:
            return
        self._elf_head = None
        self._code = (ranges or [])[::-1]

    @property
    def done(self) -> bool:
        """True once more data cannot change the result (not a binary, or gave up and not
        hashing)."""
        return self._off and self._hasher is None

    #: :meth:`close` can leave the digest as a future (``Analyzers.close(defer=True)``)
    can_defer = True

    def close(self, defer: bool = False) -> dict[str, Any] | None:
        """The result; with ``defer``, its ``sha256`` may be a future that the caller
        resolves (the layer reader does, at the layer's end)."""
        rounds = 0
        while self._handler is not None and not self._off and rounds < 1 << 16:
            rounds += 1
            handler, acc = self._handler, self._acc
            self._need = 0
            try:
                handler(acc, True)
                if self._handler is handler and self._need <= len(self._acc):
                    self._handler = None
                self._run()  # bytes a handler gave back
            except Exception as exc:  # noqa: BLE001 - never raise for data
                self._error(self._cuda, f"internal error at end of stream: {exc!r}")
                break
        self._work.clear()
        self._acc = bytearray()
        self._handler = None
        self._off = True
        out = self.result()
        if out is not None and self._hasher is not None:
            out["sha256"] = self._hasher.digest_later() if defer else self._hasher.hexdigest()
        self._hasher = None
        return out

    # -- results -------------------------------------------------------------------------------

    def result(self) -> dict[str, Any] | None:
        out: dict[str, Any] = {}
        if self._fat.entries or self._cuda_error_count:
            t = self._fat.build()
            out["cuda"] = {
                "sass": list(t.sass),
                "ptx": list(t.ptx),
                "lto": list(t.lto),
                "ptx_isa": list(t.ptx_isa),
                "compressed": list(t.compressed),
                "entries": t.entries,
                "containers": t.containers,
                "errors": self._cuda_error_count,
                **({"error_messages": list(self._cuda_errors)} if self._cuda_errors else {}),
            }
        if self._ids or self._hip_error_count:
            h = hip_targets(self._ids, bundles=self._bundles, compressed=self._hip_compressed)
            out["hip"] = {
                "targets": list(h.target_ids),
                "gfx": list(h.gfx),
                "processors": list(h.processors),
                "compressed": list(h.compressed),
                "bundles": h.bundles,
                "errors": self._hip_error_count,
                **({"error_messages": list(self._hip_errors)} if self._hip_errors else {}),
            }
        return out or None

    # -- the loop ------------------------------------------------------------------------------

    def _step(self, skip: int, need: int, handler: Callable[[bytearray, bool], None]) -> None:
        """Skip ``skip`` bytes, then collect ``need`` bytes (in a fresh buffer) for ``handler``."""
        self._skip = skip
        self._acc = bytearray()
        self._acc_pos = self._pos + skip
        self._need = need
        self._handler = handler
        self._tail = b""

    def _want(self, need: int) -> None:
        """Keep collecting into the current buffer until it holds ``need`` bytes."""
        self._need = need

    def _search(self, skip: int = 0) -> None:
        self._skip = skip
        self._need = 0
        self._handler = None
        self._acc = bytearray()
        self._tail = b""

    def _replay(self, data: bytes | bytearray) -> None:
        """Process ``data`` (bytes already counted) again, before the rest of the stream.

        Replayed bytes are budgeted per file (:data:`MAX_REPLAY`): hostile data cannot make
        the scan quadratic; past the budget they are dropped (not searched)."""
        self._search()
        if data:
            self._pos -= len(data)
            if len(data) > self._replay_budget:
                self._pos += len(data)
                self._error(self._cuda, "replay budget spent; some bytes were not searched")
                return
            self._replay_budget -= len(data)
            self._work.append(bytes(data))

    def _run(self) -> None:
        work = self._work
        while work and not self._off:
            chunk = work.pop()
            n = len(chunk)
            i = 0
            while i < n:
                if self._skip:
                    take = min(self._skip, n - i)
                    self._skip -= take
                    i += take
                    self._pos += take
                    continue
                if self._handler is not None:
                    acc = self._acc
                    take = min(self._need - len(acc), n - i)
                    if take > 0:
                        acc += chunk[i : i + take]
                        i += take
                        self._pos += take
                    if len(acc) >= self._need:
                        handler = self._handler
                        mark = len(work)
                        handler(acc, False)
                        if len(work) > mark and i < n:
                            # a replay: it comes before the rest of this chunk
                            replayed = work.pop()
                            work.append(chunk[i:])
                            work.append(replayed)
                            break
                    continue
                if not self._needles:
                    self._off = True
                    return
                i = self._find(chunk, i)
                if i < 0:  # searched to the end of the chunk
                    break

    def _find(self, chunk: bytes, i: int) -> int:
        """Search ``chunk[i:]`` (plus the boundary with the previous chunk); start the first
        candidate found and return the index to go on from, or -1 when there was none."""
        n = len(chunk)
        if self._hip_gate and self._pos >= HIP_GATE_WINDOW:
            self._hip_gate = False
            self._hip = False
            self._set_needles()
            if not self._needles:
                return -1
        tail = self._tail
        best = -1
        best_kind = -1
        if tail and i == 0:
            window = tail + chunk[: self._keep]
            lt = len(tail)
            for kind, needle in self._needles:
                k = window.find(needle)
                while 0 <= k < lt:
                    if k + len(needle) > lt:
                        if best < 0 or k < best:
                            best, best_kind = k, kind
                        break
                    k = window.find(needle, k + 1)
            if best >= 0:
                prefill = tail[best:]
                self._start(best_kind, self._pos - len(prefill), bytearray(prefill))
                return 0
        self._tail = b""
        limit = n
        code = self._code
        while code and code[-1][1] <= self._pos:
            code.pop()
        if code:
            start = code[-1][0] - self._pos
            if start <= 0:  # in executable code: not searched (a magic across its start is
                # lost, but no container is linked there)
                self._search(code.pop()[1] - self._pos)
                return i
            if start < n - i:
                limit = i + start  # search what comes before it, then skip it
        stop = limit
        for kind, needle in self._needles:
            end = min(n, limit + len(needle) - 1)
            k = _rare_find(chunk, needle, i, end)
            if k >= 0 and (best < 0 or k < best):
                best, best_kind, limit = k, kind, k
        if best < 0:
            if stop < n:
                self._pos += stop - i
                self._search(code.pop()[1] - self._pos)
                return stop
            keep = self._keep
            if keep:
                if n - i >= keep:
                    self._tail = chunk[n - keep :]
                else:
                    self._tail = (tail + chunk[i:])[-keep:]
            self._pos += n - i
            return -1
        self._pos += best - i
        self._start(best_kind, self._pos, bytearray())
        return best

    def _start(self, kind: int, pos: int, prefill: bytearray) -> None:
        if kind == _K_HIPREG:  # a HIP host binary: look for bundles from here on
            self._hip_gate = False
            self._set_needles()
            self._search()
            return
        if kind == _K_FAT:
            handler, need = self._fat_container, CONTAINER_HEADER_SIZE
        elif kind == _K_BUNDLE:
            handler, need = self._bundle, _BUNDLE_FIRST
        else:
            handler, need = self._ccob_head, 8
            if not self._plain:  # a v1 compressed bundle ends where the next one starts
                self._plain = True
                self._set_needles()
        self._skip = 0
        self._acc = prefill
        self._acc_pos = pos
        self._need = need
        self._handler = handler
        self._tail = b""

    def _reject(self, acc: bytearray, eof: bool) -> None:
        """Not a structure after all: search again from the byte after the candidate."""
        self._replay(acc[1:])

    # -- CUDA fatbin ---------------------------------------------------------------------------

    def _fat_container(self, acc: bytearray, eof: bool) -> None:
        if len(acc) < CONTAINER_HEADER_SIZE:
            return self._reject(acc, eof)
        magic, version, hsize, body = parse_container_header(acc)
        if (
            magic != FATBIN_MAGIC
            or version != 1
            or not CONTAINER_HEADER_SIZE <= hsize <= MAX_CONTAINER_HEADER
            or body < ENTRY_HEADER_MIN
        ):
            return self._reject(acc, eof)
        self._c_pos = self._acc_pos
        self._c_hsize = hsize
        self._c_left = body
        self._want(hsize + ENTRY_HEADER_MIN)
        self._handler = self._fat_first

    def _fat_first(self, acc: bytearray, eof: bool) -> None:
        """The first entry decides whether the magic started a real container."""
        hsize = self._c_hsize
        if len(acc) < hsize + ENTRY_HEADER_MIN:
            return self._reject(acc, eof)
        h = parse_entry_header(acc[hsize:])
        if h.is_padding or not h.valid_size() or h.header_size + h.payload_size > self._c_left:
            return self._reject(acc, eof)
        if self._containers >= MAX_CONTAINERS:
            self._error(True, f"more than {MAX_CONTAINERS} fatbin containers")
            return self._stop_cuda()
        self._containers += 1
        self._fat_add(h, self._c_pos + hsize)

    def _fat_add(self, h: Any, offset: int) -> None:
        if self._fat.entries >= MAX_FATBIN_ENTRIES:
            self._error(True, f"more than {MAX_FATBIN_ENTRIES} fatbin entries")
            return self._stop_cuda()
        self._fat.add(h.entry(offset, self._c_pos))
        self._c_left -= h.header_size + h.payload_size
        self._fat_next(h.header_size - ENTRY_HEADER_MIN + h.payload_size)

    def _fat_next(self, skip: int) -> None:
        left = self._c_left
        if left <= 0:
            self._search(skip)
        elif left < ENTRY_HEADER_MIN:
            self._step(skip, left, self._fat_trailer)
        else:
            self._step(skip, ENTRY_HEADER_MIN, self._fat_entry)

    def _fat_trailer(self, acc: bytearray, eof: bool) -> None:
        if len(acc) < self._c_left:
            self._error(True, f"truncated fatbin container at {self._c_pos:#x}")
        elif not _zero(acc):
            self._error(True, f"truncated fatbin entry at {self._acc_pos:#x}")
        self._c_left = 0
        self._search()

    def _fat_entry(self, acc: bytearray, eof: bool) -> None:
        at = self._acc_pos
        if len(acc) < ENTRY_HEADER_MIN:
            self._error(True, f"fatbin entry at {at:#x} is truncated")
            return self._search()
        h = parse_entry_header(acc)
        if h.is_padding:
            # zero padding at the end of a container body
            left, self._c_left = self._c_left, 0
            return self._search(left - ENTRY_HEADER_MIN)
        if not h.valid_size():
            self._error(True, f"fatbin entry header size {h.header_size} at {at:#x}")
            return self._replay(acc)
        if h.header_size + h.payload_size > self._c_left:
            self._error(True, f"fatbin entry at {at:#x} runs past its container")
            return self._replay(acc)
        self._fat_add(h, at)

    def _stop_cuda(self) -> None:
        self._cuda = False
        self._set_needles()
        self._search()

    # -- clang offload bundles -----------------------------------------------------------------

    def _bundle(self, acc: bytearray, eof: bool) -> None:
        def read(off: int, n: int) -> bytes:
            if off + n > len(acc):
                raise _NeedMore(off + n)
            return bytes(acc[off : off + n])

        try:
            entries, extent = parse_bundle_header(
                read, _NO_LIMIT, name=self.name, base=self._acc_pos
            )
        except _NeedMore as more:
            if not eof and more.n <= MAX_HEADER_BYTES:
                self._want(max(more.n, min(len(acc) * 4, MAX_HEADER_BYTES)))
                return None
            if eof and self._plausible_bundle(acc):
                self._error(False, f"offload bundle at {self._acc_pos:#x} is truncated")
                return self._search()
            return self._reject(acc, eof)
        except BinaryFormatError:
            return self._reject(acc, eof)
        if not entries or not all(_ID_RX.match(e.id) for e in entries):
            return self._reject(acc, eof)
        self._bundle_found([e.id for e in entries], "none")
        if extent >= len(acc):
            self._search(extent - len(acc))
        else:
            self._replay(acc[extent:])
        return None

    @staticmethod
    def _plausible_bundle(acc: bytearray) -> bool:
        if len(acc) < 32:
            return False
        count = int.from_bytes(acc[24:32], "little")
        return 1 <= count <= MAX_BUNDLE_ENTRIES

    def _bundle_found(self, ids: list[str], compression: str) -> None:
        if self._bundles >= MAX_BUNDLES:
            self._error(False, f"more than {MAX_BUNDLES} offload bundles")
            self._hip = False
            self._set_needles()
            return
        self._bundles += 1
        if compression != "none":
            self._hip_compressed.add(compression)
        for i in ids:
            if len(self._ids) >= MAX_TARGET_IDS and i not in self._ids:
                self._error(False, f"more than {MAX_TARGET_IDS} target ids")
                break
            self._ids.add(i)

    def _ccob_head(self, acc: bytearray, eof: bool) -> None:
        hsize = ccob_header_size(acc)
        if hsize is None:
            return self._reject(acc, eof)
        if len(acc) < hsize + 4:
            if eof:
                return self._reject(acc, eof)
            self._want(hsize + 4)
            return None
        try:
            h = parse_ccob_header(bytes(acc[:hsize]), name=self.name, pos=self._acc_pos)
        except BinaryFormatError:
            return self._reject(acc, eof)
        if (h.total_size is not None and h.total_size <= hsize) or not _compressed_start(
            h.method, acc[hsize : hsize + 4]
        ):
            return self._reject(acc, eof)
        self._ccob = h
        room = MAX_CCOB_INPUT if h.total_size is None else min(MAX_CCOB_INPUT, h.total_size - hsize)
        self._want(hsize + min(room, _CCOB_FIRST))
        self._handler = self._ccob_body
        return None

    def _ccob_body(self, acc: bytearray, eof: bool) -> None:
        h = self._ccob
        hsize = h.header_size
        room = MAX_CCOB_INPUT if h.total_size is None else min(MAX_CCOB_INPUT, h.total_size - hsize)
        have = len(acc) - hsize
        try:
            entries = ccob_entries(
                bytes(acc[hsize:]), h.method, h.uncompressed_size, name=self.name
            )
        except BinaryFormatError as exc:
            if not eof and have < room:
                self._want(hsize + min(room, have * 4))
                return None
            self._error(False, str(exc))
            entries = None
        if entries is not None:
            if not entries or not all(_ID_RX.match(e.id) for e in entries):
                self._error(False, f"compressed bundle at {self._acc_pos:#x}: no target ids")
            else:
                self._bundle_found([e.id for e in entries], h.method)
        if h.total_size is None:
            # version 1 has no size: it ends at the next CCOB magic; raw bundle magics inside
            # its compressed bytes are not looked for
            self._plain = False
            self._set_needles()
            return self._replay(acc[hsize:])
        if h.total_size >= len(acc):
            return self._search(h.total_size - len(acc))
        return self._replay(acc[h.total_size :])


class CudaFatbinScanner(_StreamScanner):
    """Stream analyzer for CUDA fatbins (``.nv_fatbin`` / ``__nv_relfatbin`` / ``.fatbin``)."""

    def __init__(self, name: str = "<stream>") -> None:
        super().__init__(cuda=True, hip=False, name=name)


class HipBundleScanner(_StreamScanner):
    """Stream analyzer for clang offload bundles, plain and compressed (``.hip_fatbin``)."""

    def __init__(self, name: str = "<stream>") -> None:
        super().__init__(cuda=False, hip=True, name=name)


class GpuCodeScanner(_StreamScanner):
    """Both in one pass: ``{"cuda": {...}, "hip": {...}}`` (either key absent), or None.
    With ``sha256``, a file with device code also gets ``"sha256"``: the hex SHA-256 of all
    its bytes, hashed as they were fed."""

    def __init__(self, name: str = "<stream>", *, sha256: bool = False) -> None:
        super().__init__(cuda=True, hip=True, name=name, sha256=sha256)
