"""Model formats of the model-artifacts collector besides Triton caches and cubins.

* ONNX models (``*.onnx``, up to :data:`MAX_ONNX` bytes read) with EPContext nodes
  (:mod:`gpusbom.artifacts.onnx_epcontext`): one component per node, ``artifact=onnx-epcontext``
  with the EP (``epcontext:source``), its SDK version (``epcontext:sdk-version``: the TensorRT
  version for the TensorRT EP), the target architecture (``epcontext:hardware-architecture``)
  and whether the engine is embedded.
* TensorRT engines (``*.engine``, ``*.plan``, ``*.trt``): tied to the TensorRT version and the
  GPU they were built on, with no public header spec: reported (``artifact=tensorrt-plan``,
  size), never judged statically; ``gpusbom probe --artifact PATH`` deserializes one on the
  real GPU.
* Triton Inference Server model repositories (``config.pbtxt``): the model's name, its
  ``platform`` / ``backend`` (``tensorrt_plan``, ``onnxruntime``, ``python``...).
"""

from __future__ import annotations

import posixpath
import re

from ..artifacts.onnx_epcontext import epcontext_nodes
from ..fsview.spec import PathSpec
from ..fsview.types import EntryKind
from ..model import Component, ComponentType, EvidenceMethod
from .base import VIEW_ERRORS, CollectContext

_READ_ERRORS: tuple[type[Exception], ...] = (ValueError, *VIEW_ERRORS)

__all__ = ["MAX_ONNX", "MODEL_PATHS", "model_components"]

MAX_ONNX = 32 << 20
PLAN_EXT = (".engine", ".plan", ".trt")
MODEL_PATHS = (
    PathSpec("/**/*.onnx", max_size=MAX_ONNX),
    PathSpec("/**/config.pbtxt", max_size=256 << 10),
    *(PathSpec("/**/*" + e, max_size=0) for e in PLAN_EXT),
)
_PBTXT_RX = re.compile(r'^\s*(name|platform|backend)\s*:\s*"([^"\n]{1,128})"', re.M)


def model_components(ctx: CollectContext) -> list[Component]:
    out: list[Component] = []
    for entry in ctx.fs.entries():
        if entry.kind is not EntryKind.FILE:
            continue
        p = entry.path
        if p.endswith(".onnx"):
            out.extend(_onnx(ctx, p, entry.size))
        elif p.endswith(PLAN_EXT):
            out.append(_plan(ctx, p, entry.size))
        elif p.endswith("/config.pbtxt"):
            c = _pbtxt(ctx, p)
            if c is not None:
                out.append(c)
    return out


def _onnx(ctx: CollectContext, path: str, size: int | None) -> list[Component]:
    if size is not None and size > MAX_ONNX:
        ctx.unknown(f"{path}: ONNX model of {size} bytes, larger than the {MAX_ONNX} read: "
                    "EPContext nodes not looked for", path)
        return []
    try:
        nodes = epcontext_nodes(ctx.fs.read_bytes(path))
    except _READ_ERRORS as e:
        ctx.unknown(f"{path}: not a readable ONNX model: {e}", path)
        return []
    out = []
    base = posixpath.basename(path)
    for k, n in enumerate(nodes):
        props = {"artifact": "onnx-epcontext"}
        for key, val in (("epcontext:source", n.source), ("epcontext:sdk-version", n.sdk_version),
                         ("epcontext:hardware-architecture", n.hardware_architecture),
                         ("epcontext:partition", n.partition_name)):
            if val:
                props[key] = val
        if n.embed_mode is not None:
            props["epcontext:embed-mode"] = str(n.embed_mode)
        if n.context_bytes:
            props["epcontext:engine-bytes"] = str(n.context_bytes)
        if n.context_file:
            props["epcontext:engine-file"] = n.context_file
        props["check"] = ("unchecked: an execution provider's compiled engine is tied to its "
                          "SDK and GPU; run gpusbom probe --artifact on the target GPU")
        detail = (f"EPContext node {k + 1} of {len(nodes)}: {n.source or 'EP unknown'} "
                  f"{n.sdk_version or ''} for {n.hardware_architecture or 'arch unknown'}")
        out.append(Component(
            name=f"{base}#{n.partition_name or k}", version=n.sdk_version,
            type=ComponentType.FILE, properties=props, ecosystem="generic",
            evidence=[ctx.evidence(EvidenceMethod.FILENAME.value, path, detail.strip())]))
    return out


def _plan(ctx: CollectContext, path: str, size: int | None) -> Component:
    props = {"artifact": "tensorrt-plan",
             "check": "unchecked: no public TensorRT plan format; run gpusbom probe --artifact "
                      "on the target GPU"}
    if size is not None:
        props["size"] = str(size)
    return Component(name=posixpath.basename(path), version=None, type=ComponentType.FILE,
                     properties=props, ecosystem="generic",
                     evidence=[ctx.evidence(EvidenceMethod.FILENAME.value, path,
                                            "TensorRT engine (by file name)")])


def _pbtxt(ctx: CollectContext, path: str) -> Component | None:
    try:
        text = ctx.fs.read_text(path)
    except _READ_ERRORS as e:
        ctx.unknown(f"{path}: cannot read: {e}", path)
        return None
    found: dict[str, str] = {}
    for key, val in _PBTXT_RX.findall(text):
        found.setdefault(key, val)
    if "platform" not in found and "backend" not in found:
        return None
    model_dir = posixpath.dirname(path)
    props = {"artifact": "triton-model"}
    for key in ("platform", "backend"):
        if key in found:
            props[f"triton-model:{key}"] = found[key]
    try:
        versions = sorted(n for n in ctx.fs.listdir(model_dir) if n.isdigit())
    except VIEW_ERRORS:
        versions = []
    if versions:
        props["triton-model:versions"] = ",".join(versions)
    name = found.get("name") or posixpath.basename(model_dir)
    kind = found.get("platform") or found.get("backend")
    ev = ctx.evidence(EvidenceMethod.FILENAME.value, path, f"Triton model repository: {kind}")
    return Component(name=name, version=None, type=ComponentType.FILE, properties=props,
                     ecosystem="generic", evidence=[ev])
