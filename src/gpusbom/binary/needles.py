"""The magics the stream scanner looks for, and the fast search for them (``rare_find``).

``binary.scanloop`` searches every byte outside fatbin payloads and executable code for
these needles; the search is its hot loop, so it looks for each needle's rarest byte with
``memchr`` and checks the whole needle only there.
"""

from __future__ import annotations

from gpusbom.binary.fatbin import FATBIN_MAGIC
from gpusbom.binary.hipbundle import BUNDLE_MAGIC, CCOB_MAGIC

#: A CUDA fatbin container's magic as it lies in the file.
FAT_NEEDLE = FATBIN_MAGIC.to_bytes(4, "little")
#: A host binary with HIP device code imports this from the HIP runtime: its name is in the
#: dynamic string table, near the start of the file, before any ``.hip_fatbin``. Bundles are
#: only looked for in ELF files once it was seen (in the first ``scanloop.HIP_GATE_WINDOW`` bytes),
#: which spares CUDA and CPU libraries two of the three searches.
HIPREG_NEEDLE = b"__hipRegisterFatBinary"


#: Ranges shorter than this are searched with ``bytes.find`` alone.
_FIND_MIN = 64
#: One candidate (the rare byte) per this many bytes or more: not rare here, ``bytes.find``.
_DENSE = 512
#: The byte of each needle that is looked for first (the rarest in real CUDA and torch
#: libraries: 0xed is ~1 in 2,000 bytes of libcublasLt.so.12, ``R`` ~1 in 1,000).
_RARE = {FAT_NEEDLE: 1, HIPREG_NEEDLE: 5, BUNDLE_MAGIC: 4, CCOB_MAGIC: 2}


def rare_find(buf: bytes, needle: bytes, start: int, end: int) -> int:
    """``buf.find(needle, start, end)``, faster on machine code and data: the positions of the
    needle's rarest byte are found with ``bytes.find`` of that one byte (``memchr``, several
    GB/s) and each is checked for the whole needle.

    ``bytes.find`` on a 4-byte needle runs at ~1.3 GB/s over machine code (its skip loop
    stops at every byte that shares a bloom slot with the needle). A numpy compare of the
    rarest byte (~3 GB/s) was used before; its fixed cost per call (an array view, a compare,
    a count, a list of positions: tens of microseconds) dominated where containers lie close
    together: the ``torch/`` + ``nvidia/`` layer of a 13 GB image made 59,000 searches, 3.2
    CPU-s under the interpreter lock on a 16-core H200 host. Where the rare byte is not rare
    (more than one in :data:`_DENSE` bytes: hostile, or odd data), the rest of the range goes
    to ``bytes.find``. Same result as ``bytes.find``, always."""
    size = len(needle)
    r = _RARE.get(needle, 0)
    last = min(end, len(buf)) - size  # the last start a match may have
    if start < 0 or last - start < _FIND_MIN:
        return buf.find(needle, start, end)
    rare = needle[r : r + 1]
    find = buf.find
    stop = last + r + 1
    k = find(rare, start + r, stop)
    tries = 0
    while k >= 0:
        s = k - r
        if buf[s : s + size] == needle:
            return s
        tries += 1
        if tries >= 64 and k - start < tries * _DENSE:
            return find(needle, s + 1, end)
        k = find(rare, k + 1, stop)
    return -1
