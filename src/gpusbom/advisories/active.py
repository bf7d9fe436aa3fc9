"""Which advisory database a scan matches against, and how old it is.

The bundled snapshot (``gpusbom/data/advisories.json``) or the user's updated copy in the
user cache (``cache_dir()``, written by ``gpusbom advisories update``) when that is valid
and not older; each file is validated whole on its first load, then read from its index in
the user cache (``_dbcache``).
"""

from __future__ import annotations

import functools
from datetime import datetime
from pathlib import Path
from typing import Any

from .._resources import read_bytes
from .._userdir import user_cache_dir
from ..errors import AdvisoryError
from .database import AdvisoryDB, load_bundle_text, parse_stamp
from .targets import TARGETS
from .validate import validate_record


@functools.lru_cache(maxsize=1)
def load_bundled() -> AdvisoryDB:
    """The snapshot shipped with gpusbom (``gpusbom/data/advisories.json``)."""
    return _load_file(read_bytes("gpusbom", "data/advisories.json"), source="bundled",
                      trusted=True)


def _load_file(data: bytes, *, source: str, trusted: bool) -> AdvisoryDB:
    """A database file's bytes, validated whole on their first load, then read from their
    index in the user cache (``_dbcache``)."""
    from . import _dbcache

    path, ix = _dbcache.lookup(data, trusted=trusted, targets=TARGETS, build=validate_record)
    if ix is not None:
        return AdvisoryDB.from_index(ix, source=source)
    db = load_bundle_text(_dbcache.decode(data), source=source, trusted=trusted)
    _dbcache.store(path, db)
    return db


def age_days(db: AdvisoryDB, now: datetime | str | None = None) -> float | None:
    """Days between the database's build date (or newest record) and ``now``."""
    stamp = db.built or db.newest
    built = parse_stamp(stamp) if stamp else None
    if built is None:
        return None
    if isinstance(now, str):
        now = parse_stamp(now)
    if now is None:
        from ..clock import now as _clock_now

        now = _clock_now()
    return max(0.0, (now - built).total_seconds() / 86400)


def describe(db: AdvisoryDB, now: datetime | str | None = None) -> dict[str, Any]:
    """What a report says about the database it matched against (``ScanResult.advisory_db``):
    source (``bundled`` or the user's updated file), build date, age in whole days (relative
    to ``now``: the scan's timestamp, so a report stays reproducible), record count."""
    age = age_days(db, now)
    return {
        "source": db.source,
        "built": db.built or db.newest,
        "age_days": None if age is None else int(age),
        "advisories": len(db),
    }


def cache_dir() -> Path:
    """Where ``gpusbom advisories update`` keeps the database:
    ``$GPUSBOM_CACHE_DIR/advisories``, else ``$XDG_CACHE_HOME/gpusbom/advisories``, else
    ``~/.cache/gpusbom/advisories``."""
    return user_cache_dir() / "advisories"


#: the user's updated database inside ``cache_dir()`` (one file, swapped with os.replace)
USER_DB_NAME = "advisories.json"


def user_db_path() -> Path:
    return cache_dir() / USER_DB_NAME


#: the largest updated database read back from the user cache
MAX_USER_DB_BYTES = 256 << 20


def load_user() -> AdvisoryDB | None:
    """The updated database in the user cache; None when absent or not valid (a broken
    file never hides the bundled snapshot)."""
    from .._userdir import read_bounded

    p = user_db_path()
    data = read_bounded(p, MAX_USER_DB_BYTES)  # a larger file is not read (never written so)
    if data is None:
        return None
    try:
        return _load_file(data, source=str(p), trusted=False)
    except (AdvisoryError, UnicodeDecodeError):  # not UTF-8 (a damaged or planted file)
        return None


def load_active(*, max_age_days: float | None = None, offline: bool = False) -> AdvisoryDB:
    """The database a scan matches against: the user's updated copy when present and valid
    (and not older than the bundled snapshot), else the bundled snapshot.

    ``offline``: only the bundled snapshot. ``max_age_days``: raise ``InputError`` when the
    data is older than that many days.
    """
    db = load_bundled()
    if not offline:
        user = load_user()
        if user is not None:
            ub, bb = parse_stamp(user.built or ""), parse_stamp(db.built or db.newest or "")
            if ub is not None and (bb is None or ub >= bb):
                db = user
    if max_age_days is not None:
        from ..errors import InputError

        age = age_days(db)
        if age is None:
            raise InputError("advisory database: no build date; cannot honour --max-db-age")
        if age > max_age_days:
            raise InputError(f"advisory database ({db.source}) is {age:.0f} days old, older than "
                             f"--max-db-age {max_age_days:g}; run gpusbom advisories update")
    return db
