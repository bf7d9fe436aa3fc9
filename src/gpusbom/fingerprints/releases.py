"""Vendor release lists: is a version gpusbom read a release of its product?

A version read from a binary (a getter's constant, a rodata string, a file name) can be
wrong: a constant decoded with the wrong rule (cuBLAS 10.x's ``10201`` read as
``1.2.1``), a file's own numbering that is not the product's (CUPTI's
``libcupti.so.2025.3.1``). The fingerprint database carries the vendor's release lists
(``releases``: PyPI index listings of NVIDIA's wheels, the pins of NVIDIA's ``cuda-toolkit``
metapackage, NVIDIA's CUDA Dockerfiles, distro packages of the toolkit) and, per product,
the release from which the list is complete (``complete_from``). A candidate version is:

- ``release``: it is a listed release, or a short form of one (``10.2.2`` of
  ``10.2.2.89``), or lies in a listed short release line (``10.2`` covers ``10.2.x``);
- ``rejected``: not a release of the product. Either no listed release has its major
  version (``1.2.1`` for cuBLAS, whose releases run 10 .. 13; one major above the newest is
  allowed, a release newer than the database), or it lies in the range where the list is
  complete (at or above ``complete_from``, at or below the newest listed release) and is
  not in it (``12.7`` for cudart: there was no CUDA 12.7);
- ``unlisted``: neither: the list cannot say (an older line it does not cover completely,
  a release newer than the database). Such a version is kept, and says so.

A rejected version is never reported: the collector drops it, keeps it as evidence
(``rejected-versions``) and reports the next candidate, or ``unknown``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # the database builds its index lazily (database.release_index)
    from .database import Record, Release

__all__ = ["ReleaseCheck", "ReleaseIndex", "numeric"]

_NUM_RX = re.compile(r"\d+(?:\.\d+)*")


def numeric(version: str) -> tuple[int, ...]:
    """The leading numeric dotted part of ``version`` (``12.4.0.16rc1`` -> (12, 4, 0, 16));
    () when it has none."""
    m = _NUM_RX.match(version.strip())
    return tuple(int(p) for p in m.group(0).split(".")) if m else ()


def _text(t: tuple[int, ...]) -> str:
    return ".".join(map(str, t))


@dataclass(frozen=True)
class ReleaseCheck:
    """The verdict on one candidate version of one product."""

    status: Literal["release", "unlisted", "rejected"]
    reason: str
    #: the listed release (or release line) the candidate is, or is a short form of
    listed: str | None = None


class ReleaseIndex:
    """The release lists of a fingerprint database, per product (also the versions of its
    exact file records: a fingerprinted wheel is a release)."""

    def __init__(self, releases: Iterable[Release], complete_from: Mapping[str, str],
                 exact: Iterable[Record] = ()) -> None:
        per: dict[str, dict[tuple[int, ...], str]] = {}
        for r in releases:
            t = numeric(r.version)
            if t:
                per.setdefault(r.product, {}).setdefault(t, r.version)
        for rec in exact:
            t = numeric(rec.version)
            if t:
                per.setdefault(rec.product, {}).setdefault(t, rec.version)
        self._listed = {p: dict(sorted(v.items())) for p, v in per.items()}
        self._complete = {p: numeric(v) for p, v in complete_from.items() if numeric(v)}

    def products(self) -> frozenset[str]:
        """The products that have a release list."""
        return frozenset(self._listed)

    def listed(self, product: str) -> list[str]:
        """The listed releases (and release lines) of ``product``, in version order."""
        return list(self._listed.get(product, {}).values())

    def check(self, product: str, version: str | None) -> ReleaseCheck | None:
        """The verdict on ``version`` of ``product``; None when the product has no list or
        the version has no numeric part (nothing can be said)."""
        listed = self._listed.get(product)
        cand = numeric(version or "")
        if not listed or not cand:
            return None
        for t, text in listed.items():
            if t == cand:
                how = "a listed release"
            elif len(t) > len(cand) and t[: len(cand)] == cand:
                how = f"a short form of the listed release {text}"
            elif len(t) <= 2 and cand[: len(t)] == t:
                how = f"in the listed release line {text}"
            else:
                continue
            return ReleaseCheck("release", f"{version} is {how}", text)
        majors = sorted({t[0] for t in listed})
        newest = max(listed)
        if cand[0] not in majors:
            if cand[0] == majors[-1] + 1:
                return ReleaseCheck("unlisted", f"major {cand[0]} is newer than the newest "
                                               f"listed {product} release {listed[newest]}")
            return ReleaseCheck("rejected", f"no {product} release has major {cand[0]} "
                                            f"(listed majors: {', '.join(map(str, majors))})")
        floor = self._complete.get(product)
        if cand > newest:
            return ReleaseCheck("unlisted", f"newer than the newest listed {product} release "
                                            f"{listed[newest]}")
        if floor is not None and cand >= floor:
            lower = max((t for t in listed if t < cand), default=None)
            upper = min((t for t in listed if t > cand), default=None)
            near = ", ".join(listed[t] for t in (lower, upper) if t is not None)
            return ReleaseCheck(
                "rejected",
                f"not a {product} release: the vendor lists name every {product} release "
                f"since {_text(floor)} (nearest: {near})")
        where = (f"the list is complete only from {_text(floor)}" if floor is not None
                 else "the list is not complete for any range")
        return ReleaseCheck("unlisted", f"not listed ({where})")
