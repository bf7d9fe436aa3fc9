"""nvidia-container-toolkit: the NVIDIA Container Toolkit, from its files.

Products (stack ``nvidia-container-toolkit``):

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

from ..catalog import packages
from ..fsview.spec import PathSpec
from ..model import Component, ComponentType, EvidenceMethod
from . import register
from ._gpu import Observations, is_regular, parse_soname
from .base import CollectContext, Collector

__all__ = ["PACKAGES", "NvidiaContainerToolkitCollector"]

#: distribution package -> product (catalog/packages.yaml)
PACKAGES = packages.names_of("nvidia-container-toolkit", "distro")
BINARIES = {
    "nvidia-ctk": "nvidia-container-toolkit",
    "nvidia-container-runtime": "nvidia-container-toolkit",
    "nvidia-container-runtime-hook": "nvidia-container-toolkit",
    "nvidia-cdi-hook": "nvidia-container-toolkit",
    "nvidia-container-cli": "libnvidia-container",
}
CONFIG = "/etc/nvidia-container-runtime/config.toml"
_BIN_DIRS = ("/usr/bin", "/usr/local/bin", "/usr/sbin")


@register
class NvidiaContainerToolkitCollector(Collector):
    id = "nvidia-container-toolkit"
    version = "1"
    phase = 2
    paths = (
        *(PathSpec(f"{d}/{b}", max_size=0) for d in _BIN_DIRS for b in BINARIES),
        PathSpec(CONFIG, max_size=0),
        PathSpec("/**/libnvidia-container.so*", max_size=0),
        PathSpec("/**/libnvidia-container-go.so*", max_size=0),
    )

    def collect(self, ctx: CollectContext) -> Iterable[Component]:
        fs = ctx.fs
        obs = Observations("nvidia-container-toolkit")
        obs.cpe_products["nvidia-container-toolkit"] = "container_toolkit"
        found: list[tuple[str, str, str]] = []  # (product, path, method)
        for d in _BIN_DIRS:
            for b, product in BINARIES.items():
                p = f"{d}/{b}"
                if fs.is_file(p):
                    found.append((product, fs.realpath(p), EvidenceMethod.FILENAME.value))
        if fs.is_file(CONFIG):
            found.append(("nvidia-container-toolkit", CONFIG, EvidenceMethod.FILENAME.value))
        for stem in ("libnvidia-container", "libnvidia-container-go"):
            for p in fs.glob(f"/**/{stem}.so*"):
                so = parse_soname(p)
                if so and so.stem == stem and is_regular(fs, p):
                    found.append(("libnvidia-container", p, EvidenceMethod.SONAME.value))
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
                if product == "nvidia-container-toolkit"
                else ComponentType.LIBRARY
            )
            obs.add(product, "", ev, version=version, priority=3, source="soname", ctype=ctype)
        return obs.build()
