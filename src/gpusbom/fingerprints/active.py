"""The fingerprint database a scan identifies files with: the user's updated or imported
copy (``gpusbom fingerprints update`` / ``import``, in the user cache) when it is valid and not
older than the snapshot shipped with gpusbom (``gpusbom/data/fingerprints.json``), else that
snapshot. Each file is validated whole on its first load; a damaged user copy never hides
the bundled snapshot (``fingerprints status`` says it is not used).
"""

from __future__ import annotations

import functools
from pathlib import Path

from .._resources import read_bytes
from .._userdir import read_bounded, user_cache_dir
from .database import MAX_DB_BYTES, FingerprintDB, FingerprintError, load_bytes

__all__ = ["BUNDLED_NAME", "clear", "load_active", "load_bundled", "load_user", "user_db_path"]

#: the bundled snapshot's package data name
BUNDLED_NAME = "data/fingerprints.json"


@functools.lru_cache(maxsize=1)
def load_bundled() -> FingerprintDB:
    """The snapshot shipped with gpusbom; ``FingerprintError`` (naming it) when damaged."""
    return load_bytes(read_bytes("gpusbom", BUNDLED_NAME), name=f"gpusbom/{BUNDLED_NAME}",
                      source="bundled")


def user_db_path() -> Path:
    """``$GPUSBOM_CACHE_DIR/fingerprints/fingerprints.json`` (else ``$XDG_CACHE_HOME/gpusbom``,
    ``~/.cache/gpusbom``): one file, replaced whole by update and import."""
    return user_cache_dir() / "fingerprints" / "fingerprints.json"


@functools.lru_cache(maxsize=1)
def load_user() -> FingerprintDB | None:
    """The user copy; None when absent, too large or not valid."""
    p = user_db_path()
    data = read_bounded(p, MAX_DB_BYTES)
    if data is None:
        return None
    try:
        return load_bytes(data, name=str(p), source=str(p))
    except FingerprintError:
        return None


@functools.lru_cache(maxsize=1)
def load_active() -> FingerprintDB:
    """The database scans use: the user copy when valid and not older than the bundled
    snapshot (their ``built`` times), else the bundled snapshot."""
    bundled = load_bundled()
    user = load_user()
    if user is not None and (user.built or "") >= (bundled.built or ""):
        return user
    return bundled


def clear() -> None:
    """Forget the loaded databases (after an update, import or reset)."""
    load_user.cache_clear()
    load_active.cache_clear()
