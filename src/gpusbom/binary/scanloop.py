"""The chunk loop of the streaming GPU code scanners: search, collect header bytes, skip.

``ScanLoop`` is the state machine every scanner of ``binary.stream`` runs: the file type
from its first bytes, the magic search (``needles.find_magic``) outside executable code
(``elf_ranges``), the steps that collect a structure's header bytes for a handler or skip a
payload, the replay of a candidate that was not one, the error counts and the streaming
SHA-256 (``streamhash``). The handlers that decode the structures are the fatbin states
(``scan_fatbin``) and the offload-bundle states (``scan_bundle``); ``stream`` joins them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpusbom.binary.buildid import BuildIdReader
from gpusbom.binary.elf import ELF_MAGIC
from gpusbom.binary.elf_ranges import MAX_PHDR_PREFIX, executable_ranges
from gpusbom.binary.fatbin import CudaTargetsBuilder
from gpusbom.binary.hipbundle import BUNDLE_MAGIC, CCOB_MAGIC
from gpusbom.binary.needles import FAT_NEEDLE, HIPREG_NEEDLE, find_magic
from gpusbom.binary.streamhash import StreamSha256

_HEADS = (ELF_MAGIC, FAT_NEEDLE, BUNDLE_MAGIC[:4], CCOB_MAGIC)

#: Bytes a file may have searched twice (candidates that were not structures after all).
MAX_REPLAY = 64 << 20

_MAX_ERRORS_KEPT = 8

# candidate kinds
K_FAT, K_BUNDLE, K_CCOB, K_HIPREG = 0, 1, 2, 3
#: Bundles are only looked for in ELF files once ``HIPREG_NEEDLE`` was seen in the first
#: :data:`HIP_GATE_WINDOW` bytes, which spares CUDA and CPU libraries two of the three searches.
HIP_GATE_WINDOW = 256 << 20


class ScanLoop:
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
        self._hasher: StreamSha256 | None = None
        self._cuda = cuda
        self._hip = hip
        self._plain = hip  # look for uncompressed bundles (off inside a v1 CCOB bundle)
        self._hip_gate = False  # ELF: bundles are looked for only after HIPREG_NEEDLE was seen
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
        # ELF: the build-id note, from the first or the last bytes (binary.buildid); the build-id
        # and the SHA-256 are reported for every ELF file, device code or not: the
        # fingerprint database identifies NVIDIA libraries by them (gpusbom.fingerprints)
        self._elf = False
        self._bid: BuildIdReader | None = None
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
        self._b_kind = K_BUNDLE
        self._ccob: Any = None

    # -- set-up ------------------------------------------------------------------------------

    def _set_needles(self) -> None:
        needles: list[tuple[int, bytes]] = []
        if self._cuda:
            needles.append((K_FAT, FAT_NEEDLE))
        if self._hip_gate:
            if self._pos < HIP_GATE_WINDOW:
                needles.append((K_HIPREG, HIPREG_NEEDLE))
        elif self._hip:
            if self._plain:
                needles.append((K_BUNDLE, BUNDLE_MAGIC))
            needles.append((K_CCOB, CCOB_MAGIC))
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
        if self._bid is not None:
            self._bid.feed(chunk)
        if self._off:
            return
        if self._head is not None:
            first = False
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
                self._elf = True
                self._bid = BuildIdReader()
                first = True
                if self._hip:
                    self._hip_gate = True
                    self._set_needles()
            if self._head:  # bytes held back from earlier (tiny) chunks
                chunk = self._head + bytes(chunk)
            self._head = None
            if self._want_hash:  # a binary: hash it from its first byte
                self._hasher = StreamSha256(bytes(chunk))
            if self._bid is not None and first:
                self._bid.feed(chunk)
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
        return self._off and self._hasher is None and self._bid is None

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
        build_id = self._bid.close() if self._bid is not None else None
        self._bid = None
        if out is None and self._elf:
            out = {}  # every ELF file: its digest and build-id (fingerprints)
        if out is not None and self._hasher is not None:
            out["sha256"] = self._hasher.digest_later() if defer else self._hasher.hexdigest()
        if out is not None and build_id:
            out["build_id"] = build_id
        self._hasher = None
        return out or None

    def result(self) -> dict[str, Any] | None:
        """What was found (the scanner that knows the structures says: ``stream``)."""
        raise NotImplementedError

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
            k = find_magic(chunk, needle, i, end)
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
        """Collect the candidate of ``kind`` found at ``pos`` for its first handler
        (``stream``, which knows the structures' handlers)."""
        raise NotImplementedError

    def _reject(self, acc: bytearray, eof: bool) -> None:
        """Not a structure after all: search again from the byte after the candidate."""
        self._replay(acc[1:])
