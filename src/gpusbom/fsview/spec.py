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

import functools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .types import StreamAnalyzer

AnalyzerFactory = Callable[[], "StreamAnalyzer"]

DEFAULT_MAX_SIZE = 1 << 62
"""A spec without its own ``max_size`` keeps files up to ``Limits.max_file_bytes``."""


@dataclass(frozen=True)
class PathSpec:
    """One glob a collector needs.

    ``history``: keep the version of the file from every layer that wrote it,
    not only the final one (package databases use it to find the layer that
    introduced a package).
    ``max_size``: larger files are recorded, but their content is not kept (the smaller of
    this and ``Limits.max_file_bytes`` applies; leave it unset for package databases).
    ``stream``: a factory (or a tuple of factories) of ``StreamAnalyzer``: each matched
    regular file's data is fed to a fresh analyzer as the layer streams, whatever its size
    (``max_size=0`` analyzes without keeping anything); results land in ``Entry.analysis``.
    """

    pattern: str
    history: bool = False
    max_size: int = DEFAULT_MAX_SIZE
    stream: AnalyzerFactory | tuple[AnalyzerFactory, ...] | None = None

    @property
    def analyzers(self) -> tuple[AnalyzerFactory, ...]:
        """The stream analyzer factories, as a tuple (empty when none)."""
        s = self.stream
        if s is None:
            return ()
        return s if isinstance(s, tuple) else (s,)


@functools.lru_cache(maxsize=4096)
def glob_to_regex(pattern: str) -> str:
    # cached: the collectors' ~580 specs name ~160 distinct patterns, and the path matcher
    # and the views translate them again (4 ms of every scan on a 2-core VM, 1 ms cached)
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


_WILD = frozenset("*?[")
_NEVER = re.compile(r"(?!)").match


def _literal_prefix(text: str) -> str:
    for i, ch in enumerate(text):
        if ch in _WILD:
            return text[:i]
    return text


def _literal_suffix(text: str) -> str:
    for i in range(len(text) - 1, -1, -1):
        if text[i] in _WILD:
            return text[i + 1 :]
    return text


def _longest_literal(text: str) -> str:
    runs = re.split(r"\*|\?|\[[^\]]*\]", text)
    return max(runs, key=len) if runs else ""


def _star_match(name: str, pieces: list[str]) -> bool:
    """Whether ``name`` matches a glob whose only wildcard is ``*`` (``pieces``: the glob split
    at its stars)."""
    if len(pieces) == 1:
        return name == pieces[0]
    head, tail = pieces[0], pieces[-1]
    if len(name) < len(head) + len(tail) or not name.startswith(head) or not name.endswith(tail):
        return False
    at, end = len(head), len(name) - len(tail)
    for piece in pieces[1:-1]:  # leftmost first: the usual exact rule for stars alone
        at = name.find(piece, at, end)
        if at < 0:
            return False
        at += len(piece)
    return True


def component_test(pattern: str) -> Callable[[str], bool] | None:
    """A test of a path against ``pattern`` without compiling its regular expression, for the
    common shape: an optional ``/**/`` first, then components whose only wildcard is ``*``
    (``/**/nvidia_*.dist-info/METADATA``); None for any other pattern. It answers as the
    regular expression does for paths without a newline (``$`` and ``.`` treat those
    apart: such a path goes to the regular expression)."""
    deep = pattern.startswith("/**/")
    if not deep and not pattern.startswith("/"):
        return None
    parts = pattern[4 if deep else 1:].split("/")
    if any("**" in p or "?" in p or "[" in p for p in parts):
        return None
    globs = [p.split("*") for p in parts]
    n = len(globs)

    def test(path: str) -> bool:
        comps = path.split("/")
        if comps[0] or (len(comps) - 1 < n if deep else len(comps) - 1 != n):
            return False  # not absolute, or too few (deep) / not exactly n components
        return all(_star_match(c, g) for c, g in zip(comps[-n:], globs, strict=True))

    return test


#: from this many specs on, the matcher's layout is kept in the user cache (``gpusbom._tables``:
#: laying out the collectors' ~580 specs took ~3 ms of every scan on a 2-core VM)
_CACHED_LAYOUT = 64


def _layout_of_json(text: str) -> dict[str, Any]:
    return _layout(json.loads(text))


def _layout_dump(lay: dict[str, Any]) -> dict[str, Any]:
    """The layout as JSON data (its sets as sorted lists)."""
    return {k: sorted(v) if isinstance(v, set) else v for k, v in lay.items()}


_LAYOUT_MAPS = ("exact", "prefix", "dir_exact", "dir_suffix", "suffix", "infix")
_LAYOUT_LISTS = ("any", "wild_base", "deep", "any_shallow", "suffix_lengths", "prefix_lengths")
_LAYOUT_RX = ("deep_rx", "base_rx", "head_rx")


def _layout_loader(n: int) -> Callable[[Any], dict[str, Any]]:
    """Checks a layout read back from the cache for ``n`` specs (every index in range, every
    key of the right type: ``ValueError`` otherwise) and gives its sets back."""

    def ints(v: Any) -> list[int]:
        if type(v) is not list or not all(type(i) is int and 0 <= i < n for i in v):
            raise ValueError("path matcher layout: bad index list")
        return v

    def load(d: Any) -> dict[str, Any]:
        if type(d) is not dict or set(d) != {*_LAYOUT_MAPS, *_LAYOUT_LISTS, *_LAYOUT_RX}:
            raise ValueError("path matcher layout: bad keys")
        for k in _LAYOUT_MAPS:
            if type(d[k]) is not dict:
                raise ValueError("path matcher layout: bad map")
            for v in d[k].values():
                ints(v)
        for k in ("any", "any_shallow", "wild_base", "deep"):
            ints(d[k])
        for k in ("suffix_lengths", "prefix_lengths"):
            if type(d[k]) is not list or not all(type(i) is int and i >= 0 for i in d[k]):
                raise ValueError("path matcher layout: bad lengths")
        for k in _LAYOUT_RX:
            if d[k] is not None and type(d[k]) is not str:
                raise ValueError("path matcher layout: bad regex")
            if d[k] is not None:
                try:
                    re.compile(d[k])
                except re.error as exc:
                    raise ValueError(f"path matcher layout: {exc}") from None
        return {**d, "wild_base": set(d["wild_base"]), "deep": set(d["deep"])}

    return load


def _layout(patterns: list[str]) -> dict[str, Any]:
    """How ``PathMatcher`` indexes ``patterns`` (plain data, by position): specs bucketed by
    the shape of their base name, and the sources of the two regular expressions that
    reject most paths (see the class docstring)."""
    exact: dict[str, list[int]] = {}
    prefix: dict[str, list[int]] = {}
    dir_exact: dict[str, list[int]] = {}
    dir_suffix: dict[str, list[int]] = {}
    suffix: dict[str, list[int]] = {}
    infix: dict[str, list[int]] = {}
    any_: list[int] = []
    wild_base: set[int] = set()
    for i, pattern in enumerate(patterns):
        base = pattern.rsplit("/", 1)[-1]
        if not _longest_literal(base) and "**" not in base:
            wild_base.add(i)
        if "**" in base:
            any_.append(i)
        elif not _WILD.intersection(base):
            exact.setdefault(base, []).append(i)
        elif len(_literal_prefix(base)) >= PathMatcher._PREFIX:
            prefix.setdefault(_literal_prefix(base), []).append(i)
        elif _literal_suffix(base):
            suffix.setdefault(_literal_suffix(base), []).append(i)
        elif (run := _longest_literal(base)) and len(run) >= 2:
            infix.setdefault(run, []).append(i)  # "*.so.*" -> ".so."
        else:
            head = pattern.rsplit("/", 1)[0] or "/"
            tail = head.rsplit("**", 1)[-1]
            if "**" not in head and not _WILD.intersection(head):
                dir_exact.setdefault(head, []).append(i)
            elif tail.startswith("/") and len(tail) > 1 and not _WILD.intersection(tail):
                dir_suffix.setdefault(tail, []).append(i)
            else:
                any_.append(i)
    # specs for everything below a directory ("/**/libexec/**"): their base name
    # matches anything, so they are found through the directory instead (a test per
    # directory), not by the base-name test that every file goes through
    deep = {i for i, p in enumerate(patterns) if p.rsplit("/", 1)[-1] == "**"}
    # a file's directory ("/" for top-level files) is DIR or below it; "/**" is all
    deep_heads = sorted(
        {
            glob_to_regex(d) + "(?:/.*)?" if (d := patterns[i].rsplit("/", 1)[0]) else ".*"
            for i in deep
        }
    )
    # One C-speed yes/no test on the base name rejects almost every path
    # before any Python-level bucket lookup (specs with a wholly wild base
    # name are found through their directory instead).
    bases = sorted(
        {
            glob_to_regex("/" + p.rsplit("/", 1)[-1])[1:]
            for i, p in enumerate(patterns)
            if i not in wild_base and i not in deep
        }
    )
    # the directories where a spec with a wholly wild base name may match ("/**/bin",
    # "/**/*.dist-info/sboms"): one C-speed test of a file's directory, where a Python-level
    # test per spec used to run for every path once one such directory had a wildcard
    heads = sorted({glob_to_regex(patterns[i].rsplit("/", 1)[0] or "/") for i in wild_base
                    if i not in deep})
    return {
        "head_rx": "(?:" + "|".join(heads) + r")\Z" if heads else None,
        "exact": exact, "prefix": prefix, "dir_exact": dir_exact, "dir_suffix": dir_suffix,
        "suffix": suffix, "infix": infix, "any": any_, "wild_base": wild_base, "deep": deep,
        "any_shallow": [i for i in any_ if i not in deep],
        "suffix_lengths": sorted({len(k) for k in suffix}),
        "prefix_lengths": sorted({len(k) for k in prefix}),
        "deep_rx": "(?:" + "|".join(deep_heads) + r")\Z" if deep_heads else None,
        "base_rx": "(?:" + "|".join(bases) + r")\Z" if bases else None,
    }


class PathMatcher:
    """All specs, indexed by the shape of their last path component.

    Every entry of every layer goes through ``match``, so most paths must be
    rejected with a dict lookup or two: specs are bucketed by a literal base
    name (``METADATA``), a literal base-name prefix (``libcudart.so.*``) or a
    literal suffix (``*.icd``); only candidates from those buckets (and the
    rare spec whose last component is fully wild) run their own regex.
    """

    _PREFIX = 3  # bucket key length for prefix buckets

    def __init__(self, specs: list[PathSpec] | tuple[PathSpec, ...]) -> None:
        self.specs = tuple(specs)
        # compiled on first use: most specs never see a candidate path
        self._rx: list[re.Pattern[str] | None] = [None] * len(self.specs)
        self._test: list[Callable[[str], bool] | None] = [None] * len(self.specs)
        # specs of several collectors share patterns ("/**/*.so.*" five times): the first
        # spec of each pattern stands for the others, its regex compiled and run once
        first: dict[str, int] = {}
        self._canon = [first.setdefault(sp.pattern, i) for i, sp in enumerate(self.specs)]
        patterns = [sp.pattern for sp in self.specs]
        if len(patterns) >= _CACHED_LAYOUT:
            from .._tables import cached_parse

            lay = cached_parse(json.dumps(patterns), _layout_of_json, code=True,
                               dump=_layout_dump, load=_layout_loader(len(patterns)))
        else:
            lay = _layout(patterns)
        self._exact: dict[str, list[int]] = lay["exact"]
        self._prefix: dict[str, list[int]] = lay["prefix"]  # keyed by the whole literal prefix
        self._dir_exact: dict[str, list[int]] = lay["dir_exact"]  # wild base, literal directory
        self._dir_suffix: dict[str, list[int]] = lay["dir_suffix"]  # wild base, directory's end
        self._suffix: dict[str, list[int]] = lay["suffix"]
        self._infix: dict[str, list[int]] = lay["infix"]
        self._any: list[int] = lay["any"]
        self._wild_base: set[int] = lay["wild_base"]
        self._deep: set[int] = lay["deep"]
        self._any_shallow: list[int] = lay["any_shallow"]
        self._suffix_lengths: list[int] = lay["suffix_lengths"]
        self._prefix_lengths: list[int] = lay["prefix_lengths"]
        self._deep_rx = re.compile(lay["deep_rx"]) if lay["deep_rx"] is not None else None
        self._base_rx = re.compile(lay["base_rx"]) if lay["base_rx"] is not None else None
        self._head_rx = re.compile(lay["head_rx"]) if lay["head_rx"] is not None else None

    def _candidates(self, path: str) -> list[int]:
        base = path[path.rfind("/") + 1 :]
        out: list[int] = []
        hit = self._exact.get(base)
        if hit:
            out.extend(hit)
        for n in self._prefix_lengths:
            if n > len(base):
                break
            hit = self._prefix.get(base[:n])
            if hit:
                out.extend(hit)
        if self._dir_exact or self._dir_suffix:
            head = path[: path.rfind("/")] or "/"
            hit = self._dir_exact.get(head)
            if hit:
                out.extend(hit)
            for tail, idxs in self._dir_suffix.items():
                if head.endswith(tail):
                    out.extend(idxs)
        for n in self._suffix_lengths:
            if n <= len(base):
                hit = self._suffix.get(base[-n:])
                if hit:
                    out.extend(hit)
        for run, idxs in self._infix.items():
            if run in base:
                out.extend(idxs)
        if self._any:
            out.extend(self._any)
        return out

    def _regex(self, i: int) -> re.Pattern[str]:
        rx = self._rx[i]
        if rx is None:
            rx = self._rx[i] = re.compile("^" + glob_to_regex(self.specs[i].pattern) + "$")
        return rx

    def _matches(self, i: int, path: str) -> bool:
        """Whether spec ``i`` matches ``path``; its regex compiled only where needed (~0.1 ms
        each, a few dozen per scan that reads layers): ``component_test``'s shapes go
        without it, but for a path with a newline."""
        test = self._test[i]
        if test is None:
            simple = component_test(self.specs[i].pattern)
            if simple is None:
                rx = self._regex(i)
                test = self._test[i] = lambda p: rx.match(p) is not None
            else:
                test = self._test[i] = lambda p: (
                    simple(p) if "\n" not in p else self._regex(i).match(p) is not None)
        return test(path)

    def dir_prefilter(self, head: str) -> Callable[[str], object] | None:
        """A cheap test of the base names of the files in directory ``head``: a name it
        answers None for is one ``match`` rejects (one C-level regex call per name, once
        the directory is known; the walker calls ``match`` only for the rest). None: no
        such test here (a spec with a wholly wild base name may match in ``head``)."""
        if self._head_rx is not None and self._head_rx.match(head) is not None:
            return None
        if self._deep_rx is not None and self._deep_rx.match(head):
            return None
        return self._base_rx.match if self._base_rx is not None else _NEVER

    def match(self, path: str) -> PathSpec | None:
        cut = path.rfind("/")
        if self._base_rx is None or self._base_rx.match(path, cut + 1) is None:
            head = path[:cut] or "/"
            # below a directory that a "/**" spec takes whole, any name may match
            deep = self._deep_rx is not None and self._deep_rx.match(head) is not None
            if not deep and (self._head_rx is None or self._head_rx.match(head) is None):
                return None
        cands = self._candidates(path)
        if not cands:
            return None
        canon = self._canon
        seen: dict[int, bool] = {}
        hits = []
        for i in dict.fromkeys(cands):
            c = canon[i]
            ok = seen.get(c)
            if ok is None:
                ok = seen[c] = self._matches(c, path)
            if ok:
                hits.append(self.specs[i])
        if not hits:
            return None
        if len(hits) == 1:
            return hits[0]
        factories = tuple(dict.fromkeys(f for h in hits for f in h.analyzers))
        return PathSpec(
            pattern=hits[0].pattern,
            history=any(h.history for h in hits),
            max_size=max(h.max_size for h in hits),
            stream=factories or None,
        )

    def __bool__(self) -> bool:
        return bool(self.specs)
