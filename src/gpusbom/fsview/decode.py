"""The decode of one layer blob: sniffed by magic bytes, hashed, inflated, bomb-checked.

``DecodePipeline.chunks`` yields the decompressed bytes as ``(data, raw bytes since last)``
pairs: gzip with ISA-L (concatenated members, trailing zero padding tolerated), zstd with
``zstandard`` (checked to end at a frame boundary by ``ZstdFrameWalker``), anything else as
a plain tar; or, when ``fsview.decompress.open_decompressed`` granted threads, gzip with
rapidgzip in a child process (``gzip_child``) or zstd frames on a thread pool
(``zstd_frames``), redone sequentially on any doubt. ``fsview.threadstream`` runs it in
worker threads or inline; the module docstring of ``fsview.decompress`` tells the whole.
"""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Callable, Generator, Iterator
from typing import Any, BinaryIO, cast

from .. import settings
from ..errors import LayerError, UnsafeArchiveError
from .blobhash import BlobHasher
from .blobspan import BlobSpan
from .gzip_child import Inflater, parallel_chunk_kib
from .types import Limits
from .zstd_walk import ZSTD_MAGIC, ZstdFrameWalker

GZIP_MAGIC = b"\x1f\x8b"
RAW_CHUNK = 1 << 20
OUT_CHUNK = 4 << 20
RATIO_CHECK_AFTER = 1 << 30
# real layers inflate to 2-5x (sparse or zero-filled files rarely reach 20x); beyond this
# multiple of the blob size the parallel reader (whose chunk buffers grow with the ratio)
# gives way to the bounded sequential one
PARALLEL_MAX_RATIO = 32

_GZIP_ERRORS: tuple[type[BaseException], ...]
try:  # pragma: no branch
    from isal import isal_zlib as _zlib

    _GZIP_ERRORS = (cast("type[BaseException]", _zlib.error), ValueError)
except ImportError:  # pragma: no cover - isal is a dependency; zlib is the fallback
    import zlib as _zlib  # type: ignore[no-redef]

    _GZIP_ERRORS = (cast("type[BaseException]", _zlib.error), ValueError)


def sniff(head: bytes) -> str:
    """``"gzip"``, ``"zstd"`` or ``"tar"`` from the first bytes of a blob."""
    if head[:2] == GZIP_MAGIC:
        return "gzip"
    if head[:4] == ZSTD_MAGIC or (head[1:4] == b"\x2a\x4d\x18" and 0x50 <= head[0] <= 0x5F):
        return "zstd"  # a zstd frame, or a zstd skippable frame
    return "tar"


def _hasher(alg: str | None) -> Any:
    if alg is None:
        return None
    try:
        return hashlib.new(alg)
    except ValueError:
        raise LayerError(f"unsupported digest algorithm {alg!r}") from None


class DecodePipeline:
    """Reads raw bytes, hashes them, decompresses; yields ``(data, raw_bytes_since_last)``."""

    def __init__(
        self,
        raw: BinaryIO,
        name: str,
        limits: Limits,
        raw_alg: str | None,
        out_alg: str | None,
    ) -> None:
        self.raw = raw
        self._raw_read = raw.read
        self._hash_raw_inline = True
        self._out_sink: Callable[[bytes], None] | None = None
        self.name = name
        self.limits = limits
        self.raw_hash = _hasher(raw_alg)
        self.out_hash = _hasher(out_alg)
        self.raw_bytes = 0
        self.out_bytes = 0
        self.format: str | None = None
        self._raw_pending = 0  # raw bytes read but not yet reported
        # set by open_decompressed when this gzip blob is inflated on several threads
        self.parallel: tuple[BlobSpan, int] | None = None
        # set when this multi-frame zstd blob is decompressed on several threads (zstd_frames)
        self.parallel_zstd: tuple[BlobSpan, int, list[tuple[int, int, int]]] | None = None
        self.fallback: str | None = None  # why the parallel inflate gave way (for tests)

    # raw side ------------------------------------------------------------------------------

    def read_raw(self, n: int = RAW_CHUNK) -> bytes:
        data = self._raw_read(n)
        if data:
            if self._hash_raw_inline and self.raw_hash is not None:
                self.raw_hash.update(data)
            self.raw_bytes += len(data)
            self._raw_pending += len(data)
        return data

    def _take_raw(self) -> int:
        n = self._raw_pending
        self._raw_pending = 0
        return n

    # output side ---------------------------------------------------------------------------

    def _out(self, data: bytes) -> tuple[bytes, int]:
        n = self.out_bytes + len(data)
        self.out_bytes = n
        lim = self.limits
        if n > lim.max_layer_uncompressed:
            raise UnsafeArchiveError(
                f"{self.name}: decompressed size exceeds the limit of "
                f"{lim.max_layer_uncompressed} bytes"
            )
        if (
            self.format != "tar"
            and n > RATIO_CHECK_AFTER
            and n > lim.max_compression_ratio * max(1, self.raw_bytes)
        ):
            raise UnsafeArchiveError(
                f"{self.name}: compression ratio above {lim.max_compression_ratio}:1 "
                f"({n} bytes from {self.raw_bytes}): decompression bomb?"
            )
        if self.out_hash is not None:
            if self._out_sink is not None:
                self._out_sink(data)
            else:
                self.out_hash.update(data)
        return data, self._take_raw()

    def chunks(self) -> Generator[tuple[bytes, int], None, None]:
        if self.parallel is not None:
            yield from self._gunzip_parallel(*self.parallel)
            return
        if self.parallel_zstd is not None:
            from .zstd_frames import parallel_unzstd

            yield from parallel_unzstd(self, *self.parallel_zstd)
            return
        head = self.read_raw()
        while 0 < len(head) < 4:
            more = self.read_raw()
            if not more:
                break
            head += more
        fmt = sniff(head)
        self.format = fmt
        if fmt == "gzip":
            yield from self._gunzip(head)
        elif fmt == "zstd":
            yield from self._unzstd(head)
        else:
            self.out_hash = None  # uncompressed: the diff_id is the raw digest
            data = head
            while data:
                yield self._out(data)
                data = self.read_raw()

    def _gunzip(self, first: bytes) -> Iterator[tuple[bytes, int]]:
        name = self.name
        d: Any = None
        members = 0
        pending = b""
        zeros = False  # in trailing zero padding after the last member
        data = first
        try:
            while True:
                if pending:
                    data = pending + data
                    pending = b""
                while data:
                    if zeros:
                        if data.count(0) != len(data):
                            raise LayerError(f"{name}: corrupt gzip: garbage after the last member")
                        data = b""
                        break
                    if d is None:
                        if len(data) < 2:
                            pending = data
                            data = b""
                            break
                        if data[:2] != GZIP_MAGIC:
                            if members and data.count(0) == len(data):
                                zeros = True
                                continue
                            raise LayerError(
                                f"{name}: corrupt gzip: "
                                + ("garbage after the last member" if members else "bad header")
                            )
                        d = _zlib.decompressobj(wbits=31)
                    out = d.decompress(data, OUT_CHUNK)
                    if out:
                        yield self._out(out)
                    if d.eof:
                        data = d.unused_data
                        d = None
                        members += 1
                        continue
                    data = d.unconsumed_tail
                    while not data and len(out) == OUT_CHUNK:
                        # output may still be pending inside the inflater
                        out = d.decompress(b"", OUT_CHUNK)
                        if out:
                            yield self._out(out)
                        if d.eof:
                            data = d.unused_data
                            d = None
                            members += 1
                            break
                        data = d.unconsumed_tail
                data = self.read_raw()
                if not data:
                    break
        except _GZIP_ERRORS as e:
            raise LayerError(f"{name}: corrupt gzip: {e}") from None
        if d is not None or (pending and (not members or pending.count(0) != len(pending))):
            raise LayerError(f"{name}: corrupt gzip: truncated (unexpected end of compressed data)")
        # report the raw bytes read last
        if self._raw_pending:
            yield b"", self._take_raw()

    def _gunzip_parallel(self, span: BlobSpan, threads: int) -> Iterator[tuple[bytes, int]]:
        """Inflate with rapidgzip on ``threads`` threads in a child process while a thread
        here hashes the blob; on any doubt, inflate again sequentially (see the module
        docstring)."""
        self.format = "gzip"
        # the bomb check in _out compares output with raw bytes read: rapidgzip reads ahead
        # on its own, so the whole blob is the measure (the 32x check below is the tight one)
        self.raw_bytes = span.size
        started = time.perf_counter()
        # time in reads of the child's pipe, waiting and copying (GPUSBOM_DEBUG_INFLATE)
        debug = bool(settings.get("debug_inflate"))
        waited = read_cpu = w0 = r0 = 0.0
        reads = full = 0  # full: reads that found the pipe full (the child waited for us)
        hasher = BlobHasher(span, self.raw_hash, self.name)
        reported = 0
        delivered = 0
        limit = PARALLEL_MAX_RATIO * max(span.size, 1)
        reason: str | None = None
        finished = False
        child: Inflater | None = None
        try:
            try:
                child = Inflater(span, threads, self.limits.inflate_chunk_kib or parallel_chunk_kib())
            except OSError as e:
                reason = f"start: {e}"
            if child is not None:
                while True:
                    if debug:
                        w0, r0 = time.perf_counter(), time.thread_time()
                    try:
                        out = child.read()
                    except OSError as e:
                        reason = f"read: {e}"
                        break
                    if debug:
                        waited += time.perf_counter() - w0
                        read_cpu += time.thread_time() - r0
                        reads += 1
                        full += bool(child.pipe_size) and len(out) >= child.pipe_size
                    if not out:
                        reason = child.finish()
                        break
                    if delivered + len(out) > limit:
                        reason = "ratio"
                        break
                    delivered += len(out)
                    now = hasher.hashed
                    yield self._out(out)[0], now - reported
                    reported = now
            if reason is None:
                # rapidgzip ends quietly where a truncated blob stops: the last member's
                # footer (ISIZE = its length mod 2**32) must agree; a blob of several
                # members fails this too and is checked by the sequential path
                tail = span.pread(4, span.size - 4) if span.size >= 4 else b""
                if len(tail) != 4 or int.from_bytes(tail, "little") != delivered & 0xFFFFFFFF:
                    reason = "footer"
            if child is not None:
                child.close()
            if reason is not None:
                self.fallback = reason
                yield from self._gunzip_again(span, delivered)
            finished = True
        finally:
            if child is not None:
                child.close()
            if not finished:  # an error, or the consumer stopped early: stop hashing too
                hasher.stop()
            hasher.join()
            if debug:
                print(
                    f"gpusbom: parallel inflate {self.name}: {threads} threads, "
                    f"{delivered} bytes, {time.perf_counter() - started:.2f} s, "
                    f"{reads} reads waited {waited:.2f} s ({read_cpu:.2f} CPU-s), "
                    f"{full} found the pipe full ({child.pipe_size if child else 0} bytes), hashed by "
                    f"{hasher.done_at - started:.2f} s, fallback={reason}",
                    file=sys.stderr,
                )
        hasher.raise_error()
        self.raw_bytes = span.size
        if span.size > reported:
            yield b"", span.size - reported

    def _gunzip_again(self, span: BlobSpan, skip: int) -> Iterator[tuple[bytes, int]]:
        """The sequential inflate of ``span`` from its start, dropping the first ``skip``
        output bytes (already handed on); the blob is being hashed elsewhere."""
        return self.decode_again(span, skip, self._gunzip)

    def decode_again(
        self,
        span: BlobSpan,
        skip: int,
        decode: Callable[[bytes], Iterator[tuple[bytes, int]]],
    ) -> Iterator[tuple[bytes, int]]:
        """``decode`` (this pipeline's sequential gunzip or unzstd) over ``span`` from its
        start, dropping the first ``skip`` output bytes: a parallel decode that failed part
        way is redone in order, so bad input gets the sequential verdict."""
        pos = [0]

        def pread(n: int = RAW_CHUNK) -> bytes:
            data = span.pread(max(n, RAW_CHUNK), pos[0])
            pos[0] += len(data)
            return data

        self._hash_raw_inline = False
        self._raw_read = pread
        self.raw_bytes = 0
        self.out_bytes = 0  # counted again from the start (the skipped part included)
        for data, _n in decode(self.read_raw()):
            if skip:
                if len(data) <= skip:
                    skip -= len(data)
                    continue
                data = data[skip:]
                skip = 0
            if data:
                yield data, 0

    def _unzstd(self, first: bytes) -> Iterator[tuple[bytes, int]]:
        import zstandard

        name = self.name
        pipeline = self
        walker = ZstdFrameWalker(name)
        walker.feed(first)

        class _Src:
            def __init__(self) -> None:
                self.first: bytes | None = first

            def read(self, n: int = -1) -> bytes:
                if self.first is not None:
                    b, self.first = self.first, None
                    return b
                data = pipeline.read_raw(RAW_CHUNK if n is None or n < 0 else max(n, RAW_CHUNK))
                walker.feed(data)
                return data

        try:
            reader = zstandard.ZstdDecompressor(max_window_size=1 << 31).stream_reader(
                _Src(),  # type: ignore[arg-type]  # any object with read() works
                read_size=RAW_CHUNK,
                read_across_frames=True,
                closefd=False,
            )
            while True:
                out = reader.read(OUT_CHUNK)
                if not out:
                    break
                yield self._out(out)
            # drain whatever is left of the raw stream for the digest
            while True:
                data = self.read_raw()
                if not data:
                    break
                walker.feed(data)
        except zstandard.ZstdError as e:
            raise LayerError(f"{name}: corrupt zstd: {e}") from None
        walker.check_complete()
        if self._raw_pending:
            yield b"", self._take_raw()

