"""The streaming scanners do not search the executable segments of separate-code ELF files
(device code containers are data, never linked there), and skip nothing in the merged layout
NVIDIA ships, where ``.nv_fatbin`` shares the R+X segment with ``.rodata`` and ``.text``."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from elftools.elf.constants import SH_FLAGS
from elftools.elf.elffile import ELFFile
from gpubin_oracles import make_fatbin, make_fatbin_entry, nvidia_library, rocrand_library

from gpusbom.binary import scanloop
from gpusbom.binary.stream import MAX_PHDR_PREFIX, GpuCodeScanner, executable_ranges

GPU_SECTIONS = {".nv_fatbin", "__nv_relfatbin", ".hip_fatbin"}


def feed(data: bytes, step: int = 1 << 16) -> dict | None:
    sc = GpuCodeScanner("t")
    for k in range(0, len(data), step):
        sc.feed(data[k : k + step])
    return sc.close()


def sections_in(path: Path, ranges: list[tuple[int, int]]) -> list[tuple[str, bool]]:
    """(name, executable) of every section with file bytes inside ``ranges``."""
    out = []
    with path.open("rb") as f:
        for s in ELFFile(f).iter_sections():
            if s["sh_type"] == "SHT_NOBITS" or not s["sh_size"]:
                continue
            a, b = s["sh_offset"], s["sh_offset"] + s["sh_size"]
            if any(a < y and b > x for x, y in ranges):
                out.append((s.name, bool(s["sh_flags"] & SH_FLAGS.SHF_EXECINSTR)))
    return out


def test_separate_code_library_skips_only_code(monkeypatch: pytest.MonkeyPatch) -> None:
    path = rocrand_library()
    data = path.read_bytes()
    ranges = executable_ranges(data[:MAX_PHDR_PREFIX])
    assert ranges, "librocrand is linked with separate code: its .text is skipped"
    inside = sections_in(path, ranges)
    assert inside and all(x for _, x in inside), inside  # only SHF_EXECINSTR sections
    assert not {n for n, _ in inside} & GPU_SECTIONS
    found = feed(data)
    assert found and found["hip"]["targets"]
    # a (valid) fatbin container planted in the code is not looked at ...
    fat = make_fatbin([make_fatbin_entry(2, 80)])
    a, b = ranges[0]
    assert b - a > len(fat) + 0x100
    planted = data[: a + 0x100] + fat + data[a + 0x100 + len(fat) :]
    for step in (1 << 16, 4093, 1 << 20):
        assert feed(planted, step) == found
    # ... which is the skip's doing: without it the container is found
    monkeypatch.setattr(scanloop, "executable_ranges", lambda head: [])  # the name scanloop.py reads
    assert feed(planted)["cuda"]["sass"] == ["sm_80"]


def test_merged_layout_skips_nothing() -> None:
    path = nvidia_library("nvjpeg-cu12")
    head = path.read_bytes()[:MAX_PHDR_PREFIX]
    assert executable_ranges(head) == []
    with path.open("rb") as f:
        e = ELFFile(f)
        fat = e.get_section_by_name(".nv_fatbin")
        x = [s for s in e.iter_segments() if s["p_type"] == "PT_LOAD" and s["p_flags"] & 1]
    # the reason: the fatbin lies in the R+X segment that starts at offset 0
    assert any(s["p_offset"] == 0 and s.section_in_segment(fat) for s in x)


def _elf64(
    phdrs: list[tuple[int, int, int, int]], *, phoff: int = 64, size: int = 1 << 16
) -> bytes:
    """ELF64 with (p_type, p_flags, p_offset, p_filesz) program headers, zero-filled."""
    hdr = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    hdr += struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, phoff, 0, 0, 64, 56, len(phdrs), 64, 0, 0)
    body = bytearray(size)
    body[:64] = hdr
    for k, (t, fl, off, n) in enumerate(phdrs):
        at = phoff + 56 * k
        body[at : at + 56] = struct.pack("<IIQQQQQQ", t, fl, off, off, off, n, n, 4096)
    return bytes(body)


def test_rule_on_synthetic_headers() -> None:
    sep = [(1, 4, 0, 0x1000), (1, 5, 0x1000, 0x8000), (1, 4, 0x9000, 0x1000), (4, 4, 0x2000, 0x100)]
    data = _elf64(sep)
    # the PF_X range less what another header (here a PT_NOTE) covers, pieces >= MIN_SKIP
    assert executable_ranges(data) == [(0x1000, 0x2000), (0x2100, 0x9000)]
    assert executable_ranges(data[:100]) is None  # table not complete yet
    assert executable_ranges(_elf64([(1, 5, 0, 0x8000), (1, 6, 0x9000, 0x100)])) == []
    assert executable_ranges(_elf64(sep, phoff=MAX_PHDR_PREFIX)) == []  # table too far
    assert executable_ranges(_elf64(sep, phoff=8)) == []  # malformed
    bad = bytearray(data)
    bad[4] = 7  # unknown class
    assert executable_ranges(bytes(bad)) == []
    # the scanner: a container in the skipped code is not found, one before it is
    fat = make_fatbin([make_fatbin_entry(2, 80)])
    body = bytearray(data + bytes(0x10000))
    body[0x3000 : 0x3000 + len(fat)] = fat
    for step in (1, 7, 4096, 1 << 20):
        assert feed(bytes(body), step) is None
    body[0x800 : 0x800 + len(fat)] = fat
    for step in (7, 4096, 1 << 20):
        assert feed(bytes(body), step)["cuda"]["containers"] == 1
