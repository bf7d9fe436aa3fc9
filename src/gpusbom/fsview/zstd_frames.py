"""zstd layers made of many frames, decompressed on several threads.

A zstd stream may be a sequence of independent frames (``pzstd``, ``zstd:chunked`` layers
of Podman and Buildah, seekable zstd). When such a blob lies in a file (``BlobSpan``) and
``inflate_threads`` are granted (``sources.schedule``), ``plan_frames`` walks the frame and
block headers with ``pread`` (block contents are skipped, not read) and
``parallel_unzstd`` decompresses the frames on a thread pool (zstandard releases the
interpreter lock), handing the output on in order, while another thread hashes the blob.

Only ordinary good input takes this path: every frame must declare its content size (not 0), at
most ``MAX_FRAME_CONTENT`` (so the frames in flight bound the memory), the frames and
skippable frames must tile the blob exactly, and there must be at least two frames. Any
other blob (one frame, a size not declared, truncated, garbage after the last frame)
stays on the sequential path. A frame that fails to decompress, or whose output is not its
declared size, makes the whole blob be decompressed again sequentially from its start (the
bytes already handed on are skipped): bad input is judged exactly as before.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from .. import settings
from .blobhash import BlobHasher

if TYPE_CHECKING:
    from .blobspan import BlobSpan

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
#: frames whose content is larger than this keep the blob on the sequential path
MAX_FRAME_CONTENT = 32 << 20
#: decompressed bytes in flight per thread (whole frames; at least one frame per thread)
IN_FLIGHT_PER_THREAD = 16 << 20
#: headers of more frames than this are not walked (the sequential path reads the blob)
MAX_FRAMES = 1 << 20

Frame = tuple[int, int, int]  # (offset, compressed size, declared content size)


def _header_fcs(span: BlobSpan, pos: int) -> tuple[int, int | None] | None:
    """(header length after the magic, declared content size or None) of the frame at
    ``pos``; None when the header is malformed."""
    fhd = span.pread(1, pos + 4)
    if len(fhd) != 1:
        return None
    d = fhd[0]
    if d & 0x08:  # reserved bit
        return None
    single = bool(d & 0x20)
    fcs_len = (1 if single else 0, 2, 4, 8)[d >> 6]
    did_len = (0, 1, 2, 4)[d & 3]
    hlen = 1 + (0 if single else 1) + did_len + fcs_len
    if fcs_len == 0:
        return hlen, None
    raw = span.pread(fcs_len, pos + 4 + hlen - fcs_len)
    if len(raw) != fcs_len:
        return None
    fcs = int.from_bytes(raw, "little") + (256 if fcs_len == 2 else 0)
    return hlen, fcs


def plan_frames(span: BlobSpan) -> list[Frame] | None:
    """The data frames of the zstd blob ``span`` (skippable frames are left out), or None
    when it should stay sequential."""
    frames: list[Frame] = []
    pos, size = 0, span.size
    walked = 0
    while pos < size:
        walked += 1
        if walked > MAX_FRAMES:
            return None
        magic = span.pread(4, pos)
        if len(magic) != 4:
            return None
        if magic[1:] == b"\x2a\x4d\x18" and 0x50 <= magic[0] <= 0x5F:  # skippable frame
            raw = span.pread(4, pos + 4)
            if len(raw) != 4:
                return None
            n = 8 + int.from_bytes(raw, "little")
            if pos + n > size:
                return None
            pos += n
            continue
        if magic != ZSTD_MAGIC:
            return None
        hdr = _header_fcs(span, pos)
        if hdr is None or not hdr[1] or hdr[1] > MAX_FRAME_CONTENT:
            return None  # no size declared (or 0: nothing to gain), or too large
        hlen, fcs = hdr[0], hdr[1]
        checksum = bool(span.pread(1, pos + 4)[0] & 0x04)
        p = pos + 4 + hlen
        while True:  # block headers: 3 bytes, little endian
            bh = span.pread(3, p)
            if len(bh) != 3:
                return None
            v = int.from_bytes(bh, "little")
            btype = (v >> 1) & 3
            if btype == 3:
                return None
            p += 3 + (1 if btype == 1 else v >> 3)
            if p > size:
                return None
            if v & 1:
                break
        p += 4 if checksum else 0
        if p > size:
            return None
        frames.append((pos, p - pos, fcs))
        pos = p
    return frames if len(frames) >= 2 else None


def parallel_unzstd(
    pipeline: Any, span: BlobSpan, threads: int, frames: list[Frame]
) -> Iterator[tuple[bytes, int]]:
    """The decompressed bytes of ``span`` as ``(data, raw bytes since last)`` pairs for
    ``decode.DecodePipeline.chunks`` (``pipeline``: its output checks and raw hash)."""
    import zstandard

    pipeline.format = "zstd"
    pipeline.raw_bytes = span.size  # the bomb check: frames are read ahead of the output
    local = threading.local()

    def one(frame: Frame) -> bytes:
        off, csize, fcs = frame
        d = getattr(local, "d", None)
        if d is None:
            d = local.d = zstandard.ZstdDecompressor(max_window_size=1 << 31)
        out: bytes = d.decompress(span.pread(csize, off), max_output_size=fcs)
        if len(out) != fcs:
            raise ValueError(f"frame at {off}: {len(out)} bytes, header says {fcs}")
        return out

    started = time.perf_counter()
    hasher = BlobHasher(span, pipeline.raw_hash, pipeline.name)
    pool = ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="unzstd")
    budget = max(1, threads) * IN_FLIGHT_PER_THREAD
    pending: deque[tuple[Future[bytes], int]] = deque()
    in_flight = 0
    nxt = 0
    delivered = 0
    reported = 0
    reason: str | None = None
    finished = False
    try:
        while True:
            while nxt < len(frames) and (not pending or in_flight + frames[nxt][2] <= budget):
                pending.append((pool.submit(one, frames[nxt]), frames[nxt][2]))
                in_flight += frames[nxt][2]
                nxt += 1
            if not pending:
                break
            fut, fcs = pending.popleft()
            in_flight -= fcs
            try:
                out = fut.result()
            except (zstandard.ZstdError, ValueError, MemoryError) as e:
                reason = str(e)[:200]
                break
            if out:
                delivered += len(out)
                now = hasher.hashed
                yield pipeline._out(out)[0], now - reported
                reported = now
        for f, _ in pending:
            f.cancel()
        pool.shutdown(wait=True)
        if reason is not None:
            pipeline.fallback = reason
            yield from _unzstd_again(pipeline, span, delivered)
        finished = True
    finally:
        for f, _ in pending:
            f.cancel()
        pool.shutdown(wait=True)
        if not finished:
            hasher.stop()
        hasher.join()
        if settings.get("debug_inflate"):
            print(
                f"gpusbom: parallel unzstd {pipeline.name}: {threads} threads, {len(frames)} "
                f"frames, {delivered} bytes, {time.perf_counter() - started:.2f} s, "
                f"fallback={reason}",
                file=sys.stderr,
            )
    hasher.raise_error()
    pipeline.raw_bytes = span.size
    if span.size > reported:
        yield b"", span.size - reported


def _unzstd_again(pipeline: Any, span: BlobSpan, skip: int) -> Iterator[tuple[bytes, int]]:
    """The sequential decompression of ``span`` from its start, dropping the first ``skip``
    output bytes (already handed on); the blob is being hashed elsewhere."""
    it: Iterator[tuple[bytes, int]] = pipeline.decode_again(span, skip, pipeline._unzstd)
    return it
