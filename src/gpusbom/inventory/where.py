"""``Store.query_rows`` ("where is"): components by name, product and version range, found
and compared once per distinct component set and expanded to the scans holding the set
as rows are taken."""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from . import normalize
from .ranges import QueryRange
from .rows import labels_match, scan_filter, source
from .schema import components, products
from .types import Page, QueryRow

if TYPE_CHECKING:
    from .store import Store

__all__ = ["query_rows"]


def query_rows(
    store: Store,
    component: str | None = None,
    versions: QueryRange | None = None,
    *,
    host: str | None = None,
    image: str | None = None,
    kind: str | None = None,
    labels: dict[str, str | None] | None = None,
    all_scans: bool = False,
) -> Page[QueryRow]:
    """Components by name (package name or GPU product: ``cudnn`` finds the deb, the
    wheel and the bare library), version range, host / image (globs), labels
    (``{"key": "glob"}``, None: the key is present), in the latest scan of each
    subject (``all_scans``: in every scan).

    The components are found and their versions compared once per distinct component
    set, then expanded to the scans holding the set as rows are taken (sorted by
    kind, subject, ts, component, version, location, scan id): the ``Page`` knows
    its total and subjects before a row is built."""
    from sqlalchemy import Text, cast, select
    from sqlalchemy.exc import SQLAlchemyError

    src = source(all_scans)
    in_sets = scan_filter(select(src.c.cset).distinct(), src, kind=kind, host=host,
                          image=image)
    cols = (components.c.set_id, components.c.idx, components.c.name,
            components.c.version, components.c.type, components.c.ecosystem,
            components.c.purl, components.c.location,
            components.c.product.label("cprod"))
    # (set, position) -> (row, product, compared version, found by product)
    found: dict[tuple[str, int], tuple[Any, str | None, str | None, bool]] = {}
    scans_of: dict[str, list[tuple[str, str, str, str, dict[str, str]]]] = {}
    try:
        with store._read() as conn:
            if component:
                key = normalize.name_key(component)
                by_product = select(*cols, products.c.product, products.c.version.label(
                    "pver")).select_from(products.join(components, (
                        products.c.set_id == components.c.set_id)
                        & (products.c.comp_idx == components.c.idx))).where(
                    products.c.product == component.strip().lower(),
                    products.c.set_id.in_(in_sets))
                for r in conn.execute(by_product):
                    found.setdefault((r.set_id, r.idx), (r, r.product, r.pver, True))
                by_name = select(*cols).where(components.c.name_key == key,
                                              components.c.set_id.in_(in_sets))
                for r in conn.execute(by_name):
                    found.setdefault((r.set_id, r.idx), (r, r.cprod, r.version, False))
            else:
                for r in conn.execute(select(*cols).where(
                        components.c.set_id.in_(in_sets))):
                    found[(r.set_id, r.idx)] = (r, r.cprod, r.version, False)
            if versions is not None:
                # a fleet holds a few versions on thousands of hosts: each compared once
                contains: dict[tuple[Any, ...], bool] = {}
                for k, (r, _prod, matched, via_product) in list(found.items()):
                    ck = (matched, r.ecosystem, via_product)
                    if ck not in contains:
                        contains[ck] = bool(versions.contains(matched, r.ecosystem,
                                                              via_product))
                    if not contains[ck]:
                        del found[k]
            sets = sorted({k[0] for k in found})
            parsed: dict[str | None, dict[str, str]] = {}
            for i in range(0, len(sets), 500):
                stmt = scan_filter(select(src.c.kind, src.c.subject, src.c.id, src.c.ts,
                                          cast(src.c.labels, Text), src.c.cset).where(
                    src.c.cset.in_(sets[i:i + 500])), src, kind=kind, host=host,
                    image=image)
                for k, subject, sid, ts, lab, cset in conn.execute(stmt):
                    got = parsed.get(lab)
                    if got is None:
                        got = parsed[lab] = dict(json.loads(lab) if lab else {})
                    if labels and not labels_match(got, labels):
                        continue
                    scans_of.setdefault(cset, []).append((k, subject, sid, ts, got))
    except SQLAlchemyError as exc:
        raise store._wrap(exc) from None
    for group in scans_of.values():
        group.sort(key=lambda x: (x[0], x[1], x[3], x[2]))
    streams = [(v, scans_of[k[0]]) for k, v in found.items() if k[0] in scans_of]
    total = sum(len(g) for _, g in streams)
    subjects = frozenset((x[0], x[1]) for _, g in streams for x in g)

    def stream(item: tuple[Any, str | None, str | None, bool], group: list[Any]
               ) -> Iterator[tuple[tuple[Any, ...], Any, Any]]:
        r = item[0]
        for sc in group:
            yield (sc[0], sc[1], sc[3], r.name, r.version or "", r.location or "",
                   sc[2]), item, sc

    def rows() -> Iterator[QueryRow]:
        for _key, (r, prod, matched, _via), (k, subject, sid, ts, lab) in heapq.merge(
                *(stream(i, g) for i, g in streams), key=lambda t: t[0]):
            yield QueryRow(
                kind=k, subject=subject, scan_id=sid, ts=ts, component=r.name,
                version=r.version, matched_version=matched, product=prod, type=r.type,
                ecosystem=r.ecosystem, purl=r.purl, location=r.location,
                labels=dict(lab))

    return Page(rows(), total, subjects)
