"""Evidence fusion: one thing seen several ways becomes one component.

Stack collectors (phase 2) report what they see: a soname, a header, a
version file, an env var. When a package database owns the file behind a
piece of evidence, that evidence (and the GPU meaning: the observation's
``products``) is merged into the package's component, so a deb cuDNN is
one component with its package record, its soname and its header. Evidence
no package owns stays with a stand-alone component (``pkg:generic/...``), and
stand-alone observations of the same product, version and location merge.
Separate copies at different locations stay separate.
"""

from __future__ import annotations

from collections.abc import Callable

from .devicecode import UNION_KEYS, merge, union_values
from .model import Component, Evidence, Product, product_sort_key

__all__ = ["fuse", "product_of", "union_values"]

_FILE_METHODS_EXCLUDED = {"env", "label", "device", "probe"}

# properties a package keeps as its own when GPU evidence is merged into it
_OWN_KEYS = ("location",)
# how a component was identified (gpusbom.identification): never joined, see
# _merge_identification
_IDENT = ("identification-method", "identification-confidence")

# comma-separated sets (what a binary was built for): merged as set unions, so a package
# with several libraries lists all of its targets once (a summary: each file's own targets
# are its ``device_code`` record)
_SET_KEYS = UNION_KEYS


def product_of(c: Component) -> Product | None:
    return c.product


def _add_products(target: Component, products: list[Product]) -> None:
    for p in products:
        if p not in target.products:
            target.products.append(p)
    target.products.sort(key=product_sort_key)


def _file_evidence(ev: Evidence) -> bool:
    return bool(ev.path) and ev.method not in _FILE_METHODS_EXCLUDED


def _merge_identification(target: Component, source: Component) -> None:
    """A GPU observation merged into a package: the package's record identifies the
    package; how the observation's product was identified is kept per product
    (``product-identification``: ``cudnn@9.14.0: header (low)``). Merged into a stand-alone
    component of the same product, the first one's identification stands."""
    method = source.properties.get(_IDENT[0])
    if not method:
        return
    if (target.ecosystem or "generic") == "generic":
        for k in _IDENT:
            if k in source.properties:
                target.properties.setdefault(k, source.properties[k])
        return
    p = source.products[0] if source.products else None
    name = f"{p.name}@{p.version}" if p is not None and p.version else (
        p.name if p is not None else source.name)
    entry = f"{name}: {method} ({source.properties.get(_IDENT[1], 'low')})"
    old = target.properties.get("product-identification")
    entries = set(old.split("; ")) if old else set()
    target.properties["product-identification"] = "; ".join(sorted(entries | {entry}))


def _merge_into(target: Component, source: Component) -> None:
    _add_products(target, source.products)
    seen = {(e.collector, e.method, e.path, e.detail) for e in target.evidence}
    for ev in source.evidence:
        key = (ev.collector, ev.method, ev.path, ev.detail)
        if key not in seen:
            target.evidence.append(ev)
            seen.add(key)
    _merge_identification(target, source)
    for k, v in source.properties.items():
        if k in _IDENT:
            continue
        if k not in target.properties:
            target.properties[k] = v
        elif k in _SET_KEYS:
            target.properties[k] = union_values(target.properties[k], v)
        elif target.properties[k] != v and k not in _OWN_KEYS:
            # keep both values visible rather than silently dropping one
            existing = target.properties[k].split(", ")
            if v not in existing:
                target.properties[k] = ", ".join(sorted({*existing, v}))
    merge(target.device_code, source.device_code)
    if not target.cpe and source.cpe:
        target.cpe = source.cpe
    for dep in source.depends_on:
        if dep not in target.depends_on:
            target.depends_on.append(dep)


def fuse(
    packages: list[Component],
    observations: list[Component],
    owner: Callable[[str], Component | None],
) -> list[Component]:
    """Return ``packages`` (enriched) plus the stand-alone observations, merged."""
    standalone: dict[tuple[str, str, str, str], Component] = {}
    order: list[Component] = []
    package_ids = {id(p) for p in packages}
    for obs in observations:
        by_owner: dict[int, list[Evidence]] = {}
        owners: dict[int, Component] = {}
        rest: list[Evidence] = []
        for ev in obs.evidence:
            pkg = owner(ev.path) if _file_evidence(ev) and ev.path else None
            if pkg is not None and id(pkg) in package_ids:
                by_owner.setdefault(id(pkg), []).append(ev)
                owners[id(pkg)] = pkg
            else:
                rest.append(ev)
        file_rest = [e for e in rest if _file_evidence(e)]
        if by_owner and not file_rest:
            # everything file-based is owned: env/label evidence goes with the first owner
            first = next(iter(by_owner))
            by_owner[first].extend(rest)
            rest = []
        for key, evs in by_owner.items():
            part = Component(
                name=obs.name,
                version=obs.version,
                type=obs.type,
                cpe=obs.cpe,
                supplier=obs.supplier,
                properties=dict(obs.properties),
                evidence=evs,
                depends_on=list(obs.depends_on),
                ecosystem=obs.ecosystem,
                products=list(obs.products),
                device_code=[d for d in obs.device_code
                             if any(e.path == d.path for e in evs)],
            )
            _merge_into(owners[key], part)
        if not rest:
            continue
        if by_owner:
            obs.device_code = [d for d in obs.device_code if any(e.path == d.path for e in rest)]
        obs.evidence = rest
        loc = obs.properties.get("location", "")
        k = (obs.name, obs.version or "", obs.purl or "", loc)
        if k in standalone:
            _merge_into(standalone[k], obs)
        else:
            standalone[k] = obs
            order.append(obs)
    return packages + _adopt_file_facts(order)


def _adopt_file_facts(order: list[Component]) -> list[Component]:
    """Stand-alone observations that name no product (facts about a file, e.g. the GPU
    targets of a library) merge into the stand-alone product observation with evidence on
    the same file, when there is exactly one."""
    by_path: dict[str, list[Component]] = {}
    for c in order:
        # a product linked into a file (a static CUDA runtime) is part of it, not the file
        if product_of(c) is not None and c.properties.get("linkage") != "static":
            for ev in c.evidence:
                if ev.path and _file_evidence(ev):
                    lst = by_path.setdefault(ev.path, [])
                    if c not in lst:
                        lst.append(c)
    if not by_path:
        return order
    out: list[Component] = []
    for c in order:
        if product_of(c) is None and c.evidence:
            paths = {ev.path for ev in c.evidence if ev.path and _file_evidence(ev)}
            hosts = {id(h): h for p in paths for h in by_path.get(p, ())}
            if len(hosts) == 1 and all(p in by_path for p in paths):
                host = next(iter(hosts.values()))
                seen = {(e.collector, e.method, e.path, e.detail) for e in host.evidence}
                for ev in c.evidence:
                    if (ev.collector, ev.method, ev.path, ev.detail) not in seen:
                        host.evidence.append(ev)
                merge(host.device_code, c.device_code)
                for key, v in c.properties.items():
                    if key not in host.properties:
                        host.properties[key] = v
                    elif key in _SET_KEYS:
                        host.properties[key] = union_values(host.properties[key], v)
                continue
        out.append(c)
    return out
