"""Fleet inventory: keep every scan of every host and image, and answer from them.

    from gpusbom.inventory import Store, push_scan
    push_scan(result, "postgresql://gpusbom:...@db/inventory")   # scan --push
    with Store("sqlite:///inv.db") as store:
        store.ingest(result)                     # -> (scan id, created)
        store.query("cudnn", parse_range("<9.1"))
        store.affected(load_active())            # re-match stored scans, no rescan
        store.drift("node-17")
        store.latest_scans("host")               # ScanResults (check --inventory)

Storage: SQLAlchemy 2 + Alembic migrations shipped in this package; SQLite by default
(a file in the user data dir), PostgreSQL (psycopg 3) by URL. See docs/inventory.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import settings
from .database import InventoryError, default_url, normalize_url, redact
from .ranges import QueryRange, parse_range
from .types import AffectedRow, Change, Drift, Page, QueryRow, ScanInfo, SubjectInfo

if TYPE_CHECKING:
    from ..model import ScanResult
    from .store import Store

__all__ = [
    "AffectedRow",
    "Change",
    "Drift",
    "InventoryError",
    "Page",
    "QueryRow",
    "ScanInfo",
    "Store",
    "SubjectInfo",
    "QueryRange",
    "default_url",
    "normalize_url",
    "parse_range",
    "push_scan",
    "redact",
]


def __getattr__(name: str) -> object:
    # the store pulls in SQLAlchemy: load it when asked for
    if name == "Store":
        from .store import Store

        return Store
    raise AttributeError(name)


#: a server that restarts or is not up yet: how long ``push_scan`` keeps retrying
PUSH_RETRY_SECONDS = 30.0
_CONNECTION_LOST = (
    "connection refused", "server closed the connection",
    "terminating connection", "the database system is starting up",
    "the database system is shutting down", "the database system is in recovery mode",
    "ssl syscall error", "no connection to the server",
    "connection already closed", "consuming input failed",
)


def _connection_lost(exc: InventoryError) -> bool:
    text = str(exc).lower()
    if "authentication failed" in text or "does not exist" in text:
        return False  # the server answered: retrying cannot help
    return any(k in text for k in _CONNECTION_LOST)


def push_scan(result: ScanResult, url: str, *, retry_seconds: float | None = None) -> None:
    """Store ``result`` in the inventory at ``url`` (``gpusbom scan --push URL``); the same
    scan pushed twice is stored once. Raises ``InventoryError`` (exit 3) when the database
    cannot be used; the password in ``url`` is never shown.

    A database server that is restarting (connection refused or dropped, "starting up")
    is retried with backoff for ``retry_seconds`` (``PUSH_RETRY_SECONDS``, or
    ``$GPUSBOM_PUSH_RETRY_SECONDS``), one warning line on stderr per retry; the ingest is
    one transaction, so a push cut off mid-way leaves nothing behind and is simply redone."""
    import sys
    import time

    from .store import Store

    if retry_seconds is None:
        env = settings.raw("push_retry_seconds")
        retry_seconds = float(env) if env else PUSH_RETRY_SECONDS
    deadline = time.monotonic() + retry_seconds
    delay = 0.5
    while True:
        try:
            with Store(url) as store:
                store.ingest(result)
            return
        except InventoryError as exc:
            left = deadline - time.monotonic()
            if not _connection_lost(exc) or left <= 0:
                raise
            wait = min(delay, left)
            print(f"gpusbom: warning: {exc}; retrying in {wait:.1f}s", file=sys.stderr)
            time.sleep(wait)
            delay = min(delay * 2, 5.0)
