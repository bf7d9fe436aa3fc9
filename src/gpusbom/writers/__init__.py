"""Writer registry: each module in this package registers one format."""

from __future__ import annotations

import importlib
import pkgutil
from typing import TypeVar

from .base import Writer, WriterOptions

__all__ = ["Writer", "WriterOptions", "all_writers", "get_writer", "register"]

_REGISTRY: dict[str, type[Writer]] = {}
_loaded = False
W = TypeVar("W", bound=type[Writer])


def register(cls: W) -> W:
    if cls.format in _REGISTRY and _REGISTRY[cls.format] is not cls:
        raise ValueError(f"writer {cls.format!r} registered twice")
    _REGISTRY[cls.format] = cls
    return cls


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for mod in pkgutil.iter_modules(__path__):
        if mod.name != "base" and not mod.name.startswith("_"):
            importlib.import_module(f"{__name__}.{mod.name}")


def all_writers() -> dict[str, type[Writer]]:
    _load()
    return dict(sorted(_REGISTRY.items()))


def get_writer(fmt: str) -> Writer:
    writers = all_writers()
    if fmt not in writers:
        from ..errors import UsageError

        raise UsageError(
            f"unknown output format {fmt!r}; choose one of: {', '.join(writers)}"
        )
    return writers[fmt]()
