"""A read-only squashed filesystem view built from streamed image layers.

``read_layer`` (in ``layer``) streams one layer blob once: it tells the
compression apart by magic bytes, verifies digests while reading, parses the
tar with our own bounded parser (``tarstream``), and returns a ``LayerIndex``.
``squash`` applies layer indexes in order (whiteouts, opaque dirs) and returns
an ``FsView`` whose link resolution never leaves the image root.
"""

from __future__ import annotations

from .spec import PathMatcher, PathSpec
from .types import ContentRef, Entry, EntryKind, LayerIndex, Limits, NullProgress, ProgressSink, Spool

__all__ = [
    "ContentRef",
    "Entry",
    "EntryKind",
    "LayerIndex",
    "Limits",
    "NullProgress",
    "PathMatcher",
    "PathSpec",
    "ProgressSink",
    "Spool",
]
