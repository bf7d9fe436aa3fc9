"""What gpusbom's own forked workers send back through their pipes (the host walk's
workers, the NVML query process, the image layer workers), and how the parent reads it.

The bytes are pickle's format, because it carries the workers' results (tens of MB of
entries on a large host or image) at C speed, but they are read by an unpickler that can
name nothing except an explicit list of data classes given by the caller, and the
exception classes of ``builtins`` and ``gpusbom.errors`` (for a worker's error, raised again
in the parent): no function, no module attribute, no dotted name, no persistent id. So a
worker that was subverted while it parsed a hostile file (a memory bug in a C parser it
called) can send the parent wrong data, but never make it import a module or call anything
but one of those classes' constructors. ``tests/architecture/test_no_pickle.py`` checks that
nothing else in ``src/`` loads pickles, and ``tests/test_wire.py`` that a stream naming
anything else is refused.
"""

from __future__ import annotations

import builtins
import io
import pickle
from collections.abc import Iterable
from typing import Any

from .errors import GpusbomError

PROTOCOL = pickle.HIGHEST_PROTOCOL


class WireError(GpusbomError, pickle.UnpicklingError):
    """A worker's bytes named something they may not, or were malformed (the callers turn
    it into a lost worker: the work redone in this process, or a ``LayerError``)."""


def dumps(obj: Any) -> bytes:
    """``obj`` as bytes for the parent (in a worker)."""
    return pickle.dumps(obj, protocol=PROTOCOL)


def _exception_class(module: str, name: str) -> type[BaseException] | None:
    if "." in name:
        return None
    if module == "builtins":
        got = getattr(builtins, name, None)
    elif module == "gpusbom.errors":
        from . import errors

        got = getattr(errors, name, None)
    else:
        return None
    if isinstance(got, type) and issubclass(got, BaseException):
        return got
    return None


def portable(exc: BaseException) -> BaseException:
    """``exc`` as a worker sends it: itself when the parent may read its class back (a
    builtin or gpusbom error whose arguments are plain), else a ``RuntimeError`` naming it."""
    cls = type(exc)
    if _exception_class(cls.__module__, cls.__qualname__) is cls:
        try:
            loads(dumps(exc), {})
        except Exception:  # noqa: BLE001, S110 - its arguments name other classes: as below
            pass
        else:
            return exc
    return RuntimeError(f"{cls.__module__}.{cls.__qualname__}: {exc}")


class _DataOnly(pickle.Unpickler):
    def __init__(self, data: bytes, allowed: dict[tuple[str, str], type]) -> None:
        super().__init__(io.BytesIO(data))
        self._allowed = allowed

    def find_class(self, module: str, name: str) -> Any:
        cls = self._allowed.get((module, name)) or _exception_class(module, name)
        if cls is None:
            raise WireError(f"a worker's result names {module}.{name}, which it may not")
        return cls

    def persistent_load(self, pid: Any) -> Any:
        raise WireError("a worker's result holds a persistent id")


def allow(classes: Iterable[type]) -> dict[tuple[str, str], type]:
    """The table ``loads`` takes: each class under its module and (undotted) name."""
    out: dict[tuple[str, str], type] = {}
    for cls in classes:
        if "." in cls.__qualname__ or "<" in cls.__qualname__:
            raise ValueError(f"{cls!r} is not a module-level class")
        out[cls.__module__, cls.__qualname__] = cls
    return out


def loads(data: bytes, allowed: dict[tuple[str, str], type]) -> Any:
    """A worker's result (in the parent): plain values and instances of ``allowed``'s
    classes only; anything else raises ``WireError``."""
    try:
        return _DataOnly(data, allowed).load()
    except WireError:
        raise
    except Exception as e:  # noqa: BLE001 - truncated or malformed bytes, whatever they raise
        raise WireError(f"a worker's result is malformed: {type(e).__name__}: {e}") from None
