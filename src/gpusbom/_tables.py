"""What gpusbom derives from its own data, made once per content and kept in the user cache.

The catalog's YAML tables: every command reads the same package data (``products.yaml``, ``names.yaml``,
``packages.yaml``, ``classifiers.yaml``, ``display.yaml``): importing PyYAML and parsing
them cost 30-35 ms of every run on a 2-core VM, reading the parsed tables back ~1 ms. The
cache file is named by the SHA-256 of gpusbom's version and the text, so an edited table
or another gpusbom is parsed afresh, never served stale; it lives in
``$GPUSBOM_CACHE_DIR/tables`` (else ``$XDG_CACHE_HOME/gpusbom/tables``, else
``~/.cache/gpusbom/tables``), beside the layer-result cache, mode 0600. A cache that cannot
be read or written is ignored (the tables are parsed as before). Only gpusbom's own tables
are cached: files named by ``$GPUSBOM_CATALOG`` are parsed every time.

What is derived from data by gpusbom's code (the path matcher's layout of the collectors'
~580 path specs, ``fsview.spec``) is kept the same way with ``code=True``: named also by the
fingerprint of that code (``gpusbom._codeid``), so an edited module never gets what an older
one derived.

Format: JSON only (``{"format": 1, "data": ...}``), so a planted file can hold wrong data but
never name code; a result that would not come back equal from JSON is not cached. A file
over ``MAX_BYTES``, not JSON, of another format, or refused by the caller's ``load`` (which
checks the shape and converts, raising ``ValueError``/``TypeError``/``KeyError``) is a miss:
it is removed and the text parsed afresh.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ._userdir import read_bounded, user_cache_dir, write_private

__all__ = ["MAX_BYTES", "cached_parse", "drop", "tables_dir"]

FORMAT = 1
#: the largest table file read back (the shipped tables' are well under 1 MB)
MAX_BYTES = 64 << 20


def tables_dir() -> Path:
    return user_cache_dir() / "tables"


def _path(text: str, code: bool) -> Path:
    from . import __version__

    salt = __version__
    if code:
        from ._codeid import code_fingerprint

        salt += "\0" + code_fingerprint()
    digest = hashlib.sha256(f"{salt}\0".encode() + text.encode()).hexdigest()
    return tables_dir() / f"{digest[:40]}.json"


def drop(text: str, *, code: bool = False) -> None:
    """Remove the cached parse of ``text`` (one its caller found wrong: damaged or planted)."""
    with contextlib.suppress(OSError):
        _path(text, code).unlink()


def _same(a: Any, b: Any) -> bool:
    """Equal, with the same container types throughout (JSON has no tuples or sets)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def cached_parse(text: str, parse: Callable[[str], Any], *, code: bool = False,
                 dump: Callable[[Any], Any] | None = None,
                 load: Callable[[Any], Any] | None = None) -> Any:
    """``parse(text)``, from the user cache when this text was parsed before (``code``: by
    this very code). ``dump`` makes the result plain JSON data and ``load`` checks that data
    and makes the result of it again (both default to none: the result is plain data)."""
    path = _path(text, code)
    got = read_bounded(path, MAX_BYTES)
    if got is not None:
        try:
            doc = json.loads(got)
            if type(doc) is not dict or doc.get("format") != FORMAT or "data" not in doc:
                raise ValueError("not a table file")
            return load(doc["data"]) if load is not None else doc["data"]
        except (ValueError, TypeError, KeyError, IndexError, RecursionError):
            with contextlib.suppress(OSError):
                path.unlink()  # damaged, foreign or planted: parsed afresh
    data = parse(text)
    plain = dump(data) if dump is not None else data
    try:
        blob = json.dumps({"format": FORMAT, "data": plain}, allow_nan=False)
        if not _same(json.loads(blob)["data"], plain):
            return data  # not plain data: parsed every time
        # a read-only cache: parsed every time
        write_private(path, blob.encode(), ".table-")
    except (OSError, TypeError, ValueError, RecursionError):
        pass
    return data
