"""The magic search of the stream scanner (``needles.find_magic``: a compiled literal pattern
for the 4-byte magics, ``bytes.find`` for the longer ones) gives exactly ``bytes.find``'s
answer: needles at the range ends and just across them, in random data, in data made of the
needles' own bytes, in near misses every 1,000 bytes, and in hostile fills (every byte the
needle's first, its first three repeated)."""

from __future__ import annotations

import random

import pytest

from gpusbom.binary.hipbundle import BUNDLE_MAGIC, CCOB_MAGIC
from gpusbom.binary.needles import FAT_NEEDLE as _FAT
from gpusbom.binary.needles import HIPREG_NEEDLE as _HIPREG
from gpusbom.binary.needles import find_magic

NEEDLES = (_FAT, _HIPREG, BUNDLE_MAGIC, CCOB_MAGIC)
_RND = random.Random(3)
_BASE = bytes(_RND.getrandbits(8) for _ in range(1 << 16)) * 24  # 1.5 MiB


@pytest.mark.parametrize("needle", NEEDLES, ids=lambda n: n.decode("latin-1")[:8])
@pytest.mark.parametrize("fill", ["random", "first", "prefix", "zeros"])
def test_range_edges(needle: bytes, fill: str) -> None:
    base = {"random": _BASE, "first": needle[:1] * len(_BASE),
            "prefix": (needle[:-1] * (len(_BASE) // (len(needle) - 1) + 1))[: len(_BASE)],
            "zeros": bytes(len(_BASE))}[fill]
    for edge in (0, 1, 63, 64, 4096, 1 << 20, len(base) - len(needle)):
        for d in (-len(needle), -1, 0, 1):
            at = max(0, min(edge + d, len(base) - len(needle)))
            buf = bytearray(base)
            buf[at : at + len(needle)] = needle
            data = bytes(buf)
            for start in (0, 17, at - 1, at, at + 1, -5):
                for end in (len(data), len(data) + 9, at + len(needle), at + len(needle) - 1,
                            at, -1):
                    assert find_magic(data, needle, start, end) == data.find(needle, start, end)


def test_random_needle_bytes() -> None:
    rnd = random.Random(7)
    for _ in range(200):
        size = rnd.choice([3, 100, 70_000, 300_000, 2 << 20])
        needle = rnd.choice(NEEDLES)
        block = bytearray(rnd.choice([*needle, 0]) for _ in range(4096))
        buf = block * (size // 4096 + 1)
        for _ in range(rnd.randint(0, 3)):
            at = rnd.randrange(size)
            buf[at : at + len(needle)] = needle
        data = bytes(buf[:size])
        start = rnd.randrange(size)
        end = rnd.randrange(start, size + 1)
        assert find_magic(data, needle, start, end) == data.find(needle, start, end)
    # and it does find things
    data = _BASE[:300_000] + _FAT + _BASE[:10]
    assert find_magic(data, _FAT, 0, len(data)) == 300_000
    assert find_magic(data, _FAT, 300_001, len(data)) == -1


@pytest.mark.parametrize("needle", NEEDLES, ids=lambda n: n.decode("latin-1")[:8])
def test_near_misses(needle: bytes) -> None:
    """Every 1,000th byte starts all but the last byte of the needle, until the real one."""
    unit = needle[:-1] + b"\x00" * (1000 - len(needle) + 1)
    for at in (0, 5, 64 * 1000 + 3, 300 * 1000 + 999):
        buf = bytearray(unit * 400)
        buf[at : at + len(needle)] = needle
        data = bytes(buf)
        for start in (0, 1, at, at + 1):
            for end in (len(data), at + len(needle), at + len(needle) - 1):
                assert find_magic(data, needle, start, end) == data.find(needle, start, end)
