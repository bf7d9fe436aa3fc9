"""intel-gpu: Intel's GPU compute runtime (NEO), its graphics compiler and gmmlib.

Stack ``intel-gpu``; products and sources:

- ``intel-compute-runtime``: the OpenCL driver ``.../intel-opencl/libigdrcl.so`` (legacy
  variant ``libigdrcl_legacy1.so``) that ``/etc/OpenCL/vendors/intel.icd``
  (``intel_legacy1.icd``) names. The file name carries no version: it comes from the
  owning package (``intel-opencl-icd`` 22.43.24595.41-1 -> 22.43.24595.41), else unknown.
- ``ocloc``: the offline compiler, ``/usr/bin/ocloc`` or ``ocloc-YY.WW.BUILD.HOTFIX``
  (Intel's packages put the compute-runtime release in the file name).
- ``igc``: the Intel Graphics Compiler, ``libigc.so.1.*`` / ``libigc.so.2.*`` (and its
  OpenCL front end ``libigdfcl.so.*``). The file version (``1.0.1``) is an ABI version,
  not IGC's release (1.0.12504.6): the version comes from the owning package.
- ``gmmlib``: ``libigdgmm.so.12.*``; again the file version (12.3.0) is the ABI, the
  release (22.3.3) comes from the owning package.

Every component keeps what its file name says in ``file-version``; evidence details say
when a version came from a package. The files, and the products they are, come from the
stack's catalog rows (the fields are listed where this module reads them).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable

from ..catalog import Product, detection
from ..fsview.spec import PathSpec
from ..model import Component, ComponentType, EvidenceMethod
from . import register
from ._amd_intel import (
    INTEL,
    LIB_DIRS,
    lib_specs,
    observation,
    owned_version,
    real_files,
    soname_version,
)
from .base import VIEW_ERRORS, CollectContext, Collector

__all__ = ["IntelGpuCollector"]

STACK = "intel-gpu"
ICD_DIR = "/etc/OpenCL/vendors"
BIN_DIRS = ("/usr/bin", "/usr/local/bin")
_RELEASE_SUFFIX = r"(?:-(\d+\.\d+\.\d+(?:\.\d+)?))?$"


def _product(row: Product) -> str:
    return row.found_as[1]


#: the stack's rows name what this collector reads (``products.yaml``):
#: ``icd_libraries``: OpenCL drivers (``<subdir>/<stem>`` under a library directory) whose
#: file name carries no version (the owning package's); a stem's ``_<variant>`` suffix is
#: the ``variant`` property; ``icd_files``: the ICD files in ``ICD_DIR`` that name them
ICD_LIBS = detection.row_map(STACK, "icd_libraries")
ICD_FILES = detection.listed(STACK, "icd_files")
#: ``versioned_bins``: executables that are products of their own name, whose vendor
#: packages put the release in the file name (``NAME-YY.WW.BUILD.HOTFIX``)
BINS = detection.listed(STACK, "versioned_bins")
_BIN_RX = {b: re.compile("^" + re.escape(b) + _RELEASE_SUFFIX) for b in BINS}
#: soname stem -> product: the rows' ``libraries``, whose file versions are ABI versions
#: (the release comes from the owning package)
ABI_LIBS = {stem: _product(r) for stem, r in detection.row_map(STACK, "libraries").items()}


def _icd_globs() -> list[str]:
    return [f"{d}/{lib}.so*" for d in LIB_DIRS for lib in ICD_LIBS]


def _icd_lib(name: str) -> tuple[str, Product]:
    """The ``icd_libraries`` entry a file name is (the longest stem it starts with)."""
    lib = max((x for x in ICD_LIBS if name.startswith(posixpath.basename(x) + ".so")), key=len)
    return lib, ICD_LIBS[lib]


@register
class IntelGpuCollector(Collector):
    id = "intel-gpu"
    version = "1"
    paths = (
        *(PathSpec(g, max_size=0) for g in _icd_globs()),
        *(PathSpec(f"{ICD_DIR}/{name}", max_size=64 * 1024) for name in ICD_FILES),
        *lib_specs(ABI_LIBS),
        *(PathSpec(f"{d}/{b}*", max_size=0) for d in BIN_DIRS for b in BINS),
    )

    def collect(self, ctx: CollectContext) -> Iterable[Component]:
        icds = self._icds(ctx)
        out: list[Component] = []
        for path in real_files(ctx, _icd_globs()):
            out.append(self._neo(ctx, path, icds))
        for path in real_files(ctx, [f"{d}/{b}*" for d in BIN_DIRS for b in BINS]):
            comp = self._ocloc(ctx, path)
            if comp is not None:
                out.append(comp)
        for stem, product in ABI_LIBS.items():
            for path in real_files(ctx, [f"{d}/{stem}.so*" for d in LIB_DIRS]):
                out.append(self._abi_lib(ctx, path, stem, product))
        return out

    def _icds(self, ctx: CollectContext) -> dict[str, tuple[str, str]]:
        """library path or bare name -> (icd file, line)"""
        out: dict[str, tuple[str, str]] = {}
        for name in ICD_FILES:
            icd = f"{ICD_DIR}/{name}"
            if not ctx.fs.is_file(icd):
                continue
            try:
                line = ctx.fs.read_text(icd).strip().splitlines()
            except (OSError, LookupError) as e:
                ctx.unknown(f"cannot read OpenCL ICD file: {e}", icd)
                continue
            if line and line[0].strip():
                out.setdefault(line[0].strip(), (icd, line[0].strip()))
        return out

    def _neo(self, ctx: CollectContext, path: str, icds: dict[str, tuple[str, str]]) -> Component:
        owned = owned_version(ctx, path)
        name = posixpath.basename(path)
        detail = name + (f"; {owned.detail}" if owned else "")
        evidence = [ctx.evidence(EvidenceMethod.FILENAME.value, path, detail)]
        lib, row = _icd_lib(name)
        props: dict[str, str] = {}
        variant = posixpath.basename(lib).partition("_")[2]
        if variant:
            props["variant"] = variant
        for key, (icd, line) in sorted(icds.items()):
            try:
                real = ctx.fs.realpath(key) if key.startswith("/") else None
            except VIEW_ERRORS as e:  # a loop in an ICD target: that ICD names no file
                ctx.unknown(f"OpenCL ICD target {key}: {e}", key)
                real = None
            if real == path or (not key.startswith("/") and key == name):
                evidence.append(
                    ctx.evidence(EvidenceMethod.FILENAME.value, icd, f"OpenCL ICD names {line}")
                )
        return observation(
            ctx,
            product=_product(row),
            version=owned.version if owned else None,
            vendor=INTEL,
            stack=STACK,
            location=posixpath.dirname(path),
            evidence=evidence,
            properties=props,
        )

    def _ocloc(self, ctx: CollectContext, path: str) -> Component | None:
        name = posixpath.basename(path)
        hit = next(((b, m) for b, rx in _BIN_RX.items() if (m := rx.match(name))), None)
        if hit is None:
            return None
        product, m = hit
        owned = owned_version(ctx, path)
        if m.group(1):
            version: str | None = m.group(1)
            detail = f"{name}: compute-runtime {version}"
        else:
            version = owned.version if owned else None
            detail = name + (f"; {owned.detail}" if owned else "")
        return observation(
            ctx,
            product=product,
            version=version,
            vendor=INTEL,
            stack=STACK,
            location=posixpath.dirname(path),
            evidence=[ctx.evidence(EvidenceMethod.FILENAME.value, path, detail)],
            type=ComponentType.APPLICATION,
        )

    def _abi_lib(self, ctx: CollectContext, path: str, stem: str, product: str) -> Component:
        fv = soname_version(path, stem)
        owned = owned_version(ctx, path)
        name = posixpath.basename(path)
        detail = name + (f"; {owned.detail}" if owned else "")
        props = {"file-version": fv} if fv else {}
        return observation(
            ctx,
            product=product,
            version=owned.version if owned else None,
            vendor=INTEL,
            stack=STACK,
            location=posixpath.dirname(path),
            evidence=[ctx.evidence(EvidenceMethod.SONAME.value, path, detail)],
            properties=props,
        )
