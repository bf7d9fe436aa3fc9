"""Ownership claimed per directory (``GroupedPaths``, the claims a host walk's workers
prepare) answers what a map of every claimed file to its first claimer answers: the same
owner for every path asked, claimed as plain lists or grouped, through linked directories,
odd spellings (trailing and doubled slashes, ``.``, ``..``, no slash) and names holding
the separator the grouping joins names with."""

from __future__ import annotations

import random

import pytest
from test_pkg_collectors_fsview import Link, image

from gpusbom.collectors.base import GroupedPaths, OwnershipIndex
from gpusbom.fsview.types import Spool
from gpusbom.model import Component, ComponentType

LAYER = {
    "/usr/lib/x86_64-linux-gnu/libc.so.6": b"x",
    "/usr/lib/x86_64-linux-gnu/libm.so.6": b"x",
    "/usr/bin/tool": b"x",
    "/opt/b/f": b"x",
    "/lib": Link("usr/lib"),
    "/bin": Link("usr/bin"),
    "/opt/a": Link("/opt/b"),
    "/usr/lib/loop": Link("loop"),
}
PARTS = ["usr", "lib", "bin", "x86_64-linux-gnu", "libc.so.6", "libm.so.6", "opt", "a", "b",
         "f", "loop", ".", "..", "", "a\0b", "tool"]
FIXED = ["/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/",
         "/usr/lib//x86_64-linux-gnu/libm.so.6", "/usr/./lib/a", "/usr/lib/../bin/tool", "/",
         "//", "", "nolead", "/opt/a/f", "/opt/b/f", "/usr/lib/a\0b", "/usr/lib/a", "/usr/lib/b",
         "/usr/lib/loop/x", "/bin/tool"]


def _paths(rng: random.Random, n: int) -> list[str]:
    out = []
    for _ in range(n):
        p = "/".join(rng.choice(PARTS) for _ in range(rng.randint(1, 4)))
        out.append(("/" if rng.random() < 0.9 else "") + p + ("/" if rng.random() < 0.1 else ""))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_grouped_claims_answer_like_a_map_of_first_claims(seed: int) -> None:
    rng = random.Random(seed)
    spool = Spool()
    try:
        fs = image([LAYER], spool)
        comps = [Component(type=ComponentType.LIBRARY, name=f"p{i}", version="1") for i in range(6)]
        claims = [(c, _paths(rng, 40) + rng.sample(FIXED, 6)) for c in comps]
        plain, grouped = OwnershipIndex(fs), OwnershipIndex(fs)
        ref: dict[str, Component] = {}  # every claimed file's key -> its first claimer
        for comp, paths in claims:
            plain.add(comp, paths)
            grouped.add(comp, GroupedPaths.of(paths))
            for p in paths:
                if p:
                    ref.setdefault(plain.key(p), comp)
        asked = FIXED + _paths(rng, 300) + [p for _, ps in claims for p in ps]
        owned = 0
        for q in asked:
            want = ref.get(plain.key(q))
            assert plain.owner(q) is want, (q, want)
            assert grouped.owner(q) is want, (q, want)
            owned += want is not None
        assert owned > 100
        assert len(plain) == len(grouped) == len(ref)
        # a name holding the separator is kept whole: it neither claims nor is claimed by parts
        sep = OwnershipIndex(fs)
        sep.add(comps[0], ["/usr/lib/a\0b"])
        sep.add(comps[1], GroupedPaths.of(["/usr/lib/a", "/usr/lib/b"]))
        assert sep.owner("/usr/lib/a") is comps[1] and sep.owner("/usr/lib/a\0b") is comps[0]
        assert sep.owner("/usr/lib/b\0a") is None
    finally:
        spool.close()
