"""CUDA fatbin decoding vs cuobjdump on real libraries from pinned NVIDIA wheels."""

from __future__ import annotations

import pytest
from gpubin_oracles import cuobjdump_headers, cuobjdump_list, get_cuobjdump, nvidia_library

from gpusbom.binary import scan_binary, scan_cuda

# Summaries as cuobjdump shows them (checked once by hand; the oracle test below re-checks).
EXPECTED = {
    "nvjpeg-cu12": {
        "sass": (
            "sm_50",
            "sm_52",
            "sm_60",
            "sm_61",
            "sm_70",
            "sm_75",
            "sm_80",
            "sm_86",
            "sm_89",
            "sm_90",
            "sm_100",
            "sm_101",
            "sm_103",
            "sm_120",
            "sm_121",
        ),
        "ptx": ("compute_121",),
        "ptx_isa": ("8.8",),
        "compressed": ("lz4",),
        "entries": 175,
    },
    "nvjpeg-cu13": {
        "sass": (
            "sm_75",
            "sm_80",
            "sm_86",
            "sm_89",
            "sm_90",
            "sm_100",
            "sm_103",
            "sm_107",
            "sm_120",
            "sm_121",
        ),
        "ptx": ("compute_121",),
        "ptx_isa": ("9.4",),
        "compressed": ("zstd",),
        "entries": 110,
    },
    "nvjpeg2k-cu12": {
        "sass": ("sm_52", "sm_60", "sm_61", "sm_70", "sm_75", "sm_80", "sm_90", "sm_100", "sm_120"),
        "ptx": ("compute_120",),
        "ptx_isa": ("8.8",),
        "compressed": ("lz4",),
        "entries": 80,
    },
}


@pytest.fixture(scope="module")
def cuobjdump() -> str:
    return get_cuobjdump()


@pytest.mark.parametrize("key", sorted(EXPECTED))
def test_wheel_library_matches_cuobjdump(key: str, cuobjdump: str) -> None:
    lib = nvidia_library(key)
    with lib.open("rb") as f:
        entries, targets = scan_cuda(f, name=str(lib))
    assert targets.errors == ()
    ours = [("ELF" if e.kind == "elf" else "PTX", e.list_name) for e in entries if e.list_name]
    assert ours == cuobjdump_list(cuobjdump, lib)
    mine = [
        {
            "kind": e.kind,
            "arch": e.arch,
            "version": e.version,
            "host": "linux",
            "compile_size": "64bit" if e.is_64bit else "32bit",
            "compressed": e.compressed,
        }
        for e in entries
    ]
    assert mine == cuobjdump_headers(cuobjdump, lib)
    for field, value in EXPECTED[key].items():
        assert getattr(targets, field) == value, field


@pytest.mark.parametrize("key", sorted(EXPECTED))
def test_wheel_library_scan_binary(key: str) -> None:
    lib = nvidia_library(key)
    with lib.open("rb") as f:
        result = scan_binary(f, name=str(lib))
    assert result.hip is None and result.errors == ()
    assert result.cuda is not None and result.cuda.sass == EXPECTED[key]["sass"]
    assert {s.name for s in result.sections} == {".nv_fatbin", ".nvFatBinSegment"}
