"""The one clock of gpusbom. Nothing else in ``src/`` reads the date (tests/architecture).

Two readings, for two kinds of use:

* :func:`now` is the clock of everything a report says: scan timestamps, the advisory
  database's age, policy exception expiry, ``--since`` windows, dashboard ages. It is the
  wall clock unless ``SOURCE_DATE_EPOCH`` fixes it, so a report (and a golden test) is the
  same on every day it is made.
* :func:`wall` is the machine's own clock (Unix seconds) for bookkeeping that must advance
  even when ``SOURCE_DATE_EPOCH`` is set: cache use times and freshness, ingest stamps.

Durations are measured with ``time.monotonic``/``perf_counter`` and are not dates.
"""

from __future__ import annotations

import datetime as _dt
import os
import time

from .errors import UsageError


def now() -> _dt.datetime:
    """The report clock: aware UTC; ``SOURCE_DATE_EPOCH`` (Unix seconds) fixes it."""
    sde = os.environ.get("SOURCE_DATE_EPOCH")
    if sde:
        try:
            return _dt.datetime.fromtimestamp(int(sde), tz=_dt.timezone.utc)
        except (ValueError, OverflowError, OSError) as exc:
            raise UsageError(f"SOURCE_DATE_EPOCH={sde!r} is not a Unix timestamp") from exc
    return wall_now()


def wall() -> float:
    """The machine's clock in Unix seconds, never fixed: for cache and ingest bookkeeping."""
    return time.time()


def wall_now() -> _dt.datetime:
    """:func:`wall` as an aware UTC datetime."""
    return _dt.datetime.fromtimestamp(wall(), tz=_dt.timezone.utc)


def iso(when: _dt.datetime) -> str:
    """``2026-12-04T14:32:29Z``: whole seconds, UTC."""
    return when.astimezone(_dt.timezone.utc).replace(microsecond=0).isoformat().replace(
        "+00:00", "Z")


def scan_timestamp() -> str:
    """ISO 8601 UTC of :func:`now`; ``SOURCE_DATE_EPOCH`` makes it reproducible."""
    return iso(now())


def parse_iso(ts: str) -> _dt.datetime | None:
    """ISO 8601 (``Z`` allowed) -> aware UTC datetime; None when it does not parse."""
    s = ts.strip()
    if s.endswith(("Z", "z")):
        s = s[:-1] + "+00:00"
    try:
        dt = _dt.datetime.fromisoformat(s)
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=_dt.timezone.utc)
    return dt.astimezone(_dt.timezone.utc)
