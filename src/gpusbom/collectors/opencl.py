"""opencl: OpenCL ICDs (installable client drivers) and the OpenCL ICD loader.

An OpenCL ICD is registered by a ``/etc/OpenCL/vendors/*.icd`` file holding one
line: the library to load, an absolute path or a bare file name the dynamic
linker finds (``libpocl.so.2.10.0``, ``libnvidia-opencl.so.1``,
``/opt/intel/.../libigdrcl.so``). Each ICD is reported as one component named
after the driver it loads (``pocl``, ``nvidia-opencl``, ``intel-opencl``, ...)
with the library resolved inside the image and its version from, in order:
the version string the library carries (PoCL: ``OpenCL 3.0 PoCL 3.1``), the
owning package, the file name (``libnvidia-opencl.so.580.95.05``). A library
the ICD names but the image lacks is reported too (``icd-library-missing``).

Environment overrides, from the image config: ``OCL_ICD_VENDORS`` (another
vendors directory, or one ``.icd`` file) and ``OCL_ICD_FILENAMES`` (a ``:``
list of libraries, loaded as ICDs without any ``.icd`` file).

The loader and the known drivers are the catalog's loader row (``opencl-icd-loader``:
``loader``, ``icd_products``, ``icd_drivers``). The ICD loader itself (``libOpenCL.so.1``)
is reported as
``opencl-icd-loader``; its file name version (``1.0.0``) is the ABI, not the
loader's release, so the version comes from the owning package when known.

The library search, file-name versions, bounded byte scans and the ICD component
itself come from ``_libs`` (shared with the Vulkan collector; re-exported here). Nothing in the
image is executed.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Iterator

from ..fsview.spec import PathSpec
from ..model import Component, ComponentType, Evidence, EvidenceMethod
from . import register
from ._classify import hits as classifier_hits
from ._classify import paths_for as classifier_paths
from ._libs import (
    LIBRARY_PATHS,
    driver_for,
    find_library,
    generic_purl,
    icd_component,
    icd_row,
    library_dirs,
    package_label,
    package_version,
    scan_bytes,
    soname_version,
)
from ._libs import IcdDriver as _Driver
from .base import CollectContext, Collector

__all__ = [
    "LIBRARY_PATHS",
    "OpenCLCollector",
    "find_library",
    "generic_purl",
    "library_dirs",
    "package_version",
    "scan_bytes",
    "soname_version",
]

VENDORS_DIR = "/etc/OpenCL/vendors"
_SMALL = 64 * 1024
_LIB_CONTENT = 64 * 1024 * 1024

# -- OpenCL ---------------------------------------------------------------------------------


COLLECTOR_ID = "opencl"
#: the loader's row (``opencl-icd-loader``): its file, identity and the drivers by library stem
_ROW = icd_row(COLLECTOR_ID)
_DRIVERS: dict[str, _Driver] = _ROW.drivers
_LOADER = _ROW.file
#: libraries whose bytes a driver's version is read from (PoCL's ``libpocl.so*``)
_SCANNED = tuple(stem for stem, d in _DRIVERS.items() if d.embedded is not None)


def _driver_for(lib_name: str) -> _Driver:
    return driver_for(_DRIVERS, lib_name, _ROW.fallback)


@register
class OpenCLCollector(Collector):
    id = COLLECTOR_ID
    version = "2"
    paths = (
        *classifier_paths([_ROW.product]),
        PathSpec(VENDORS_DIR + "/*.icd", max_size=_SMALL),
        PathSpec("/**/*.icd", max_size=_SMALL),  # OCL_ICD_VENDORS may name another directory
        *(PathSpec(f"/**/{stem}.so*", max_size=_LIB_CONTENT) for stem in _SCANNED),
        *LIBRARY_PATHS,
    )

    def collect(self, ctx: CollectContext) -> Iterable[Component]:
        env = ctx.target.env
        dirs = library_dirs(ctx)
        out: list[Component] = []
        vendors_env = (env.get("OCL_ICD_VENDORS") or "").strip()
        icd_files: list[tuple[str, str | None]] = []  # (icd file, env override text)
        if vendors_env:
            note = f"OCL_ICD_VENDORS={vendors_env}"
            target = (
                vendors_env
                if vendors_env.startswith("/")
                else posixpath.join(VENDORS_DIR, vendors_env)
            )
            if ctx.fs.is_dir(target):
                icd_files += [(p, note) for p in ctx.fs.glob(target.rstrip("/") + "/*.icd")]
            elif ctx.fs.is_file(target):
                icd_files.append((target, note))
        for p in ctx.fs.glob(VENDORS_DIR + "/*.icd"):
            if all(p != q for q, _ in icd_files):
                icd_files.append((p, None))
        for icd, override in icd_files:
            comp = self._from_icd(ctx, icd, dirs, override, vendors_env)
            if comp is not None:
                out.append(comp)
        files_env = (env.get("OCL_ICD_FILENAMES") or "").strip()
        for lib in (x.strip() for x in files_env.split(":")):
            if lib:
                out.append(
                    self._icd_component(
                        ctx,
                        lib,
                        find_library(ctx, lib, dirs),
                        dirs,
                        [
                            ctx.evidence(
                                EvidenceMethod.ENV.value, None, f"OCL_ICD_FILENAMES={files_env}"
                            )
                        ],
                        {"icd-source": "OCL_ICD_FILENAMES"},
                    )
                )
        out.extend(self._loaders(ctx, dirs))
        return out

    # -- ICDs ----------------------------------------------------------------------------------

    def _from_icd(
        self, ctx: CollectContext, icd: str, dirs: list[str], override: str | None, vendors_env: str
    ) -> Component | None:
        try:
            text = ctx.fs.read_text(icd)
        except Exception as e:  # noqa: BLE001 - a bad file is an unknown naming it
            ctx.unknown(f"cannot read OpenCL ICD file: {e}", icd)
            return None
        lines = [ln.strip() for ln in text.replace("\0", "").splitlines() if ln.strip()]
        if not lines:
            ctx.unknown("empty OpenCL ICD file", icd)
            return None
        lib = lines[0]
        props = {"icd": icd, "icd-source": "OCL_ICD_VENDORS" if override else VENDORS_DIR}
        if override is None and vendors_env:
            props["overridden-by"] = f"OCL_ICD_VENDORS={vendors_env}"
        ev = [
            ctx.evidence(
                EvidenceMethod.FILENAME.value, icd, f"ICD {posixpath.basename(icd)}: {lib}"
            )
        ]
        if override:
            ev.append(ctx.evidence(EvidenceMethod.ENV.value, None, override))
        pkg = ctx.owner(icd)
        if pkg is not None:
            props["icd-package"] = package_label(pkg) or ""
        return self._icd_component(
            ctx,
            lib,
            find_library(ctx, lib, dirs, posixpath.dirname(icd)),
            dirs,
            ev,
            props,
            icd_owner=pkg,
        )

    def _icd_component(
        self,
        ctx: CollectContext,
        lib: str,
        found: str | None,
        dirs: list[str],
        evidence: list[Evidence],
        props: dict[str, str],
        icd_owner: Component | None = None,
    ) -> Component:
        drv = _driver_for(lib)
        props = {
            "stack": _ROW.stack,
            "product": drv.product,
            "opencl:driver": drv.driver or drv.product,
            "icd-library": lib,
            **props,
        }
        return icd_component(ctx, drv, found, props, evidence, icd_owner, "ICD file")

    # -- the ICD loader ------------------------------------------------------------------------

    def _loaders(self, ctx: CollectContext, dirs: list[str]) -> Iterator[Component]:
        seen: set[str] = set()
        for d in dirs:
            path = posixpath.join(d, _LOADER)
            if not ctx.fs.is_file(path):
                continue
            real = ctx.fs.realpath(path)
            if real in seen:
                continue
            seen.add(real)
            owner = ctx.owner(real)
            version = package_version(owner)
            impl = _ROW.implementation
            props = {
                "stack": _ROW.stack,
                "product": _ROW.product,
                "location": posixpath.dirname(real),
                "library": real,
            }
            sover = soname_version(real)
            if sover:
                props["soname-version"] = sover
            evidence = [ctx.evidence(EvidenceMethod.SONAME.value, real, posixpath.basename(real))]
            for hit in classifier_hits(ctx.fs.analysis(real), real, [_ROW.product]):
                # the implementation's own version string (ocl-icd's): the release when no
                # package says it
                evidence.append(
                    ctx.evidence(hit.method, real, f"{hit.detail} ({hit.row.confidence})")
                )
                if version is None and hit.version:
                    version = hit.version
                    props["version-source"] = hit.method
                    props["version-method"] = hit.method
                    props["version-confidence"] = hit.row.confidence
                    if impl:
                        props["implementation"] = impl
            vendor = _ROW.namespace
            if impl and props.get("implementation") == impl:
                vendor = impl
            if owner is not None:
                props["library-package"] = package_label(owner) or ""
                props["version-source"] = "package"
                if impl and owner.name.startswith(impl):
                    vendor, props["implementation"] = impl, impl
            yield Component(
                name=_ROW.product,
                version=version,
                type=ComponentType.LIBRARY,
                purl=generic_purl(vendor, _ROW.product, version),
                supplier=_ROW.supplier if vendor == _ROW.namespace else None,
                properties=props,
                evidence=evidence,
                ecosystem="generic",
            )
