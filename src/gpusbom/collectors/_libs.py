"""Shared helpers of the OpenCL and Vulkan collectors (and others resolving shared libraries;
not a collector: the leading ``_`` keeps the registry from importing it as one).

- ``LIBRARY_PATHS``: path specs recording every shared library (without content) and the
  ld.so.conf files, so a library name can be resolved inside the image.
- ``library_dirs(ctx)``, ``find_library(ctx, name, dirs, base)``: the dynamic linker's search.
- ``soname_version(path)``, ``package_version(pkg)``, ``package_label(pkg)``: versions.
- ``scan_bytes(ctx, path, rx, limit)``: a bounded regex scan of a file's bytes.
- ``generic_purl(vendor, name, version)``: ``pkg:generic/<vendor>/<name>@<version>``.
- ``IcdDriver``, ``driver_for(drivers, lib, fallback)``, ``icd_component(...)``: one ICD
  (installable client driver) component from the library it loads, its version from (in
  order) the version string the library carries, the file name, the owning package.
- ``IcdRow``, ``icd_row(collector_id)``: a loader's catalog row (``loader``,
  ``icd_products``, ``icd_drivers``): the loader's file and identity, the known drivers.
Nothing in the image is executed.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import BinaryIO

from packageurl import PackageURL

from .. import catalog
from ..catalog import detection
from ..fsview.spec import PathSpec
from ..model import Component, ComponentType, Evidence, EvidenceMethod
from .base import VIEW_ERRORS, CollectContext

__all__ = [
    "LIBRARY_PATHS",
    "IcdDriver",
    "IcdRow",
    "driver_for",
    "find_library",
    "generic_purl",
    "icd_component",
    "icd_row",
    "library_dirs",
    "package_label",
    "package_version",
    "scan_bytes",
    "soname_version",
]

_SMALL = 64 * 1024
_LIB_CONTENT = 64 * 1024 * 1024
_CHUNK = 1 << 20
_OVERLAP = 512

#: record every shared library (without content) so ICDs and loaders can be resolved
LIBRARY_PATHS = (
    PathSpec("/**/*.so", max_size=0),
    PathSpec("/**/*.so.*", max_size=0),
    PathSpec("/etc/ld.so.conf", max_size=_SMALL),
    PathSpec("/etc/ld.so.conf.d/*.conf", max_size=_SMALL),
)

_DEFAULT_DIRS = ("/lib", "/usr/lib", "/lib64", "/usr/lib64", "/usr/local/lib", "/usr/local/lib64")
_TRIPLET_GLOBS = ("/usr/lib/*-linux-gnu*", "/lib/*-linux-gnu*", "/usr/local/lib/*-linux-gnu*")
_SOVER_RX = re.compile(r"\.so\.(\d+(?:\.\d+)*)$")
_EPOCH_RX = re.compile(r"^\d+:")


def _ld_so_conf_dirs(ctx: CollectContext, path: str, depth: int = 0) -> list[str]:
    out: list[str] = []
    if depth > 4:
        return out
    try:
        if not ctx.fs.is_file(path):
            return out
        text = ctx.fs.read_text(path)
    except VIEW_ERRORS as e:  # an unreadable ld.so.conf only narrows the search: say so
        ctx.unknown(f"cannot read {path}: {e}", path)
        return out
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("include"):
            pat = line[len("include") :].strip()
            if not pat.startswith("/"):
                pat = posixpath.join(posixpath.dirname(path), pat)
            for inc in ctx.fs.glob(pat):
                out.extend(_ld_so_conf_dirs(ctx, inc, depth + 1))
        elif line.startswith("/"):
            out.append(line.split("=", 1)[0].rstrip("/") or "/")
    return out


def library_dirs(ctx: CollectContext) -> list[str]:
    """Directories the dynamic linker searches, in order: LD_LIBRARY_PATH (image env),
    ld.so.conf, the default and multiarch directories. Only those present in the image."""
    cand: list[str] = []
    for d in (ctx.target.env.get("LD_LIBRARY_PATH") or "").split(":"):
        if d.startswith("/"):
            cand.append(d.rstrip("/") or "/")
    cand.extend(_ld_so_conf_dirs(ctx, "/etc/ld.so.conf"))
    for g in _TRIPLET_GLOBS:
        cand.extend(ctx.fs.glob(g))
    cand.extend(_DEFAULT_DIRS)
    out: list[str] = []
    seen: set[str] = set()
    for d in cand:
        try:
            real = ctx.fs.realpath(d)
        except VIEW_ERRORS:  # a link loop as a search dir holds no library: skip it
            continue
        if real in seen or not ctx.fs.is_dir(d):
            continue
        seen.add(real)
        out.append(d)
    return out


def find_library(
    ctx: CollectContext, name: str, dirs: list[str] | None = None, base: str | None = None
) -> str | None:
    """Where ``name`` resolves inside the image: an absolute path as is, a relative path with
    a ``/`` against ``base``, a bare file name in the library search directories."""
    name = name.strip()
    if not name:
        return None
    if name.startswith("/"):
        cands = [name]
    elif "/" in name:
        cands = [posixpath.normpath(posixpath.join(base or "/", name))]
    else:
        cands = [posixpath.join(d, name) for d in (dirs if dirs is not None else library_dirs(ctx))]
    for c in cands:
        if ctx.fs.is_file(c):
            return c
    return None


def soname_version(path: str) -> str | None:
    """``1.3.239`` of ``libvulkan.so.1.3.239``; None for an unversioned ``.so``."""
    m = _SOVER_RX.search(posixpath.basename(path))
    return m.group(1) if m else None


def package_version(pkg: Component | None) -> str | None:
    """The upstream version of a package component: no epoch, no Debian/RPM/apk revision."""
    if pkg is None or not pkg.version:
        return None
    v = pkg.version
    if pkg.ecosystem in ("deb", "rpm", "apk"):
        v = _EPOCH_RX.sub("", v)
        if "-" in v:
            v = v.rsplit("-", 1)[0]
    return v or None


def scan_bytes(
    ctx: CollectContext, path: str, rx: re.Pattern[bytes], limit: int = _LIB_CONTENT,
    needle: bytes | None = None,
) -> re.Match[bytes] | None:
    """The first match of ``rx`` in the first ``limit`` bytes of ``path``, read in 1 MiB
    chunks (memory stays bounded); None when absent or the content was not kept.
    ``needle``: bytes every match of ``rx`` contains (its literal start): a chunk without
    them is not searched with the regex (a byte search is ten times faster)."""
    from ..fsview.view import NotCapturedError

    try:
        f = ctx.fs.open(path)
    except (NotCapturedError, FileNotFoundError, IsADirectoryError):
        return None
    with f:
        return scan_stream(f, rx, limit, needle)


def scan_stream(f: BinaryIO, rx: re.Pattern[bytes], limit: int = _LIB_CONTENT,
                needle: bytes | None = None) -> re.Match[bytes] | None:
    """``scan_bytes`` of an open file (a host walk's worker scans what it captured:
    ``host/premake.py``)."""
    tail = b""
    read = 0
    while read < limit:
        chunk = f.read(min(_CHUNK, limit - read))
        if not chunk:
            break
        read += len(chunk)
        if needle is not None and needle not in chunk and \
                needle not in tail + chunk[: len(needle) - 1]:
            # not in tail + chunk: no match there (nor a copy of the chunk made to look)
            tail = chunk[-_OVERLAP:] if len(chunk) >= _OVERLAP else (tail + chunk)[-_OVERLAP:]
            continue
        buf = tail + chunk
        m = rx.search(buf)
        if m is not None:
            return m
        tail = buf[-_OVERLAP:]
    return None


def generic_purl(vendor: str | None, name: str, version: str | None) -> str:
    return PackageURL(
        type="generic", namespace=vendor or None, name=name, version=version
    ).to_string()


def package_label(pkg: Component | None) -> str | None:
    if pkg is None:
        return None
    return f"{pkg.name} {pkg.version}" if pkg.version else pkg.name


# -- ICDs (OpenCL vendors files, Vulkan manifests) --------------------------------------------


@dataclass(frozen=True)
class IcdDriver:
    """What an ICD driver library's file name says about its product."""

    product: str
    vendor: str | None
    supplier: str | None
    #: the file name's version is the product's (NVIDIA: driver version); else an ABI number
    soname_is_version: bool = False
    #: regex on the library bytes giving the product version
    embedded: re.Pattern[bytes] | None = None
    cpe: str | None = None  # CPE vendor:product (catalog.cpe23 adds the version)
    #: the driver's own name when the product is a suite shipping several (Mesa)
    driver: str | None = None


@dataclass(frozen=True)
class IcdRow:
    """What a loader's catalog row declares: its stack and product, its library file, the
    purl namespace and supplier of its component, an implementation other than the
    reference one (its name marks it), and the ICD drivers by library stem."""

    stack: str
    product: str
    file: str
    namespace: str | None
    supplier: str | None
    implementation: str | None
    drivers: dict[str, IcdDriver]

    @property
    def fallback(self) -> str:
        """The product of an ICD whose library name gives none (``vulkan-icd``)."""
        return f"{self.stack}-icd"


def _opt_str(row: catalog.Product, key: str, d: dict[str, object], name: str) -> str | None:
    v = d.get(name)
    if v is not None and not isinstance(v, str):
        raise catalog.CatalogError(f"catalog: {row.id}: {key} {name} must be a string")
    return v


def _icd_drivers(row: catalog.Product) -> dict[str, IcdDriver]:
    prods = detection.mapping(row, "icd_products")
    out: dict[str, IcdDriver] = {}
    for stem, v in detection.mapping(row, "icd_drivers").items():
        if isinstance(v, str):
            product, driver = v, None
        elif isinstance(v, list) and len(v) == 2 and all(isinstance(x, str) for x in v):
            product, driver = v
        else:
            raise catalog.CatalogError(
                f"catalog: {row.id}: icd_drivers {stem} must be a product or [product, driver]")
        spec = prods.get(product)
        if not isinstance(spec, dict):
            raise catalog.CatalogError(f"catalog: {row.id}: icd_products lacks {product}")
        where = f"icd_products {product}"
        emb = _opt_str(row, where, spec, "embedded")
        out[stem] = IcdDriver(
            product, _opt_str(row, where, spec, "vendor"), _opt_str(row, where, spec, "supplier"),
            soname_is_version=bool(spec.get("soname_is_version")),
            embedded=re.compile(emb.encode()) if emb else None,
            cpe=_opt_str(row, where, spec, "cpe"), driver=driver,
        )
    return out


def icd_row(collector_id: str) -> IcdRow:
    """The loader row of the collector's stack (the row whose ``loader`` names its file)."""
    row = next((r for r in detection.collected_by(collector_id) if r.extra.get("loader")), None)
    if row is None:  # a packaging bug: the shipped catalog has the row (tests load it)
        raise RuntimeError(f"catalog: no loader row for {collector_id}")
    ld = detection.mapping(row, "loader")
    file = _opt_str(row, "loader", ld, "file")
    if not file:
        raise catalog.CatalogError(f"catalog: {row.id}: loader needs a file")
    return IcdRow(row.stack, row.product_id, file, _opt_str(row, "loader", ld, "namespace"),
                  _opt_str(row, "loader", ld, "supplier"),
                  _opt_str(row, "loader", ld, "implementation"), _icd_drivers(row))


def lib_stem(name: str) -> str:
    """``libvulkan_lvp`` of ``/usr/lib/libvulkan_lvp.so.1``."""
    base = posixpath.basename(name)
    i = base.find(".so")
    return base[:i] if i > 0 else base


def driver_for(drivers: dict[str, IcdDriver], lib_name: str, fallback: str) -> IcdDriver:
    """The known driver of a library name, else one named after the library (``fallback``
    when the name gives none), with no vendor."""
    stem = lib_stem(lib_name)
    d = drivers.get(stem)
    if d is not None:
        return d
    product = stem[3:] if stem.startswith("lib") and len(stem) > 3 else stem
    return IcdDriver(product.lower() or fallback, None, None)


def icd_component(
    ctx: CollectContext,
    drv: IcdDriver,
    found: str | None,
    props: dict[str, str],
    evidence: list[Evidence],
    icd_owner: Component | None,
    icd_file: str,
    limit: int = _LIB_CONTENT,
) -> Component:
    """The component of one ICD whose library resolved to ``found`` (None: the image lacks
    it). ``props`` and ``evidence`` hold what the ICD file said; ``icd_owner`` is the package
    owning the ICD file, ``icd_file`` how a version from it is described (``"ICD file"``:
    ``version-source`` ``package of the ICD file``); ``limit`` bounds the byte scan."""
    version: str | None = None
    how: str | None = None
    evidence = list(evidence)
    from_icd = f"package of the {icd_file}"
    if found is None:
        props["icd-library-missing"] = "true"
        # the ICD's own package names the driver's release (pocl-opencl-icd 3.1-3)
        if icd_owner is not None and drv.vendor is not None and not drv.soname_is_version:
            version, how = package_version(icd_owner), from_icd
    else:
        real = ctx.fs.realpath(found)
        props["library"] = real
        props["location"] = posixpath.dirname(real)
        sover = soname_version(real)
        if sover:
            props["soname-version"] = sover
        lib_owner = ctx.owner(real)
        if lib_owner is not None:
            props["library-package"] = package_label(lib_owner) or ""
        if drv.embedded is not None:
            m = scan_bytes(ctx, real, drv.embedded, limit)
            if m is not None:
                version, how = m.group(1).decode("ascii", "replace"), "embedded"
                evidence.append(
                    ctx.evidence(
                        EvidenceMethod.ELF.value, real, m.group(0).decode("ascii", "replace")
                    )
                )
        if version is None and drv.soname_is_version and sover:
            version, how = sover, "soname"
        if version is None and lib_owner is not None:
            version, how = package_version(lib_owner), "package"
        if version is None and icd_owner is not None and drv.vendor is not None:
            version, how = package_version(icd_owner), from_icd
        if version is None and drv.vendor is None and sover and sover.count(".") >= 2:
            version, how = sover, "soname"
        evidence.append(
            ctx.evidence(
                EvidenceMethod.SONAME.value if sover else EvidenceMethod.FILENAME.value,
                real,
                posixpath.basename(real),
            )
        )
    if how:
        props["version-source"] = how
    return Component(
        name=drv.product,
        version=version,
        type=ComponentType.LIBRARY,
        purl=generic_purl(drv.vendor, drv.product, version),
        cpe=catalog.cpe23(drv.cpe, version) if drv.cpe and version else None,
        supplier=drv.supplier,
        properties=props,
        evidence=evidence,
        ecosystem="generic",
    )
