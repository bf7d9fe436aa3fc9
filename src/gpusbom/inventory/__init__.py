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

from .engine import InventoryError, default_url, normalize_url, redact
from .ranges import VersionRange, parse_range
from .types import AffectedRow, Change, Drift, QueryRow, ScanInfo, SubjectInfo

if TYPE_CHECKING:
    from ..model import ScanResult
    from .store import Store

__all__ = [
    "AffectedRow",
    "Change",
    "Drift",
    "InventoryError",
    "QueryRow",
    "ScanInfo",
    "Store",
    "SubjectInfo",
    "VersionRange",
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


def push_scan(result: ScanResult, url: str) -> None:
    """Store ``result`` in the inventory at ``url`` (``gpusbom scan --push URL``); the same
    scan pushed twice is stored once. Raises ``InventoryError`` (exit 3) when the database
    cannot be used; the password in ``url`` is never shown."""
    from .store import Store

    with Store(url) as store:
        store.ingest(result)
