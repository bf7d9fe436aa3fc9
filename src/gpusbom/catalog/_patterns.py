"""The catalog's name patterns: compiled on first use, with the literal text a match must
start with, so that a lookup skips the patterns a name cannot match without compiling them
(a scan needs a handful of the table's ~340 patterns; compiling them all cost ~25 ms)."""

from __future__ import annotations

import re

__all__ = ["NamePattern", "literal_prefixes"]


#: characters of a pattern's literal start (anything else: a metacharacter, an escape, or a
#: character whose case folding is not plain ASCII lower-casing)
_LITERAL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_/")


def _alternatives(pattern: str) -> list[str] | None:
    """The top-level ``|`` alternatives of a regular expression; None when the split is not
    certain (an unbalanced group)."""
    out, cur, depth, i = [], [], 0, 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            cur.append(pattern[i:i + 2])
            i += 2
            continue
        if ch == "[":  # a set: ``]`` right after ``[`` or ``[^`` is a member
            j = i + 1
            if j < len(pattern) and pattern[j] == "^":
                j += 1
            if j < len(pattern) and pattern[j] == "]":
                j += 1
            while j < len(pattern) and pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            cur.append(pattern[i:j + 1])
            i = j + 1
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                return None
        if ch == "|" and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
        i += 1
    if depth:
        return None
    out.append("".join(cur))
    return out


def _optional_head(alt: str) -> list[str]:
    """An alternative that starts with an optional literal group, as the two it stands for:
    ``(nvidia/)?cuda`` -> ``["nvidia/cuda", "cuda"]`` (the vendor namespace of generic
    names); any other alternative as it is."""
    if alt.startswith("("):
        end = alt.find(")?")
        group = alt[1:end] if end > 1 else ""
        if group and all(ch in _LITERAL_CHARS or ch == "/" for ch in group):
            rest = alt[end + 2:]
            return [group + rest, rest]
    return [alt]


def literal_prefixes(pattern: str) -> tuple[str, ...] | None:
    """Lower-cased text that every string ``pattern`` full-matches case-insensitively starts
    with, one per top-level alternative: ``libcuda1|libcuda-\\d+`` -> ``("libcuda1",
    "libcuda-")``; an optional literal group first counts both ways (``(nvidia/)?cuda`` ->
    ``("nvidia/cuda", "cuda")``). None when an alternative starts with anything else
    (``(lib|x)y``, ``.*x``). Only ASCII letters, digits, ``-``, ``_`` and ``/`` count as
    literal, so for an ASCII name the prefix test is exact; a quantified last character
    (``x?``, ``x*``, ``x{0,1}``) is left out."""
    alts = _alternatives(pattern)
    if alts is None:
        return None
    out = []
    for alt in (a for whole in alts for a in _optional_head(whole)):
        n = 0
        while n < len(alt) and alt[n] in _LITERAL_CHARS:
            n += 1
        if n < len(alt) and alt[n] in "?*{":
            n -= 1
        if n <= 0:
            return None
        out.append(alt[:n].lower())
    return tuple(out)


class NamePattern:
    """A catalog pattern (case-insensitive unless ``flags`` say otherwise), compiled on
    first use: a scan needs a handful of the table's ~340 patterns, and compiling them all
    cost every run ~25 ms. ``prefixes`` (``literal_prefixes``) lets a lookup skip the
    patterns a name cannot match without compiling them."""

    __slots__ = ("_rx", "flags", "pattern", "prefixes")

    def __init__(self, pattern: str, flags: int = re.IGNORECASE) -> None:
        self.pattern = pattern
        self.flags = flags
        # a prefix of every case-insensitive match is one of every case-sensitive match too
        self.prefixes = literal_prefixes(pattern)
        self._rx: re.Pattern[str] | None = None

    @property
    def rx(self) -> re.Pattern[str]:
        rx = self._rx
        if rx is None:
            rx = self._rx = re.compile(self.pattern, self.flags)
        return rx

    def may_match(self, name: str) -> bool:
        """False only when ``name`` (lower case) cannot full-match the pattern."""
        return self.prefixes is None or not name.isascii() or name.startswith(self.prefixes)

    def fullmatch(self, text: str) -> re.Match[str] | None:
        return self.rx.fullmatch(text)

    def search(self, text: str) -> re.Match[str] | None:
        return self.rx.search(text)

    def __repr__(self) -> str:
        return f"NamePattern({self.pattern!r})"
