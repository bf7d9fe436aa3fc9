"""Writer registry: each module in this package registers one format (or a family).

Modules are imported lazily: a format ``fam`` or ``fam-variant`` lives in the module
``fam`` (``cyclonedx-json`` in ``cyclonedx.py``), so asking for one format imports one
module (the table writer pulls in rich; a JSON scan need not). Module names are found
with :mod:`pkgutil` (no import); :func:`all_writers` imports them all (listing, ``--help``,
unknown-format errors), which also catches a module registering a format that does not
follow the convention.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import TypeVar

from .base import Writer, WriterOptions

__all__ = ["Writer", "WriterOptions", "all_writers", "get_writer", "has_writer", "register"]

_REGISTRY: dict[str, type[Writer]] = {}
_loaded = False
_imported: set[str] = set()
W = TypeVar("W", bound=type[Writer])


def register(cls: W) -> W:
    if cls.format in _REGISTRY and _REGISTRY[cls.format] is not cls:
        raise ValueError(f"writer {cls.format!r} registered twice")
    _REGISTRY[cls.format] = cls
    return cls


def _module_names() -> list[str]:
    return sorted(
        m.name for m in pkgutil.iter_modules(__path__)
        if m.name != "base" and not m.name.startswith("_")
    )


def _import(name: str) -> None:
    if name not in _imported:
        importlib.import_module(f"{__name__}.{name}")
        _imported.add(name)


def _load() -> None:
    global _loaded
    if _loaded:
        return
    for name in _module_names():
        _import(name)
    _loaded = True


def _find(fmt: str) -> type[Writer] | None:
    """The writer of ``fmt``, importing only the module the naming convention points to."""
    if fmt in _REGISTRY:
        return _REGISTRY[fmt]
    module = fmt.split("-", 1)[0]
    if module and module.isidentifier() and module in _module_names():
        _import(module)
        if fmt in _REGISTRY:
            return _REGISTRY[fmt]
    _load()  # a module not following the convention: import them all
    return _REGISTRY.get(fmt)


def all_writers() -> dict[str, type[Writer]]:
    _load()
    return dict(sorted(_REGISTRY.items()))


def has_writer(fmt: str) -> bool:
    return _find(fmt) is not None


def get_writer(fmt: str) -> Writer:
    cls = _find(fmt)
    if cls is None:
        from ..errors import UsageError

        raise UsageError(
            f"unknown output format {fmt!r}; choose one of: {', '.join(all_writers())}"
        )
    return cls()
