"""A fingerprint of gpusbom's installed code, for caches that keep what the code derived.

The layer-result cache (``fsview/layercache.py``) and the advisory database's index
(``advisories/_dbcache.py``) keep results that depend on gpusbom's code, not only on its
version: a change to any module (a development tree, a patched install) must make earlier
entries unreachable. The fingerprint is the SHA-256 of each ``.py`` file's path, size and
modification time under the package, computed once per process (~1 ms: ``stat`` of ~230
files; the ``__pycache__`` directories hold no source and are not listed).
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
            if name.endswith(".py"):
                st = os.stat(os.path.join(dirpath, name))
                h.update(f"{dirpath}/{name}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()
