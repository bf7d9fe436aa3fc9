"""A read-only squashed filesystem view built from streamed image layers.

``read_layer`` (in ``layer``) streams one layer blob once: it tells the
compression apart by magic bytes, verifies digests while reading, parses the
tar with our own bounded parser (``tarstream``), and returns a ``LayerIndex``.
``squash`` applies layer indexes in order (whiteouts, opaque dirs) and returns
an ``FsView`` whose link resolution never leaves the image root.

The names below are imported on first use (PEP 562): a host scan reaches
``fsview.types`` through this package and needs none of the layer reader's modules
(decompression, tar parsing, hashing: 15-20 ms of its start on an H200 host).
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType as _ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

#: each exported name and the module that defines it
_WHERE = {
    "DecompressedStream": "decompress", "open_decompressed": "decompress",
    "normalize_path": "layer", "read_layer": "layer",
    "PathMatcher": "spec", "PathSpec": "spec",
    "squash": "squash",
    "TarMember": "tarstream", "iter_tar": "tarstream",
    "ContentRef": "types", "Entry": "types", "EntryKind": "types", "LayerIndex": "types",
    "Limits": "types", "NullProgress": "types", "ProgressSink": "types", "Spool": "types",
    "FsView": "view", "NotCapturedError": "view",
}

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


def __getattr__(name: str) -> Any:
    mod = _WHERE.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{mod}"), name)
    globals()[name] = value
    return value


class _Package(_ModuleType):
    """This package: ``squash`` names the function, never the submodule of that name. The
    import system sets a package's attribute to each submodule it loads; the eager import
    of the function used to rebind it, and here that binding of the submodule is dropped
    instead (the function is looked up on first use, above)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _WHERE and isinstance(value, _ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
