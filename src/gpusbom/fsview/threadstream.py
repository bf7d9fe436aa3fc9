"""``DecompressedStream``: a layer blob's decompressed bytes as a forward-only stream.

The consumer (the tar parser) reads it with a cheap ``skip(n)`` (dropped chunks are never
copied). With ``threaded``, the read / hash / inflate stages of a ``DecodePipeline`` run in
worker threads joined by bounded queues (hashlib, ISA-L and zstd release the interpreter
lock on large buffers), so the parser overlaps with them; otherwise the pipeline runs
inline in the consumer's thread.
"""

from __future__ import annotations

import contextlib
import io
import queue
import threading
from collections.abc import Callable
from typing import Any

from .decode import RAW_CHUNK, DecodePipeline
from .types import few_cpus

_QUEUE_DEPTH = 8  # raw chunks (1 MiB) in flight
_OUT_QUEUE_DEPTH = 4  # decompressed chunks (up to 4 MiB) in flight, per queue
#: per queue on 2 CPUs or fewer (``fsview.types.few_cpus``), where the stages share the
#: cores and a deeper queue only holds more bytes (nvidia-wheels fixture, 2-core VM: with
#: ``fsview.types.ANALYZER_BACKLOG_SMALL``, peak RSS 123 MiB instead of 142, wall the same)
_OUT_QUEUE_DEPTH_SMALL = 2
#: raw chunks in flight there (same measure, with ``gpusbom._alloc.ARENA_MAX_SMALL``: 111 ->
#: 98 MiB on nvidia-wheels, 173 -> 135 MiB on the 12-layer gzip synthetic image)
_QUEUE_DEPTH_SMALL = 4


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
        pipeline: DecodePipeline,
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
            few = few_cpus()
            raw_chan = _Chan(stop, _QUEUE_DEPTH_SMALL if few else _QUEUE_DEPTH)
            out_depth = _OUT_QUEUE_DEPTH_SMALL if few else _OUT_QUEUE_DEPTH
            out_chan = _Chan(stop, out_depth)
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
                hash_chan = _Chan(stop, out_depth)
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

