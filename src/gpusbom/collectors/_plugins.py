"""Collector plug-ins: the ``gpusbom.collectors`` entry points, listed once per installation.

Listing entry points (``importlib.metadata``) imports that package and reads every installed
distribution's metadata: 15-20 ms of every scan on a 2-core VM, where a plug-in is rare. The
list is kept in the user cache (``$GPUSBOM_CACHE_DIR/plugins.json``, else
``$XDG_CACHE_HOME/gpusbom/plugins.json``, else ``~/.cache/gpusbom/plugins.json``) with a
hash of ``sys.path`` and the modification time of each of its entries: installing or
removing a distribution changes its directory's, so the list is read again then. Only an
empty list is ever served from that file: plug-ins found are listed from the installation on
every run, so the file cannot name code to import. A cache
that cannot be read or written is ignored. ``importlib.metadata`` is imported only to list the entry
points, or to load a plug-in.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from .._userdir import read_bounded, user_cache_dir, write_private

__all__ = ["GROUP", "entry_points"]

GROUP = "gpusbom.collectors"


def _cache_file() -> Path:
    return user_cache_dir() / "plugins.json"


def _key() -> str:
    """What the list depends on: the interpreter, ``sys.path``, and each entry's mtime."""
    key = [sys.version, GROUP]
    for p in sys.path:
        try:
            key.append(f"{p}\0{os.stat(p or '.').st_mtime_ns}")
        except OSError:
            key.append(f"{p}\0-")
    return hashlib.sha256("\n".join(key).encode()).hexdigest()


def _listed() -> list[tuple[str, str]]:
    from importlib.metadata import entry_points as eps

    return [(ep.name, ep.value) for ep in eps(group=GROUP)]


def entry_points() -> list[Any]:
    """The ``gpusbom.collectors`` entry points (``importlib.metadata.EntryPoint``)."""
    path, key = _cache_file(), _key()
    pairs: list[tuple[str, str]] | None = None
    eps: Any = None
    try:
        got = json.loads(read_bounded(path, 1 << 20) or b"null")
        eps = got.get("entry_points") if isinstance(got, dict) and got.get("key") == key else None
        # only "no plug-ins" is taken from the cache: a listed plug-in names code to import,
        # so that list is always read from the installation itself (a planted file can at
        # most cost the listing's 15-20 ms, never name a module)
        if eps == []:
            pairs = []
    except (ValueError, RecursionError):
        pass
    if pairs is None:
        pairs = _listed()
    if eps != pairs and eps != [list(p) for p in pairs]:
        with contextlib.suppress(OSError):  # a read-only cache: listed every time
            write_private(path, json.dumps({"key": key, "entry_points": pairs}).encode(),
                          ".plugins-")
    if not pairs:
        return []
    from importlib.metadata import EntryPoint

    return [EntryPoint(name=name, value=value, group=GROUP) for name, value in pairs]
