"""ONNX Runtime EPContext nodes: compiled execution-provider code inside an ONNX model.

An EPContext node (op type ``EPContext``, domain ``com.microsoft``; ONNX Runtime's contrib op
schema) carries what an execution provider compiled: ``ep_cache_context`` (the engine bytes
when ``embed_mode`` = 1, else a file name), ``source`` (the EP: ``TensorrtExecutionProvider``,
``NvTensorRTRTXExecutionProvider``, ``QNNExecutionProvider``...), ``ep_sdk_version`` (the SDK
that built it: the TensorRT version), ``hardware_architecture`` (the TensorRT EP writes the
GPU's compute capability) and ``partition_name``.

A minimal protobuf walker reads ``ModelProto.graph`` (field 7) -> ``GraphProto.node`` (1) ->
``NodeProto`` (``op_type`` 4, ``domain`` 7, ``attribute`` 5) -> ``AttributeProto`` (``name`` 1,
``i`` 3, ``s`` 4). Every other field is skipped by its length; nothing is executed, bounded by
the bytes given and :data:`MAX_NODES`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["EpContext", "epcontext_nodes"]

MAX_NODES = 1 << 20
MAX_ATTR = 256


@dataclass(frozen=True)
class EpContext:
    source: str | None = None
    sdk_version: str | None = None
    hardware_architecture: str | None = None
    embed_mode: int | None = None
    partition_name: str | None = None
    context_bytes: int = 0  # size of the embedded ep_cache_context (embed_mode 1)
    context_file: str | None = None  # embed_mode 0: the engine's file name
    attributes: dict[str, str] = field(default_factory=dict)


def _varint(b: bytes, pos: int) -> tuple[int, int]:
    out = shift = 0
    while True:
        if pos >= len(b) or shift > 63:
            raise ValueError("truncated or overlong varint")
        x = b[pos]
        pos += 1
        out |= (x & 0x7F) << shift
        if not x & 0x80:
            return out, pos
        shift += 7


def _fields(b: bytes, start: int = 0, end: int | None = None):  # type: ignore[no-untyped-def]
    """(field number, wire type, value or (offset, length)) of one message."""
    pos, end = start, len(b) if end is None else end
    while pos < end:
        key, pos = _varint(b, pos)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, pos = _varint(b, pos)
            yield num, wt, v
        elif wt == 2:
            n, pos = _varint(b, pos)
            if pos + n > end:
                raise ValueError("length-delimited field runs past its message")
            yield num, wt, (pos, n)
            pos += n
        elif wt == 1:
            pos += 8
        elif wt == 5:
            pos += 4
        else:
            raise ValueError(f"wire type {wt}")
        if pos > end:
            raise ValueError("field runs past its message")


def _text(b: bytes, span: tuple[int, int], cap: int = 256) -> str:
    off, n = span
    return b[off : off + min(n, cap)].decode("utf-8", "replace")


def _node(b: bytes, off: int, n: int) -> EpContext | None:
    op = domain = None
    attrs: list[tuple[int, int]] = []
    for num, wt, v in _fields(b, off, off + n):
        if num == 4 and wt == 2:
            op = _text(b, v)
        elif num == 7 and wt == 2:
            domain = _text(b, v)
        elif num == 5 and wt == 2 and len(attrs) < MAX_ATTR:
            attrs.append(v)
    if op != "EPContext" or domain not in (None, "", "com.microsoft"):
        return None
    vals: dict[str, str] = {}
    ints: dict[str, int] = {}
    ctx_bytes = 0
    for aoff, alen in attrs:
        name = None
        s: tuple[int, int] | None = None
        i: int | None = None
        for num, wt, v in _fields(b, aoff, aoff + alen):
            if num == 1 and wt == 2:
                name = _text(b, v)
            elif num == 4 and wt == 2:
                s = v
            elif num == 3 and wt == 0:
                i = v
        if name is None:
            continue
        if name == "ep_cache_context" and s is not None:
            ctx_bytes = s[1]
            vals[name] = _text(b, s, 4096) if s[1] <= 4096 else ""
        elif s is not None:
            vals[name] = _text(b, s)
        elif i is not None:
            ints[name] = i
    embed = ints.get("embed_mode")
    return EpContext(
        source=vals.get("source"), sdk_version=vals.get("ep_sdk_version"),
        hardware_architecture=vals.get("hardware_architecture"), embed_mode=embed,
        partition_name=vals.get("partition_name"),
        context_bytes=ctx_bytes if embed == 1 else 0,
        context_file=vals.get("ep_cache_context") if embed == 0 else None,
        attributes={k: v for k, v in vals.items() if k != "ep_cache_context"},
    )


def epcontext_nodes(model: bytes) -> list[EpContext]:
    """The EPContext nodes of a serialized ONNX ``ModelProto``; raises ``ValueError`` when the
    bytes are not a well-formed protobuf message."""
    out: list[EpContext] = []
    count = 0
    for num, wt, v in _fields(model):
        if num != 7 or wt != 2:
            continue
        for gnum, gwt, gv in _fields(model, v[0], v[0] + v[1]):
            if gnum == 1 and gwt == 2:
                count += 1
                if count > MAX_NODES:
                    raise ValueError(f"more than {MAX_NODES} nodes")
                node = _node(model, *gv)
                if node is not None:
                    out.append(node)
    return out
