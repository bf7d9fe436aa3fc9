"""level-zero: the oneAPI Level Zero loader and Intel's Level Zero GPU driver.

- Loader (stack ``level-zero``, product ``level-zero-loader``): ``libze_loader.so.1.X.Y``.
  The file version is the loader's own version upstream, but distributions do not always
  keep it in step (Debian's ``libze1`` 1.8.12 ships ``libze_loader.so.1.8.0``), so the
  owning package's version wins when a package database knows the file; the file
  version stays in ``file-version``.
- GPU driver (stack ``intel-gpu``, product ``level-zero-gpu-driver``):
  ``libze_intel_gpu.so.1.X.BUILD``, built by Intel's compute runtime; BUILD is the third
  number of the compute-runtime release ``YY.WW.BUILD.HOTFIX`` (``compute-runtime-build``).
  The legacy driver for older GPUs (``libze_intel_gpu_legacy1.so.1.X.BUILD``) is
  ``level-zero-gpu-driver-legacy``.

The library stems and their products are the catalog's (``names.yaml``, stacks
``level-zero`` and ``intel-gpu``); the stems whose file version is the product's release
rather than an ABI version are the ``release_sonames`` of the stack's rows.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable

from ..catalog import detection, names
from ..model import Component, EvidenceMethod
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
from .base import CollectContext, Collector

__all__ = ["LevelZeroCollector"]

STACKS = ("level-zero", "intel-gpu")
#: stems whose file name carries the product's release (the rows' ``release_sonames``)
_FILE_IS_VERSION = frozenset(s for st in STACKS for s in detection.listed(st, "release_sonames"))
LIBRARIES = {  # stem -> (product, stack, the file name is the product's version): names.yaml
    stem: (product, stack, stem in _FILE_IS_VERSION)
    for stack in STACKS
    for stem, product in names.libraries(stack).items()
}
LIB_DIRS_L0 = (*LIB_DIRS, "/opt/intel/oneapi/*/lib", "/opt/intel/oneapi/*/*/lib")


@register
class LevelZeroCollector(Collector):
    id = "level-zero"
    version = "1"
    paths = lib_specs(LIBRARIES, LIB_DIRS_L0)

    def collect(self, ctx: CollectContext) -> Iterable[Component]:
        out: list[Component] = []
        for stem, (product, stack, file_is_version) in LIBRARIES.items():
            for path in real_files(ctx, [f"{d}/{stem}.so*" for d in LIB_DIRS_L0]):
                fv = soname_version(path, stem)
                owned = owned_version(ctx, path)
                props: dict[str, str] = {}
                if fv:
                    props["file-version"] = fv
                name = posixpath.basename(path)
                if file_is_version and fv and fv.count(".") == 2:
                    version: str | None = fv
                    props["compute-runtime-build"] = fv.split(".")[2]
                    detail = f"{name}: {product} {fv}"
                elif owned is not None and owned.version:
                    version = owned.version
                    detail = f"{name}; {owned.detail}"
                elif fv and fv.count(".") == 2:
                    version = fv
                    detail = f"{name}: file version {fv}"
                else:
                    version = None
                    detail = name
                if owned is not None and owned.detail not in detail:
                    detail += f"; package {owned.package} {owned.package_version}"
                ev = ctx.evidence(EvidenceMethod.SONAME.value, path, detail)
                out.append(
                    observation(
                        ctx,
                        product=product,
                        version=version,
                        vendor=INTEL,
                        stack=stack,
                        location=posixpath.dirname(path),
                        evidence=[ev],
                        properties=props,
                    )
                )
        return out
