"""Hostile inputs: truncated and mutated fatbins, bundles and ELF files only ever give a
valid result or BinaryFormatError, quickly and without huge allocations."""

from __future__ import annotations

import io
import random
import struct
import time
import tracemalloc

from gpubin_oracles import make_bundle, make_ccob, make_elf, make_fatbin, make_fatbin_entry

from gpusbom.binary import (
    BinaryFormatError,
    find_gpu_sections,
    list_bundles,
    list_fatbin,
    scan_binary,
)

ITERATIONS = 300


def _fatbin() -> bytes:
    return make_fatbin(
        [
            make_fatbin_entry(2, 75),
            make_fatbin_entry(2, 90, flags=0x100011),
            make_fatbin_entry(
                1,
                120,
                flags=0x8011,
                version=(9, 0),
                header_size=80,
                payload=b"\x28\xb5\x2f\xfd" + bytes(30),
                uncompressed=100,
            ),
        ]
    ) + make_fatbin([make_fatbin_entry(8, 90, flags=0x18011, header_size=120)])


def _bundles() -> bytes:
    ids = [
        "host-x86_64-unknown-linux",
        "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-",
        "hipv4-amdgcn-amd-amdhsa--gfx1100",
    ]
    items = [(i, i.encode() * 4) for i in ids]
    plain = make_bundle(items, align=64)
    return (
        plain
        + make_ccob(plain, version=2, method="zlib")
        + bytes(8)
        + make_ccob(plain, version=3, method="zstd")
        + make_ccob(plain, version=1)
    )


def _mutate(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    if not b:
        return b""
    op = rng.randrange(5)
    if op == 0:
        return bytes(b[: rng.randrange(len(b) + 1)])
    if op == 1:
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        return bytes(b)
    if op == 2 and len(b) >= 8:  # plant a hostile 64-bit size/offset/count
        pos = rng.randrange(len(b) - 7)
        value = rng.choice([0, 1, 2**31, 2**32 - 1, 2**63, 2**64 - 1, rng.randrange(2**64)])
        struct.pack_into("<Q", b, pos, value)
        return bytes(b)
    if op == 3 and len(b) >= 4:
        pos = rng.randrange(len(b) - 3)
        struct.pack_into("<I", b, pos, rng.choice([0, 0xFFFFFFFF, rng.randrange(2**32)]))
        return bytes(b)
    start = rng.randrange(len(b))
    return bytes(b[:start] + b[start + rng.randrange(1, 64) :])


def _check(fn, data: bytes) -> None:
    start = time.perf_counter()
    try:
        fn(io.BytesIO(data))
    except BinaryFormatError:
        pass
    assert time.perf_counter() - start < 5.0


def _run(seed: int, base: bytes, fn) -> None:
    rng = random.Random(seed)
    tracemalloc.start()
    try:
        for _ in range(ITERATIONS):
            _check(fn, _mutate(rng, base))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, peak


def test_fuzz_fatbin() -> None:
    base = _fatbin()
    assert len(list_fatbin(io.BytesIO(base))) == 4
    _run(1234, base, lambda f: list_fatbin(f))


def test_fuzz_bundles() -> None:
    base = _bundles()
    assert len(list_bundles(io.BytesIO(base))) == 4
    _run(5678, base, lambda f: list_bundles(f))


def test_fuzz_elf() -> None:
    base = make_elf(
        [
            (".nv_fatbin", _fatbin()),
            (".hip_fatbin", _bundles()),
            ("__CLANG_OFFLOAD_BUNDLE__hip-amdgcn-amd-amdhsa--gfx906", b"x"),
        ]
    )
    r = scan_binary(io.BytesIO(base))
    assert r.errors == () and r.cuda and r.hip and r.hip.bundles == 4

    def both(f: io.BytesIO) -> None:
        find_gpu_sections(f)
        scan_binary(f)

    _run(91011, base, both)


def test_random_garbage() -> None:
    rng = random.Random(42)
    for _ in range(ITERATIONS):
        blob = rng.randbytes(rng.randrange(1, 2048))
        prefix = rng.choice(
            [
                b"",
                b"\x7fELF\x02\x01\x01",
                struct.pack("<I", 0xBA55ED50),
                b"__CLANG_OFFLOAD_BUNDLE__",
                b"CCOB",
            ]
        )
        for fn in (list_fatbin, list_bundles, scan_binary):
            _check(fn, prefix + blob)
