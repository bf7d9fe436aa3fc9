"""The one clock of gpusbom: the time a scan (or an output without one) is stamped with.
``SOURCE_DATE_EPOCH`` makes it reproducible; nothing else reads the wall clock for output."""

from __future__ import annotations

import datetime as _dt
import os

from .errors import UsageError


def scan_timestamp() -> str:
    """ISO 8601 UTC; ``SOURCE_DATE_EPOCH`` makes it reproducible."""
    sde = os.environ.get("SOURCE_DATE_EPOCH")
    if sde:
        try:
            when = _dt.datetime.fromtimestamp(int(sde), tz=_dt.timezone.utc)
        except (ValueError, OverflowError, OSError) as exc:
            raise UsageError(f"SOURCE_DATE_EPOCH={sde!r} is not a Unix timestamp") from exc
    else:
        when = _dt.datetime.now(tz=_dt.timezone.utc)
    return when.replace(microsecond=0).isoformat().replace("+00:00", "Z")


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
