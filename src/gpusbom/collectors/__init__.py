"""Collector registry. Every module in this package is imported on first use,
so adding a collector is adding one file; third-party collectors register
through the ``gpusbom.collectors`` entry-point group."""

from __future__ import annotations

import importlib
import pkgutil
from typing import TypeVar

from ._premade import PremadeParser
from .base import VIEW_ERRORS, CollectContext, Collector

__all__ = ["VIEW_ERRORS", "CollectContext", "Collector", "PremadeParser", "all_collectors",
           "premade_parsers", "register"]

_REGISTRY: dict[str, type[Collector]] = {}
_loaded = False

C = TypeVar("C", bound=type[Collector])


def register(cls: C) -> C:
    if not getattr(cls, "id", None):
        raise TypeError(f"{cls.__name__} has no id")
    if cls.id in _REGISTRY and _REGISTRY[cls.id] is not cls:
        raise ValueError(f"collector id {cls.id!r} registered twice")
    _REGISTRY[cls.id] = cls
    return cls


_LOAD_FAILURES: list[tuple[str, str]] = []


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for mod in pkgutil.iter_modules(__path__):
        if mod.name not in ("base",) and not mod.name.startswith("_"):
            importlib.import_module(f"{__name__}.{mod.name}")
    from ._plugins import entry_points

    for ep in entry_points():
        try:
            ep.load()
        except Exception as exc:  # noqa: BLE001 - third-party code: any error means "did not load"
            # a broken plug-in must not break scans, nor vanish: every scan reports it
            _LOAD_FAILURES.append((ep.name, f"{type(exc).__name__}: {exc}"))


def load_failures() -> list[tuple[str, str]]:
    """(entry point name, why) of each collector plug-in that failed to load."""
    _load()
    return list(_LOAD_FAILURES)


def all_collectors() -> dict[str, type[Collector]]:
    """id -> class of every active collector (``Collector.active``), sorted by id for
    deterministic order."""
    _load()
    return dict(sorted((k, c) for k, c in _REGISTRY.items() if c.active()))


#: the modules that declare parses for a host walk's workers (their ``PREMADE``), in order;
#: imported by name as ``_load`` does (each imports this package to register)
_PREMADE_MODULES = ("python", "_digests", "dpkg", "strategies.headers", "triton")


def premade_parsers() -> tuple[PremadeParser, ...]:
    """The parses a host walk's workers run on the files they capture (``host/premake.py``):
    every declaring module's ``PREMADE``, in ``_PREMADE_MODULES`` order."""
    out: list[PremadeParser] = []
    for name in _PREMADE_MODULES:
        out.extend(importlib.import_module(f"{__name__}.{name}").PREMADE)
    return tuple(out)
