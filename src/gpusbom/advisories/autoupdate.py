"""Before a scan: update an advisory database older than ``GPUSBOM_DB_AUTO_UPDATE_DAYS``
(5, grype's default maximum age), as grype does.

Apart from ``update.py`` so that a scan that needs no update imports none of the fetching
code. An attempt that fails (offline, a feed down) is said in one stderr line and the scan
goes on with the database it has; the failure is remembered in the user cache
(``auto-update-failed`` beside the database) and later scans do not try again for
``GPUSBOM_DB_AUTO_UPDATE_RETRY_HOURS`` (2, grype's ``max-update-check-frequency``), so an
offline machine neither waits for the network nor prints the same line on every scan.
``gpusbom advisories update`` tries at once; ``GPUSBOM_DB_AUTO_UPDATE=0`` (or ``scan
--offline``) never tries.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time

from .db import age_days, cache_dir, load_active

__all__ = ["AUTO_UPDATE_DAYS", "RETRY_HOURS", "auto_update"]

AUTO_UPDATE_DAYS = 5.0  # grype's default maximum database age
RETRY_HOURS = 2.0  # grype's default db.max-update-check-frequency

#: in ``cache_dir()``: the last automatic update failed (its mtime: when; its text: why)
FAILED_MARK = "auto-update-failed"


def _float_env(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


def _failed_recently(hours: float) -> bool:
    """Whether an automatic update failed less than ``hours`` ago (a mark dated in the
    future, from a clock set back, does not count: it would stop updates for good)."""
    try:
        when = (cache_dir() / FAILED_MARK).stat().st_mtime
    except OSError:
        return False
    return 0 <= time.time() - when < hours * 3600


def _mark_failed(why: str) -> None:
    try:
        cache_dir().mkdir(parents=True, exist_ok=True)
        (cache_dir() / FAILED_MARK).write_text(why + "\n", encoding="utf-8")
    except OSError:  # a read-only cache: every scan tries again, as before
        pass


def auto_update(*, quiet: bool = False) -> bool:
    """Update a stale database first, saying so in one stderr line (not with ``quiet``); a
    failure is one line too (always: the scan uses older data than asked for) and the scan
    goes on. True when a new database was installed."""
    if os.environ.get("GPUSBOM_DB_AUTO_UPDATE", "1").strip().lower() in ("0", "false", "no", "off"):
        return False
    limit = _float_env("GPUSBOM_DB_AUTO_UPDATE_DAYS", AUTO_UPDATE_DAYS)
    db = load_active()
    age = age_days(db)
    if age is not None and age <= limit:
        return False
    retry = _float_env("GPUSBOM_DB_AUTO_UPDATE_RETRY_HOURS", RETRY_HOURS)
    if _failed_recently(retry):
        return False
    if not quiet:
        print(f"advisory database ({db.source}) is {age or 0:.0f} days old: updating "
              "(--offline to skip)", file=sys.stderr)
    from ..errors import InputError
    from .update import update

    try:
        report = update()
    except InputError as exc:
        _mark_failed(str(exc))
        print(f"advisory update failed, using the {db.source} database: {exc} (next try in "
              f"{retry:g} h; `gpusbom advisories update` tries now)", file=sys.stderr)
        return False
    with contextlib.suppress(OSError):
        (cache_dir() / FAILED_MARK).unlink()
    if not quiet:
        print(f"advisory database updated: {report.advisories} advisories", file=sys.stderr)
    return True
