"""``asdict`` for the model's plain dataclasses (:mod:`gpusbom.model`), without the deep copy
of :func:`dataclasses.asdict`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields, is_dataclass
from typing import Any

_LEAVES = frozenset((str, int, float, bool, type(None)))
#: a converter per dataclass, compiled on first use (see ``_converter``)
_CONVERTERS: dict[type, Callable[[Any], dict[str, Any]]] = {}
#: classes seen that are not dataclasses, lists, tuples or dicts (enums): kept as they are
_OPAQUE: set[type] = set()


def _converter(cls: type) -> Callable[[Any], dict[str, Any]]:
    """A function building ``cls``'s dict in one dict display: a field holding a leaf
    (most: strings, numbers, None) is taken as it is, without a call per field (a scan of
    ~550 components has ~35,000 fields; the generic recursion was most of a scan's
    serialisation time)."""
    names = tuple(f.name for f in fields(cls))
    body = ", ".join(f"{n!r}: (_x if (_x := o.{n}).__class__ in _L else _a(_x))"
                     for n in names)
    ns: dict[str, Any] = {"_L": _LEAVES, "_a": asdict}
    exec(f"def conv(o):\n    return {{{body}}}\n", ns)  # noqa: S102 - field names of our own dataclasses
    conv: Callable[[Any], dict[str, Any]] = ns["conv"]
    _CONVERTERS[cls] = conv
    return conv


def asdict(obj: Any) -> Any:
    """``dataclasses.asdict`` for the model's plain types, without its deep copy of every
    leaf (strings, numbers and enums are immutable): several times faster on big scans
    (JSON output, inventory content hashes)."""
    cls = obj.__class__
    if cls in _LEAVES:
        return obj
    conv = _CONVERTERS.get(cls)
    if conv is not None:
        return conv(obj)
    if cls is list:
        return [x if x.__class__ in _LEAVES else asdict(x) for x in obj]
    if cls is tuple:
        return tuple(x if x.__class__ in _LEAVES else asdict(x) for x in obj)
    if cls is dict:
        return {(k if k.__class__ in _LEAVES else asdict(k)):
                (v if v.__class__ in _LEAVES else asdict(v)) for k, v in obj.items()}
    if cls in _OPAQUE:
        return obj
    if is_dataclass(obj) and not isinstance(obj, type):
        return _converter(cls)(obj)
    _OPAQUE.add(cls)  # an enum member, say: a value kept as it is, as before
    return obj  # enums and other immutable values
