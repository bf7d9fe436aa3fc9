"""Row helpers of the inventory store (``store.Store``): the latest-scan and subject filters
of a select, ``scans`` rows as ``ScanInfo``, and the components a re-match reads, rebuilt
from their rows. Functions of a connection and a statement; no state of their own.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Iterator
from typing import Any

from ..extras import require

require("inventory")  # one line naming the pip install, not an ImportError of SQLAlchemy

from sqlalchemy import select  # noqa: E402 - after the extra's check

from ..model import Component, ComponentType, Evidence, Product  # noqa: E402
from .schema import components, content_sets, latest, products, scans  # noqa: E402
from .types import ScanInfo  # noqa: E402

__all__ = ["catalog_components", "components_of", "info_columns", "labels_match", "like",
           "scan_filter", "scan_info", "scan_infos", "source"]


def labels_match(labels: dict[str, str], want: dict[str, str | None]) -> bool:
    """Whether ``labels`` has every key of ``want``, each value matching its glob (None:
    any value)."""
    for k, v in want.items():
        if k not in labels:
            return False
        if v is not None and not fnmatch.fnmatchcase(str(labels[k]), v):
            return False
    return True


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


def source(all_scans: bool) -> Any:
    """The table a question reads: ``latest`` (one row per host and image, never history)
    unless ``all_scans``."""
    return scans if all_scans else latest


def scan_filter(stmt: Any, src: Any, *, kind: str | None, host: str | None,
                image: str | None) -> Any:
    """``stmt`` narrowed to a kind, host or image glob (on ``src``: scans or latest)."""
    if kind:
        stmt = stmt.where(src.c.kind == kind)
    if host:
        stmt = stmt.where(src.c.kind == "host",
                          src.c.subject.like(like(host), escape="\\"))
    if image:
        stmt = stmt.where(src.c.kind != "host",
                          src.c.subject.like(like(image), escape="\\"))
    return stmt


def scan_info(r: Any) -> ScanInfo:
    """A ``scans`` row as a ``ScanInfo``."""
    return ScanInfo(
        id=r.id, kind=r.kind, subject=r.subject, reference=r.reference, ts=r.ts,
        ingested_at=r.ingested_at, digest=r.digest, hostname=r.hostname,
        labels=dict(r.labels or {}), tool_version=r.tool_version,
        advisory_db=r.advisory_db, components=r.components, stack_text=r.stack_text,
    )


def catalog_components(conn: Any, rows: set[str], in_sets: Any) -> set[tuple[str, int]]:
    """(set id, idx) of the components a catalog row names by package, in the sets
    ``in_sets`` (a select of set ids): the catalog's names are patterns, so the distinct
    (ecosystem, name) pairs stored (in the component sets: as many as distinct contents,
    not scans) are matched here and the matching ones selected by value."""
    from sqlalchemy import tuple_

    from .. import catalog

    prods = [catalog.get(r) for r in sorted(rows)]
    ecos = sorted({e for p in prods for e in p.names})
    if not ecos:
        return set()
    # each distinct stored name looked up once through the catalog's own matcher (its
    # prefix filter passes over most names with one test)
    stmt = select(components.c.ecosystem, components.c.name).where(
        components.c.ecosystem.in_(ecos), components.c.set_id.in_(in_sets)).distinct()
    pairs = sorted((e, n) for e, n in conn.execute(stmt).all()
                   if any(p.id in rows for p in catalog.by_package(e, n)))
    out: set[tuple[str, int]] = set()
    for i in range(0, len(pairs), 200):
        stmt = select(components.c.set_id, components.c.idx).where(
            tuple_(components.c.ecosystem, components.c.name).in_(pairs[i:i + 200]),
            components.c.set_id.in_(in_sets))
        out.update((a, b) for a, b in conn.execute(stmt))
    return out


def scan_infos(conn: Any, ids: Iterable[str], src: Any = None) -> Iterator[ScanInfo]:
    """The ``ScanInfo`` of each scan id (read from ``src``: scans, or latest)."""
    src = scans if src is None else src
    ids = sorted(ids)
    for i in range(0, len(ids), 500):
        for r in conn.execute(select(*info_columns(src)).where(
                src.c.id.in_(ids[i:i + 500]))):
            yield scan_info(r)


def info_columns(src: Any) -> list[Any]:
    """The columns ``scan_info`` reads; a history row's stack summary is its component
    set's (``latest`` keeps a copy)."""
    cols = [src.c[n] for n in ("id", "kind", "subject", "reference", "ts", "ingested_at",
                               "digest", "hostname", "labels", "tool_version", "advisory_db",
                               "components", "cset", "fset", "month")]
    if "stack_text" in src.c:
        return [*cols, src.c.stack_text]
    return [*cols, select(content_sets.c.stack_text).where(content_sets.c.id == src.c.cset)
            .scalar_subquery().label("stack_text")]


def components_of(conn: Any, keys: dict[str, set[int]]) -> dict[str, list[Component]]:
    """Components rebuilt from their rows (what the matcher reads: identity, version,
    properties, products, evidence methods), by component set id: ``keys`` maps each set
    to the positions wanted."""
    by_set = keys
    out: dict[str, list[Component]] = {}
    sids = sorted(by_set)
    for i in range(0, len(sids), 200):
        chunk = sids[i:i + 200]
        prods: dict[tuple[str, int], list[Product]] = {}
        # only the wanted positions (a superset across the chunk, filtered below):
        # a host scan holds hundreds of components, an advisory touches a few
        idxs = sorted({i for sid in chunk for i in by_set[sid]})
        for r in conn.execute(select(products).where(products.c.set_id.in_(chunk),
                                                     products.c.comp_idx.in_(idxs))
                              .order_by(products.c.set_id, products.c.comp_idx,
                                        products.c.n)):
            if r.comp_idx in by_set[r.set_id]:
                prods.setdefault((r.set_id, r.comp_idx), []).append(
                    Product(stack=r.stack, name=r.product, version=r.version))
        for r in conn.execute(select(components).where(components.c.set_id.in_(chunk),
                                                       components.c.idx.in_(idxs))
                              .order_by(components.c.set_id, components.c.idx)):
            if r.idx not in by_set[r.set_id]:
                continue
            methods = [m for m in (r.evidence_methods or "").split(",") if m]
            out.setdefault(r.set_id, []).append(Component(
                name=r.name, version=r.version, type=ComponentType(r.type), purl=r.purl,
                ecosystem=r.ecosystem, properties=dict(r.properties or {}),
                evidence=[Evidence(collector="inventory", method=m, path=r.location)
                          for m in methods],
                bom_ref=r.ref or f"inventory:{r.set_id[:12]}:{r.idx}",
                products=prods.get((r.set_id, r.idx), []),
            ))
    return out
