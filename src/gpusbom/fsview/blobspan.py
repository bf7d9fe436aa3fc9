"""A blob that lies in a file, read with ``pread`` (``BlobSpan``), and how to find one.

The parallel decoders of ``fsview.decompress`` (rapidgzip in a child process, zstd frames on
a thread pool) and the blob hash beside them read such a blob at their own offsets, with no
shared file position; a blob read through a stream (a network body, a pipe) has no span and
stays on the sequential path.
"""

from __future__ import annotations

import io
import os
from typing import Any


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
