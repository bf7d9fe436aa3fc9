"""The magics the stream scanner looks for, and the fast search for them (``find_magic``).

``binary.scanloop`` searches every byte outside fatbin payloads and executable code for
these needles; the search is its hot loop, so it runs in C from the range's start to the
first match (``find_magic``).
"""

from __future__ import annotations

import re

from gpusbom.binary.fatbin import FATBIN_MAGIC

#: A CUDA fatbin container's magic as it lies in the file.
FAT_NEEDLE = FATBIN_MAGIC.to_bytes(4, "little")
#: A host binary with HIP device code imports this from the HIP runtime: its name is in the
#: dynamic string table, near the start of the file, before any ``.hip_fatbin``. Bundles are
#: only looked for in ELF files once it was seen (in the first ``scanloop.HIP_GATE_WINDOW`` bytes),
#: which spares CUDA and CPU libraries two of the three searches.
HIPREG_NEEDLE = b"__hipRegisterFatBinary"


#: Needles this long or shorter are searched with a compiled pattern (``find_magic``).
_SHORT = 8
_PATTERNS: dict[bytes, re.Pattern[bytes]] = {}


def find_magic(buf: bytes, needle: bytes, start: int, end: int) -> int:
    """``buf.find(needle, start, end)``, always the same answer, in one C call without a
    step of Python per candidate.

    A short magic (the fatbin and compressed-bundle magics: 4 bytes) is searched with a
    compiled literal pattern (``re``): ~3.3 GB/s on the VM over CUDA and CPU libraries
    whatever their bytes, where ``bytes.find`` runs at ~1.9 GB/s (its skip loop stops at
    every byte that shares a bloom slot with a 4-byte needle). A longer one
    (``__hipRegisterFatBinary``, the plain bundle magic) goes to ``bytes.find``, whose skip
    is long then (~6.7 GB/s).

    The search used before looked for the magic's rarest byte with ``memchr`` and checked
    each position in Python: fast where that byte is rare (0xed is ~1 in 2,000 bytes of
    ``libcublasLt.so.12``), but ~1 in 550 bytes of ``libcurand.so.10`` and of LLVM's
    libraries, and the 4.5 GB CUDA 13.0 layer of ``benchmarks/big_image.py`` made 1.6
    million such checks in 61,000 searches (2.9 s under the interpreter lock, profiled on a
    16-core host): the lock that the layer's reader and its analysis thread share."""
    if len(needle) > _SHORT or start < 0 or end < 0:
        return buf.find(needle, start, end)
    pattern = _PATTERNS.get(needle)
    if pattern is None:
        pattern = _PATTERNS.setdefault(needle, re.compile(re.escape(needle)))
    m = pattern.search(buf, start, end)
    return m.start() if m is not None else -1
