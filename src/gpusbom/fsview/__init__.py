"""A read-only squashed filesystem view built from streamed image layers.

``read_layer`` (in ``layer``) streams one layer blob once: it tells the
compression apart by magic bytes, verifies digests while reading, parses the
tar with our own bounded parser (``tarstream``), and returns a ``LayerIndex``.
``squash`` applies layer indexes in order (whiteouts, opaque dirs) and returns
an ``FsView`` whose link resolution never leaves the image root.
"""

from __future__ import annotations

from .decompress import DecompressedStream, open_decompressed
from .layer import normalize_path, read_layer
from .spec import PathMatcher, PathSpec
from .squash import squash
from .tarstream import TarMember, iter_tar
from .types import (
    ContentRef,
    Entry,
    EntryKind,
    LayerIndex,
    Limits,
    NullProgress,
    ProgressSink,
    Spool,
)
from .view import FsView, NotCapturedError

__all__ = [
    "ContentRef",
    "DecompressedStream",
    "Entry",
    "EntryKind",
    "FsView",
    "LayerIndex",
    "Limits",
    "NotCapturedError",
    "NullProgress",
    "PathMatcher",
    "PathSpec",
    "ProgressSink",
    "Spool",
    "TarMember",
    "iter_tar",
    "normalize_path",
    "open_decompressed",
    "read_layer",
    "squash",
]
