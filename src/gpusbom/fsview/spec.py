"""Path specifications: how collectors say up front which files they need.

A layer is streamed once; while it streams, every entry path is matched
against one compiled regular expression built from all collectors' specs.
Only matching regular files have their content kept (in memory, or in a temp
file when large). Directories, symlinks and hard links are always recorded so
links can be resolved inside the image root.

Glob syntax, on absolute image paths:
    ``*``   any characters except ``/``
    ``**``  any characters including ``/`` (``/**/`` also matches a single ``/``)
    ``?``   one character except ``/``
    ``[..]`` a character class
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_MAX_SIZE = 64 * 1024 * 1024


@dataclass(frozen=True)
class PathSpec:
    """One glob a collector needs.

    ``history``: keep the version of the file from every layer that wrote it,
    not only the final one (package databases use it to find the layer that
    introduced a package).
    ``max_size``: larger files are recorded, but their content is not kept.
    """

    pattern: str
    history: bool = False
    max_size: int = DEFAULT_MAX_SIZE


def glob_to_regex(pattern: str) -> str:
    if not pattern.startswith("/"):
        raise ValueError(f"path spec must be absolute: {pattern!r}")
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("/**/", i):
            out.append("(?:/|/.*/)")
            i += 4
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            j = pattern.find("]", i + 1)
            if j == -1:
                out.append(re.escape(c))
                i += 1
            else:
                body = pattern[i + 1 : j]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = j + 1
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


class PathMatcher:
    """All specs compiled into one regex; ``match`` returns the merged spec or None."""

    def __init__(self, specs: list[PathSpec] | tuple[PathSpec, ...]) -> None:
        self.specs = tuple(specs)
        if self.specs:
            parts = [f"(?P<g{i}>{glob_to_regex(s.pattern)})" for i, s in enumerate(self.specs)]
            self._rx: re.Pattern[str] | None = re.compile("^(?:" + "|".join(parts) + ")$")
        else:
            self._rx = None
        # single-spec regexes, to merge options when several specs match one path
        self._each = [re.compile("^" + glob_to_regex(s.pattern) + "$") for s in self.specs]

    def match(self, path: str) -> PathSpec | None:
        if self._rx is None:
            return None
        m = self._rx.match(path)
        if m is None:
            return None
        hits = [s for s, rx in zip(self.specs, self._each) if rx.match(path)]
        if len(hits) == 1:
            return hits[0]
        return PathSpec(
            pattern=hits[0].pattern,
            history=any(h.history for h in hits),
            max_size=max(h.max_size for h in hits),
        )

    def __bool__(self) -> bool:
        return bool(self.specs)
