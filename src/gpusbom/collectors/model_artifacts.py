"""model-artifacts: compiled GPU code that ships as model artifacts, not as libraries.

* **Triton kernel caches** (:mod:`gpusbom.artifacts.triton_cache`): each cached CUDA kernel
  (``<HASH>/<kernel>.cubin`` with its ``<kernel>.json``) is one component of type ``file``
  with ``artifact=triton-kernel-cache``, ``triton:backend``, ``triton:version`` and the SASS
  architecture it was built for (``cuda:sass``), as a per-file
  :class:`~gpusbom.devicecode.DeviceCode` record (kind ``artifact``, format
  ``triton-cache``): ``check`` judges it like any binary. The JSON is read where the cache
  sits in a known place (``.triton/cache``, ``torchinductor_*/triton``, ``triton_cache``);
  elsewhere (``TRITON_CACHE_DIR``) the cubin's own ELF header gives the architecture.
* any other **bare cubin** (``*.cubin``: an ELF file for ``EM_CUDA``) the same way, format
  ``cubin`` (the gpu-binaries stream scanner reads fatbins, not bare cubins).
* **ONNX EPContext nodes**, **TensorRT plans** and **Triton model repositories**:
  :mod:`gpusbom.collectors._model_formats`.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable

from ..artifacts.triton_cache import cubin_header, kernel_meta
from ..devicecode import DeviceCode
from ..fsview.spec import PathSpec
from ..fsview.types import EntryKind
from ..model import Component, ComponentType, EvidenceMethod
from . import register
from ._model_formats import MODEL_PATHS, model_components
from .base import VIEW_ERRORS, CollectContext, Collector

_READ_ERRORS: tuple[type[Exception], ...] = (ValueError, *VIEW_ERRORS)

__all__ = ["ModelArtifacts"]

MAX_CUBIN = 64 << 20
JSON_GLOBS = ("/**/.triton/cache/*/*.json", "/**/torchinductor_*/triton/*/*/*.json",
              "/**/triton_cache/*/*.json")


@register
class ModelArtifacts(Collector):
    id = "model-artifacts"
    version = "1"
    phase = 2
    paths = (PathSpec("/**/*.cubin", max_size=MAX_CUBIN),
             PathSpec("/**/__grp__*.json", max_size=0),
             *(PathSpec(g, max_size=1 << 20) for g in JSON_GLOBS), *MODEL_PATHS)

    def collect(self, ctx: CollectContext) -> Iterable[Component]:
        out: list[Component] = []
        fs = ctx.fs
        for entry in fs.entries():
            if entry.kind is not EntryKind.FILE or not entry.path.endswith(".cubin"):
                continue
            c = self._cubin(ctx, entry.path)
            if c is not None:
                out.append(c)
        out.extend(model_components(ctx))
        return out

    def _cubin(self, ctx: CollectContext, path: str) -> Component | None:
        fs = ctx.fs
        try:
            head = fs.read_bytes(path)[:64]
        except VIEW_ERRORS as e:
            ctx.unknown(f"cannot read {path}: {e}", path)
            return None
        hdr = cubin_header(head)
        if hdr is None:
            return None
        meta = None
        side = path[: -len(".cubin")] + ".json"
        if fs.is_file(side):
            try:
                meta = kernel_meta(fs.read_bytes(side))
            except _READ_ERRORS as e:
                ctx.unknown(f"Triton kernel metadata unreadable: {e}", side)
        grp = any(n.startswith("__grp__") for n in _siblings(ctx, path))
        sm = f"sm_{hdr.sm}" if hdr.sm else ""
        arch = meta.arch if meta and meta.backend == "cuda" and meta.arch else sm
        props = {"artifact": "triton-kernel-cache" if meta or grp else "cubin"}
        if meta:
            props["triton:backend"] = meta.backend
            if meta.triton_version:
                props["triton:version"] = meta.triton_version
        if sm and arch and sm != arch.rstrip("af"):
            ctx.unknown(f"{path}: the cubin is {sm}, its Triton metadata says {arch}", path)
        targets = {"cuda:sass": arch} if arch else {}
        if not arch:
            ctx.unknown(f"{path}: cubin ELF ABI version {hdr.abi_version} (e_flags "
                        f"{hdr.e_flags:#x}): SASS architecture not decoded", path)
        props.update(targets)
        detail = (f"Triton {meta.triton_version or '?'} {meta.backend} kernel {meta.name}"
                  if meta else "cubin") + (f" for {arch}" if arch else "")
        ev = ctx.evidence(EvidenceMethod.ELF.value, path, detail)
        fmt = "triton-cache" if meta or grp else "cubin"
        code = DeviceCode(path=path, targets=targets, kind="artifact" if meta or grp
                          else "code-object", format=fmt, layer=ev.layer, collector=self.id,
                          detail=detail)
        name = meta.name if meta else posixpath.basename(path)[: -len(".cubin")]
        if meta or grp:  # one component per cache entry: the key directory tells them apart
            name = f"{name}@{posixpath.basename(posixpath.dirname(path))[:12]}"
        return Component(name=name, version=None, type=ComponentType.FILE, properties=props,
                         evidence=[ev], ecosystem="generic", device_code=[code])


def _siblings(ctx: CollectContext, path: str) -> list[str]:
    try:
        return ctx.fs.listdir(posixpath.dirname(path))
    except VIEW_ERRORS:
        return []
