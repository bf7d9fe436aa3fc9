"""``Store.affected``: the stored scans re-matched against the current advisory database,
each distinct component content matched once."""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

from ..errors import UsageError
from ..model import Component
from . import normalize
from .rows import catalog_components, components_of, scan_filter, source
from .schema import components, products
from .types import AffectedRow, Page

if TYPE_CHECKING:
    from .store import Store

__all__ = ["affected", "affected_rows"]


class _Scan(NamedTuple):
    kind: str
    subject: str
    id: str
    ts: str
    labels: dict[str, str]


def _match_key(c: Component) -> tuple[Any, ...]:
    """Everything of a component the advisory matcher reads: all but its bom-ref."""
    return (c.name, c.version, c.type.value, c.purl, c.ecosystem,
            json.dumps(c.properties, sort_keys=True, default=str),
            tuple((e.method, e.path) for e in c.evidence),
            tuple((p.stack, p.name, p.version) for p in c.products))


def affected_rows(
    store: Store,
    db: Any,
    advisory: str | None = None,
    *,
    include_review: bool = False,
    all_scans: bool = False,
    kind: str | None = None,
) -> Page[AffectedRow]:
    """Stored scans re-matched against ``db`` (an ``AdvisoryDB``: the current one,
    not the one of scan time), nothing rescanned. ``advisory``: one advisory id or
    CVE; else every advisory.

    Each distinct component set is read and matched once and its findings expanded to the
    scans that hold it only as rows are taken: the ``Page`` knows its total (findings per
    set x scans per set) and its subjects without building a row, and yields its rows
    sorted by (advisory, vulnerability, kind, subject, component, installed version, scan
    id) through a merge of one sorted stream per (set, finding)."""
    from sqlalchemy import Text, and_, cast, or_, select, tuple_
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
        return Page([], 0, frozenset())
    src = source(all_scans)
    # the sets the question reads (latest: one row per host and image; a fleet holds a
    # few distinct sets), and the (set, position) of the components an advisory names
    in_sets = scan_filter(select(src.c.cset).distinct(), src, kind=kind, host=None,
                          image=None)
    wanted: set[tuple[str, int]] = set()
    try:
        with store._read() as conn:
            conds = []
            if stack_keys:
                conds.append(tuple_(products.c.stack, products.c.product).in_(
                    sorted(stack_keys)))
            if stack_any:
                conds.append(products.c.stack.in_(sorted(stack_any)))
            if conds:
                wanted.update((a, b) for a, b in conn.execute(
                    select(products.c.set_id, products.c.comp_idx).where(
                        or_(*conds), products.c.set_id.in_(in_sets))))
            if pkg_keys:
                wanted.update((a, b) for a, b in conn.execute(
                    select(components.c.set_id, components.c.idx).where(
                        or_(*(and_(components.c.ecosystem == e, components.c.name_key == n)
                              for e, n in sorted(pkg_keys))),
                        components.c.set_id.in_(in_sets))))
            if catalog_rows:
                wanted.update(catalog_components(conn, catalog_rows, in_sets))
            by_set: dict[str, set[int]] = {}
            for cset, idx in wanted:
                by_set.setdefault(cset, set()).add(idx)
            set_comps = components_of(conn, by_set)
            # the scans of those sets: the few columns a row shows (labels as text,
            # parsed once per distinct text)
            scans_of: dict[str, list[_Scan]] = {}
            labels_of: dict[str | None, dict[str, str]] = {}
            sets = sorted(by_set)
            for i in range(0, len(sets), 500):
                stmt = scan_filter(select(src.c.id, src.c.kind, src.c.subject, src.c.ts,
                                          cast(src.c.labels, Text), src.c.cset).where(
                    src.c.cset.in_(sets[i:i + 500])), src, kind=kind, host=None, image=None)
                for sid, k, subject, ts, lab, cset in conn.execute(stmt).all():
                    got = labels_of.get(lab)
                    if got is None:
                        got = labels_of[lab] = dict(json.loads(lab) if lab else {})
                    # a scan's rows share its labels (one copy per scan)
                    scans_of.setdefault(cset, []).append(_Scan(k, subject, sid, ts, dict(got)))
    except SQLAlchemyError as exc:
        raise store._wrap(exc) from None
    # sets whose wanted components are alike in everything the matcher reads (and whose
    # scans are of one kind: the evidence rules read it) are matched once
    alike: dict[tuple[Any, ...], list[tuple[str, list[_Scan]]]] = {}
    for cset in sorted(scans_of):
        by_kind: dict[str, list[_Scan]] = {}
        for sc in scans_of[cset]:
            by_kind.setdefault(sc.kind, []).append(sc)
        comps = set_comps.get(cset, [])
        mkey = tuple(_match_key(c) for c in comps)
        for k, group in by_kind.items():
            alike.setdefault((k, *mkey), []).append((cset, group))
    streams: list[tuple[Any, list[_Scan]]] = []
    total = 0
    subjects: set[tuple[str, str]] = set()
    for key, members in alike.items():
        first = set_comps.get(members[0][0], [])
        position = {c.bom_ref: i for i, c in enumerate(first)}
        # the target kind enables the evidence rules (a part the scan looked for and
        # did not find; the kernel module an image does not hold)
        found = [f for f in match(first, db, target_kind=key[0])
                 if f.advisory is not None and (
            f.advisory.status == "affected"
            or (include_review and f.advisory.status == "review"))]
        if not found:
            continue
        group = sorted((sc for _, scs in members for sc in scs),
                       key=lambda sc: (sc.kind, sc.subject, sc.id))
        total += len(found) * len(group)
        if any(f.advisory is not None and f.advisory.status == "affected" for f in found):
            subjects.update((sc.kind, sc.subject) for sc in group)
        for f in found:
            assert f.advisory is not None  # noqa: S101 - type narrowing (filtered above)
            ref = f.components[0] if f.components else None
            # alike sets hold alike components: the name is the same in each
            name = first[position[ref]].name if ref in position else (ref or "?")
            streams.append(((f.advisory.advisory, f.advisory.vulnerability, name,
                             f.advisory.installed_version or "", f), group))

    def rows() -> Iterator[AffectedRow]:
        def stream(head: Any, group: list[_Scan]) -> Iterator[tuple[Any, ...]]:
            adv, vuln, name, inst, f = head
            for sc in group:
                yield (adv, vuln, sc.kind, sc.subject, name, inst, sc.id), sc, f

        for (_adv, _vuln, _kind, _subject, name, _inst, _sid), sc, f in heapq.merge(
                *(stream(h, g) for h, g in streams), key=lambda t: t[0]):
            yield AffectedRow(
                kind=sc.kind, subject=sc.subject, scan_id=sc.id, ts=sc.ts,
                advisory=f.advisory.advisory, vulnerability=f.advisory.vulnerability,
                status=f.advisory.status, severity=f.severity, component=name,
                installed_version=f.advisory.installed_version,
                fixed_version=f.advisory.fixed_version, labels=sc.labels,
            )

    return Page(rows(), total, frozenset(subjects),
                found=any(f.advisory is not None and f.advisory.status == "affected"
                          for (*_, f), _g in streams))


def affected(store: Store, db: Any, advisory: str | None = None, *,
             include_review: bool = False, all_scans: bool = False,
             kind: str | None = None) -> list[AffectedRow]:
    """Every row of ``affected_rows``, as a list."""
    return list(affected_rows(store, db, advisory, include_review=include_review,
                              all_scans=all_scans, kind=kind))
