"""Writer registry: each module in this package registers one format (or a family).

Every output of every command is a writer here. A writer has a ``subject``, the kind of
result it writes: ``scan`` (a ScanResult: the SBOMs, table, JSON, VEX, HTML), ``reconcile``
(a ``reconcile.Reconciliation``), ``gate``
(a ``policy.GateReport``), ``check`` (a ``compat.CheckReport``), ``rows`` (an inventory
``writers.base.Rows``), ``drift`` (an inventory drift), ``metrics`` (a Prometheus collector).
The same format id (``table``, ``json``, ``sarif``...) may be registered once per subject.

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
from collections.abc import Iterable
from typing import TypeVar

from .base import Rows, Writer, WriterOptions

__all__ = ["Rows", "Writer", "WriterOptions", "all_writers", "asked_modules", "get_writer",
           "has_writer", "preload", "register", "rendered_elsewhere", "subjects"]

_REGISTRY: dict[tuple[str, str], type[Writer]] = {}
_loaded = False
_imported: set[str] = set()
_asked: list[type[Writer]] = []
W = TypeVar("W", bound=type[Writer])


def register(cls: W) -> W:
    key = (cls.subject, cls.format)
    if key in _REGISTRY and _REGISTRY[key] is not cls:
        raise ValueError(f"writer {cls.format!r} of {cls.subject} registered twice")
    _REGISTRY[key] = cls
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


def _find(fmt: str, subject: str) -> type[Writer] | None:
    """The writer of ``fmt``, importing only the module the naming convention points to."""
    key = (subject, fmt)
    if key in _REGISTRY:
        return _REGISTRY[key]
    module = fmt.split("-", 1)[0]
    if module and module.isidentifier() and module in _module_names():
        _import(module)
        if key in _REGISTRY:
            return _REGISTRY[key]
    _load()  # a module not following the convention: import them all
    return _REGISTRY.get(key)


def all_writers(subject: str = "scan") -> dict[str, type[Writer]]:
    """The formats of ``subject``'s writers, sorted by format id."""
    _load()
    return dict(sorted((f, cls) for (s, f), cls in _REGISTRY.items() if s == subject))


def subjects() -> list[str]:
    """Every subject some writer writes, sorted."""
    _load()
    return sorted({s for s, _f in _REGISTRY})


def has_writer(fmt: str, subject: str = "scan") -> bool:
    cls = _find(fmt, subject)
    if cls is not None:
        _asked.append(cls)
    return cls is not None


def asked_modules() -> list[str]:
    """The modules the writers asked for so far will import when they write (the command
    line's outputs are checked with ``has_writer`` before the scan), as ``Writer.imports``
    names them (``module`` or ``module:function``)."""
    return list(dict.fromkeys(m for cls in _asked for m in cls.imports))


def rendered_elsewhere(formats: set[str], subject: str = "scan") -> None:
    """Writers of ``formats`` asked for so far will write in another process (one forked
    for it, ``cli.output.prefork``): :func:`asked_modules` no longer names their modules."""
    _asked[:] = [cls for cls in _asked if not (cls.subject == subject and cls.format in formats)]


def preload(names: Iterable[str]) -> None:
    """Import ``names`` as ``Writer.imports`` gives them (``module`` or ``module:function``,
    the function then called: tables its first use would build). A name that fails is
    skipped: it is imported again where it is used, and fails there."""
    for name in names:
        module, _, function = name.partition(":")
        try:
            loaded = importlib.import_module(module)
            if function:
                getattr(loaded, function)()
        except Exception:  # noqa: BLE001, S112 - see above
            continue


def get_writer(fmt: str, subject: str = "scan") -> Writer:
    cls = _find(fmt, subject)
    if cls is None:
        from ..errors import UsageError

        raise UsageError(
            f"unknown output format {fmt!r}; choose one of: {', '.join(all_writers(subject))}"
        )
    return cls()
