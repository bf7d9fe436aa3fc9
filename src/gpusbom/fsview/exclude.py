"""``--exclude GLOB`` (as Syft's): paths left out of collection, in images and hosts.

A glob is absolute (``/usr/share/doc/**``) or relative to the root (``./var/cache/**``,
``var/cache``); ``*`` and ``?`` stay inside one path component, ``**`` crosses them. A
path is excluded when it or one of its parent directories matches, so ``/opt/old`` also
leaves out everything below ``/opt/old``. :func:`exclude` gives the view without them;
the collectors never see those paths.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..errors import UsageError
from .spec import glob_to_regex
from .view import FsView


def normalize(pattern: str) -> str:
    """``./a/**`` and ``a/**`` -> ``/a/**``; a trailing ``/`` dropped."""
    p = pattern.strip()
    if not p or p in (".", "./", "/"):
        raise UsageError(f"--exclude {pattern!r}: would exclude the whole root")
    if p.startswith("./"):
        p = p[1:]
    elif not p.startswith("/"):
        p = "/" + p
    return p.rstrip("/") or "/"


def compile_excludes(patterns: Sequence[str]) -> re.Pattern[str]:
    """One regex matching a path that an exclude glob names, or one below such a path."""
    parts = [glob_to_regex(normalize(p)) for p in patterns]
    return re.compile("^(?:" + "|".join(parts) + ")(?:/.*)?$")


def exclude(view: FsView, patterns: Sequence[str]) -> FsView:
    """``view`` without the paths ``patterns`` exclude (the same view when none)."""
    if not patterns:
        return view
    rx = compile_excludes(patterns).match
    gone = {p for p in view._entries if rx(p)}  # noqa: SLF001 - this package's own view
    if not gone:
        return view
    entries = {p: e for p, e in view._entries.items() if p not in gone}  # noqa: SLF001
    history = {p: h for p, h in view._history.items() if p not in gone}  # noqa: SLF001
    children = None
    if view._children is not None:  # noqa: SLF001
        children = {d: {c for c in kids if c not in gone}
                    for d, kids in view._children.items() if d not in gone}  # noqa: SLF001
    out = FsView(entries, view.layers, view.limits, history=history, children=children)
    out.unreadable = [p for p in view.unreadable if not rx(p)]
    out.file_count = view.file_count
    out.premade = {k: v for k, v in view.premade.items() if k[1] not in gone}
    return out
