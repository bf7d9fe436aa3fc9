"""The byte ranges of an ELF file that hold only executable code, from its program headers.

The stream scanner (``binary.scanloop``) does not search these ranges for device-code
magics: device code containers are data and never linked into an executable segment. The
ranges are known from the first bytes of the file (the program header table), before the
rest streams by.
"""

from __future__ import annotations

from typing import Literal

from gpusbom.binary.elf import ELF_MAGIC

#: Most leading bytes of an ELF file looked at for its program header table; a table that
#: ends past them (it normally sits right after the 64-byte ELF header) disables the skip.
MAX_PHDR_PREFIX = 64 << 10
#: Executable byte ranges shorter than this are searched anyway (not worth a state change).
MIN_SKIP = 4096
_PT_LOAD = 1
_PF_X = 1


def executable_ranges(head: bytes | bytearray) -> list[tuple[int, int]] | None:
    """File ranges ``[start, end)`` of an ELF file that hold only executable code, from the
    program header table in ``head`` (the file's first bytes): sorted, disjoint, each at least
    :data:`MIN_SKIP` long. None when ``head`` is too short to tell (it needs the ELF header and
    the whole table); ``[]`` when nothing may be skipped (not separate-code, or malformed).

    The rule, from the layouts of real libraries (checked with pyelftools):

    * Separate-code layout -- GNU ld ``-z separate-code`` (the x86-64 default since binutils
      2.31), lld and mold: the first ``PT_LOAD`` (offset 0: ELF header, dynamic symbols,
      ``.rodata``, ``.nv_fatbin``, ``.hip_fatbin``) is read-only and the ``PF_X`` segment holds
      only code (``.init .plt .text .fini``). Seen in torch 2.5.1's ``libtorch_cuda.so``
      (``.nv_fatbin`` at 0x40a3118 in the R segment 0x3a93000.., code 0xde1000..0x3a92355),
      ``libtorch_cpu.so``, ``libtorch_cuda_linalg.so``, ``libtorch_python.so`` and Debian's
      ``librocrand.so.1.1`` (``.hip_fatbin`` at 0xc53000 in the R segment 0x1b000..): no
      non-executable section inside a ``PF_X`` segment in any of them.
    * Merged layout (gold, old GNU ld, ``-z noseparate-code``), which NVIDIA ships: one
      ``R+X`` ``PT_LOAD`` from offset 0 holds the ELF header, ``.rodata`` *and* ``.nv_fatbin``
      with ``.text`` (``libcublas.so.12`` / ``libcublasLt.so.12`` 12.9, cuDNN 9 libraries,
      ``libcusparseLt``, ``libnvjpeg.so.12`` / ``.13``, ``libnvjpeg2k.so.0``). These files
      also have non-X ``PT_LOAD`` segments (RW data, a read-only ``.nvFatBinSegment`` tail),
      so "there is a non-X segment" does not tell the layouts apart.

    Hence: only when a non-``PF_X`` ``PT_LOAD`` maps offset 0 (the ELF header is not mapped
    executable) are the ``PF_X`` ``PT_LOAD`` ranges skipped, less any byte that another
    program header (any type) also covers. Anything odd -- a table outside ``head``, bad
    sizes, more than 4096 entries -- skips nothing.
    """
    if len(head) < 64 or head[:4] != ELF_MAGIC:
        return None
    cls, enc = head[4], head[5]
    if cls not in (1, 2) or enc not in (1, 2):
        return []
    order: Literal["little", "big"] = "little" if enc == 1 else "big"

    def u(off: int, n: int) -> int:
        return int.from_bytes(head[off : off + n], order)

    if cls == 2:
        phoff, phentsize, phnum, entsize = u(32, 8), u(54, 2), u(56, 2), 56
    else:
        phoff, phentsize, phnum, entsize = u(28, 4), u(42, 2), u(44, 2), 32
    end = phoff + phentsize * phnum
    if phnum == 0 or phnum > 4096 or phentsize < entsize or phoff < 52 or end > MAX_PHDR_PREFIX:
        return []
    if len(head) < end:
        return None
    execs: list[tuple[int, int]] = []
    others: list[tuple[int, int]] = []
    ro_head = False
    for k in range(phnum):
        at = phoff + k * phentsize
        ptype = u(at, 4)
        if cls == 2:
            flags, offset, filesz = u(at + 4, 4), u(at + 8, 8), u(at + 32, 8)
        else:
            offset, filesz, flags = u(at + 4, 4), u(at + 16, 4), u(at + 24, 4)
        if filesz == 0:
            continue
        if ptype == _PT_LOAD and flags & _PF_X:
            execs.append((offset, offset + filesz))
        else:
            others.append((offset, offset + filesz))
            if ptype == _PT_LOAD and offset == 0:
                ro_head = True
    if not ro_head or not execs:
        return []
    # exclusive executable bytes: each PF_X range less every other header's range
    out: list[tuple[int, int]] = []
    for a, b in execs:
        pieces = [(a, b)]
        for c, d in others:
            pieces = [q for x, y in pieces for q in ((x, min(y, c)), (max(x, d), y)) if q[0] < q[1]]
        out.extend(pieces)
    out.sort()
    merged: list[tuple[int, int]] = []
    for a, b in out:
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return [(a, b) for a, b in merged if b - a >= MIN_SKIP]
