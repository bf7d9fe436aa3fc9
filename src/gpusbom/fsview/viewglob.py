"""The glob of ``FsView``: sorted real paths of kept entries that match a pattern.

Collectors glob a few hundred patterns per scan over views of up to hundreds of thousands
of paths, most with nothing to find, so the answer comes from the sorted paths narrowed
before any regex runs: a literal leading directory is one sorted range (and, in a large
directory, the base-name index when that has fewer candidates); a pattern whose base name
starts with a literal goes to the base-name index; the literal parts of the components
drop candidates with a substring test; the regex is compiled only where a candidate is
left. ``GlobIndex`` holds this; ``FsView`` inherits it.
"""

from __future__ import annotations

import bisect
import functools
import re

from ..errors import UnsafeArchiveError
from .spec import glob_to_regex
from .types import Entry

_GLOB_CHARS = frozenset("*?[")


def _literal_prefix(name: str) -> str:
    """The part of a glob's base name before its first wildcard."""
    for i, ch in enumerate(name):
        if ch in "*?[":
            return name[:i]
    return name


#: a glob's literal directory holding more kept paths than this is searched through the
#: base-name index instead, when that has fewer candidates (``FsView._glob_raw``)
_BASE_INDEX_OVER = 64


@functools.lru_cache(maxsize=4096)
def _glob_rx(pattern: str) -> re.Pattern[str]:
    # collectors glob the same few hundred patterns on every scan
    return re.compile("^" + glob_to_regex(pattern) + "$")


@functools.lru_cache(maxsize=4096)
def _needles(pattern: str, skip: int) -> tuple[str, ...]:
    """"/" and the literal start of each component of ``pattern`` after the first ``skip``
    (``/`` joins the components: each starts right after one, ``**`` or not), longest
    first; the ones that say nothing (empty) are left out."""
    out = {"/" + lp for c in pattern.split("/")[1 + skip:] if c != "**"
           for lp in (_literal_prefix(c),) if lp}
    return tuple(sorted(out, key=lambda n: (-len(n), n)))


def _direct(paths: list[str], lo: int, hi: int, n: int) -> list[str]:
    """The paths of sorted ``paths[lo:hi]`` (all below one directory, whose path with its
    "/" is ``n`` long) that are that directory's own entries, not deeper ones."""
    out: list[str] = []
    i = lo
    while i < hi:
        p = paths[i]
        cut = p.find("/", n)
        if cut < 0:
            out.append(p)
            i += 1
        else:  # below entry p[:cut]: its subtree sorts before p[:cut] + "0"
            i = bisect.bisect_left(paths, p[:cut] + "0", i + 1, hi)
    return out


class GlobIndex:
    """``glob`` over a view's entries (``FsView`` sets the attributes below and resolves
    paths with ``realpath``)."""

    _entries: dict[str, Entry]
    _sorted: list[str] | None
    _basenames: list[str] | None  # the distinct base names, sorted
    _by_base: dict[str, list[str]] | None  # base name -> its paths
    _globbed: dict[str, list[str]]  # pattern -> glob(): entries never change

    def realpath(self, path: str) -> str:
        raise NotImplementedError  # FsView's: the pattern's literal directories resolved

    def _sorted_paths(self) -> list[str]:
        if self._sorted is None:
            self._sorted = sorted(self._entries)
        return self._sorted

    def _glob_raw(self, pattern: str) -> list[str]:
        # the regex is compiled only where a candidate is left (``_matching``); a bad
        # pattern still fails here (glob_to_regex: translated once per pattern)
        glob_to_regex(pattern)
        # literal leading components narrow the scan to one sorted range
        comps = pattern.split("/")
        lit: list[str] = []
        for c in comps[1:-1]:
            if _GLOB_CHARS.intersection(c):
                break
            lit.append(c)
        paths = self._sorted_paths()
        candidates: list[str]
        if lit:
            prefix = "/" + "/".join(lit) + "/"
            lo = bisect.bisect_left(paths, prefix)
            hi = bisect.bisect_left(paths, prefix[:-1] + "0")  # "0" sorts right after "/"
            base = "" if "**" in comps[-1] else _literal_prefix(comps[-1])
            if base and len(lit) == len(comps) - 2:
                # every directory literal: a match starts with the directory and the base
                # name's literal part (a range of its own)
                lo = bisect.bisect_left(paths, prefix + base, lo, hi)
                hi = bisect.bisect_left(paths, prefix + base + "\U0010ffff", lo, hi)
            if base and hi - lo > _BASE_INDEX_OVER:
                # "/usr/lib/*/libamdhip64.so*": the paths whose base name starts with the
                # literal part, when they are fewer than the directory's (a host's library
                # directory keeps thousands; a GPU collector globs dozens of such names,
                # most with a copy or two: 48 globs of ROCm's, 10-20 ms of an H200 host's
                # scan, each a regex test of the whole directory)
                by_base, names = self._base_index()
                blo = bisect.bisect_left(names, base)
                bhi = bisect.bisect_left(names, base + "\U0010ffff")
                if bhi - blo < hi - lo:
                    return self._matching(pattern, len(lit), sorted(
                        p for n in names[blo:bhi] for p in by_base[n] if p.startswith(prefix)))
            last = comps[-1]
            if len(lit) == len(comps) - 2 and "**" not in last and "[" not in last:
                # "/usr/lib/*-linux-gnu*": only the directory's own entries can match (no
                # wildcard of the last component crosses "/"): each subdirectory's subtree is
                # skipped as one range (a host keeps tens of thousands of paths below /usr/lib)
                return self._matching(pattern, len(lit), _direct(paths, lo, hi, len(prefix)))
            return self._matching(pattern, len(lit), paths[lo:hi])
        base = "" if "**" in comps[-1] else _literal_prefix(comps[-1])
        if base:
            # "/**/libcudart.so*": only paths whose base name starts with the literal
            # part can match; a sorted (base name, path) index finds them without a
            # regex test of every kept path (host scans keep hundreds of thousands)
            by_base, names = self._base_index()
            lo = bisect.bisect_left(names, base)
            hi = bisect.bisect_left(names, base + "\U0010ffff")
            return self._matching(pattern, 0, sorted(
                p for n in names[lo:hi] for p in by_base[n]))
        candidates = paths
        last = comps[-1]
        cut = max(last.rfind("*"), last.rfind("?"))
        if 0 <= cut < len(last) - 1 and not any(c in last for c in "[]\\"):
            # "/**/*.egg-info": a match ends with the base name's literal tail; one string
            # test each drops the rest before the regex (a host keeps ~20,000 entries)
            # ("$" also matches before a final newline, as the regex test did)
            tails = (last[cut + 1 :], last[cut + 1 :] + "\n")
            candidates = [p for p in candidates if p.endswith(tails)]
        return self._matching(pattern, 0, candidates)

    @staticmethod
    def _matching(pattern: str, skip: int, candidates: list[str]) -> list[str]:
        """The ``candidates`` (sorted) that ``pattern`` matches. A match holds "/" and the
        literal start of each of the pattern's components (after the first ``skip``
        literal ones, which the candidates share): a substring test drops the rest, and a
        pattern left with none is not compiled (most of the patterns collectors glob have
        no match on a given view: "/**/tensorrt*.dist-info/METADATA" tested each of a
        host's hundreds of METADATA; 81 regexes compiled for an H200 host's scan)."""
        needles = _needles(pattern, skip)
        if needles and candidates:
            candidates = [p for p in candidates if all(n in p for n in needles)]
        if not candidates:
            return []
        match = _glob_rx(pattern).match
        return [p for p in candidates if match(p)]

    def _base_index(self) -> tuple[dict[str, list[str]], list[str]]:
        """Each base name's paths, and the distinct base names sorted (one pass over the
        entries and one sort of the names: sorting (base name, path) pairs took 35 ms of a
        host scan's 20,000 entries on a development VM)."""
        if self._by_base is None or self._basenames is None:
            by_base: dict[str, list[str]] = {}
            for p in self._entries:
                name = p[p.rfind("/") + 1 :]
                got = by_base.get(name)
                if got is None:
                    by_base[name] = [p]
                else:
                    got.append(p)
            self._by_base, self._basenames = by_base, sorted(by_base)
        return self._by_base, self._basenames

    def _no_base_name_can_match(self, pattern: str) -> bool:
        """Cheap reject: no kept entry's base name starts with the pattern's literal
        base-name prefix. Collectors glob a few hundred patterns per scan and most have
        nothing to find; compiling their regexes was a large part of a scan's fixed cost."""
        base = pattern.rsplit("/", 1)[-1]
        cut = len(base)
        for i, ch in enumerate(base):
            if ch in "*?[":
                cut = i
                break
        lit = base[:cut]
        if not lit:
            return False
        names = self._base_index()[1]
        i = bisect.bisect_left(names, lit)
        return i >= len(names) or not names[i].startswith(lit)

    def glob(self, pattern: str) -> list[str]:
        """Sorted real paths of kept entries matching the absolute glob ``pattern``.

        Symlinks in the literal leading directories of the pattern are resolved
        (``/usr/local/cuda/lib64/*.so`` finds files under ``/usr/local/cuda-12.4``).
        Collectors ask for some patterns more than once: each is answered once per view.
        """
        got = self._globbed.get(pattern)
        if got is None:
            got = self._globbed[pattern] = self._glob(pattern)
        return list(got)

    def _glob(self, pattern: str) -> list[str]:
        if self._no_base_name_can_match(pattern):
            return []
        out = set(self._glob_raw(pattern))
        comps = pattern.split("/")
        k = 1
        while k < len(comps) - 1 and not _GLOB_CHARS.intersection(comps[k]):
            k += 1
        if k > 1:
            lit = "/".join(comps[:k])
            try:
                real = self.realpath(lit)
            except UnsafeArchiveError:
                real = lit
            if real != lit:
                rest = "/".join(comps[k:])
                out.update(self._glob_raw(real.rstrip("/") + "/" + rest))
        return sorted(out)
