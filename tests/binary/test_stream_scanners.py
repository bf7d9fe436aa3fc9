"""The streaming scanners agree exactly with the seekable decoders (which tests/binary proves
against cuobjdump and clang-offload-bundler), whatever the chunk boundaries; bad input never
raises and stays bounded."""

from __future__ import annotations

import io
import random
import subprocess
from pathlib import Path
from typing import Any

import pytest
from gpubin_oracles import (
    get_nvcc,
    make_bundle,
    make_ccob,
    make_elf,
    make_fatbin,
    make_fatbin_entry,
    nvidia_library,
    rocrand_library,
)
from test_fatbin_nvcc import GENCODES, KERNELS, MODES

from gpusbom.binary import scan_binary
from gpusbom.binary.stream import CudaFatbinScanner, GpuCodeScanner, HipBundleScanner

SEEDS = (1, 2, 3)
# HIP host binaries import __hipRegisterFatBinary: ELF files are searched for bundles after it
DYNSTR = b"\0libamdhip64.so.5\0__hipRegisterFatBinary\0"


def seekable(data: bytes) -> dict[str, Any] | None:
    r = scan_binary(io.BytesIO(data))
    out: dict[str, Any] = {}
    if r.cuda and (r.cuda.entries or r.cuda.errors):
        c = r.cuda
        out["cuda"] = {
            "sass": list(c.sass),
            "ptx": list(c.ptx),
            "lto": list(c.lto),
            "ptx_isa": list(c.ptx_isa),
            "compressed": list(c.compressed),
            "entries": c.entries,
            "containers": c.containers,
            "errors": len(c.errors),
        }
    if r.hip and (r.hip.target_ids or r.hip.errors):
        h = r.hip
        out["hip"] = {
            "targets": list(h.target_ids),
            "gfx": list(h.gfx),
            "processors": list(h.processors),
            "compressed": list(h.compressed),
            "bundles": h.bundles,
            "errors": len(h.errors),
        }
    return out or None


def streamed(data: bytes, seed: int | None, cls: type = GpuCodeScanner) -> dict[str, Any] | None:
    """Feed ``data`` in random chunks (1 byte .. 1 MiB, many tiny ones) or whole (seed None)."""
    s = cls()
    if seed is None:
        s.feed(data)
        return _device_code(s.close())
    rng = random.Random(seed)
    i = 0
    while i < len(data):
        r = rng.random()
        n = rng.randint(1, 16) if r < 0.3 else rng.randint(17, 4096) if r < 0.6 else rng.randint(
            4097, 1 << 20
        )
        s.feed(data[i : i + n])
        i += n
    return _device_code(s.close())


def _device_code(r: dict[str, Any] | None) -> dict[str, Any] | None:
    """The device-code part of a stream result: every ELF file's ``build_id`` (for the
    fingerprint database; tests/fingerprints checks it against readelf) is not something
    the seekable decoders read."""
    if r:
        r.pop("build_id", None)
    return r or None


def assert_agree(data: bytes) -> dict[str, Any] | None:
    want = seekable(data)
    assert want is not None
    assert streamed(data, None) == want
    for seed in SEEDS:
        assert streamed(data, seed) == want, f"seed {seed}"
    return want


# --- real inputs --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def nvcc_libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    nvcc = get_nvcc()
    d = tmp_path_factory.mktemp("nvcc-stream")
    (d / "k.cu").write_text(KERNELS)
    gen = [x for g in GENCODES for x in ("-gencode", g)]
    out = {}
    for mode in MODES:
        lib = d / f"k_{mode}.so"
        subprocess.run(
            [nvcc, "-shared", "-Xcompiler", "-fPIC", f"--compress-mode={mode}", *gen,
             "-o", str(lib), str(d / "k.cu")],
            check=True, capture_output=True, timeout=600,
        )  # fmt: skip
        out[mode] = lib
    fat = d / "k.fatbin"
    subprocess.run(
        [nvcc, "--fatbin", *gen, "-o", str(fat), str(d / "k.cu")],
        check=True, capture_output=True, timeout=600,
    )  # fmt: skip
    out["fatbin"] = fat
    return out


@pytest.mark.parametrize("mode", [*MODES, "fatbin"])
def test_nvcc_builds_every_compress_mode(nvcc_libs: dict[str, Path], mode: str) -> None:
    want = assert_agree(nvcc_libs[mode].read_bytes())
    assert want is not None
    assert want["cuda"]["sass"] == ["sm_75", "sm_80", "sm_90a", "sm_100a", "sm_100f"]
    assert want["cuda"]["ptx"] == ["compute_100a", "compute_103f", "compute_120"]


@pytest.mark.parametrize(
    ("key", "sass"),
    [
        ("nvjpeg-cu12", "sm_50,sm_52,sm_60,sm_61,sm_70,sm_75,sm_80,sm_86,sm_89,sm_90,sm_100,"
         "sm_101,sm_103,sm_120,sm_121"),
        ("nvjpeg-cu13", "sm_75,sm_80,sm_86,sm_89,sm_90,sm_100,sm_103,sm_107,sm_120,sm_121"),
        ("nvjpeg2k-cu12", "sm_52,sm_60,sm_61,sm_70,sm_75,sm_80,sm_90,sm_100,sm_120"),
    ],
)  # fmt: skip
def test_wheel_libraries(key: str, sass: str) -> None:
    want = assert_agree(nvidia_library(key).read_bytes())
    assert want is not None and ",".join(want["cuda"]["sass"]) == sass
    assert streamed(nvidia_library(key).read_bytes(), 7, CudaFatbinScanner) == want
    assert streamed(nvidia_library(key).read_bytes(), 7, HipBundleScanner) is None


def test_rocrand_hip_fatbin() -> None:
    data = rocrand_library().read_bytes()
    want = assert_agree(data)
    assert want is not None
    assert want["hip"]["gfx"] == [
        "gfx1030", "gfx803", "gfx900:xnack-", "gfx906:xnack-", "gfx908:xnack-",
        "gfx90a:xnack+", "gfx90a:xnack-",
    ]  # fmt: skip
    assert streamed(data, 5, HipBundleScanner) == want
    assert streamed(data, 5, CudaFatbinScanner) is None


# --- synthetic: compressed bundles, boundaries, non-binaries ------------------------------------

_ITEMS = [
    ("host-x86_64-unknown-linux-gnu-", b""),
    ("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-", b"\x7fELF" + bytes(3000)),
    ("hipv4-amdgcn-amd-amdhsa--gfx1100", b"\x7fELF" + bytes(5000)),
]


@pytest.mark.parametrize("version", [1, 2, 3])
@pytest.mark.parametrize("method", ["zstd", "zlib"])
def test_ccob_bundles(version: int, method: str) -> None:
    rng = random.Random(version)
    payload = rng.randbytes(300_000)  # incompressible: the header sits in a big first block
    items = [*_ITEMS, ("hipv4-amdgcn-amd-amdhsa--gfx942", payload)]
    two = make_ccob(make_bundle(items), version=version, method=method) + make_ccob(
        make_bundle(_ITEMS[:2]), version=version, method=method
    )
    elf = make_elf([(".dynstr", DYNSTR), (".text", rng.randbytes(5000)), (".hip_fatbin", two)])
    want = assert_agree(elf)
    assert want is not None
    assert want["hip"]["compressed"] == [method]
    assert want["hip"]["bundles"] == 2


def test_fatbin_and_bundle_in_one_file() -> None:
    fat = make_fatbin([make_fatbin_entry(2, 90, flags=0x100011), make_fatbin_entry(1, 90)])
    elf = make_elf(
        [
            (".dynstr", DYNSTR),
            (".rodata", b"__CLANG_OFFLOAD_BUNDLE__\0CCOB\0" + bytes(100)),  # string literals
            (".nv_fatbin", fat + bytes(8) + fat),
            (".hip_fatbin", make_bundle(_ITEMS)),
        ]
    )
    want = assert_agree(elf)
    assert want is not None
    assert want["cuda"]["sass"] == ["sm_90a"] and want["cuda"]["ptx"] == ["compute_90"]
    assert want["hip"]["gfx"] == ["gfx1100", "gfx90a:xnack-"]


def test_not_a_binary_is_not_scanned() -> None:
    s = GpuCodeScanner()
    s.feed(b"#!/bin/sh\n" + make_fatbin([make_fatbin_entry(2, 80)]))
    assert s._off and s.close() is None
    for head in (b"\x7f", b"E", b"L"):  # the type is decided after 4 bytes, however fed
        s = GpuCodeScanner()
        s.feed(head)
    assert GpuCodeScanner().close() is None


def test_magic_split_at_every_offset() -> None:
    fat = make_fatbin([make_fatbin_entry(2, 80), make_fatbin_entry(2, 86)])
    data = make_elf([(".text", bytes(100)), (".nv_fatbin", fat)])
    want = seekable(data)
    start = data.find(fat[:4])
    for cut in range(start - 2, start + 90):
        s = GpuCodeScanner()
        s.feed(data[:cut])
        s.feed(data[cut:])
        assert s.close() == want, cut


# --- hostile input ------------------------------------------------------------------------------


def test_mutated_and_truncated_inputs_never_raise() -> None:
    base = nvidia_library("nvjpeg-cu13").read_bytes()[:600_000]
    fat_at = base.find(b"\x50\xed\x55\xba")
    bundle = make_elf(
        [(".dynstr", DYNSTR), (".hip_fatbin", make_ccob(make_bundle(_ITEMS), version=3))]
    )
    rng = random.Random(42)
    for src, hot in ((base, fat_at), (bundle, 64)):
        for _ in range(150):
            data = bytearray(src[: rng.randint(0, len(src))])
            for _ in range(rng.randint(1, 20)):
                if data:
                    at = min(len(data) - 1, max(0, hot + rng.randint(-64, 4096)))
                    data[at] = rng.randrange(256)
            s = GpuCodeScanner()
            for i in range(0, len(data), 7919):
                s.feed(bytes(data[i : i + 7919]))
            r = s.close()
            assert r is None or isinstance(r, dict)
            assert len(s._acc) == 0 and not s._work


def test_hostile_sizes_stay_bounded() -> None:
    # a container claiming 2^63 bytes of body, a bundle claiming 4096 entries of 4 KiB ids,
    # a CCOB claiming 4 GB uncompressed: nothing is allocated by a size field
    fat = b"\x50\xed\x55\xba\x01\x00\x10\x00" + (1 << 63).to_bytes(8, "little")
    fat += make_fatbin_entry(2, 90)[:8] + (1 << 62).to_bytes(8, "little") + bytes(48)
    bundle = b"__CLANG_OFFLOAD_BUNDLE__" + (4096).to_bytes(8, "little")
    bundle += (b"\0" * 16 + (4096).to_bytes(8, "little") + b"hip-" + b"x" * 4092) * 50
    bomb = make_ccob(bytes(1 << 26), version=3)  # 64 MiB of zeros
    s = GpuCodeScanner()
    s.feed(b"\x7fELF" + bytes(60) + fat + bytes(64) + bundle + bomb)
    assert len(s._acc) <= 8 << 20
    r = s.close()
    assert r is None or isinstance(r, dict)


def test_elf_without_hip_runtime_import_is_not_searched_for_bundles() -> None:
    elf = make_elf([(".hip_fatbin", make_bundle(_ITEMS))])
    assert streamed(elf, None) is None
    assert streamed(make_bundle(_ITEMS), 3) == seekable(make_bundle(_ITEMS))  # raw bundle file
