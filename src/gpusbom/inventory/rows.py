"""Row helpers of the inventory store (``store.Store``): the latest-scan and subject filters
of a select, ``scans`` rows as ``ScanInfo``, and the components a re-match reads, rebuilt
from their rows. Functions of a connection and a statement; no state of their own.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from sqlalchemy import select

from ..model import Component, ComponentType, Evidence, Product
from .schema import components, latest, products, scans
from .types import ScanInfo

__all__ = ["catalog_components", "components_of", "like", "scan_filter", "scan_info",
           "scan_infos"]


def like(pattern: str) -> str:
    """A shell glob as an SQL LIKE pattern (``\\`` escapes)."""
    out = []
    for ch in pattern:
        if ch in "%_\\":
            out.append("\\" + ch)
        elif ch == "*":
            out.append("%")
        elif ch == "?":
            out.append("_")
        else:
            out.append(ch)
    return "".join(out)


def scan_filter(stmt: Any, *, kind: str | None, host: str | None,
                image: str | None, all_scans: bool) -> Any:
    """``stmt`` narrowed to the latest scans (unless ``all_scans``), a kind, host or image
    glob."""
    if not all_scans:
        stmt = stmt.where(scans.c.id.in_(select(latest.c.scan_id)))
    if kind:
        stmt = stmt.where(scans.c.kind == kind)
    if host:
        stmt = stmt.where(scans.c.kind == "host",
                          scans.c.subject.like(like(host), escape="\\"))
    if image:
        stmt = stmt.where(scans.c.kind != "host",
                          scans.c.subject.like(like(image), escape="\\"))
    return stmt


def scan_info(r: Any) -> ScanInfo:
    """A ``scans`` row as a ``ScanInfo``."""
    return ScanInfo(
        id=r.id, kind=r.kind, subject=r.subject, reference=r.reference, ts=r.ts,
        ingested_at=r.ingested_at, digest=r.digest, hostname=r.hostname,
        labels=dict(r.labels or {}), tool_version=r.tool_version,
        advisory_db=r.advisory_db, components=r.components, stack_text=r.stack_text,
    )


def catalog_components(conn: Any, rows: set[str], *, kind: str | None,
                       all_scans: bool) -> set[tuple[str, int]]:
    """(scan id, idx) of the components a catalog row names by package: the catalog's
    names are patterns, so the distinct (ecosystem, name) pairs stored are matched here
    and the matching ones selected by value."""
    from sqlalchemy import tuple_

    from .. import catalog

    prods = [catalog.get(r) for r in sorted(rows)]
    ecos = sorted({e for p in prods for e in p.names})
    if not ecos:
        return set()
    stmt = select(components.c.ecosystem, components.c.name).select_from(
        components.join(scans, scans.c.id == components.c.scan_id)).where(
        components.c.ecosystem.in_(ecos)).distinct()
    stmt = scan_filter(stmt, kind=kind, host=None, image=None, all_scans=all_scans)
    pairs = sorted((e, n) for e, n in conn.execute(stmt)
                   if any(p.matches(e, n) for p in prods))
    out: set[tuple[str, int]] = set()
    for i in range(0, len(pairs), 200):
        stmt = select(components.c.scan_id, components.c.idx).select_from(
            components.join(scans, scans.c.id == components.c.scan_id)).where(
            tuple_(components.c.ecosystem, components.c.name).in_(pairs[i:i + 200]))
        stmt = scan_filter(stmt, kind=kind, host=None, image=None,
                                 all_scans=all_scans)
        out.update((a, b) for a, b in conn.execute(stmt))
    return out


def scan_infos(conn: Any, ids: Iterable[str]) -> Iterator[ScanInfo]:
    """The ``ScanInfo`` of each scan id."""
    ids = sorted(ids)
    for i in range(0, len(ids), 500):
        for r in conn.execute(select(scans).where(scans.c.id.in_(ids[i:i + 500]))):
            yield scan_info(r)


def components_of(conn: Any, keys: set[tuple[str, int]]) -> dict[str, list[Component]]:
    """Components rebuilt from their rows (what the matcher reads: identity, version,
    properties, products, evidence methods)."""
    by_scan: dict[str, set[int]] = {}
    for sid, idx in keys:
        by_scan.setdefault(sid, set()).add(idx)
    out: dict[str, list[Component]] = {}
    sids = sorted(by_scan)
    for i in range(0, len(sids), 200):
        chunk = sids[i:i + 200]
        prods: dict[tuple[str, int], list[Product]] = {}
        # only the wanted positions (a superset across the chunk, filtered below):
        # a host scan holds hundreds of components, an advisory touches a few
        idxs = sorted({i for sid in chunk for i in by_scan[sid]})
        for r in conn.execute(select(products).where(products.c.scan_id.in_(chunk),
                                                     products.c.comp_idx.in_(idxs))
                              .order_by(products.c.scan_id, products.c.comp_idx,
                                        products.c.n)):
            if r.comp_idx in by_scan[r.scan_id]:
                prods.setdefault((r.scan_id, r.comp_idx), []).append(
                    Product(stack=r.stack, name=r.product, version=r.version))
        for r in conn.execute(select(components).where(components.c.scan_id.in_(chunk),
                                                       components.c.idx.in_(idxs))
                              .order_by(components.c.scan_id, components.c.idx)):
            if r.idx not in by_scan[r.scan_id]:
                continue
            methods = [m for m in (r.evidence_methods or "").split(",") if m]
            out.setdefault(r.scan_id, []).append(Component(
                name=r.name, version=r.version, type=ComponentType(r.type), purl=r.purl,
                ecosystem=r.ecosystem, properties=dict(r.properties or {}),
                evidence=[Evidence(collector="inventory", method=m, path=r.location)
                          for m in methods],
                bom_ref=r.ref or f"inventory:{r.scan_id[:12]}:{r.idx}",
                products=prods.get((r.scan_id, r.idx), []),
            ))
    return out
