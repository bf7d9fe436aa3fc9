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

from .. import settings
from ..clock import wall
from .db import age_days, cache_dir, load_active

__all__ = ["AUTO_UPDATE_DAYS", "RETRY_HOURS", "auto_update"]

AUTO_UPDATE_DAYS = 5.0  # grype's default maximum database age
RETRY_HOURS = 2.0  # grype's default db.max-update-check-frequency

#: in ``cache_dir()``: the last automatic update failed (first line: when, in clock.wall()
#: seconds; then why)
FAILED_MARK = "auto-update-failed"


def _failed_recently(hours: float) -> bool:
    """Whether an automatic update failed less than ``hours`` ago (a mark dated in the
    future, from a clock set back, does not count: it would stop updates for good)."""
    mark = cache_dir() / FAILED_MARK
    try:
        with open(mark, "rb") as f:
            first = f.read(64).split(b"\n", 1)[0]
        try:  # the time the mark was written, by gpusbom's clock (not the file system's)
            when = float(first.decode("ascii"))
        except (UnicodeDecodeError, ValueError):
            when = mark.stat().st_mtime  # a mark of an older gpusbom: its mtime
    except OSError:
        return False
    return 0 <= wall() - when < hours * 3600


def _mark_failed(why: str) -> None:
    try:
        os.makedirs(cache_dir(), mode=0o700, exist_ok=True)
        (cache_dir() / FAILED_MARK).write_text(f"{wall()}\n{why}\n", encoding="utf-8")
    except OSError:  # a read-only cache: every scan tries again, as before
        pass


def auto_update(*, quiet: bool = False) -> bool:
    """Update a stale database first, saying so in one stderr line (not with ``quiet``); a
    failure is one line too (always: the scan uses older data than asked for) and the scan
    goes on. True when a new database was installed."""
    if not settings.get("db_auto_update"):
        return False
    limit = float(settings.get("db_auto_update_days"))
    db = load_active()
    age = age_days(db)
    if age is not None and age <= limit:
        return False
    retry = float(settings.get("db_auto_update_retry_hours"))
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
