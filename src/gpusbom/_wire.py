"""What gpusbom's own forked workers send back through their pipes (the host walk's
workers, the NVML query process, the image layer workers), and how the parent reads it.

The bytes are MessagePack (``msgpack``, C speed for the tens of MB of entries a large host
or image gives): plain values natively, and a few extension types that the parent decodes
itself: tuples, sets and frozensets; instances of the data classes its caller lists (their
dataclass fields or ``__slots__``, set without running any method of the class); members of
listed enums (by value); and errors of ``builtins`` and ``gpusbom.errors`` (for a worker's
error, raised again in the parent). Nothing in the format names a module, a function or
anything to call: a class is looked up by name in the caller's table and only its
attributes are set. So a worker that was subverted while it parsed a hostile file (a
memory bug in a C parser it called) can send the parent wrong data, never code.
``tests/test_wire.py`` and ``tests/architecture/test_no_pickle.py`` hold it to that.
"""

from __future__ import annotations

import builtins
import dataclasses
import enum
from collections.abc import Iterable
from typing import Any

import msgpack

from .errors import GpusbomError

_TUPLE, _SET, _FROZENSET, _OBJECT, _ENUM, _ERROR = range(1, 7)


class WireError(GpusbomError, ValueError):
    """A worker's bytes named something they may not, or were malformed (the callers turn
    it into a lost worker: the work redone in this process, or a ``LayerError``)."""


def _key(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _attrs(cls: type) -> tuple[str, ...]:
    if dataclasses.is_dataclass(cls):
        return tuple(f.name for f in dataclasses.fields(cls))
    names: list[str] = []
    for klass in reversed(cls.__mro__):
        slots = klass.__dict__.get("__slots__", ())
        names.extend([slots] if isinstance(slots, str) else slots)
    return tuple(n for n in names if n not in ("__dict__", "__weakref__"))


def _exception_class(name: str) -> type[BaseException] | None:
    module, _, qual = name.partition(":")
    if "." in qual:
        return None
    if module == "builtins":
        got = getattr(builtins, qual, None)
    elif module == "gpusbom.errors":
        from . import errors

        got = getattr(errors, qual, None)
    else:
        return None
    if isinstance(got, type) and issubclass(got, BaseException):
        return got
    return None


_ATTRS: dict[type, tuple[str, tuple[str, ...]]] = {}


def _pack(obj: Any) -> bytes:
    return msgpack.packb(obj, default=_default, strict_types=True, use_bin_type=True)  # type: ignore[no-any-return]


def _default(obj: Any) -> msgpack.ExtType:
    t = type(obj)
    if t is tuple:
        return msgpack.ExtType(_TUPLE, _pack(list(obj)))
    if t is set:
        return msgpack.ExtType(_SET, _pack(list(obj)))
    if t is frozenset:
        return msgpack.ExtType(_FROZENSET, _pack(list(obj)))
    if isinstance(obj, enum.Enum):
        return msgpack.ExtType(_ENUM, _pack([_key(t), obj.value]))
    if isinstance(obj, BaseException):
        return msgpack.ExtType(_ERROR, _pack([_key(t), list(obj.args)]))
    for base in (bool, int, float, str, bytes, list, dict):  # a subclass: as its base
        if isinstance(obj, base):
            convert: Any = base
            return convert(obj)
    got = _ATTRS.get(t)
    if got is None:
        got = _ATTRS[t] = (_key(t), _attrs(t))
    key, names = got
    return msgpack.ExtType(_OBJECT, _pack([key, [getattr(obj, n, None) for n in names]]))


def dumps(obj: Any) -> bytes:
    """``obj`` as bytes for the parent (in a worker). Raises ``TypeError`` for a value of a
    kind the format does not carry."""
    return _pack(obj)


def portable(exc: BaseException) -> BaseException:
    """``exc`` as a worker sends it: itself when the parent may read its class back (a
    builtin or gpusbom error whose arguments are plain), else a ``RuntimeError`` naming it."""
    cls = type(exc)
    if _exception_class(_key(cls)) is cls:
        try:
            loads(dumps(exc), {})
        except Exception:  # noqa: BLE001, S110 - its arguments are not plain: as below
            pass
        else:
            return exc
    return RuntimeError(f"{cls.__module__}.{cls.__qualname__}: {exc}")


def allow(classes: Iterable[type]) -> dict[str, type]:
    """The table ``loads`` takes: the data classes (and enums) a worker's result may hold."""
    out: dict[str, type] = {}
    for cls in classes:
        if "." in cls.__qualname__ or "<" in cls.__qualname__:
            raise ValueError(f"{cls!r} is not a module-level class")
        out[_key(cls)] = cls
    return out


def loads(data: bytes, allowed: dict[str, type]) -> Any:
    """A worker's result (in the parent): plain values and instances of ``allowed``'s
    classes only; anything else raises ``WireError``."""

    def unpack(raw: bytes) -> Any:
        return msgpack.unpackb(raw, ext_hook=hook, raw=False, strict_map_key=False,
                               use_list=True)

    def hook(code: int, raw: bytes) -> Any:
        value = unpack(raw)
        if code == _TUPLE and isinstance(value, list):
            return tuple(value)
        if code == _SET and isinstance(value, list):
            return set(value)
        if code == _FROZENSET and isinstance(value, list):
            return frozenset(value)
        if not (isinstance(value, list) and len(value) == 2 and isinstance(value[0], str)):
            raise WireError(f"a worker's result holds a malformed extension {code}")
        name, args = value
        if code == _ERROR:
            cls = _exception_class(name)
            if cls is None or not isinstance(args, list):
                raise WireError(f"a worker's result names {name}, which it may not")
            return cls(*args)
        cls = allowed.get(name)
        if cls is None:
            raise WireError(f"a worker's result names {name}, which it may not")
        if code == _ENUM and issubclass(cls, enum.Enum):
            return cls(args)
        if code == _OBJECT and not issubclass(cls, enum.Enum) and isinstance(args, list):
            names = _attrs(cls)
            if len(args) != len(names):
                raise WireError(f"a worker's {name} has {len(args)} fields, not {len(names)}")
            obj = object.__new__(cls)
            for n, v in zip(names, args, strict=True):
                object.__setattr__(obj, n, v)
            return obj
        raise WireError(f"a worker's result holds a malformed extension {code}")

    try:
        return unpack(data)
    except WireError:
        raise
    except Exception as e:  # noqa: BLE001 - truncated or malformed bytes, whatever they raise
        raise WireError(f"a worker's result is malformed: {type(e).__name__}: {e}") from None
