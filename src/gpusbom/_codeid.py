"""A fingerprint of gpusbom's installed code, for caches that keep what the code derived.

The layer-result cache (``fsview/layercache.py``) and the advisory database's index
(``advisories/_dbcache.py``) keep results that depend on gpusbom's code, not only on its
version: a change to any module (a development tree, a patched install) must make earlier
entries unreachable. The fingerprint is the SHA-256 of each ``.py`` file's path, size and
modification time under the package, computed once per process (~1 ms: ``stat`` of ~230
files; the ``__pycache__`` directories hold no source and are not listed).

The catalog's YAML tables count as code here: the collectors' file patterns and parsers
are read from their rows (``catalog/detection.py``), so an edited row must reach a cached
layer as an edited module does; so do the extra catalog files ``$GPUSBOM_CATALOG`` names.
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

__all__ = ["code_fingerprint"]


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """Size and mtime of every module of the installed package, hashed."""
    root = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        # sorted; byte-code caches hold no source (not listing them: 1-3 ms a scan)
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith((".py", ".yaml")):
                st = os.stat(os.path.join(dirpath, name))
                h.update(f"{dirpath}/{name}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    from . import settings

    for name in settings.raw("catalog").split(os.pathsep):
        if name.strip():
            try:
                st = os.stat(name)
            except OSError:  # reported where the catalog reads it (exit 3)
                continue
            h.update(f"catalog {os.path.abspath(name)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()
