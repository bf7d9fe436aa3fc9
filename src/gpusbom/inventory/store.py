"""The inventory store: every scan of every host and image, and the questions asked of it.

``Store(url)`` opens (and migrates) the database; ``ingest`` stores one scan in one
transaction; ``query``/``affected``/``drift``/``subjects``/``latest_scans`` answer from
the latest scan of each host and image (``all_scans=True``: from every scan kept).

One module over 500 lines: the one ``Store`` class; each method is one question over the
same schema, connection and retry handling (``_read``, ``_wrap``). The row helpers that need
no store (filters, rows rebuilt as components) are in ``rows.py``.
"""

from __future__ import annotations

import fnmatch
import json
import random
import time
from collections.abc import Sequence
from typing import Any

from ..errors import InputError, UsageError
from ..model import Component, ComponentType, ScanResult
from . import normalize
from .database import InventoryError, describe_error, open_engine
from .ranges import QueryRange
from .rows import (
    catalog_components,
    components_of,
    like,
    scan_filter,
    scan_info,
    scan_infos,
)
from .schema import (
    affected_advisories,
    components,
    devices,
    finding_counts,
    findings,
    latest,
    probes,
    products,
    scan_documents,
    scans,
)
from .types import AffectedRow, Change, Drift, QueryRow, ScanInfo, SubjectInfo

__all__ = ["AffectedRow", "Change", "Drift", "QueryRow", "ScanInfo", "Store", "SubjectInfo"]

_INSERT_ORDER = ("scans", "scan_documents", "components", "products", "devices", "probes",
                 "findings", "finding_counts", "affected_advisories")
_TABLES = {"scans": scans, "scan_documents": scan_documents, "components": components,
           "products": products, "devices": devices, "probes": probes, "findings": findings,
           "finding_counts": finding_counts, "affected_advisories": affected_advisories}


def _labels_match(labels: dict[str, str], want: dict[str, str | None]) -> bool:
    for k, v in want.items():
        if k not in labels:
            return False
        if v is not None and not fnmatch.fnmatchcase(str(labels[k]), v):
            return False
    return True


def _match_key(c: Component) -> tuple[Any, ...]:
    """Everything of a component the advisory matcher reads: all but its bom-ref."""
    return (c.name, c.version, c.type.value, c.purl, c.ecosystem,
            json.dumps(c.properties, sort_keys=True, default=str),
            tuple((e.method, e.path) for e in c.evidence),
            tuple((p.stack, p.name, p.version) for p in c.products))


class Store:
    """An inventory database. ``url``: ``sqlite:///PATH``, a path, ``postgresql://...``,
    or None for the default SQLite file in the user data dir."""

    def __init__(self, url: str | None = None) -> None:
        self.engine, self.url = open_engine(url)
        self.dialect = self.engine.dialect.name

    # ------------------------------------------------------------------ plumbing

    @property
    def display_url(self) -> str:
        return str(self.url.render_as_string(hide_password=True))

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _read(self) -> Any:
        return self.engine.connect()

    def _wrap(self, exc: BaseException) -> InventoryError:
        return describe_error(exc, self.url)

    # ------------------------------------------------------------------ ingest

    def ingest(self, result: ScanResult, *, labels: dict[str, str] | None = None,
               advisory_db: str | None = None) -> tuple[str, bool]:
        """Store ``result`` in one transaction; returns (scan id, created). The same scan
        (same canonical JSON, after ``labels`` are merged into the target's labels) is
        stored once, also when several writers ingest it at the same time."""
        from sqlalchemy.exc import IntegrityError, OperationalError, SQLAlchemyError

        if labels:
            result = ScanResult.from_dict(result.to_dict())
            result.target.labels = {**result.target.labels, **labels}
        data = normalize.canonical_json(result)
        sid = normalize.scan_id_of_bytes(data)
        try:
            if self._exists(sid):
                return sid, False
        except SQLAlchemyError as exc:
            raise self._wrap(exc) from None
        rows = normalize.rows(result, sid, advisory_db=advisory_db)
        rows["scan_documents"] = [{"scan_id": sid, "encoding": "json+zlib",
                                   "data": normalize.compress(data)}]
        attempts = 8
        for attempt in range(attempts):
            try:
                with self.engine.connect().execution_options(gpusbom_write=True) as conn, \
                        conn.begin():
                    if self._exists(sid, conn):
                        return sid, False
                    for name in _INSERT_ORDER:
                        if rows[name]:
                            conn.execute(_TABLES[name].insert(), rows[name])
                    self._advance_latest(conn, rows["scans"][0])
                return sid, True
            except IntegrityError as exc:
                # a concurrent writer stored the same scan first: that is success
                if self._exists(sid):
                    return sid, False
                raise InventoryError(
                    f"inventory database {self.display_url}: cannot store scan of "
                    f"{result.target.reference}: {describe_error(exc, self.url).args[0]}"
                ) from None
            except OperationalError as exc:
                text = str(getattr(exc, "orig", exc))
                transient = ("locked" in text or "deadlock" in text
                             or "could not serialize" in text)
                if transient and attempt < attempts - 1:
                    time.sleep(0.05 * (2 ** attempt) * (1 + random.random()))  # noqa: S311 - retry jitter
                    continue
                raise self._wrap(exc) from None
            except SQLAlchemyError as exc:
                raise self._wrap(exc) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _exists(self, sid: str, conn: Any = None) -> bool:
        from sqlalchemy import select

        stmt = select(scans.c.id).where(scans.c.id == sid)
        if conn is not None:
            return conn.execute(stmt).first() is not None
        with self._read() as c:
            return c.execute(stmt).first() is not None

    def _advance_latest(self, conn: Any, scan: dict[str, Any]) -> None:
        """Make ``scan`` the latest of its subject unless a newer one (by ts, ingested_at,
        id) is there: one upsert, atomic on both databases (PostgreSQL locks the
        conflicting row and re-checks the condition; SQLite writers hold the write lock)."""
        from sqlalchemy import tuple_
        from sqlalchemy.dialects import postgresql, sqlite

        insert: Any = postgresql.insert if self.dialect == "postgresql" else sqlite.insert
        row = {"kind": scan["kind"], "subject": scan["subject"], "scan_id": scan["id"],
               "ts": scan["ts"], "ingested_at": scan["ingested_at"]}
        stmt = insert(latest).values(**row)
        new = stmt.excluded
        conn.execute(stmt.on_conflict_do_update(
            index_elements=[latest.c.kind, latest.c.subject],
            set_={"scan_id": new.scan_id, "ts": new.ts, "ingested_at": new.ingested_at},
            where=tuple_(latest.c.ts, latest.c.ingested_at, latest.c.scan_id)
            < tuple_(new.ts, new.ingested_at, new.scan_id)))

    def rebuild_latest(self) -> None:
        """Recompute the latest scan of every subject from ``scans`` (for bulk loads that
        write rows without ``ingest``, such as the benchmarks)."""
        from sqlalchemy import func, insert, select

        rn = func.row_number().over(
            partition_by=(scans.c.kind, scans.c.subject),
            order_by=(scans.c.ts.desc(), scans.c.ingested_at.desc(), scans.c.id.desc()),
        ).label("rn")
        ranked = select(scans.c.kind, scans.c.subject, scans.c.id, scans.c.ts,
                        scans.c.ingested_at, rn).subquery("ranked")
        with self.engine.connect().execution_options(gpusbom_write=True) as conn, \
                conn.begin():
            conn.execute(latest.delete())
            conn.execute(insert(latest).from_select(
                ["kind", "subject", "scan_id", "ts", "ingested_at"],
                select(ranked.c.kind, ranked.c.subject, ranked.c.id, ranked.c.ts,
                       ranked.c.ingested_at).where(ranked.c.rn == 1)))

    # ------------------------------------------------------------------ scans

    def latest_scan_ids(self) -> Any:
        """A subquery of the ids of the latest scan of every (kind, subject): the
        ``latest`` table ingest keeps (newest by ts, then ingested_at, then id)."""
        from sqlalchemy import select

        return select(latest.c.scan_id)

    def scans(self, *, kind: str | None = None, subject: str | None = None,
              all_scans: bool = True, labels: dict[str, str | None] | None = None
              ) -> list[ScanInfo]:
        """Scans, oldest first (``all_scans=False``: the latest of each subject)."""
        from sqlalchemy import select
        from sqlalchemy.exc import SQLAlchemyError

        stmt = scan_filter(select(scans), kind=kind, host=None, image=None,
                                 all_scans=all_scans)
        if subject is not None:
            stmt = stmt.where(scans.c.subject == subject)
        stmt = stmt.order_by(scans.c.ts, scans.c.ingested_at, scans.c.id)
        try:
            with self._read() as conn:
                out = [scan_info(r) for r in conn.execute(stmt)]
        except SQLAlchemyError as exc:
            raise self._wrap(exc) from None
        if labels:
            out = [s for s in out if _labels_match(s.labels, labels)]
        return out

    def resolve(self, ref: str) -> ScanInfo:
        """A scan by id or unique id prefix (at least 6 characters)."""
        from sqlalchemy import select

        ref = ref.strip().lower()
        if len(ref) < 6:
            raise UsageError(f"scan id {ref!r}: give at least 6 characters")
        stmt = select(scans).where(scans.c.id.like(like(ref) + "%", escape="\\")).limit(2)
        with self._read() as conn:
            found = [scan_info(r) for r in conn.execute(stmt)]
        if not found:
            raise InputError(f"inventory: no scan {ref!r}")
        if len(found) > 1:
            raise UsageError(f"scan id {ref!r} is ambiguous: give more characters")
        return found[0]

    def load(self, scan_ids: Sequence[str]) -> dict[str, ScanResult]:
        """The stored scans, exactly as ingested."""
        from sqlalchemy import select

        out: dict[str, ScanResult] = {}
        ids = list(scan_ids)
        with self._read() as conn:
            for i in range(0, len(ids), 500):
                stmt = select(scan_documents.c.scan_id, scan_documents.c.data).where(
                    scan_documents.c.scan_id.in_(ids[i:i + 500]))
                for sid, data in conn.execute(stmt):
                    out[sid] = ScanResult.from_dict(json.loads(normalize.decompress(data)))
        return out

    def document(self, scan_id: str) -> bytes:
        """The stored scan's canonical gpusbom JSON."""
        from sqlalchemy import select

        with self._read() as conn:
            data = conn.execute(select(scan_documents.c.data).where(
                scan_documents.c.scan_id == scan_id)).scalar_one()
        return normalize.decompress(data)

    def latest_scans(self, kind: str | None = None) -> list[ScanResult]:
        """The latest scan of every host and image (``kind``: host | image | sbom), rebuilt
        as ``ScanResult``s (everything the scan held: components, devices, probes...)."""
        infos = self.scans(kind=kind, all_scans=False)
        loaded = self.load([s.id for s in infos])
        return [loaded[s.id] for s in infos if s.id in loaded]

    def subjects(self, kind: str | None = None) -> list[SubjectInfo]:
        """Every host / image with its latest scan, GPUs, driver and finding counts."""
        from sqlalchemy import func, select

        latest = self.scans(kind=kind, all_scans=False)
        by_id = {s.id: s for s in latest}
        with self._read() as conn:
            counts = {(k, s): n for k, s, n in conn.execute(
                select(scans.c.kind, scans.c.subject, func.count()).group_by(
                    scans.c.kind, scans.c.subject))}
            gpus: dict[str, list[str]] = {}
            drivers: dict[str, set[str]] = {}
            for r in conn.execute(select(devices).where(devices.c.scan_id.in_(
                    self.latest_scan_ids())).order_by(devices.c.scan_id, devices.c.idx)):
                if r.scan_id not in by_id:
                    continue
                bits = ", ".join(x for x in (r.pci_address, r.compute_capability and
                                             f"cc {r.compute_capability}") if x)
                gpus.setdefault(r.scan_id, []).append(f"{r.model} ({bits})" if bits else r.model)
            for r in conn.execute(select(components.c.scan_id, components.c.name,
                                         components.c.version).where(
                    components.c.type == ComponentType.DEVICE_DRIVER.value,
                    components.c.scan_id.in_(self.latest_scan_ids()))):
                if r.scan_id in by_id:
                    drivers.setdefault(r.scan_id, set()).add(f"{r.name} {r.version or '?'}")
            sev: dict[str, dict[str, int]] = {}
            for sid, severity, n in conn.execute(
                    select(findings.c.scan_id, findings.c.severity, func.count()).where(
                        findings.c.scan_id.in_(self.latest_scan_ids())).group_by(
                        findings.c.scan_id, findings.c.severity)):
                sev.setdefault(sid, {})[severity] = n
        return [SubjectInfo(
            kind=s.kind, subject=s.subject, scans=counts.get((s.kind, s.subject), 1), latest=s,
            gpus=tuple(gpus.get(s.id, ())), driver=", ".join(sorted(drivers.get(s.id, ())))
            or None, findings=sev.get(s.id, {}),
        ) for s in sorted(latest, key=lambda x: (x.kind, x.subject))]

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
        """Components by name (package name or GPU product: ``cudnn`` finds the deb, the
        wheel and the bare library), version range, host / image (globs), labels
        (``{"key": "glob"}``, None: the key is present), in the latest scan of each
        subject (``all_scans``: in every scan)."""
        from sqlalchemy import Text, cast, select
        from sqlalchemy.exc import SQLAlchemyError

        # labels as text, parsed once per distinct text: thousands of rows of one fleet
        # carry a handful of label sets
        cols = (scans.c.kind, scans.c.subject, scans.c.id.label("sid"), scans.c.ts,
                cast(scans.c.labels, Text).label("labels"), components.c.idx, components.c.name, components.c.version,
                components.c.type, components.c.ecosystem, components.c.purl,
                components.c.location, components.c.product.label("cprod"))
        found: dict[tuple[str, int], tuple[Any, str | None, str | None, bool]] = {}
        try:
            with self._read() as conn:
                if component:
                    key = normalize.name_key(component)
                    by_product = select(*cols, products.c.product, products.c.version.label(
                        "pver")).select_from(products.join(components, (
                            products.c.scan_id == components.c.scan_id)
                            & (products.c.comp_idx == components.c.idx)).join(
                                scans, scans.c.id == products.c.scan_id)).where(
                        products.c.product == component.strip().lower())
                    by_product = scan_filter(by_product, kind=kind, host=host,
                                                   image=image, all_scans=all_scans)
                    for r in conn.execute(by_product):
                        found.setdefault((r.sid, r.idx), (r, r.product, r.pver, True))
                    by_name = select(*cols).select_from(components.join(
                        scans, scans.c.id == components.c.scan_id)).where(
                        components.c.name_key == key)
                    by_name = scan_filter(by_name, kind=kind, host=host, image=image,
                                                all_scans=all_scans)
                    for r in conn.execute(by_name):
                        found.setdefault((r.sid, r.idx), (r, r.cprod, r.version, False))
                else:
                    stmt = scan_filter(select(*cols).select_from(components.join(
                        scans, scans.c.id == components.c.scan_id)), kind=kind, host=host,
                        image=image, all_scans=all_scans)
                    for r in conn.execute(stmt):
                        found[(r.sid, r.idx)] = (r, r.cprod, r.version, False)
        except SQLAlchemyError as exc:
            raise self._wrap(exc) from None
        out: list[QueryRow] = []
        parsed: dict[str | None, dict[str, str]] = {}
        for r, prod, matched, via_product in found.values():
            lab = parsed.get(r.labels)
            if lab is None:
                lab = parsed[r.labels] = dict(json.loads(r.labels) if r.labels else {})
            lab = dict(lab)
            if labels and not _labels_match(lab, labels):
                continue
            if versions is not None and not versions.contains(matched, r.ecosystem,
                                                              via_product):
                continue
            out.append(QueryRow(
                kind=r.kind, subject=r.subject, scan_id=r.sid, ts=r.ts, component=r.name,
                version=r.version, matched_version=matched, product=prod, type=r.type,
                ecosystem=r.ecosystem, purl=r.purl, location=r.location, labels=lab,
            ))
        out.sort(key=lambda q: (q.kind, q.subject, q.ts, q.component, q.version or "",
                                q.location or ""))
        return out

    # ------------------------------------------------------------------ affected

    def affected(
        self,
        db: Any,
        advisory: str | None = None,
        *,
        include_review: bool = False,
        all_scans: bool = False,
        kind: str | None = None,
    ) -> list[AffectedRow]:
        """Stored scans re-matched against ``db`` (an ``AdvisoryDB``: the current one,
        not the one of scan time), nothing rescanned. ``advisory``: one advisory id or
        CVE; else every advisory."""
        from sqlalchemy import and_, or_, select, tuple_
        from sqlalchemy.exc import SQLAlchemyError

        from ..advisories.db import TARGETS, AdvisoryDB
        from ..advisories.matcher import match

        if advisory is not None:
            adv = db.get(advisory)
            if adv is None:
                raise UsageError(f"no advisory {advisory!r} in the advisory database "
                                 f"({db.source})")
            db = AdvisoryDB([adv], source=db.source, built=db.built)
        pkg_keys: set[tuple[str, str]] = set()
        stack_keys: set[tuple[str, str]] = set()
        stack_any: set[str] = set()
        catalog_rows: set[str] = set()
        for adv in db:
            for vuln in adv.vulnerabilities:
                for a in vuln.affected:
                    for sel in TARGETS.get(a.target, []):
                        if "catalog" in sel:  # any package name the catalog row lists
                            catalog_rows.add(sel["catalog"])
                        elif "ecosystem" in sel:
                            pkg_keys.add((sel["ecosystem"], normalize.name_key(sel["name"])))
                        elif "product" in sel:
                            stack_keys.add((sel["stack"], sel["product"]))
                        else:
                            stack_any.add(sel["stack"])
        if not (pkg_keys or stack_keys or stack_any or catalog_rows):
            return []
        wanted: set[tuple[str, int]] = set()
        try:
            with self._read() as conn:
                conds = []
                if stack_keys:
                    conds.append(tuple_(products.c.stack, products.c.product).in_(
                        sorted(stack_keys)))
                if stack_any:
                    conds.append(products.c.stack.in_(sorted(stack_any)))
                if conds:
                    stmt = select(products.c.scan_id, products.c.comp_idx).select_from(
                        products.join(scans, scans.c.id == products.c.scan_id)).where(or_(*conds))
                    stmt = scan_filter(stmt, kind=kind, host=None, image=None,
                                             all_scans=all_scans)
                    wanted.update((a, b) for a, b in conn.execute(stmt))
                if pkg_keys:
                    stmt = select(components.c.scan_id, components.c.idx).select_from(
                        components.join(scans, scans.c.id == components.c.scan_id)).where(
                        or_(*(and_(components.c.ecosystem == e, components.c.name_key == n)
                              for e, n in sorted(pkg_keys))))
                    stmt = scan_filter(stmt, kind=kind, host=None, image=None,
                                             all_scans=all_scans)
                    wanted.update((a, b) for a, b in conn.execute(stmt))
                if catalog_rows:
                    wanted.update(catalog_components(conn, catalog_rows, kind=kind,
                                                           all_scans=all_scans))
                comps = components_of(conn, wanted)
                infos = {s.id: s for s in scan_infos(conn, {sid for sid, _ in wanted})}
        except SQLAlchemyError as exc:
            raise self._wrap(exc) from None
        # a fleet's scans hold the same few component sets (identical nodes, one image on
        # many hosts): scans whose wanted components are alike in everything the matcher
        # reads are matched once, and the findings mapped onto each scan's own components
        alike: dict[tuple[Any, ...], list[str]] = {}
        for sid, clist in sorted(comps.items()):
            alike.setdefault(tuple(_match_key(c) for c in clist), []).append(sid)
        out: list[AffectedRow] = []
        for sids in alike.values():
            first = comps[sids[0]]
            position = {c.bom_ref: i for i, c in enumerate(first)}
            found = [f for f in match(first, db) if f.advisory is not None and (
                f.advisory.status == "affected"
                or (include_review and f.advisory.status == "review"))]
            for sid in sids:
                info, clist = infos[sid], comps[sid]
                for f in found:
                    assert f.advisory is not None  # noqa: S101 - type narrowing (filtered above)
                    ref = f.components[0] if f.components else None
                    c = clist[position[ref]] if ref in position else None
                    out.append(AffectedRow(
                        kind=info.kind, subject=info.subject, scan_id=sid, ts=info.ts,
                        advisory=f.advisory.advisory, vulnerability=f.advisory.vulnerability,
                        status=f.advisory.status, severity=f.severity,
                        component=c.name if c else (ref or "?"),
                        installed_version=f.advisory.installed_version,
                        fixed_version=f.advisory.fixed_version, labels=info.labels,
                    ))
        out.sort(key=lambda a: (a.advisory, a.vulnerability, a.kind, a.subject, a.component,
                                a.installed_version or ""))
        return out

    # ------------------------------------------------------------------ drift

    def history(self, subject: str) -> list[ScanInfo]:
        """Every scan of a host or image (by subject, host name or reference), oldest first."""
        from sqlalchemy import or_, select

        stmt = select(scans).where(or_(scans.c.subject == subject, scans.c.hostname == subject,
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

    # ------------------------------------------------------------------ metrics

    def metrics(self, *, now: float | None = None) -> str:
        """Prometheus text exposition of the latest scan of every host and image."""
        from .metrics import render

        return render(self, now=now)
