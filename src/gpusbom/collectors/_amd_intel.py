"""Shared helpers of the AMD (ROCm) and Intel (oneAPI, Level Zero, GPU runtime) collectors.

Not a collector (the leading underscore keeps the registry from importing it as one).
What lives here is what every one of those collectors does the same way: find the real
file behind a soname glob, read a version out of a file name or a C header, ask the
package database which package a file belongs to, and build the stand-alone
observation (``pkg:generic/<vendor>/<product>@<version>``) the conventions in
``docs/CONTRACTS.md`` describe.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass

from packageurl import PackageURL

from ..errors import UnsafeArchiveError
from ..fsview.spec import PathSpec
from ..fsview.types import EntryKind
from ..model import Component, ComponentType, Evidence
from .base import CollectContext

__all__ = [
    "AMD",
    "INTEL",
    "LIB_DIRS",
    "OwnedVersion",
    "Vendor",
    "header_defines",
    "lib_specs",
    "observation",
    "owned_version",
    "real_files",
    "soname_version",
    "upstream_version",
]


@dataclass(frozen=True)
class Vendor:
    """A vendor's purl namespace and supplier name."""

    purl_ns: str  # pkg:generic/<purl_ns>/...
    supplier: str


AMD = Vendor("amd", "Advanced Micro Devices, Inc.")
INTEL = Vendor("intel", "Intel Corporation")

#: where distributions and vendors put shared libraries (ROCm roots are added by the ROCm
#: collector itself); kept explicit so path specs stay specific
LIB_DIRS = (
    "/usr/lib",
    "/usr/lib64",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/local/lib",
    "/usr/local/lib64",
    "/lib",
    "/lib64",
    "/lib/x86_64-linux-gnu",
)

_DEB_REVISION = re.compile(r"-[A-Za-z0-9.+~]+$")
_EPOCH = re.compile(r"^\d+:")
_REPACK = re.compile(r"[+~](?:dfsg|ds)\d*$")  # Debian repack markers, not upstream


def lib_specs(stems: Iterable[str], dirs: Iterable[str] = LIB_DIRS) -> tuple[PathSpec, ...]:
    """Name-only specs (``max_size=0``) for ``<dir>/<stem>.so*`` in every dir: the
    version is in the file name, the content is never read."""
    return tuple(PathSpec(f"{d}/{stem}.so*", max_size=0) for d in dirs for stem in stems)


def real_files(ctx: CollectContext, patterns: Iterable[str]) -> list[str]:
    """Regular files matching any glob; symlinks (``libfoo.so.1 -> libfoo.so.1.2.3``)
    resolve to the file they name, so each library is reported once, where it really is."""
    fs = ctx.fs
    out: set[str] = set()
    for pattern in patterns:
        for path in fs.glob(pattern):
            try:
                real = fs.realpath(path)
                e = fs.lookup(real, follow=False)
            except UnsafeArchiveError:
                continue
            if e is not None and e.kind in (EntryKind.FILE, EntryKind.HARDLINK):
                out.add(real)
    return sorted(out)


def soname_version(path: str, stem: str) -> str | None:
    """``/x/libamdhip64.so.5.2.21153``, ``libamdhip64`` -> ``5.2.21153``; None when the
    file name carries no version (``libigdrcl.so``) or is not ``<stem>.so...``."""
    name = posixpath.basename(path)
    prefix = stem + ".so."
    if not name.startswith(prefix):
        return None
    ver = name[len(prefix) :]
    return ver if re.fullmatch(r"\d+(?:\.\d+)*", ver) else None


def upstream_version(pkg: Component) -> str | None:
    """A package's version without the packaging parts: epoch and Debian revision
    (``1:5.2.3-8`` -> ``5.2.3``), RPM release (``22.43.24595.41-1.el9`` ->
    ``22.43.24595.41``); PyPI and conda versions are upstream versions already."""
    v = pkg.version
    if not v:
        return None
    if pkg.ecosystem in ("deb", "rpm", "apk"):
        v = _EPOCH.sub("", v)
        if "-" in v:
            v = _DEB_REVISION.sub("", v)
        v = _REPACK.sub("", v)
    return v or None


@dataclass(frozen=True)
class OwnedVersion:
    """A product version read from the package that owns its file."""

    package: str
    package_version: str
    version: str | None  # upstream part

    @property
    def detail(self) -> str:
        return f"version from the owning package {self.package} {self.package_version}"


def owned_version(ctx: CollectContext, path: str) -> OwnedVersion | None:
    pkg = ctx.owner(path)
    if pkg is None or not pkg.version:
        return None
    return OwnedVersion(pkg.name, pkg.version, upstream_version(pkg))


def header_defines(text: str, names: Iterable[str]) -> dict[str, str]:
    """``#define NAME value`` lines -> {NAME: value} (value stripped of quotes and comments)."""
    want = set(names)
    out: dict[str, str] = {}
    for m in re.finditer(r"^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+([^\n]*)$", text, re.MULTILINE):
        name = m.group(1)
        if name in want and name not in out:
            val = re.sub(r"/[/*].*$", "", m.group(2)).strip().strip('"').strip()
            out[name] = val
    return out


def observation(
    ctx: CollectContext,
    *,
    product: str,
    version: str | None,
    vendor: Vendor,
    stack: str,
    location: str,
    evidence: list[Evidence],
    properties: dict[str, str] | None = None,
    type: ComponentType = ComponentType.LIBRARY,
) -> Component:
    """One stand-alone observation of ``product`` at ``location`` (fusion may merge it
    into the package that owns its files)."""
    props = {"stack": stack, "product": product, "location": location}
    props.update(properties or {})
    purl = PackageURL(type="generic", namespace=vendor.purl_ns, name=product, version=version)
    return Component(
        name=product,
        version=version,
        type=type,
        purl=purl.to_string(),
        supplier=vendor.supplier,
        properties=props,
        evidence=evidence,
        ecosystem="generic",
    )
