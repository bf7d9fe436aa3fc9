"""nvidia-container-toolkit: the NVIDIA Container Toolkit, from its files.

Products (stack ``nvidia-container-toolkit``; the files of each are the catalog row's
``binaries``, ``config_files`` and ``library_files``):

- ``nvidia-container-toolkit``: ``nvidia-ctk``, ``nvidia-container-runtime``,
  ``nvidia-container-runtime-hook``, ``nvidia-cdi-hook`` and
  ``/etc/nvidia-container-runtime/config.toml``;
- ``libnvidia-container``: ``nvidia-container-cli`` and ``libnvidia-container.so.<ver>``
  (the soname carries the version, e.g. ``libnvidia-container.so.1.17.8``).

Each file is one piece of evidence, so when the package catalogers own those files
(packages ``nvidia-container-toolkit``, ``nvidia-container-toolkit-base``,
``libnvidia-container-tools``, ``libnvidia-container1``) fusion tags each package with the
stack. The version, when no soname gives it, is the owning package's version when it is
one of those packages (``ctx.owner``); else unknown.
"""

from __future__ import annotations

from collections.abc import Iterable

from .. import catalog
from ..catalog import packages
from ..fsview.spec import PathSpec
from ..model import Component, ComponentType, EvidenceMethod
from . import register
from ._gpu import Observations, is_regular, parse_soname
from .base import CollectContext, Collector

__all__ = ["PACKAGES", "NvidiaContainerToolkitCollector"]

STACK = "nvidia-container-toolkit"
#: distribution package -> product (catalog/packages.yaml)
PACKAGES = packages.names_of(STACK, "distro")


def _row() -> catalog.Product:
    """The stack's row that names its files (the catalog's ``binaries``)."""
    row = next((r for r in catalog.products() if r.stack == STACK and r.extra.get("binaries")),
               None)
    if row is None:  # a packaging bug: the shipped catalog has the row (tests load it)
        raise RuntimeError(f"catalog: no row of stack {STACK} names its binaries")
    return row


def _files(key: str) -> dict[str, str]:
    v = _ROW.extra.get(key) or {}
    if not isinstance(v, dict) or not all(isinstance(k, str) and isinstance(x, str)
                                          for k, x in v.items()):
        raise catalog.CatalogError(f"catalog: {_ROW.id}: {key} must map file names to products")
    return dict(v)


_ROW = _row()
#: executable -> product, config file -> product, library stem -> product (the row's)
BINARIES = _files("binaries")
CONFIGS = _files("config_files")
LIBRARIES = _files("library_files")
#: the application among the products (the row's first), and its NVD product id
APPLICATION = _ROW.product_id
CPE_PRODUCT = _ROW.cpe[0].partition(":")[2] if _ROW.cpe else None
_BIN_DIRS = ("/usr/bin", "/usr/local/bin", "/usr/sbin")


@register
class NvidiaContainerToolkitCollector(Collector):
    id = STACK
    version = "1"
    phase = 2
    paths = (
        *(PathSpec(f"{d}/{b}", max_size=0) for d in _BIN_DIRS for b in BINARIES),
        *(PathSpec(c, max_size=0) for c in CONFIGS),
        *(PathSpec(f"/**/{stem}.so*", max_size=0) for stem in LIBRARIES),
    )

    def collect(self, ctx: CollectContext) -> Iterable[Component]:
        fs = ctx.fs
        obs = Observations(STACK)
        if CPE_PRODUCT:
            obs.cpe_products[APPLICATION] = CPE_PRODUCT
        found: list[tuple[str, str, str]] = []  # (product, path, method)
        for d in _BIN_DIRS:
            for b, product in BINARIES.items():
                p = f"{d}/{b}"
                if fs.is_file(p):
                    found.append((product, fs.realpath(p), EvidenceMethod.FILENAME.value))
        for config, product in CONFIGS.items():
            if fs.is_file(config):
                found.append((product, config, EvidenceMethod.FILENAME.value))
        for stem, product in LIBRARIES.items():
            for p in fs.glob(f"/**/{stem}.so*"):
                so = parse_soname(p)
                if so and so.stem == stem and is_regular(fs, p):
                    found.append((product, p, EvidenceMethod.SONAME.value))
        for product, path, method in found:
            so = parse_soname(path) if method == EvidenceMethod.SONAME.value else None
            version = so.version if so else None
            pkg = ctx.owner(path)
            if pkg is not None and pkg.name in PACKAGES and pkg.version:
                pkg_version = pkg.version.split("-")[0]
                obs.add(
                    product, "", None, version=pkg_version, priority=2, source=f"package {pkg.name}"
                )
            ev = ctx.evidence(method, path, path.rsplit("/", 1)[1])
            ctype = (
                ComponentType.APPLICATION
                if product == APPLICATION
                else ComponentType.LIBRARY
            )
            obs.add(product, "", ev, version=version, priority=3, source="soname", ctype=ctype)
        return obs.build()
