"""Retention and re-matching of the inventory store: ``prune`` (old scans, then the sets
and blobs no scan references; monthly partitions dropped whole on PostgreSQL) and
``rematch`` (findings recomputed against the current advisory database). Functions of a
``Store``; ``Store.prune`` / ``Store.rematch`` call them."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..model import Component
from . import normalize, writer
from .rows import source
from .schema import latest, scans

if TYPE_CHECKING:
    from .store import Store

__all__ = ["PruneReport", "RematchReport", "collect_blobs", "prune", "rematch"]


@dataclass
class PruneReport:
    scans: int = 0
    partitions: list[str] = field(default_factory=list)
    sets: int = 0
    blobs: int = 0


@dataclass(frozen=True)
class RematchReport:
    sets: int
    scans: int
    advisory_db: str


def func_to_regclass(name: str) -> Any:
    from sqlalchemy import func

    return func.to_regclass(name).isnot(None)


def _compiled(stmt: Any, conn: Any) -> tuple[str, Any]:
    """``stmt`` as the driver's SQL text and parameters (for INSERT ... SELECT into a
    temporary table)."""
    c = stmt.compile(dialect=conn.dialect)
    if conn.dialect.name == "postgresql":
        return str(c), dict(c.params)
    return str(c), tuple(c.params[k] for k in c.positiontup)



def rematch(store: Store, db: Any, *, all_scans: bool = False) -> RematchReport:
    """Findings of the stored scans recomputed against ``db`` (the current advisory
    database), nothing rescanned: each distinct (kind, component set, finding set) is
    matched once (its components rebuilt from the body in the blob store), its
    advisory findings replaced by the new match and the other findings (policy,
    probe...) kept, the result stored as a finding set and the scans pointed at it.
    ``all_scans``: every scan kept, else the latest of each subject. The stored
    bodies (``export``) stay as ingested."""
    from sqlalchemy import func, select, update
    from sqlalchemy.exc import SQLAlchemyError

    from ..advisories.matcher import match
    from ..model import Finding

    src = source(all_scans)
    built = f"{db.source}@{db.built or '?'}"[:255]
    try:
        with store._read() as conn:
            groups = conn.execute(select(src.c.kind, src.c.cset, src.c.fset,
                                         src.c.ifset).distinct()).all()
        changed = 0
        for kind, cset, fset, ifset in groups:
            body = json.loads(store._body(cset))
            comps = [Component.from_dict(c) for c in body.get("components", [])]
            # the findings as ingested (their body): the advisory ones are replaced
            old = [Finding.from_dict(f) for f in json.loads(store._body(ifset or fset))]
            keep = [f for f in old if f.advisory is None]
            new = keep + match(comps, db, target_kind=kind)
            data = json.dumps([f.to_dict() for f in new], sort_keys=True,
                              separators=(",", ":"), ensure_ascii=False).encode("utf-8")
            new_id = normalize.scan_id_of_bytes(data)
            if new_id == fset:
                continue
            rows = normalize.finding_set_rows(new, new_id)
            with store._write() as conn, conn.begin():
                writer.add_set(conn, store.dialect, new_id, "fset", rows,
                               normalize.now_iso())
                # the counter before the latest rows (the order every writer takes them in)
                seq = writer.bump(conn, store.dialect)
                for t in ((scans, latest) if all_scans else (latest, scans)):
                    stmt = update(t).where(t.c.kind == kind, t.c.cset == cset,
                                           t.c.fset == fset)
                    if not all_scans and t is scans:
                        stmt = stmt.where(scans.c.id.in_(select(latest.c.id).where(
                            latest.c.kind == kind, latest.c.cset == cset)))
                    values: dict[str, Any] = {"seq": seq} if t is latest else {}
                    got = conn.execute(stmt.values(
                        fset=new_id, ifset=func.coalesce(t.c.ifset, t.c.fset),
                        advisory_db=built, **values))
                    if t is src:
                        changed += int(got.rowcount or 0)
    except SQLAlchemyError as exc:
        raise store._wrap(exc) from None
    return RematchReport(sets=len(groups), scans=changed, advisory_db=built)

# ------------------------------------------------------------------ prune


def prune(store: Store, *, keep_days: int | None = None, keep_last: int | None = None,
          now: float | None = None) -> PruneReport:
    """Remove the scans retention says go: older than ``keep_days`` and beyond the
    newest ``keep_last`` of their subject (one alone: that one decides; the latest scan
    of every subject always stays). On PostgreSQL a month whose every scan goes is
    dropped as a partition (no row deleted one by one). Then the sets no scan
    references and their blobs. ``latest`` is untouched but for its counts of scans."""
    import datetime as _dt

    from sqlalchemy import and_, func, select, text
    from sqlalchemy.exc import SQLAlchemyError

    from ..clock import wall

    if keep_days is None and keep_last is None:
        raise UsageError("prune: give --keep-days and/or --keep-last (or set "
                         "inventory_keep_days / inventory_keep_last)")
    if (keep_days is not None and keep_days < 0) or (keep_last is not None
                                                      and keep_last < 1):
        raise UsageError("prune: --keep-days must be >= 0 and --keep-last >= 1")
    now = wall() if now is None else now
    conds: list[Any] = [~scans.c.id.in_(select(latest.c.id))]
    cutoff = None
    if keep_days is not None:
        cutoff = (_dt.datetime.fromtimestamp(now, _dt.timezone.utc)
                  - _dt.timedelta(days=keep_days)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        conds.append(scans.c.ts < cutoff)
    doomed: Any
    if keep_last is not None:
        rn = func.row_number().over(
            partition_by=(scans.c.kind, scans.c.subject),
            order_by=(scans.c.ts.desc(), scans.c.ingested_at.desc(), scans.c.id.desc()))
        # ranks over every scan of a subject (the newest is 1)
        ranked = select(scans.c.id, scans.c.month, scans.c.ts, rn.label("rn")).subquery(
            "ranked")
        doomed = select(ranked.c.id, ranked.c.month).where(
            ranked.c.rn > keep_last, ~ranked.c.id.in_(select(latest.c.id)))
        if cutoff is not None:
            doomed = doomed.where(ranked.c.ts < cutoff)
    else:
        doomed = select(scans.c.id, scans.c.month).where(and_(*conds))
    report = PruneReport()
    try:
        with store._write() as conn, conn.begin():
            if store.dialect == "postgresql":
                # ingest waits (its first insert needs ROW EXCLUSIVE on scans): no scan
                # may reference a set while the unreferenced ones are removed
                conn.exec_driver_sql("LOCK TABLE scans IN SHARE ROW EXCLUSIVE MODE")
                conn.exec_driver_sql("CREATE TEMP TABLE prune_doomed (id varchar(64), "
                                     "month integer) ON COMMIT DROP")
            else:
                conn.exec_driver_sql("CREATE TEMP TABLE IF NOT EXISTS prune_doomed "
                                     "(id varchar(64), month integer)")
                conn.exec_driver_sql("DELETE FROM prune_doomed")
            sql, params = _compiled(doomed, conn)
            conn.exec_driver_sql(f"INSERT INTO prune_doomed (id, month) {sql}", params)
            per_month = dict(conn.execute(text(
                "SELECT month, count(*) FROM prune_doomed GROUP BY month")).all())
            report.scans = sum(per_month.values())
            whole: list[int] = []
            if store.dialect == "postgresql" and per_month:
                for month, n in sorted(per_month.items()):
                    part = writer.partition_name(int(month))
                    total = conn.exec_driver_sql(
                        f"SELECT count(*) FROM {part}").scalar()  # noqa: S608 - our name
                    if total == n:
                        whole.append(int(month))
                for month in whole:
                    part = writer.partition_name(month)
                    conn.exec_driver_sql(f"ALTER TABLE scans DETACH PARTITION {part}")
                    conn.exec_driver_sql(f"DROP TABLE {part}")
                report.partitions = [writer.partition_name(m) for m in whole]
                store._partitions.difference_update(whole)
            rest = [m for m in per_month if int(m) not in whole]
            if rest:
                conn.execute(text(
                    "DELETE FROM scans WHERE EXISTS (SELECT 1 FROM prune_doomed d "
                    "WHERE d.id = scans.id AND d.month = scans.month)"))
            if report.scans:
                # counts of scans kept per subject
                conn.execute(text(
                    "UPDATE latest SET n_scans = (SELECT count(*) FROM scans s WHERE "
                    "s.kind = latest.kind AND s.subject = latest.subject)"))
            report.sets = _collect_sets(store, conn)
            writer.bump(conn, store.dialect)
    except SQLAlchemyError as exc:
        raise store._wrap(exc) from None
    report.blobs = collect_blobs(store)
    return report


def _collect_sets(store: Store, conn: Any) -> int:
    """Remove the sets no scan references (with their rows)."""
    from sqlalchemy import text

    from .schema import SET_TABLES

    removed = int(conn.execute(text(
        "DELETE FROM envelopes WHERE id NOT IN (SELECT env FROM scans)")).rowcount or 0)
    for col, kind in (("cset", "components"), ("fset", "findings"), ("pset", "probes")):
        refs = "SELECT cset FROM scans" if col == "cset" else (
            "SELECT fset FROM scans UNION SELECT ifset FROM scans WHERE ifset IS NOT NULL"
            if col == "fset"
            else "SELECT pset FROM scans")
        got = conn.execute(text(
            f"DELETE FROM content_sets WHERE kind = :k AND id NOT IN ({refs})"),  # noqa: S608 - constant text
            {"k": kind})
        removed += int(got.rowcount or 0)
        for t in SET_TABLES[col]:
            conn.execute(text(
                f"DELETE FROM {t.name} WHERE set_id NOT IN "  # noqa: S608 - a table name of ours
                "(SELECT id FROM content_sets WHERE kind = :k)"), {"k": kind})
    return removed


def collect_blobs(store: Store) -> int:
    """Remove the blobs no stored set names (left by a crash between a blob's write
    and its rows' commit, or by ``prune``)."""
    from sqlalchemy import select

    from .schema import content_sets

    with store._read() as conn:
        keep = set(conn.execute(select(content_sets.c.id).where(
            content_sets.c.kind.in_(("components", "findings")))).scalars())
    n = 0
    for key in list(store.blobs.keys()):
        if key not in keep:
            store.blobs.delete(key)
            n += 1
    return n
