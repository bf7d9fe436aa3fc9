"""Writing a scan's rows in an open write transaction (ingest, migration 0004, rematch):
the scan row, the sets it references when they are new, the ``latest`` row and the change
counter. Functions of a connection; no state of their own."""

from __future__ import annotations

from typing import Any

from .database import InventoryError
from .schema import (
    SET_TABLES,
    changes,
    content_sets,
    envelopes,
    latest,
    scans,
)

_SET_KIND = {"cset": "components", "fset": "findings", "pset": "probes"}
#: PostgreSQL advisory lock serialising partition creation
_PG_PARTITION_LOCK = 0x67707573626F6E


class RowsNotBuilt(InventoryError):
    """A set to write whose rows the caller did not build (it was stored when looked up):
    the transaction rolls back and the caller builds them and tries again."""


def _insert(dialect: str) -> Any:
    from sqlalchemy.dialects import postgresql, sqlite

    return postgresql.insert if dialect == "postgresql" else sqlite.insert


def partition_name(month: int) -> str:
    return f"scans_p{month:06d}"


def ensure_partition(conn: Any, month: int) -> None:
    """Create the month's partition of ``scans`` (PostgreSQL) unless there; ``conn`` in a
    transaction of its own (a partition created inside an ingest would hold the parent's
    lock until that ingest commits)."""
    name = partition_name(month)
    # the lock first: a catalog look-up made before it may be served from this
    # transaction's catalog snapshot, blind to a partition another writer just created
    conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_PG_PARTITION_LOCK})")
    if conn.exec_driver_sql("SELECT to_regclass(%(n)s) IS NOT NULL", {"n": name}).scalar():
        return
    nxt = month + 1 if month % 100 < 12 else (month // 100 + 1) * 100 + 1
    # toast_tuple_target: a scan row's text (the stack summary, ~1 KB) is compressed in
    # the row from 128 bytes on, not only past PostgreSQL's default of 2 KB
    conn.exec_driver_sql(f"CREATE TABLE IF NOT EXISTS {name} PARTITION OF scans "
                         f"FOR VALUES FROM ({month}) TO ({nxt}) WITH (toast_tuple_target = 128)")


def add_set(conn: Any, dialect: str, set_id: str, which: str,
            rows: dict[str, list[dict[str, Any]]], created: str,
            stack_text: str | None = None, skipped: Any = ()) -> bool:
    """Store a set's rows unless the set is there; True when written. Concurrent writers
    of one new set: the second waits on the first's ``content_sets`` row and skips."""
    tables = SET_TABLES[which]
    if any(rows.get(t.name, []) is None for t in tables):
        from sqlalchemy import select

        if conn.execute(select(content_sets.c.id).where(content_sets.c.id == set_id)
                        ).first() is None:
            raise RowsNotBuilt(set_id)
        return False
    n = len(rows.get(tables[0].name, []))
    got = conn.execute(_insert(dialect)(content_sets).values(
        id=set_id, kind=_SET_KIND[which], n=n, created=created, stack_text=stack_text)
        .on_conflict_do_nothing().returning(content_sets.c.id)).first()
    if got is None:
        return False
    if set_id in skipped:  # its body was not written (it was stored when looked up)
        raise RowsNotBuilt(set_id)
    for t in tables:
        if rows.get(t.name):
            conn.execute(t.insert(), rows[t.name])
    return True


def add_scan(conn: Any, dialect: str, rows: dict[str, list[dict[str, Any]]],
             skipped: Any = ()) -> bool:
    """Insert the scan row and its new sets, advance ``latest``, bump the counter; False
    (nothing written) when the scan is stored already."""
    scan = rows["scans"][0]
    row = {k: v for k, v in scan.items() if k != "stack_text"}  # the set's, not the row's
    got = conn.execute(_insert(dialect)(scans).values(**row).on_conflict_do_nothing()
                       .returning(scans.c.id)).first()
    if got is None:
        return False
    conn.execute(_insert(dialect)(envelopes).values(**rows["envelopes"][0])
                 .on_conflict_do_nothing())
    known = [scan[w] for w in ("cset", "fset", "pset") if scan[w] in skipped]
    if known:
        # sets stored when looked up (an unchanged host: all of them): one look-up that
        # they are still there (prune may have taken one since), not one per set
        from sqlalchemy import select

        there = set(conn.execute(select(content_sets.c.id).where(
            content_sets.c.id.in_(known))).scalars())
        if len(there) < len(set(known)):
            raise RowsNotBuilt(next(k for k in known if k not in there))
    for which in ("cset", "fset", "pset"):
        if scan[which] in skipped:
            continue
        add_set(conn, dialect, scan[which], which, rows, scan["ingested_at"],
                scan.get("stack_text") if which == "cset" else None, skipped)
    advance_latest(conn, dialect, scan)
    bump(conn, dialect)
    return True


def advance_latest(conn: Any, dialect: str, scan: dict[str, Any]) -> None:
    """Make ``scan`` the latest of its subject unless a newer one (by ts, ingested_at, id)
    is there, and count it: one upsert, atomic on both databases (PostgreSQL locks the
    conflicting row and re-checks; SQLite writers hold the write lock)."""
    from sqlalchemy import case, tuple_

    stmt = _insert(dialect)(latest).values(**scan, n_scans=1)
    new = stmt.excluded
    newer = tuple_(latest.c.ts, latest.c.ingested_at, latest.c.id) < tuple_(
        new.ts, new.ingested_at, new.id)
    sets: dict[str, Any] = {c.name: case((newer, new[c.name]), else_=latest.c[c.name])
            for c in latest.columns if c.name not in ("kind", "subject", "n_scans")}
    sets["n_scans"] = latest.c.n_scans + 1
    conn.execute(stmt.on_conflict_do_update(index_elements=[latest.c.kind, latest.c.subject],
                                            set_=sets))


def bump(conn: Any, dialect: str, by: int = 1) -> None:
    """The change counter (the dashboard's cache key): one row, updated last in a write
    transaction so its lock is held for the commit only."""
    stmt = _insert(dialect)(changes).values(name="changes", value=by)
    conn.execute(stmt.on_conflict_do_update(index_elements=[changes.c.name],
                                            set_={"value": changes.c.value + by}))
