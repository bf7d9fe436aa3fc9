"""Package names of the collector products (``packages.yaml``): which (stack, product) a
distribution package or a wheel is.

Collectors that know a product by its package (the container toolkit's debs, Triton's and
oneAPI's wheels) and ``scan --sbom`` classification (``sbomin/_classify.py``) read this
one table instead of each other's constants. Entries are tried in file order; names are
regular expressions matched in full against the lower-case name (PyPI names canonical). A
product ``{name}`` is the matched name itself (jax's plugins are products of their own).

A product row (``products.yaml``) may carry its own entry, ``collector_packages: {distro:
[...], pypi: [...]}`` (stack and product: the row's ``found_as``); those entries are tried
after the file's, in catalog order.

API::

    from gpusbom.catalog import packages
    packages.product_of("distro", "libnvidia-compute-550")   # ("nvidia-driver", "libcuda")
    packages.names_of("triton", "pypi")                     # {"triton": "triton", ...}
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._resources import read_text
from . import CatalogError, Product, normalise_name, products, shipped_table
from ._patterns import NamePattern

__all__ = ["KINDS", "PackageProduct", "entries", "entry_of", "names_of", "product_of"]

#: name kinds: ``distro`` (deb, rpm, apk package names), ``pypi`` (canonical names)
KINDS = ("distro", "pypi")
#: a product that is the matched package's own (normalised) name
NAME = "{name}"
_LITERAL = re.compile(r"^[a-z0-9][a-z0-9_-]*$")


@dataclass(frozen=True)
class PackageProduct:
    """One entry: the (stack, product) of the package names its patterns match (in full,
    case-sensitively, each compiled on first use: ``NamePattern``)."""

    stack: str
    product: str
    names: Mapping[str, tuple[NamePattern, ...]]
    #: how a collector reads the product's install (``detect``, free-form; the frameworks
    #: collector's readers are keyed by its ``reader``)
    detect: Mapping[str, Any] = field(default_factory=dict)


def _entry(row: Any, n: int) -> PackageProduct:
    if not isinstance(row, dict) or not all(isinstance(row.get(k), str) for k in ("stack", "product")):
        raise CatalogError(f"packages.yaml entry {n}: needs stack and product")
    names: dict[str, tuple[NamePattern, ...]] = {}
    for kind in KINDS:
        pats = row.get(kind) or []
        if not isinstance(pats, list) or not all(isinstance(p, str) for p in pats):
            raise CatalogError(f"packages.yaml entry {n}: {kind} must be a list of strings")
        # compiled when a name could match (the shipped table's patterns: by its tests)
        names[kind] = tuple(NamePattern(p, 0) for p in pats)
    unknown = set(row) - {"stack", "product", "detect", *KINDS}
    if unknown:
        raise CatalogError(f"packages.yaml entry {n}: unknown keys {sorted(unknown)}")
    detect = row.get("detect") or {}
    if not isinstance(detect, dict) or not all(isinstance(k, str) for k in detect):
        raise CatalogError(f"packages.yaml entry {n}: detect must be a mapping")
    return PackageProduct(row["stack"], row["product"], names, detect)


def entries() -> tuple[PackageProduct, ...]:
    return _entries(products())


@functools.lru_cache(maxsize=4)
def _entries(rows: tuple[Product, ...]) -> tuple[PackageProduct, ...]:
    """packages.yaml's entries, then the rows' own (``collector_packages``)."""
    shipped = shipped_table(read_text(__package__, "packages.yaml"), _entries_of)
    own: list[PackageProduct] = []
    for r in rows:
        names = r.extra.get("collector_packages")
        if names is None:
            continue
        if not isinstance(names, dict):
            raise CatalogError(f"catalog: {r.id}: collector_packages must map kinds to names")
        stack, product = r.found_as
        own.append(_entry({"stack": stack, "product": product, **names}, len(own) + 1))
    return shipped + tuple(own)


def _entries_of(data: Any) -> tuple[PackageProduct, ...]:
    if not isinstance(data, list):
        raise CatalogError("packages.yaml: top level must be a list")
    return tuple(_entry(r, i) for i, r in enumerate(data, 1))


@functools.lru_cache(maxsize=16384)
def product_of(kind: str, name: str) -> tuple[str, str] | None:
    """(stack, product) of the first entry whose ``kind`` names match ``name``."""
    hit = entry_of(kind, name)
    return None if hit is None else (hit[0].stack, hit[1])


@functools.lru_cache(maxsize=16384)
def entry_of(kind: str, name: str) -> tuple[PackageProduct, str] | None:
    """The first entry whose ``kind`` names match ``name``, and the product it names."""
    n = normalise_name("pypi" if kind == "pypi" else "distro", name)
    for e in entries():
        if any(p.may_match(n) and p.fullmatch(n) for p in e.names.get(kind, ())):
            return e, n if e.product == NAME else e.product
    return None


def names_of(stack: str, kind: str) -> dict[str, str]:
    """Literal name -> product of one stack's entries (for collectors that need the names
    themselves, e.g. to build path globs); ``CatalogError`` for a pattern."""
    out: dict[str, str] = {}
    for e in entries():
        if e.stack != stack:
            continue
        for rx in e.names.get(kind, ()):
            if not _LITERAL.match(rx.pattern):
                raise CatalogError(f"packages.yaml: {stack} {kind} name {rx.pattern!r} is a pattern")
            out[rx.pattern] = e.product
    return out
