"""catalog: products that no collector module knows, found from their catalog row alone.

A catalog row with ``collect: catalog`` (``gpusbom/catalog/products.yaml`` or a
``$GPUSBOM_CATALOG`` file) names its shared libraries (``libraries``: stems such as
``libtoyaccel``) and where its version comes from (``version_sources``, in order:
``soname``, the number after ``.so.`` in the file name; ``package``, the upstream
version of the package that owns the file; default: ``[package, soname]``). Each
library file found in the usual library directories becomes one component of the row's
stack and product (the row's first ``collector`` product, else its id), with a
``pkg:generic/<purl_namespace or vendor>/<product>`` purl. File names only: no content
is read, nothing is executed.

The collector always registers but is active only when some row asks for it (asked when a
scan lists its collectors, so a ``catalog`` setting made after import counts), so a catalog
without such rows changes no SBOM (the collector list is written into every SBOM).
"""

from __future__ import annotations

import hashlib
import posixpath
from collections.abc import Callable, Iterable
from typing import Any

from .. import catalog
from ..model import Component, EvidenceMethod
from . import register
from ._amd_intel import (
    LIB_DIRS,
    Vendor,
    lib_specs,
    observation,
    owned_version,
    real_files,
    soname_version,
)
from .base import CollectContext, Collector

__all__ = ["CatalogLibrariesCollector"]

_SOURCES = ("soname", "package")


def _vendor(row: catalog.Product) -> Vendor:
    ns = row.extra.get("purl_namespace")
    return Vendor(ns if isinstance(ns, str) and ns else row.vendor.lower(), row.vendor)


def _rows_version() -> str:
    """``1+<hash of the rows' libraries>``: the layer-result cache keys on collector
    versions, so other rows (other files to record) must not reuse a cached layer."""
    key = "\n".join(f"{r.id}:{','.join(r.libraries)}" for r in catalog.collected())
    return "1+" + hashlib.sha256(key.encode()).hexdigest()[:8]


class _FromRows:
    """A class attribute made from the catalog's rows when read (the rows in effect then: the
    ``catalog`` setting is read when a scan starts, not when this module is imported)."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self._make = make
        self._for: object = None
        self._value: Any = None

    def __get__(self, obj: object, owner: type) -> Any:
        rows = catalog.products()  # one tuple per catalog in effect (lru_cache)
        if rows is not self._for:
            self._value, self._for = self._make(), rows
        return self._value


class CatalogLibrariesCollector(Collector):
    id = "catalog"
    version = _FromRows(_rows_version)
    paths = _FromRows(lambda: lib_specs(sorted(
        {s for r in catalog.collected() for s in r.libraries})))

    @classmethod
    def active(cls) -> bool:
        return bool(catalog.collected())

    def collect(self, ctx: CollectContext) -> Iterable[Component]:
        out: list[Component] = []
        for row in catalog.collected():
            sources = [s for s in row.version_sources if s in _SOURCES] or ["package", "soname"]
            product = row.product_id
            for stem in row.libraries:
                for path in real_files(ctx, [f"{d}/{stem}.so*" for d in LIB_DIRS]):
                    out.append(self._one(ctx, row, product, stem, path, sources))
        return out

    @staticmethod
    def _one(ctx: CollectContext, row: catalog.Product, product: str, stem: str, path: str,
             sources: list[str]) -> Component:
        name = posixpath.basename(path)
        fv = soname_version(path, stem)
        owned = owned_version(ctx, path)
        version: str | None = None
        detail = name
        for src in sources:
            if src == "soname" and fv:
                version, detail = fv, f"{name}: file version {fv}"
                break
            if src == "package" and owned is not None and owned.version:
                version, detail = owned.version, f"{name}; {owned.detail}"
                break
        props = {"file-version": fv} if fv else {}
        ev = ctx.evidence(EvidenceMethod.SONAME.value, path, f"{detail} (catalog row {row.id})")
        return observation(ctx, product=product, version=version, vendor=_vendor(row),
                           stack=row.stack, location=posixpath.dirname(path), evidence=[ev],
                           properties=props)


register(CatalogLibrariesCollector)
