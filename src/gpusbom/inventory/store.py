"""The inventory store: every scan of every host and image, and the questions asked of it.

``Store(url)`` opens (and migrates) the database; ``ingest`` stores one scan in one
transaction; ``query``/``affected``/``drift``/``subjects``/``latest_scans`` answer from
the latest scan of each host and image (``all_scans=True``: from every scan kept).

One module over 500 lines: the one ``Store`` class; each method is one question over the
same schema, connection and retry handling (``_read``, ``_wrap``). The row helpers that need
no store (filters, rows rebuilt as components) are in ``rows.py``.
"""

from __future__ import annotations

import json
import random
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import InputError, UsageError
from ..model import ComponentType, ScanResult
from . import normalize, writer
from .database import InventoryError, describe_error, open_engine
from .ranges import QueryRange
from .rows import (
    info_columns,
    labels_match,
    like,
    scan_filter,
    scan_info,
    source,
)
from .schema import (
    changes,
    components,
    content_sets,
    devices,
    finding_counts,
    latest,
    scans,
)
from .types import AffectedRow, Change, Drift, Page, QueryRow, ScanInfo, SubjectInfo

if TYPE_CHECKING:
    from .retention import PruneReport, RematchReport

__all__ = ["AffectedRow", "Change", "Drift", "QueryRow", "ScanInfo", "Store", "SubjectInfo"]


class Store:
    """An inventory database. ``url``: ``sqlite:///PATH``, a path, ``postgresql://...``,
    or None for the default SQLite file in the user data dir."""

    def __init__(self, url: str | None = None, *, blobs: str | None = None) -> None:
        from .blobs import open_blobs

        self.engine, self.url, self.blobs = open_engine(
            url, lambda u, engine: open_blobs(blobs, u, engine))
        self.dialect = self.engine.dialect.name
        self._partitions: set[int] = set()
        self._bodies: OrderedDict[str, bytes] = OrderedDict()  # decoded set bodies

    # ------------------------------------------------------------------ plumbing

    @property
    def display_url(self) -> str:
        return str(self.url.render_as_string(hide_password=True))

    def close(self) -> None:
        self.blobs.close()
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _read(self) -> Any:
        return self.engine.connect()

    def _write(self) -> Any:
        return self.engine.connect().execution_options(gpusbom_write=True)

    def _wrap(self, exc: BaseException) -> InventoryError:
        return describe_error(exc, self.url)

    def change_count(self) -> int:
        """The change counter: bumped by every ingest, prune, rematch and triage write
        (one row: the dashboard's cache key, read per request)."""
        from sqlalchemy import select

        with self._read() as conn:
            got = conn.execute(select(changes.c.value).where(changes.c.name == "changes")
                               ).scalar()
        return int(got or 0)

    def _ensure_partition(self, month: int) -> None:
        from sqlalchemy import func, select

        if self.dialect != "postgresql" or month in self._partitions:
            return
        with self._read() as conn:  # the common case: there (one catalog look-up)
            there = conn.execute(select(func.to_regclass(writer.partition_name(month)).isnot(None))
                                 ).scalar()
        if not there:
            with self._write() as conn, conn.begin():
                writer.ensure_partition(conn, month)
        self._partitions.add(month)

    # ------------------------------------------------------------------ ingest

    def ingest(self, result: ScanResult, *, labels: dict[str, str] | None = None,
               advisory_db: str | None = None) -> tuple[str, bool]:
        """Store ``result`` in one transaction; returns (scan id, created). The same scan
        (same canonical JSON, after ``labels`` are merged into the target's labels) is
        stored once, also when several writers ingest it at the same time. Its component
        and finding bodies go to the blob store first (content-addressed: a body already
        there is not written again), then the scan row and the sets not stored yet."""
        from sqlalchemy.exc import OperationalError, SQLAlchemyError

        if labels:
            result = ScanResult.from_dict(result.to_dict())
            result.target.labels = {**result.target.labels, **labels}
        parts = normalize.split(result)
        normalize.check_text(parts.data, result.target.reference)
        sid = normalize.scan_id_of_bytes(parts.data)
        month = normalize.month_of(normalize.utc_iso(result.timestamp))
        try:
            exists, have = self._look_up(sid, month, (parts.cset, parts.fset))
            if exists:
                # stored already: its bodies are put back if the blob store lost them
                self.blobs.put(parts.cset, parts.component_body)
                self.blobs.put(parts.fset, parts.finding_body)
                return sid, False
            # bodies first, the new ones (a set stored has its body written before it)
            if parts.cset not in have:
                self.blobs.put(parts.cset, parts.component_body)
            if parts.fset not in have:
                self.blobs.put(parts.fset, parts.finding_body)
            self._ensure_partition(month)
        except SQLAlchemyError as exc:
            raise self._wrap(exc) from None
        skipped = have
        # an unchanged host: its component set is stored, its rows are not built again
        rows = normalize.rows(result, sid, advisory_db=advisory_db, parts=parts,
                              component_rows=parts.cset not in have)
        if parts.cset in have:
            rows["components"] = None  # type: ignore[assignment]  # not built: stored
        attempts = 8
        for attempt in range(attempts):
            try:
                with self._write() as conn, conn.begin():
                    created = writer.add_scan(conn, self.dialect, rows, skipped)
                return sid, created
            except writer.RowsNotBuilt:
                # a set went (prune) between the look-up and the write: its body and rows
                # are written after all
                self.blobs.put(parts.cset, parts.component_body)
                self.blobs.put(parts.fset, parts.finding_body)
                rows = normalize.rows(result, sid, advisory_db=advisory_db, parts=parts)
                skipped = set()
                continue
            except OperationalError as exc:
                text = str(getattr(exc, "orig", exc))
                transient = ("locked" in text or "deadlock" in text
                             or "could not serialize" in text)
                if transient and attempt < attempts - 1:
                    time.sleep(0.05 * (2 ** attempt) * (1 + random.random()))  # noqa: S311 - retry jitter
                    continue
                raise self._wrap(exc) from None
            except SQLAlchemyError as exc:
                raise InventoryError(
                    f"inventory database {self.display_url}: cannot store scan of "
                    f"{result.target.reference}: {describe_error(exc, self.url).args[0]}"
                ) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _look_up(self, sid: str, month: int, sets: tuple[str, ...]) -> tuple[bool, set[str]]:
        """(the scan is stored, which of ``sets`` are stored): one connection."""
        from sqlalchemy import select

        from .schema import content_sets

        with self._read() as c:
            exists = c.execute(select(scans.c.id).where(
                scans.c.id == sid, scans.c.month == month)).first() is not None
            have = set() if exists else set(c.execute(select(content_sets.c.id).where(
                content_sets.c.id.in_(sets))).scalars())
        return exists, have

    def _exists(self, sid: str, month: int | None = None) -> bool:
        from sqlalchemy import select

        stmt = select(scans.c.id).where(scans.c.id == sid)
        if month is not None:
            stmt = stmt.where(scans.c.month == month)
        with self._read() as c:
            return c.execute(stmt).first() is not None

    def rebuild_latest(self) -> None:
        """Recompute ``latest`` (the newest scan of every subject, with its count of
        scans) from ``scans``: for bulk loads that write rows without ``ingest`` (the
        benchmarks) and after ``prune``."""
        with self._write() as conn, conn.begin():
            self._rebuild_latest(conn, writer.bump(conn, self.dialect))
            writer.bump(conn, self.dialect, name=writer.LATEST_REBUILT)

    def _rebuild_latest(self, conn: Any, seq: int) -> None:
        from sqlalchemy import func, insert, literal, select

        rn = func.row_number().over(
            partition_by=(scans.c.kind, scans.c.subject),
            order_by=(scans.c.ts.desc(), scans.c.ingested_at.desc(), scans.c.id.desc()),
        ).label("rn")
        n = func.count().over(partition_by=(scans.c.kind, scans.c.subject)).label("n")
        cols = [c.name for c in scans.columns]
        ranked = select(*scans.columns, rn, n).subquery("ranked")
        stack = select(content_sets.c.stack_text).where(
            content_sets.c.id == ranked.c.cset).scalar_subquery()
        conn.execute(latest.delete())
        conn.execute(insert(latest).from_select(
            [*cols, "n_scans", "stack_text", "seq"], select(*[ranked.c[c] for c in cols],
                                                            ranked.c.n, stack, literal(seq))
            .where(ranked.c.rn == 1)))

    # ------------------------------------------------------------------ scans

    def latest_scan_ids(self) -> Any:
        """A subquery of the ids of the latest scan of every (kind, subject)."""
        from sqlalchemy import select

        return select(latest.c.id)

    def scans(self, *, kind: str | None = None, subject: str | None = None,
              all_scans: bool = True, labels: dict[str, str | None] | None = None
              ) -> list[ScanInfo]:
        """Scans, oldest first (``all_scans=False``: the latest of each subject, read from
        ``latest`` alone)."""
        from sqlalchemy import select
        from sqlalchemy.exc import SQLAlchemyError

        src = source(all_scans)
        stmt = scan_filter(select(*info_columns(src)), src, kind=kind, host=None,
                           image=None)
        if subject is not None:
            stmt = stmt.where(src.c.subject == subject)
            if kind is None:  # through the (kind, subject, ts) index
                stmt = stmt.where(src.c.kind.in_(normalize.SCAN_KINDS))
        stmt = stmt.order_by(src.c.ts, src.c.ingested_at, src.c.id)
        try:
            with self._read() as conn:
                out = [scan_info(r) for r in conn.execute(stmt)]
        except SQLAlchemyError as exc:
            raise self._wrap(exc) from None
        if labels:
            out = [s for s in out if labels_match(s.labels, labels)]
        return out

    def resolve(self, ref: str) -> ScanInfo:
        """A scan by id or unique id prefix (at least 6 characters)."""
        from sqlalchemy import select

        ref = ref.strip().lower()
        if len(ref) < 6:
            raise UsageError(f"scan id {ref!r}: give at least 6 characters")
        if any(c not in "0123456789abcdef" for c in ref):
            raise InputError(f"inventory: no scan {ref!r}")
        # a range the primary key's index answers (LIKE 'x%' needs the C collation)
        stmt = select(*info_columns(scans)).where(
            scans.c.id >= ref, scans.c.id <= ref + "g",
            scans.c.id.like(like(ref) + "%", escape="\\")).limit(2)
        with self._read() as conn:
            found = [scan_info(r) for r in conn.execute(stmt)]
        if not found:
            raise InputError(f"inventory: no scan {ref!r}")
        if len(found) > 1:
            raise UsageError(f"scan id {ref!r} is ambiguous: give more characters")
        return found[0]

    def _body(self, key: str) -> bytes:
        hit = self._bodies.get(key)
        if hit is None:
            hit = self.blobs.get(key)
            self._bodies[key] = hit
            while len(self._bodies) > 64:
                self._bodies.popitem(last=False)
        else:
            self._bodies.move_to_end(key)
        return hit

    def _parts(self, scan_ids: Sequence[str]
               ) -> dict[str, tuple[bytes, bytes, bytes, str | None]]:
        """Each stored scan's parts (envelope, component body, finding body, time stamp):
        what ``normalize.join`` puts together again."""
        from sqlalchemy import select

        from .schema import envelopes

        ids = list(dict.fromkeys(scan_ids))
        heads: dict[str, tuple[str, str | None]] = {}
        envs: dict[str, bytes] = {}
        with self._read() as conn:
            for i in range(0, len(ids), 500):
                # the latest copy first: a latest-only reader never touches history
                got = {r.id: (r.env, r.stamp) for r in conn.execute(select(
                    latest.c.id, latest.c.env, latest.c.stamp).where(
                    latest.c.id.in_(ids[i:i + 500])))}
                rest = [x for x in ids[i:i + 500] if x not in got]
                if rest:
                    got.update({r.id: (r.env, r.stamp) for r in conn.execute(select(
                        scans.c.id, scans.c.env, scans.c.stamp).where(scans.c.id.in_(rest)))})
                heads.update(got)
            keys = sorted({e for e, _ in heads.values()})
            for i in range(0, len(keys), 500):
                envs.update((k, normalize.decompress(bytes(v))) for k, v in conn.execute(
                    select(envelopes.c.id, envelopes.c.data).where(
                        envelopes.c.id.in_(keys[i:i + 500]))))
        out: dict[str, tuple[bytes, bytes, bytes, str | None]] = {}
        for sid, (env_id, stamp) in heads.items():
            env = envs[env_id]
            head = json.loads(env)
            out[sid] = (env, self._body(head["cset"]), self._body(head["fset"]), stamp)
        return out

    def _documents(self, scan_ids: Sequence[str]) -> dict[str, bytes]:
        return {sid: normalize.join(*parts) for sid, parts in self._parts(scan_ids).items()}

    def load(self, scan_ids: Sequence[str]) -> dict[str, ScanResult]:
        """The stored scans, exactly as ingested (the findings of scan time: ``rematch``
        changes what the queries read, not the stored body)."""
        from sqlalchemy.exc import SQLAlchemyError

        try:
            parts = self._parts(scan_ids)
        except SQLAlchemyError as exc:
            raise self._wrap(exc) from None
        # the parsed parts, not the canonical text parsed again: the same values
        return {sid: ScanResult.from_dict(normalize.join_dict(*p)) for sid, p in parts.items()}

    def document(self, scan_id: str) -> bytes:
        """The stored scan's canonical gpusbom JSON (the exact bytes ingested)."""
        docs = self._documents([scan_id])
        if scan_id not in docs:
            raise InputError(f"inventory: no scan {scan_id!r}")
        return docs[scan_id]

    def latest_scans(self, kind: str | None = None) -> list[ScanResult]:
        """The latest scan of every host and image (``kind``: host | image | sbom), rebuilt
        as ``ScanResult``s (everything the scan held: components, devices, probes...)."""
        infos = self.scans(kind=kind, all_scans=False)
        loaded = self.load([s.id for s in infos])
        return [loaded[s.id] for s in infos if s.id in loaded]

    def count_subjects(self, kind: str | None = None) -> int:
        """How many hosts / images (``kind``) the inventory holds: ``latest``'s rows."""
        from sqlalchemy import func, select

        stmt = select(func.count()).select_from(latest)
        if kind is not None:
            stmt = stmt.where(latest.c.kind == kind)
        with self._read() as conn:
            return int(conn.execute(stmt).scalar() or 0)

    def subjects(self, kind: str | None = None, *, limit: int | None = None
                 ) -> list[SubjectInfo]:
        """Every host / image with its latest scan, GPUs, driver and finding counts: read
        from ``latest`` and the sets it references (no history row). ``limit``: the first
        ``limit`` by (kind, subject), read through ``latest``'s primary key."""
        from sqlalchemy import select
        from sqlalchemy.exc import SQLAlchemyError

        if limit is None:
            latest_infos = self.scans(kind=kind, all_scans=False)
        else:
            stmt = select(*info_columns(latest)).order_by(latest.c.kind, latest.c.subject
                                                           ).limit(limit)
            if kind is not None:
                stmt = stmt.where(latest.c.kind == kind)
            try:
                with self._read() as conn:
                    latest_infos = [scan_info(r) for r in conn.execute(stmt)]
            except SQLAlchemyError as exc:
                raise self._wrap(exc) from None
        wanted_ids = [s.id for s in latest_infos]
        ref_cols = select(latest.c.id, latest.c.kind, latest.c.subject, latest.c.n_scans,
                          latest.c.cset, latest.c.fset)
        with self._read() as conn:
            if limit is None:
                refs = {r.id: r for r in conn.execute(ref_cols)}
            else:
                refs = {r.id: r for r in conn.execute(ref_cols.where(
                    latest.c.id.in_(wanted_ids)))}

            def of_sets(table: Any, col: Any) -> Any:
                # each set the latest scans reference read once, mapped onto its scans
                return table.c.set_id.in_(select(col).distinct())

            counts = {(r.kind, r.subject): r.n_scans for r in refs.values()}
            set_gpus: dict[str, list[str]] = {}
            for r in conn.execute(select(devices.c.set_id, devices.c.model,
                                         devices.c.pci_address, devices.c.compute_capability)
                                  .where(of_sets(devices, latest.c.cset))
                                  .order_by(devices.c.set_id, devices.c.idx)):
                bits = ", ".join(x for x in (r.pci_address, r.compute_capability and
                                             f"cc {r.compute_capability}") if x)
                set_gpus.setdefault(r.set_id, []).append(f"{r.model} ({bits})" if bits
                                                         else r.model)
            set_drivers: dict[str, set[str]] = {}
            for r in conn.execute(select(components.c.set_id, components.c.name,
                                         components.c.version).where(
                    of_sets(components, latest.c.cset),
                    components.c.type == ComponentType.DEVICE_DRIVER.value)):
                set_drivers.setdefault(r.set_id, set()).add(f"{r.name} {r.version or '?'}")
            set_sev: dict[str, dict[str, int]] = {}
            for fset, severity, n in conn.execute(
                    select(finding_counts.c.set_id, finding_counts.c.severity,
                           finding_counts.c.n).where(of_sets(finding_counts, latest.c.fset))):
                set_sev.setdefault(fset, {})[severity] = n
        gpus = {sid: set_gpus.get(r.cset, []) for sid, r in refs.items()}
        drivers = {sid: set_drivers.get(r.cset, set()) for sid, r in refs.items()}
        sev = {sid: set_sev.get(r.fset, {}) for sid, r in refs.items()}
        return [SubjectInfo(
            kind=s.kind, subject=s.subject, scans=counts.get((s.kind, s.subject), 1), latest=s,
            gpus=tuple(gpus.get(s.id, ())), driver=", ".join(sorted(drivers.get(s.id, ())))
            or None, findings=sev.get(s.id, {}),
        ) for s in sorted(latest_infos, key=lambda x: (x.kind, x.subject))]

    # ------------------------------------------------------------------ query

    def query(
        self,
        component: str | None = None,
        versions: QueryRange | None = None,
        *,
        host: str | None = None,
        image: str | None = None,
        kind: str | None = None,
        labels: dict[str, str | None] | None = None,
        all_scans: bool = False,
    ) -> list[QueryRow]:
        """Every row of ``query_rows``, as a list."""
        return list(self.query_rows(component, versions, host=host, image=image, kind=kind,
                                    labels=labels, all_scans=all_scans))

    def query_rows(
        self,
        component: str | None = None,
        versions: QueryRange | None = None,
        *,
        host: str | None = None,
        image: str | None = None,
        kind: str | None = None,
        labels: dict[str, str | None] | None = None,
        all_scans: bool = False,
    ) -> Page[QueryRow]:
        """See ``where.query_rows``."""
        from .where import query_rows

        return query_rows(self, component, versions, host=host, image=image, kind=kind,
                          labels=labels, all_scans=all_scans)

    # ------------------------------------------------------------------ affected

    def affected(self, db: Any, advisory: str | None = None, *, include_review: bool = False,
                 all_scans: bool = False, kind: str | None = None) -> list[AffectedRow]:
        """Stored scans re-matched against ``db`` (see ``matching.affected``)."""
        from .matching import affected

        return affected(self, db, advisory, include_review=include_review,
                        all_scans=all_scans, kind=kind)

    def affected_rows(self, db: Any, advisory: str | None = None, *,
                      include_review: bool = False, all_scans: bool = False,
                      kind: str | None = None) -> Page[AffectedRow]:
        """``affected`` as a ``Page`` (see ``matching.affected_rows``)."""
        from .matching import affected_rows

        return affected_rows(self, db, advisory, include_review=include_review,
                             all_scans=all_scans, kind=kind)

    # ------------------------------------------------------------------ drift

    def history(self, subject: str) -> list[ScanInfo]:
        """Every scan of a host or image (by subject, host name or reference), oldest first."""
        from sqlalchemy import and_, or_, select

        # the subject through the (kind, subject, ts) index: every kind named
        stmt = select(*info_columns(scans)).where(or_(
            and_(scans.c.kind.in_(normalize.SCAN_KINDS), scans.c.subject == subject),
            scans.c.hostname == subject,
            scans.c.reference == subject)).order_by(
            scans.c.ts, scans.c.ingested_at, scans.c.id)
        with self._read() as conn:
            return [scan_info(r) for r in conn.execute(stmt)]

    def drift(self, subject: str | None = None, *, from_scan: str | None = None,
              to_scan: str | None = None) -> Drift:
        """What changed on a host or image: components, devices, driver, probe outcomes,
        between its last two scans (or ``from_scan``/``to_scan``, ids or id prefixes)."""
        from .drift import diff

        if from_scan and to_scan:
            old, new = self.resolve(from_scan), self.resolve(to_scan)
        else:
            if not subject:
                raise UsageError("drift: name a host or image (or give --from and --to)")
            hist = self.history(subject)
            if not hist:
                raise InputError(f"inventory: no scans of {subject!r} (see gpusbom inventory "
                                 "hosts / images)")
            if to_scan:
                new = self.resolve(to_scan)
                before = [s for s in hist if (s.ts, s.ingested_at, s.id) <
                          (new.ts, new.ingested_at, new.id)]
                if not before:
                    raise InputError(f"inventory: no scan of {subject!r} before {new.id[:12]}")
                old = before[-1]
            elif from_scan:
                old = self.resolve(from_scan)
                new = hist[-1]
            else:
                if len(hist) < 2:
                    raise InputError(f"inventory: {subject!r} has one scan: nothing to compare")
                old, new = hist[-2], hist[-1]
        docs = self.load([old.id, new.id])
        return Drift(kind=new.kind, subject=new.subject, old=old, new=new,
                     changes=tuple(diff(docs[old.id], docs[new.id])))

    # ------------------------------------------------------------------ rematch, prune

    def rematch(self, db: Any, *, all_scans: bool = False) -> RematchReport:
        """See ``retention.rematch``."""
        from .retention import rematch

        return rematch(self, db, all_scans=all_scans)

    def prune(self, *, keep_days: int | None = None, keep_last: int | None = None,
              now: float | None = None) -> PruneReport:
        """See ``retention.prune``."""
        from .retention import prune

        return prune(self, keep_days=keep_days, keep_last=keep_last, now=now)

    def collect_blobs(self) -> int:
        """See ``retention.collect_blobs``."""
        from .retention import collect_blobs

        return collect_blobs(self)

    # ------------------------------------------------------------------ metrics

    def metrics(self, *, now: float | None = None) -> str:
        """Prometheus text exposition of the latest scan of every host and image."""
        from .metrics import render

        return render(self, now=now)
