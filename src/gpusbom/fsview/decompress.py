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

The work is split by concern: ``decode`` (the ``DecodePipeline``: sniff, hash, inflate,
the limits), ``threadstream`` (``DecompressedStream`` and its worker threads),
``gzip_child`` (the rapidgzip child), ``zstd_walk`` (the sequential zstd frame check),
``zstd_frames`` (parallel zstd) and ``blobspan`` (``BlobSpan``); this module decides which
path a blob takes (``open_decompressed``) and re-exports their public names.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import BinaryIO

from .blobspan import BlobSpan, blob_span
from .decode import (
    GZIP_MAGIC,
    OUT_CHUNK,
    PARALLEL_MAX_RATIO,
    RATIO_CHECK_AFTER,
    RAW_CHUNK,
    DecodePipeline,
    sniff,
)
from .gzip_child import PARALLEL_CHUNK_KIB, parallel_chunk_kib, parallel_gzip_available
from .threadstream import DecompressedStream
from .types import Limits
from .zstd_walk import ZSTD_MAGIC

__all__ = [
    "GZIP_MAGIC",
    "OUT_CHUNK",
    "PARALLEL_CHUNK_KIB",
    "PARALLEL_MAX_RATIO",
    "PARALLEL_MIN_SIZE",
    "RATIO_CHECK_AFTER",
    "RAW_CHUNK",
    "ZSTD_MAGIC",
    "ZSTD_PARALLEL_MIN_SIZE",
    "BlobSpan",
    "DecodePipeline",
    "DecompressedStream",
    "blob_span",
    "open_decompressed",
    "parallel_chunk_kib",
    "parallel_gzip_available",
    "sniff",
]

# gzip blobs from this size on are inflated in parallel when threads are granted: below it
# rapidgzip's start-up (block finder, thread pool) costs more than it saves
PARALLEL_MIN_SIZE = 64 << 20
ZSTD_PARALLEL_MIN_SIZE = 8 << 20  # multi-frame zstd: a thread pool starts in microseconds


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
    p = DecodePipeline(raw, name, limits or Limits(), raw_digest, out_digest)
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
