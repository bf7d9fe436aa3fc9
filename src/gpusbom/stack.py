"""The GPU stack summary: what a scan holds of CUDA, ROCm, oneAPI, ... at a glance.

Built from fused components: every component a stack collector recognised
lists its products in ``Component.products`` (stack ``cuda``, product ``cudnn``, the
product's own version, which may differ from the package version). A component with
``properties["release"]`` names the stack's release (the CUDA toolkit release
13.0.2, the ROCm release 6.2.0). Disagreements collectors noticed are in
``properties["disagreement"]``.

Display names of stacks and products come from the catalog (``catalog/display.yaml`` and
the rows' ``stack_name`` / ``display``).
"""

from __future__ import annotations

from packaging.version import InvalidVersion, Version

from . import catalog
from .model import Component, StackPart, StackSummary

#: stacks always listed, present or not, in this order; others follow when present
MAJOR_STACKS = ("cuda", "rocm", "oneapi")


def _vkey(v: str) -> tuple[int, object]:
    try:
        return (0, Version(v.split("+")[0].split("-")[0]))
    except InvalidVersion:
        return (1, v)


def _sorted_versions(vs: set[str]) -> list[str]:
    # (0, Version) sorts before (1, str); the two kinds are never compared with each other
    return sorted(vs, key=_vkey)


def summarize(components: list[Component]) -> list[StackSummary]:
    by_stack: dict[str, dict[str, StackPart]] = {}
    releases: dict[str, set[str]] = {}
    notes: dict[str, list[str]] = {}
    versions: dict[tuple[str, str], set[str]] = {}
    for c in components:
        products = c.products
        for prod in products:
            stack, product = prod.stack, prod.name
            parts = by_stack.setdefault(stack, {})
            part = parts.get(product)
            if part is None:
                part = parts[product] = StackPart(
                    product=product, display=catalog.product_display(product)
                )
            if prod.version:
                versions.setdefault((stack, product), set()).add(prod.version)
            if c.bom_ref and c.bom_ref not in part.refs:
                part.refs.append(c.bom_ref)
        if products and c.properties.get("release"):
            releases.setdefault(products[0].stack, set()).add(c.properties["release"])
        if products and c.properties.get("disagreement"):
            notes.setdefault(products[0].stack, []).append(
                f"{c.name}: {c.properties['disagreement']}"
            )
    out: list[StackSummary] = []
    order = list(MAJOR_STACKS) + sorted(s for s in by_stack if s not in MAJOR_STACKS)
    for stack in order:
        parts = by_stack.get(stack, {})
        for (st, product), vs in versions.items():
            if st == stack:
                parts[product].versions = _sorted_versions(vs)
        rel = _sorted_versions(releases.get(stack, set()))
        out.append(
            StackSummary(
                stack=stack,
                display=catalog.stack_display(stack),
                present=bool(parts),
                release=" + ".join(rel) if rel else None,
                parts=sorted(parts.values(), key=lambda p: p.product),
                notes=sorted(set(notes.get(stack, []))),
            )
        )
    return out
