"""Locating GPU sections in ELF files (synthetic ELF; no tools needed)."""

from __future__ import annotations

import io
import struct

import pytest
from gpubin_oracles import make_elf, make_fatbin, make_fatbin_entry

from gpusbom.binary import (
    BinaryFormatError,
    find_gpu_sections,
    is_elf,
    list_fatbin,
    scan_binary,
)
from gpusbom.binary.elf import read_at


def _fatbin() -> bytes:
    return make_fatbin(
        [
            make_fatbin_entry(2, 90, flags=0x100011),
            make_fatbin_entry(
                1,
                100,
                flags=0x208011,
                version=(9, 0),
                header_size=80,
                payload=b"\x28\xb5\x2f\xfd" + bytes(20),
                uncompressed=1000,
            ),
        ]
    )


def test_is_elf() -> None:
    assert is_elf(b"\x7fELF\x02\x01")
    assert not is_elf(b"MZ\x90\x00") and not is_elf(b"")


def test_finds_only_gpu_sections_in_order() -> None:
    fb = _fatbin()
    elf = make_elf(
        [
            (".text", b"\x90" * 16),
            (".nv_fatbin", fb),
            (".nvFatBinSegment", bytes(24)),
            ("__nv_relfatbin", fb),
            (".data", b"x"),
            (".hip_fatbin", bytes(8)),
        ]
    )
    secs = find_gpu_sections(io.BytesIO(elf))
    assert [(s.name, s.kind) for s in secs] == [
        (".nv_fatbin", "cuda-fatbin"),
        (".nvFatBinSegment", "cuda-wrapper"),
        ("__nv_relfatbin", "cuda-fatbin"),
        (".hip_fatbin", "hip-fatbin"),
    ]
    nv = secs[0]
    assert elf[nv.offset : nv.offset + nv.size] == fb and not nv.truncated
    entries = list_fatbin(io.BytesIO(elf), nv.offset, nv.size)
    assert [(e.kind, e.arch, e.target, e.compression, e.list_name) for e in entries] == [
        ("elf", "sm_90a", "sm_90a", "none", "sm_90a"),
        ("ptx", "sm_100f", "compute_100f", "zstd", "sm_100f"),
    ]
    assert entries[1].ptx_isa == "9.0" and entries[1].uncompressed_size == 1000
    r = scan_binary(io.BytesIO(elf))
    assert r.cuda is not None and r.cuda.sass == ("sm_90a",) and r.cuda.ptx == ("compute_100f",)
    assert r.cuda.entries == 4 and r.cuda.containers == 2 and r.errors == ()


def test_no_gpu_sections() -> None:
    elf = make_elf([(".text", b"\x90")])
    assert find_gpu_sections(io.BytesIO(elf)) == []
    r = scan_binary(io.BytesIO(elf))
    assert r.cuda is None and r.hip is None


def test_not_elf_and_non_binary() -> None:
    with pytest.raises(BinaryFormatError):
        find_gpu_sections(io.BytesIO(b"#!/bin/sh\n"))
    assert scan_binary(io.BytesIO(b"#!/bin/sh\n")).sections == ()


def test_truncated_file_clips_section() -> None:
    elf = make_elf([(".nv_fatbin", _fatbin())])
    # move the section header table in front by truncating after it is impossible; instead
    # grow the section size field past the end of the file
    shoff = struct.unpack_from("<Q", elf, 0x28)[0]
    hdr = shoff + 2 * 64
    bad = bytearray(elf)
    struct.pack_into("<Q", bad, hdr + 32, 1 << 40)
    (sec,) = find_gpu_sections(io.BytesIO(bytes(bad)))
    assert sec.truncated and sec.offset + sec.size == len(bad)
    r = scan_binary(io.BytesIO(bytes(bad)))
    assert r.cuda is not None and r.errors  # garbage after the fatbin is reported, not raised
    assert r.cuda.sass == ("sm_90a",)


def test_section_table_past_end() -> None:
    elf = bytearray(make_elf([(".nv_fatbin", _fatbin())]))
    struct.pack_into("<Q", elf, 0x28, len(elf) + 10)
    with pytest.raises(BinaryFormatError):
        find_gpu_sections(io.BytesIO(bytes(elf)))


def test_read_at_truncated() -> None:
    with pytest.raises(BinaryFormatError):
        read_at(io.BytesIO(b"abc"), 1, 10, name="x", what="thing")
