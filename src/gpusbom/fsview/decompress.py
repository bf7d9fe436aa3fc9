"""Streaming decompression of layer blobs, told apart by magic bytes.

gzip (``1f 8b``, concatenated members allowed, trailing zero padding
tolerated) is inflated with ISA-L, zstd (``28 b5 2f fd``, several frames
allowed) with ``zstandard``; anything else is read as a plain tar.

``open_decompressed`` returns a ``DecompressedStream``: a read-only binary
stream of the uncompressed bytes with a cheap ``skip(n)`` (dropped chunks are
never copied). It can hash the raw and the decompressed bytes as they pass,
enforces the decompression-bomb limits, and can run the read / hash /
inflate pipeline in a worker thread (hashlib, ISA-L and zstd release the GIL
on large buffers) so that the consumer (the tar parser) overlaps with it.

A large gzip blob that is a file of its own (an OCI layout blob; ``BlobSpan``) can be
inflated on several cores at once with rapidgzip (``parallel=N``), run as a child process
(its own command line, given the blob's descriptor) whose output is read from a pipe, its
sha256 hashed by another thread reading the same bytes with ``pread``. A blob inside an
archive stays on the sequential path (rapidgzip would have to read it through a Python
file object). rapidgzip stops quietly at a
truncated end and refuses trailing zero padding, so its result is only trusted when the
blob's last gzip footer agrees with what it produced; on any doubt (an error, a footer
that does not match, an output/input ratio above ``PARALLEL_MAX_RATIO``) the blob is
inflated again from its start with ISA-L, the bytes already handed on are skipped, and
the sequential path gives its usual verdict. Bad input is therefore judged exactly as
before; only good input gets faster.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Generator, Iterator
from typing import Any, BinaryIO, cast

from ..errors import LayerError, UnsafeArchiveError
from .blobhash import BlobHasher
from .types import Limits

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
RAW_CHUNK = 1 << 20
OUT_CHUNK = 4 << 20
RATIO_CHECK_AFTER = 1 << 30
_QUEUE_DEPTH = 8  # raw chunks (1 MiB) in flight
_OUT_QUEUE_DEPTH = 4  # decompressed chunks (up to 4 MiB) in flight, per queue
# gzip blobs from this size on are inflated in parallel when threads are granted: below it
# rapidgzip's start-up (block finder, thread pool) costs more than it saves
PARALLEL_MIN_SIZE = 64 << 20
ZSTD_PARALLEL_MIN_SIZE = 8 << 20  # multi-frame zstd: a thread pool starts in microseconds
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


class _ZstdFrameWalker:
    """Walks zstd frame and block headers over the raw bytes (block contents are skipped).

    The zstd stream reader ends quietly when its input stops inside a frame;
    this tells a complete stream (ends at a frame boundary) from a truncated one.
    """

    _MAGIC, _SKIPSIZE, _FHD, _BLOCK = range(4)

    def __init__(self, name: str) -> None:
        self.name = name
        self.state = self._MAGIC
        self.need = 4
        self.hbuf = b""
        self.skip = 0
        self.frames = 0
        self.checksum = False

    def _bad(self, why: str) -> LayerError:
        return LayerError(f"{self.name}: corrupt zstd: {why}")

    def feed(self, data: bytes) -> None:
        pos = 0
        n = len(data)
        while pos < n:
            if self.skip:
                take = min(self.skip, n - pos)
                self.skip -= take
                pos += take
                continue
            want = self.need - len(self.hbuf)
            chunk = data[pos : pos + want]
            pos += len(chunk)
            if len(chunk) < want:
                self.hbuf += chunk
                return
            hdr = self.hbuf + chunk if self.hbuf else chunk
            self.hbuf = b""
            self._header(hdr)

    def _header(self, h: bytes) -> None:
        st = self.state
        if st == self._MAGIC:
            if h == ZSTD_MAGIC:
                self.state, self.need = self._FHD, 1
            elif h[1:] == b"\x2a\x4d\x18" and 0x50 <= h[0] <= 0x5F:
                self.state, self.need = self._SKIPSIZE, 4
            else:
                raise self._bad("unknown frame magic" if self.frames else "bad frame header")
        elif st == self._SKIPSIZE:
            self.skip = int.from_bytes(h, "little")
            self.state, self.need = self._MAGIC, 4
            self.frames += 1
        elif st == self._FHD:
            d = h[0]
            if d & 0x08:
                raise self._bad("reserved bit set in frame header")
            single = bool(d & 0x20)
            fcs = (1 if single else 0, 2, 4, 8)[d >> 6]
            self.skip = (0 if single else 1) + (0, 1, 2, 4)[d & 3] + fcs
            self.checksum = bool(d & 0x04)
            self.state, self.need = self._BLOCK, 3
        else:  # block header
            v = int.from_bytes(h, "little")
            btype = (v >> 1) & 3
            if btype == 3:
                raise self._bad("reserved block type")
            self.skip = 1 if btype == 1 else v >> 3
            if v & 1:  # last block of the frame
                self.skip += 4 if self.checksum else 0
                self.state, self.need = self._MAGIC, 4
                self.frames += 1

    def check_complete(self) -> None:
        if self.skip or self.hbuf or self.state != self._MAGIC or not self.frames:
            raise self._bad("truncated (unexpected end of compressed data)")


class BlobSpan:
    """A blob that lies in a file: ``size`` bytes of descriptor ``fd`` from ``offset``,
    readable with ``pread`` by several threads at once (no shared file position)."""

    __slots__ = ("fd", "offset", "size")

    def __init__(self, fd: int, offset: int, size: int) -> None:
        self.fd, self.offset, self.size = fd, offset, size

    @property
    def whole_file(self) -> bool:
        """The blob is its file (an OCI layout blob), not a part of one (an archive member)."""
        try:
            return self.offset == 0 and os.fstat(self.fd).st_size == self.size
        except OSError:
            return False

    def pread(self, n: int, pos: int) -> bytes:
        n = min(n, self.size - pos)
        return os.pread(self.fd, n, self.offset + pos) if n > 0 else b""


def blob_span(raw: Any) -> BlobSpan | None:
    """The ``BlobSpan`` behind ``raw`` when it is an unread file (or a reader over part of
    one that offers ``blob_span()``); None otherwise (a network stream, a pipe)."""
    if not hasattr(os, "pread"):
        return None
    inner = raw.raw if isinstance(raw, io.BufferedReader) else raw
    get = getattr(inner, "blob_span", None)
    if callable(get):
        span = get()
        return span if isinstance(span, BlobSpan) else None
    if isinstance(inner, io.FileIO):
        try:
            if raw.tell() != 0:
                return None
            fd = inner.fileno()
            return BlobSpan(fd, 0, os.fstat(fd).st_size)
        except (OSError, ValueError):
            return None
    return None


def parallel_gzip_available() -> bool:
    try:
        import rapidgzip  # type: ignore[import-not-found, unused-ignore]  # noqa: F401
    except ImportError:  # pragma: no cover - a dependency on Linux x86-64 / arm64
        return False
    return True


# the child that runs rapidgzip's own command line: its Python binding holds the interpreter
# lock while it waits for its decoder threads, which in this process would stall the tar
# parser and the blob hash beside it (measured on 16 cores: the two largest layers of a
# 13 GB image took 5.1-5.8 s in a scan against 3.3 s alone)
_INFLATER_CODE = "import sys, rapidgzip; sys.argv[0] = 'rapidgzip'; sys.exit(rapidgzip.cli())"
_PIPE_READ = 4 << 20
#: rapidgzip's chunk (KiB of compressed input per decoder task; 4 MiB is its default). Its
#: memory grows with chunk x threads (decoded chunks wait in its prefetch cache): its
#: command line alone on a 1.35 GB layer of GPU
#: libraries (development VM, peak RSS, -P 2 / 4 / 8) took 174 / 283 / 459 MB with 4 MiB
#: chunks and 130 / 195 / 333 MB with 2 MiB, but 2 MiB cost 15% more CPU, and on a 16-core
#: H200 host the two large layers of a 13 GB image ended 7.5-7.8 s after the start instead
#: of 6.2-7.0 s (the scan 8.9 s instead of 7.6-8.1 s) with the same workers and threads.
#: ``sources.schedule`` gives a layer 2 MiB chunks (``Limits.inflate_chunk_kib``) where
#: the memory they save keeps a worker; ``GPUSBOM_RAPIDGZIP_CHUNK_KIB`` overrides both.
PARALLEL_CHUNK_KIB = 4096
_F_SETPIPE_SZ = 1031  # fcntl.F_SETPIPE_SZ (Linux); Python 3.10 names it, older ones do not


def parallel_chunk_kib() -> int:
    """The chunk size given to rapidgzip (``sources.schedule`` counts its memory by it)."""
    env = os.environ.get("GPUSBOM_RAPIDGZIP_CHUNK_KIB", "")
    return int(env) if env.isdigit() and 64 <= int(env) <= 65536 else PARALLEL_CHUNK_KIB


class _Inflater:
    """rapidgzip inflating a whole-file blob in a child process, its output read from a pipe.

    The child gets the blob's descriptor and nothing else (no shell, no image content on
    its command line); it is killed when the reader stops early."""

    def __init__(self, span: BlobSpan, threads: int, chunk_kib: int) -> None:
        import subprocess
        import tempfile

        self._err = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        try:
            self._proc = subprocess.Popen(  # noqa: S603 - our interpreter, fixed arguments
                [
                    sys.executable,
                    "-c",
                    _INFLATER_CODE,
                    "-d",
                    "-c",
                    "-q",
                    "-P",
                    str(max(1, threads)),
                    "--chunk-size",
                    str(chunk_kib),
                    f"/dev/fd/{span.fd}",
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=self._err,
                pass_fds=(span.fd,),
            )
        except BaseException:
            self._err.close()
            raise
        assert self._proc.stdout is not None  # noqa: S101 - stdout=PIPE
        self._out = self._proc.stdout
        self._fd = self._out.fileno()
        # a bigger pipe: fewer, larger reads (4 MiB where allowed, else the usual 1 MiB cap)
        with contextlib.suppress(ImportError):
            import fcntl

            for size in (_PIPE_READ, 1 << 20):
                try:
                    fcntl.fcntl(self._fd, _F_SETPIPE_SZ, size)
                    break
                except OSError:
                    continue
        self._closed = False

    def read(self) -> bytes:
        return os.read(self._fd, _PIPE_READ)

    def finish(self) -> str | None:
        """After the end of the output: None when the child succeeded, else why not."""
        rc = self._proc.wait()
        if rc == 0:
            return None
        self._err.seek(0)
        msg = self._err.read(400).decode("utf-8", "replace").strip().splitlines()
        return f"rapidgzip exit {rc}" + (f": {msg[-1]}" if msg else "")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._proc.poll() is None:
            self._proc.kill()
        self._out.close()
        self._proc.wait()
        self._err.close()


class _Pipeline:
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
        debug = bool(os.environ.get("GPUSBOM_DEBUG_INFLATE"))
        waited = read_cpu = w0 = r0 = 0.0
        reads = 0
        hasher = BlobHasher(span, self.raw_hash, self.name)
        reported = 0
        delivered = 0
        limit = PARALLEL_MAX_RATIO * max(span.size, 1)
        reason: str | None = None
        finished = False
        child: _Inflater | None = None
        try:
            try:
                child = _Inflater(span, threads, self.limits.inflate_chunk_kib or parallel_chunk_kib())
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
                    f"{reads} reads waited {waited:.2f} s ({read_cpu:.2f} CPU-s), hashed by "
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
        walker = _ZstdFrameWalker(name)
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


class _Stopped(Exception):
    pass


class _Chan:
    """A bounded queue between pipeline threads that gives up once ``stop`` is set."""

    def __init__(self, stop: threading.Event, depth: int = _QUEUE_DEPTH) -> None:
        self.q: queue.Queue[Any] = queue.Queue(maxsize=depth)
        self.stop = stop

    def put(self, item: Any) -> None:
        q, stop = self.q, self.stop
        while True:
            try:
                q.put(item, timeout=0.1)
                return
            except queue.Full:
                if stop.is_set():
                    raise _Stopped from None

    def get(self) -> Any:
        q, stop = self.q, self.stop
        while True:
            try:
                return q.get(timeout=0.1)
            except queue.Empty:
                if stop.is_set():
                    raise _Stopped from None


class _Err:
    __slots__ = ("exc",)

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


_EOF = None


class DecompressedStream(io.BufferedIOBase):
    """Uncompressed bytes of a layer blob as a forward-only binary stream.

    With ``threaded``: one thread reads and hashes the raw blob, one inflates
    (and a third hashes the output when a diff_id is asked for), while the
    consumer parses; each stage hands 1-4 MiB chunks to the next through
    bounded queues, so memory stays bounded.
    """

    def __init__(
        self,
        pipeline: _Pipeline,
        *,
        threaded: bool = False,
        on_raw: Callable[[int], None] | None = None,
    ) -> None:
        super().__init__()
        self._p = pipeline
        self._on_raw = on_raw
        self._buf = b""
        self._off = 0
        self._pos = 0
        self._eof = False
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._hash_chan: _Chan | None = None
        # a blob inflated by the rapidgzip child is read from its pipe right here: that
        # child and the blob-hash thread do the heavy work outside the interpreter lock, and
        # a thread in between would only add a hand-off per chunk under that lock
        if threaded and pipeline.parallel is None and pipeline.parallel_zstd is None:
            stop = self._stop
            raw_chan = _Chan(stop)
            out_chan = _Chan(stop, _OUT_QUEUE_DEPTH)
            self._out_chan = out_chan
            p = pipeline
            p._hash_raw_inline = False
            raw_read = p.raw.read
            raw_hash = p.raw_hash

            def read_raw_stage() -> None:
                try:
                    while True:
                        data = raw_read(RAW_CHUNK)
                        if not data:
                            break
                        if raw_hash is not None:
                            raw_hash.update(data)
                        raw_chan.put(data)
                    raw_chan.put(_EOF)
                except _Stopped:
                    pass
                except BaseException as e:  # noqa: BLE001 - handed downstream
                    with contextlib.suppress(_Stopped):
                        raw_chan.put(_Err(e))

            pending: list[bytes] = []

            def from_raw_chan(n: int = RAW_CHUNK) -> bytes:
                if pending:
                    return pending.pop()
                item = raw_chan.get()
                if item is _EOF:
                    pending.append(b"")  # stay at EOF for later calls
                    return b""
                if isinstance(item, _Err):
                    raise item.exc
                return item  # type: ignore[no-any-return]

            p._raw_read = from_raw_chan

            if p.out_hash is not None:
                hash_chan = _Chan(stop, _OUT_QUEUE_DEPTH)
                self._hash_chan = hash_chan
                out_hash = p.out_hash

                def hash_stage() -> None:
                    try:
                        while True:
                            item = hash_chan.get()
                            if item is _EOF:
                                return
                            out_hash.update(item)
                    except _Stopped:
                        pass

                p._out_sink = hash_chan.put
                self._threads.append(threading.Thread(target=hash_stage, daemon=True))

            def inflate_stage() -> None:
                gen = p.chunks()
                try:
                    for item in gen:
                        out_chan.put(item)
                    if self._hash_chan is not None:
                        self._hash_chan.put(_EOF)
                    out_chan.put(_EOF)
                except _Stopped:
                    pass
                except BaseException as e:  # noqa: BLE001 - handed to the consumer
                    with contextlib.suppress(_Stopped):
                        out_chan.put(_Err(e))
                finally:
                    gen.close()

            self._threads.append(threading.Thread(target=read_raw_stage, daemon=True))
            self._threads.append(threading.Thread(target=inflate_stage, daemon=True))
            for t in self._threads:
                t.start()
            self._next = self._next_threaded
        else:
            self._it = pipeline.chunks()
            self._next = self._next_inline

    def _next_threaded(self) -> tuple[bytes, int] | None:
        item = self._out_chan.get()
        if item is _EOF:
            # all stages are done once the hash stage saw its end marker
            for t in self._threads:
                t.join()
            return None
        if isinstance(item, _Err):
            self._eof = True
            raise item.exc
        return item  # type: ignore[no-any-return]

    def _next_inline(self) -> tuple[bytes, int] | None:
        return next(self._it, None)

    def _fill(self) -> bool:
        """Load the next non-empty chunk; False at EOF."""
        if self._eof:
            return False
        while True:
            item = self._next()
            if item is None:
                self._eof = True
                self._buf = b""
                self._off = 0
                return False
            data, raw_n = item
            if raw_n and self._on_raw is not None:
                self._on_raw(raw_n)
            if data:
                self._buf = data
                self._off = 0
                return True

    # consumer API --------------------------------------------------------------------------

    @property
    def format(self) -> str | None:
        return self._p.format

    @property
    def raw_bytes(self) -> int:
        return self._p.raw_bytes

    @property
    def out_bytes(self) -> int:
        return self._p.out_bytes

    def raw_digest(self) -> str | None:
        """``alg:hex`` of the raw bytes; valid once the stream was read to its end."""
        h = self._p.raw_hash
        return None if h is None else f"{h.name}:{h.hexdigest()}"

    def out_digest(self) -> str | None:
        h = self._p.out_hash
        return None if h is None else f"{h.name}:{h.hexdigest()}"

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def tell(self) -> int:
        return self._pos

    def read(self, n: int | None = -1) -> bytes:
        if n is None or n < 0:
            parts = [self._buf[self._off :]]
            self._buf = b""
            self._off = 0
            while self._fill():
                parts.append(self._buf)
            self._buf = b""
            out = b"".join(parts)
            self._pos += len(out)
            return out
        buf = self._buf
        off = self._off
        end = off + n
        if end <= len(buf):
            self._off = end
            self._pos += n
            return buf[off:end]
        parts = [buf[off:]]
        got = len(buf) - off
        while got < n and self._fill():
            buf = self._buf
            take = min(n - got, len(buf))
            parts.append(buf[:take])
            self._off = take
            got += take
        if got < n:
            self._buf = b""
            self._off = 0
        self._pos += got
        return b"".join(parts)

    def read1(self, n: int = -1) -> bytes:
        if self._off >= len(self._buf) and not self._fill():
            return b""
        avail = len(self._buf) - self._off
        if n is None or n < 0 or n > avail:
            n = avail
        return self.read(n)

    def readinto(self, b: Any) -> int:
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)

    def skip(self, n: int) -> int:
        """Drop ``n`` bytes without copying them; returns how many were dropped."""
        done = 0
        while True:
            avail = len(self._buf) - self._off
            if n - done <= avail:
                self._off += n - done
                self._pos += n
                return n
            done += avail
            if not self._fill():
                self._pos += done
                return done

    def skip_read(self, skip: int, n: int) -> tuple[int, bytes]:
        """``skip(skip)`` then ``read(n)`` in one call (the tar parser's step between
        headers); returns (bytes skipped, data). Data is empty if the skip hit EOF."""
        off = self._off + skip
        end = off + n
        buf = self._buf
        if end <= len(buf):
            self._off = end
            self._pos += skip + n
            return skip, buf[off:end]
        done = self.skip(skip)
        if done < skip:
            return done, b""
        return done, self.read(n)

    def drain(self) -> int:
        """Read the rest of the stream (so digests cover the whole blob); returns bytes dropped."""
        dropped = len(self._buf) - self._off
        while self._fill():
            dropped += len(self._buf)
        self._buf = b""
        self._off = 0
        self._pos += dropped
        return dropped

    def close(self) -> None:
        self._stop.set()
        it = getattr(self, "_it", None)
        if it is not None:
            it.close()  # an inline pipeline stops here (the rapidgzip child is killed)
        for t in self._threads:
            t.join(timeout=10)
        self._threads = []
        super().close()


def open_decompressed(
    raw: BinaryIO,
    name: str,
    *,
    limits: Limits | None = None,
    raw_digest: str | None = None,
    out_digest: str | None = None,
    threaded: bool = False,
    on_raw: Callable[[int], None] | None = None,
    parallel: int = 0,
) -> DecompressedStream:
    """Open ``raw`` (gzip, zstd or plain tar by magic bytes) as a decompressed stream.

    ``raw_digest`` / ``out_digest`` name hash algorithms (``"sha256"``) to run over
    the raw / decompressed bytes (the latter only for compressed blobs).
    ``on_raw(n)`` is called in the consumer's thread as raw bytes are consumed.
    ``parallel``: threads granted to inflate a large gzip blob that lies in a file
    (see the module docstring); 0 or 1 keeps the sequential path.
    Errors: ``LayerError`` for corrupt data, ``UnsafeArchiveError`` for bombs.
    """
    p = _Pipeline(raw, name, limits or Limits(), raw_digest, out_digest)
    if parallel > 1 and out_digest is None:
        span = blob_span(raw)
        if (
            span is not None
            and span.size >= PARALLEL_MIN_SIZE
            and span.whole_file
            and span.pread(2, 0) == GZIP_MAGIC
            # trailing zero padding (which rapidgzip refuses) goes the sequential way
            and span.pread(8, span.size - 8).count(0) != 8
            and parallel_gzip_available()
        ):
            p.parallel = (span, parallel)
        elif (
            span is not None
            and span.size >= ZSTD_PARALLEL_MIN_SIZE
            and span.pread(4, 0) == ZSTD_MAGIC
        ):
            from .zstd_frames import plan_frames

            frames = plan_frames(span)
            if frames is not None:
                p.parallel_zstd = (span, parallel, frames)
    return DecompressedStream(p, threaded=threaded, on_raw=on_raw)
