"""nvidia-driver: NVIDIA driver user-space libraries inside an image.

- ``libcuda.so.<ver>``, ``libnvidia-ml.so.<ver>``, ``libnvidia-ptxjitcompiler.so.<ver>``
  (regular files whose suffix is the driver version, e.g. ``580.95.05``): one component per
  library and directory, named ``libcuda`` / ``libnvidia-ml`` / ``libnvidia-ptxjitcompiler``,
  version = the driver version, stack ``nvidia-driver``.
- Forward-compat libraries under ``/usr/local/cuda*/compat/``: ONE component per compat
  directory, name ``cuda-compat``, version = the driver version of its ``libcuda.so.<ver>``,
  with ``require-cuda`` and ``driver-branches`` from ``NVIDIA_REQUIRE_CUDA`` (the driver
  branches the image declares its compat libraries support).

The libraries, the compat directory's form and product, and the env var are the catalog
row's (``nvidia-driver``: ``driver_libraries``, ``driver_version``, ``compat``).

Guards: link stubs (``*/stubs/libcuda.so``) and unversioned or major-only names
(``libcuda.so``, ``libcuda.so.1``) are never a driver.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .. import catalog
from ..catalog import detection
from ..fsview.spec import PathSpec
from ..model import Component, ComponentType, EvidenceMethod
from . import register
from ._gpu import Observations, is_bundled, is_regular, is_stub, parse_require_cuda, parse_soname
from .base import CollectContext, Collector

__all__ = ["NvidiaDriverCollector"]

COLLECTOR_ID = "nvidia-driver"


def _row() -> catalog.Product:
    """The stack's row that names the driver's libraries (``driver_libraries``)."""
    row = next((r for r in detection.collected_by(COLLECTOR_ID)
                if r.extra.get("driver_libraries")), None)
    if row is None:  # a packaging bug: the shipped catalog has the row (tests load it)
        raise RuntimeError(f"catalog: no row of {COLLECTOR_ID} names its driver_libraries")
    return row


def _compat_str(key: str) -> str:
    v = _COMPAT.get(key)
    if not isinstance(v, str) or not v:
        raise catalog.CatalogError(f"catalog: {_ROW.id}: compat needs {key} (a string)")
    return v


_ROW = _row()
_COMPAT = detection.mapping(_ROW, "compat")
#: libraries reported one component each (stem = component name)
DRIVER_LIBS = detection.strs(_ROW, "driver_libraries")
#: the forward-compat component, the library whose version it takes first, its env var
COMPAT_PRODUCT = _compat_str("product")
COMPAT_VERSION_FROM = _compat_str("version_from")
COMPAT_ENV = _compat_str("env_require")
_extra = _COMPAT.get("libraries") or []
if not isinstance(_extra, list) or not all(isinstance(x, str) for x in _extra):
    raise catalog.CatalogError(f"catalog: {_ROW.id}: compat libraries must be a list of strings")
# what else a compat directory holds (evidence on the compat component only)
COMPAT_LIBS = DRIVER_LIBS + tuple(_extra)
_COMPAT_RX = re.compile(_compat_str("dir"))
_DRIVER_VERSION = detection.string(_ROW, "driver_version")
if not _DRIVER_VERSION:
    raise catalog.CatalogError(f"catalog: {_ROW.id}: driver_libraries need a driver_version")
_DRIVER_VERSION_RX = re.compile(_DRIVER_VERSION)


@register
class NvidiaDriverCollector(Collector):
    id = COLLECTOR_ID
    version = "1"
    phase = 2
    paths = tuple(PathSpec(f"/**/{lib}.so*", max_size=0) for lib in COMPAT_LIBS)

    def collect(self, ctx: CollectContext) -> Iterable[Component]:
        fs = ctx.fs
        obs = Observations(_ROW.stack)
        compat_dirs: set[str] = set()
        for path in fs.glob("/**/lib*.so.*"):
            so = parse_soname(path)
            if so is None or so.stem not in COMPAT_LIBS or not so.version:
                continue
            lib = so.stem
            if is_stub(path) or is_bundled(path) or not is_regular(fs, path):
                continue
            if not _DRIVER_VERSION_RX.match(so.version):
                continue
            d = path.rsplit("/", 1)[0]
            name = path.rsplit("/", 1)[1]
            ev = ctx.evidence(EvidenceMethod.SONAME.value, path, name)
            if _COMPAT_RX.match(d):
                compat_dirs.add(d)
                prio = 3 if lib == COMPAT_VERSION_FROM else 1
                obs.add(
                    COMPAT_PRODUCT, d, ev, version=so.version, priority=prio, source="soname " + name
                )
            elif lib in DRIVER_LIBS:
                obs.add(lib, d, ev, version=so.version, priority=3, source="soname " + name)
        require = (ctx.target.env or {}).get(COMPAT_ENV, "").strip()
        if require and compat_dirs:
            rq = parse_require_cuda(require)
            for d in compat_dirs:
                o = obs.add(
                    COMPAT_PRODUCT,
                    d,
                    ctx.evidence(EvidenceMethod.ENV.value, None, f"{COMPAT_ENV}={require}"),
                )
                if rq.cuda:
                    o.properties["require-cuda"] = rq.cuda
                if rq.branches:
                    o.properties["driver-branches"] = rq.branches_text
        out = obs.build()
        for c in out:
            c.type = ComponentType.LIBRARY
        return out
