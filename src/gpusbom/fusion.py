"""Evidence fusion: one thing seen several ways becomes one component.

Stack collectors (phase 2) report what they see: a soname, a header, a
version file, an env var. When a package database owns the file behind a
piece of evidence, that evidence (and the GPU meaning: stack, product,
product version) is merged into the package's component, so a deb cuDNN is
one component with its package record, its soname and its header. Evidence
no package owns stays with a stand-alone component (``pkg:generic/...``), and
stand-alone observations of the same product, version and location merge.
Separate copies at different locations stay separate.
"""

from __future__ import annotations

from collections.abc import Callable

from .model import Component, Evidence, Product

_FILE_METHODS_EXCLUDED = {"env", "label", "device", "probe"}

# properties a package keeps as its own when GPU evidence is merged into it
_PRODUCT_KEYS = ("stack", "product", "product-version", "location")


def product_of(c: Component) -> Product | None:
    stack = c.properties.get("stack")
    if not stack:
        return None
    return Product(stack=stack, name=c.properties.get("product") or c.name, version=c.version)


def _add_products(target: Component, products: list[Product]) -> None:
    for p in products:
        if p not in target.products:
            target.products.append(p)
    target.products.sort(key=lambda p: (p.stack, p.name, p.version or ""))
    if len(target.products) > 1:
        target.properties["products"] = ", ".join(
            f"{p.stack}/{p.name}@{p.version or 'unknown'}" for p in target.products
        )


def _file_evidence(ev: Evidence) -> bool:
    return bool(ev.path) and ev.method not in _FILE_METHODS_EXCLUDED


def _merge_into(target: Component, source: Component) -> None:
    prod = product_of(source)
    _add_products(target, source.products or ([prod] if prod else []))
    seen = {(e.collector, e.method, e.path, e.detail) for e in target.evidence}
    for ev in source.evidence:
        key = (ev.collector, ev.method, ev.path, ev.detail)
        if key not in seen:
            target.evidence.append(ev)
            seen.add(key)
    for k, v in source.properties.items():
        if k not in target.properties:
            target.properties[k] = v
        elif target.properties[k] != v and k not in _PRODUCT_KEYS:
            # keep both values visible rather than silently dropping one
            existing = target.properties[k].split(", ")
            if v not in existing:
                target.properties[k] = ", ".join(sorted({*existing, v}))
    if source.ecosystem is None or source.ecosystem == "generic":
        # a package adopting a product: name the product and its version on the package
        target.properties.setdefault("product", source.name)
        if source.version and source.version != target.version:
            target.properties.setdefault("product-version", source.version)
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
            )
            _merge_into(owners[key], part)
        if not rest:
            continue
        obs.evidence = rest
        if not obs.products:
            prod = product_of(obs)
            if prod is not None:
                obs.products.append(prod)
        loc = obs.properties.get("location", "")
        k = (obs.name, obs.version or "", obs.purl or "", loc)
        if k in standalone:
            _merge_into(standalone[k], obs)
        else:
            standalone[k] = obs
            order.append(obs)
    return packages + order
