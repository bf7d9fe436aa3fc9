"""nvidia-driver: NVIDIA driver user-space libraries inside an image.

- ``libcuda.so.<ver>``, ``libnvidia-ml.so.<ver>``, ``libnvidia-ptxjitcompiler.so.<ver>``
  (regular files whose suffix is the driver version, e.g. ``580.95.05``): one component per
  library and directory, named ``libcuda`` / ``libnvidia-ml`` / ``libnvidia-ptxjitcompiler``,
  version = the driver version, stack ``nvidia-driver``.
- Forward-compat libraries under ``/usr/local/cuda*/compat/``: ONE component per compat
  directory, name ``cuda-compat``, version = the driver version of its ``libcuda.so.<ver>``,
  with ``require-cuda`` and ``driver-branches`` from ``NVIDIA_REQUIRE_CUDA`` (the driver
  branches the image declares its compat libraries support).

Guards: link stubs (``*/stubs/libcuda.so``) and unversioned or major-only names
(``libcuda.so``, ``libcuda.so.1``) are never a driver.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..fsview.spec import PathSpec
from ..model import Component, ComponentType, EvidenceMethod
from . import register
from ._gpu import Observations, is_bundled, is_regular, is_stub, parse_require_cuda, parse_soname
from .base import CollectContext, Collector

__all__ = ["NvidiaDriverCollector"]

DRIVER_LIBS = ("libcuda", "libnvidia-ml", "libnvidia-ptxjitcompiler")
# what else a compat directory holds (evidence on cuda-compat only)
COMPAT_LIBS = DRIVER_LIBS + (
    "libnvidia-nvvm",
    "libcudadebugger",
    "libnvidia-gpucomp",
    "libnvidia-pkcs11",
    "libnvidia-pkcs11-openssl3",
)
_COMPAT_RX = re.compile(r"^/usr/local/cuda[^/]*/compat$")
_DRIVER_VERSION_RX = re.compile(r"^\d{3,}\.\d+(?:\.\d+)?$")


@register
class NvidiaDriverCollector(Collector):
    id = "nvidia-driver"
    version = "1"
    phase = 2
    paths = tuple(PathSpec(f"/**/{lib}.so*", max_size=0) for lib in COMPAT_LIBS)

    def collect(self, ctx: CollectContext) -> Iterable[Component]:
        fs = ctx.fs
        obs = Observations("nvidia-driver")
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
                prio = 3 if lib == "libcuda" else 1
                obs.add(
                    "cuda-compat", d, ev, version=so.version, priority=prio, source="soname " + name
                )
            elif lib in DRIVER_LIBS:
                obs.add(lib, d, ev, version=so.version, priority=3, source="soname " + name)
        require = (ctx.target.env or {}).get("NVIDIA_REQUIRE_CUDA", "").strip()
        if require and compat_dirs:
            rq = parse_require_cuda(require)
            for d in compat_dirs:
                o = obs.add(
                    "cuda-compat",
                    d,
                    ctx.evidence(EvidenceMethod.ENV.value, None, f"NVIDIA_REQUIRE_CUDA={require}"),
                )
                if rq.cuda:
                    o.properties["require-cuda"] = rq.cuda
                if rq.branches:
                    o.properties["driver-branches"] = rq.branches_text
        out = obs.build()
        for c in out:
            c.type = ComponentType.LIBRARY
        return out
