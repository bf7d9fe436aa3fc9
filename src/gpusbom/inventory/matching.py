"""``Store.affected``: the stored scans re-matched against the current advisory database,
each distinct component content matched once."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..model import Component
from . import normalize
from .rows import catalog_components, components_of, scan_filter, scan_infos, source
from .schema import components, products
from .types import AffectedRow

if TYPE_CHECKING:
    from .store import Store

__all__ = ["affected"]


def _match_key(c: Component) -> tuple[Any, ...]:
    """Everything of a component the advisory matcher reads: all but its bom-ref."""
    return (c.name, c.version, c.type.value, c.purl, c.ecosystem,
            json.dumps(c.properties, sort_keys=True, default=str),
            tuple((e.method, e.path) for e in c.evidence),
            tuple((p.stack, p.name, p.version) for p in c.products))


def affected(
    store: Store,
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
    src = source(all_scans)
    # (scan id, component set, position): the sets are matched, each once
    wanted: set[tuple[str, str, int]] = set()
    try:
        with store._read() as conn:
            conds = []
            if stack_keys:
                conds.append(tuple_(products.c.stack, products.c.product).in_(
                    sorted(stack_keys)))
            if stack_any:
                conds.append(products.c.stack.in_(sorted(stack_any)))
            if conds:
                stmt = select(src.c.id, products.c.set_id, products.c.comp_idx) \
                    .select_from(products.join(src, src.c.cset == products.c.set_id)) \
                    .where(or_(*conds))
                stmt = scan_filter(stmt, src, kind=kind, host=None, image=None)
                wanted.update((a, b, c) for a, b, c in conn.execute(stmt))
            if pkg_keys:
                stmt = select(src.c.id, components.c.set_id, components.c.idx) \
                    .select_from(components.join(src, src.c.cset == components.c.set_id)) \
                    .where(or_(*(and_(components.c.ecosystem == e,
                                      components.c.name_key == n)
                                 for e, n in sorted(pkg_keys))))
                stmt = scan_filter(stmt, src, kind=kind, host=None, image=None)
                wanted.update((a, b, c) for a, b, c in conn.execute(stmt))
            if catalog_rows:
                wanted.update(catalog_components(conn, catalog_rows, src, kind=kind))
            by_set: dict[str, set[int]] = {}
            set_of: dict[str, str] = {}
            for sid, cset, idx in wanted:
                by_set.setdefault(cset, set()).add(idx)
                set_of[sid] = cset
            set_comps = components_of(conn, by_set)
            infos = {s.id: s for s in scan_infos(conn, set_of, src)}
    except SQLAlchemyError as exc:
        raise store._wrap(exc) from None
    # a fleet's scans hold the same few component sets (identical nodes, one image on
    # many hosts): scans whose wanted components are alike in everything the matcher
    # reads are matched once, and the findings mapped onto each scan's own components
    comps = {sid: set_comps.get(cset, []) for sid, cset in set_of.items()}
    key_of_set: dict[tuple[str, str], tuple[Any, ...]] = {}
    alike: dict[tuple[Any, ...], list[str]] = {}
    for sid, cset in sorted(set_of.items()):
        k = (infos[sid].kind, cset)
        key = key_of_set.get(k)
        if key is None:
            key = key_of_set[k] = (infos[sid].kind,
                                   *(_match_key(c) for c in set_comps.get(cset, [])))
        alike.setdefault(key, []).append(sid)
    out: list[AffectedRow] = []
    for sids in alike.values():
        first = comps[sids[0]]
        position = {c.bom_ref: i for i, c in enumerate(first)}
        # the target kind enables the evidence rules (a part the scan looked for and
        # did not find; the kernel module an image does not hold)
        found = [f for f in match(first, db, target_kind=infos[sids[0]].kind)
                 if f.advisory is not None and (
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

