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
             skipped: Any = (), *, latest_seq: bool = True) -> bool:
    """Insert the scan row and its new sets, advance ``latest``, bump the counter; False
    (nothing written) when the scan is stored already. ``latest_seq=False``: for
    migration 0004, whose ``latest`` has no ``seq`` yet (0005 adds it)."""
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
    # the counter first, then the latest row (every writer of latest takes them in this
    # order): the row records the counter value of its write
    if latest_seq:
        advance_latest(conn, dialect, scan, bump(conn, dialect))
    else:
        advance_latest(conn, dialect, scan, None)
        bump(conn, dialect)
    return True


def advance_latest(conn: Any, dialect: str, scan: dict[str, Any], seq: int | None) -> None:
    """Make ``scan`` the latest of its subject unless a newer one (by ts, ingested_at, id)
    is there, and count it: one upsert, atomic on both databases (PostgreSQL locks the
    conflicting row and re-checks; SQLite writers hold the write lock). ``seq``: the
    change counter's value of this write (``bump``'s), kept in the row (None: not written)."""
    from sqlalchemy import case, tuple_

    more = {} if seq is None else {"seq": seq}
    stmt = _insert(dialect)(latest).values(**scan, n_scans=1, **more)
    new = stmt.excluded
    newer = tuple_(latest.c.ts, latest.c.ingested_at, latest.c.id) < tuple_(
        new.ts, new.ingested_at, new.id)
    sets: dict[str, Any] = {c.name: case((newer, new[c.name]), else_=latest.c[c.name])
            for c in latest.columns if c.name not in ("kind", "subject", "n_scans", "seq")}
    sets["n_scans"] = latest.c.n_scans + 1
    sets.update(more)
    conn.execute(stmt.on_conflict_do_update(index_elements=[latest.c.kind, latest.c.subject],
                                            set_=sets))


#: the change counter (the dashboard's cache key)
CHANGES = "changes"
#: counts the times ``latest`` was rebuilt (its rows deleted and written again)
LATEST_REBUILT = "latest_rebuilt"


def bump(conn: Any, dialect: str, by: int = 1, name: str = CHANGES) -> int:
    """Advance a counter (one row of ``changes``) and return its new value.

    The change counter is taken late in a write transaction: by ingest just before its
    ``latest`` row, which records the value (``latest.seq``), so its lock is held for that
    upsert and the commit only. Writers of ``latest`` take the counter before the row,
    so the values are given out in commit order: the rows a reader sees always hold
    every value up to the largest it sees (``metrics._LatestRows`` reads the rows changed
    since a value)."""
    stmt = _insert(dialect)(changes).values(name=name, value=by)
    return int(conn.execute(stmt.on_conflict_do_update(
        index_elements=[changes.c.name], set_={"value": changes.c.value + by})
        .returning(changes.c.value)).scalar_one())
