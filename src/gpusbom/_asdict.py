"""``asdict`` for the model's plain dataclasses (:mod:`gpusbom.model`), without the deep copy
of :func:`dataclasses.asdict`."""

from __future__ import annotations

from dataclasses import fields, is_dataclass
from typing import Any

_FIELD_NAMES: dict[type, tuple[str, ...]] = {}
_LEAVES = (str, int, float, bool, type(None))


def asdict(obj: Any) -> Any:
    """``dataclasses.asdict`` for the model's plain types, without its deep copy of every
    leaf (strings, numbers and enums are immutable): several times faster on big scans
    (JSON output, inventory content hashes)."""
    cls = type(obj)
    if cls in _LEAVES:
        return obj
    names = _FIELD_NAMES.get(cls)
    if names is None and is_dataclass(obj) and not isinstance(obj, type):
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(obj))
    if names is not None:
        return {n: asdict(getattr(obj, n)) for n in names}
    if cls is list:
        return [asdict(x) for x in obj]
    if cls is tuple:
        return tuple(asdict(x) for x in obj)
    if cls is dict:
        return {asdict(k): asdict(v) for k, v in obj.items()}
    return obj  # enums and other immutable values
