"""The magic search of the stream scanner (``memchr`` of a magic's rarest byte) gives exactly
``bytes.find``'s answer: needles near the edges where it changes course (short ranges, the
point where a dense rare byte sends the rest to ``bytes.find``), at the range ends, in data
where the "rare" byte is everywhere (the hostile fallback), and in random data made of the
needles' own bytes."""

from __future__ import annotations

import random

import pytest

from gpusbom.binary.hipbundle import BUNDLE_MAGIC, CCOB_MAGIC
from gpusbom.binary.needles import _DENSE, _FIND_MIN
from gpusbom.binary.needles import FAT_NEEDLE as _FAT
from gpusbom.binary.needles import HIPREG_NEEDLE as _HIPREG
from gpusbom.binary.needles import rare_find as _rare_find

NEEDLES = (_FAT, _HIPREG, BUNDLE_MAGIC, CCOB_MAGIC)
_RND = random.Random(3)
_BASE = bytes(_RND.getrandbits(8) for _ in range(1 << 16)) * 24  # 1.5 MiB


@pytest.mark.parametrize("needle", NEEDLES, ids=lambda n: n.decode("latin-1")[:8])
@pytest.mark.parametrize("fill", ["random", "rare", "other"])
def test_window_edges(needle: bytes, fill: str) -> None:
    base = {"random": _BASE, "rare": b"\xed" * len(_BASE), "other": needle[1:2] * len(_BASE)}[fill]
    edges = (_FIND_MIN, 64, 64 * _DENSE, 70 * _DENSE, len(base) - len(needle))
    for edge in edges:
        for d in (-len(needle), -1, 0, 1):
            for start in (0, 17):
                at = edge + d + start
                buf = bytearray(base)
                buf[at : at + len(needle)] = needle
                data = bytes(buf[: len(base)])
                for end in (len(data), at + len(needle), at + len(needle) - 1):
                    assert _rare_find(data, needle, start, end) == data.find(needle, start, end)


def test_random_needle_bytes() -> None:
    rnd = random.Random(7)
    for _ in range(80):
        size = rnd.choice([100, 70_000, 300_000, 2 << 20])
        needle = rnd.choice(NEEDLES)
        block = bytearray(rnd.choice([*needle, 0]) for _ in range(4096))
        buf = block * (size // 4096 + 1)
        for _ in range(rnd.randint(0, 3)):
            at = rnd.randrange(size)
            buf[at : at + len(needle)] = needle
        data = bytes(buf[:size])
        start = rnd.randrange(size)
        end = rnd.randrange(start, size + 1)
        assert _rare_find(data, needle, start, end) == data.find(needle, start, end)
    # and it does find things
    data = _BASE[:300_000] + _FAT + _BASE[:10]
    assert _rare_find(data, _FAT, 0, len(data)) == 300_000


@pytest.mark.parametrize("needle", NEEDLES, ids=lambda n: n.decode("latin-1")[:8])
def test_near_misses_below_the_dense_limit(needle: bytes) -> None:
    """Every 1,000th byte starts all but the last byte of the needle: each candidate is
    checked and rejected by the main loop (not the dense fallback) until the real one."""
    unit = needle[:-1] + b"\x00" * (1000 - len(needle) + 1)
    for at in (0, 5, 64 * 1000 + 3, 300 * 1000 + 999):
        buf = bytearray(unit * 400)
        buf[at : at + len(needle)] = needle
        data = bytes(buf)
        for start in (0, 1, at, at + 1):
            for end in (len(data), at + len(needle), at + len(needle) - 1):
                assert _rare_find(data, needle, start, end) == data.find(needle, start, end)
