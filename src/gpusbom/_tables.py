"""What gpusbom derives from its own data, made once per content and kept in the user cache.

The catalog's YAML tables: every command reads the same package data (``products.yaml``, ``names.yaml``,
``packages.yaml``, ``classifiers.yaml``, ``display.yaml``): importing PyYAML and parsing
them cost 30-35 ms of every run on a 2-core VM, unpickling the parsed tables 1 ms. The
cache file is named by the SHA-256 of gpusbom's version and the text, so an edited table
or another gpusbom is parsed afresh, never served stale; it lives in
``$GPUSBOM_CACHE_DIR/tables`` (else ``$XDG_CACHE_HOME/gpusbom/tables``, else
``~/.cache/gpusbom/tables``), beside the layer-result cache, mode 0600. A cache that cannot
be read or written is ignored (the tables are parsed as before). Only gpusbom's own tables
are cached: files named by ``$GPUSBOM_CATALOG`` are parsed every time.

What is built from a table by gpusbom's code (``products()``'s rows: validating them and
indexing their ~340 name patterns took 4-5 ms of every run) is kept the same way with
``code=True``: named also by the fingerprint of that code (``gpusbom._codeid``), so an
edited module never gets objects an older one built. The path matcher's layout of the
collectors' ~580 path specs (``fsview.spec``) is kept that way too.
"""

from __future__ import annotations

import contextlib
import hashlib
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ._userdir import user_cache_dir, write_private

__all__ = ["cached_parse", "tables_dir"]


def tables_dir() -> Path:
    return user_cache_dir() / "tables"


def cached_parse(text: str, parse: Callable[[str], Any], *, code: bool = False) -> Any:
    """``parse(text)``, from the user cache when this text was parsed before (``code``: by
    this very code, for results that are gpusbom's own objects)."""
    from . import __version__

    salt = __version__
    if code:
        from ._codeid import code_fingerprint

        salt += "\0" + code_fingerprint()
    digest = hashlib.sha256(f"{salt}\0".encode() + text.encode()).hexdigest()
    path = tables_dir() / f"{digest[:40]}.pickle"
    try:
        with open(path, "rb") as f:
            return pickle.load(f)  # noqa: S301 - the user's own cache, written below
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ValueError, TypeError):
        pass
    data = parse(text)
    # a read-only cache: parsed every time
    with contextlib.suppress(OSError, pickle.PicklingError):
        write_private(path, pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL), ".table-")
    return data
