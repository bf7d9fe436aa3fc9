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
"""

from __future__ import annotations

import hashlib
import io
import queue
import threading
from collections.abc import Callable, Generator, Iterator
from typing import Any, BinaryIO, cast

from ..errors import LayerError, UnsafeArchiveError
from .types import Limits

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
RAW_CHUNK = 1 << 20
OUT_CHUNK = 4 << 20
RATIO_CHECK_AFTER = 1 << 30
_QUEUE_DEPTH = 8  # raw chunks (1 MiB) in flight
_OUT_QUEUE_DEPTH = 4  # decompressed chunks (up to 4 MiB) in flight, per queue

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
        if threaded:
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
                    try:
                        raw_chan.put(_Err(e))
                    except _Stopped:
                        pass

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
                    try:
                        out_chan.put(_Err(e))
                    except _Stopped:
                        pass
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
) -> DecompressedStream:
    """Open ``raw`` (gzip, zstd or plain tar by magic bytes) as a decompressed stream.

    ``raw_digest`` / ``out_digest`` name hash algorithms (``"sha256"``) to run over
    the raw / decompressed bytes (the latter only for compressed blobs).
    ``on_raw(n)`` is called in the consumer's thread as raw bytes are consumed.
    Errors: ``LayerError`` for corrupt data, ``UnsafeArchiveError`` for bombs.
    """
    p = _Pipeline(raw, name, limits or Limits(), raw_digest, out_digest)
    return DecompressedStream(p, threaded=threaded, on_raw=on_raw)
