"""HIP offload bundles: synthetic (plain and CCOB v1/v2/v3, zlib/zstd), bundles made by
clang-offload-bundler 15, and the .hip_fatbin of Debian's librocrand1 vs the oracle."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import pytest
from gpubin_oracles import (
    get_bundler,
    make_bundle,
    make_ccob,
    make_elf,
    rocrand_library,
)

from gpusbom.binary import (
    BinaryFormatError,
    find_gpu_sections,
    list_bundles,
    parse_target_id,
    scan_binary,
    scan_hip,
)

IDS = [
    "host-x86_64-unknown-linux",
    "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-",
    "hipv4-amdgcn-amd-amdhsa--gfx942:sramecc+:xnack+",
    "hipv4-amdgcn-amd-amdhsa--gfx1100",
]
ROCRAND_IDS = {
    "host-x86_64-unknown-linux",
    "hipv4-amdgcn-amd-amdhsa--gfx803",
    "hipv4-amdgcn-amd-amdhsa--gfx900:xnack-",
    "hipv4-amdgcn-amd-amdhsa--gfx906:xnack-",
    "hipv4-amdgcn-amd-amdhsa--gfx908:xnack-",
    "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-",
    "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+",
    "hipv4-amdgcn-amd-amdhsa--gfx1030",
}


def _items(ids: list[str]) -> list[tuple[str, bytes]]:
    return [(i, b"" if i.startswith("host") else (b"\x7fELF" + i.encode() * 50)) for i in ids]


def test_parse_target_id() -> None:
    t = parse_target_id("hipv4-amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-")
    assert (t.kind, t.triple, t.target, t.processor) == (
        "hipv4",
        "amdgcn-amd-amdhsa-",
        "gfx90a:sramecc+:xnack-",
        "gfx90a",
    )
    assert t.features == (("sramecc", "+"), ("xnack", "-"))
    h = parse_target_id("host-x86_64-unknown-linux")
    assert h.is_host and h.target == "" and not h.is_gpu
    old = parse_target_id("hip-amdgcn-amd-amdhsa-gfx906")
    assert (old.triple, old.target) == ("amdgcn-amd-amdhsa", "gfx906")
    assert parse_target_id("openmp-amdgcn-amd-amdhsa--gfx90a").is_gpu


def test_plain_bundle() -> None:
    data = make_bundle(_items(IDS))
    (b,) = list_bundles(io.BytesIO(data))
    assert list(b.target_ids) == IDS and b.compression == "none" and b.size == len(data)
    for e, (_, payload) in zip(b.entries, _items(IDS)):
        assert data[e.offset : e.offset + e.size] == payload


@pytest.mark.parametrize("version", [1, 2, 3])
@pytest.mark.parametrize("method", ["zlib", "zstd"])
def test_compressed_bundles_concatenated(version: int, method: str) -> None:
    first = make_ccob(make_bundle(_items(IDS[:2])), version=version, method=method)
    second = make_ccob(make_bundle(_items(IDS[2:])), version=version, method=method)
    pad = bytes(-len(first) % 4096)
    data = first + pad + second + bytes(100)
    bundles = list_bundles(io.BytesIO(data))
    assert [list(b.target_ids) for b in bundles] == [IDS[:2], IDS[2:]]
    assert all(b.compression == method and b.ccob_version == version for b in bundles)
    if version > 1:
        assert bundles[0].size == len(first)
    _, summary = scan_hip(io.BytesIO(data))
    assert summary.gfx == ("gfx1100", "gfx90a:xnack-", "gfx942:sramecc+:xnack+")
    assert summary.processors == ("gfx1100", "gfx90a", "gfx942")
    assert summary.compressed == (method,)


def test_mixed_plain_and_compressed_in_elf() -> None:
    plain = make_bundle(_items(IDS[:2]))
    comp = make_ccob(make_bundle(_items(IDS[2:])))
    elf = make_elf(
        [
            (".hip_fatbin", plain + bytes(-len(plain) % 4096) + comp),
            ("__CLANG_OFFLOAD_BUNDLE__hip-amdgcn-amd-amdhsa--gfx1201", b"code"),
            (".hipFatBinSegment", b"FPIH" + bytes(20)),
        ]
    )
    f = io.BytesIO(elf)
    kinds = {s.name: s.kind for s in find_gpu_sections(f)}
    assert kinds[".hip_fatbin"] == "hip-fatbin" and kinds[".hipFatBinSegment"] == "hip-wrapper"
    r = scan_binary(f)
    assert r.cuda is None and r.hip is not None and r.errors == ()
    assert r.hip.processors == ("gfx1100", "gfx1201", "gfx90a", "gfx942")
    assert r.hip.bundles == 2


def test_errors_are_binary_format_errors() -> None:
    good = make_bundle(_items(IDS))
    bad_count = good[:24] + (10**12).to_bytes(8, "little") + good[32:]
    with pytest.raises(BinaryFormatError):
        list_bundles(io.BytesIO(bad_count))
    with pytest.raises(BinaryFormatError):
        list_bundles(io.BytesIO(good[:100]))
    with pytest.raises(BinaryFormatError):
        list_bundles(io.BytesIO(b"garbage" + good))
    _, summary = scan_hip(io.BytesIO(good + b"trailing junk"))
    assert summary.errors and summary.target_ids == tuple(sorted(IDS))  # partial result kept


def _oracle_list(bundler: str, path: Path) -> set[str]:
    proc = subprocess.run(
        [bundler, "--list", "--type=bc", f"--input={path}"],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return set(proc.stdout.split())


def test_bundles_made_by_clang_offload_bundler(tmp_path: Path) -> None:
    bundler = get_bundler()
    inputs = []
    for i, tid in enumerate(IDS + ["hip-amdgcn-amd-amdhsa-gfx906"]):
        p = tmp_path / f"in{i}.bin"
        p.write_bytes(b"" if tid.startswith("host") else tid.encode() * (i + 1))
        inputs.append((tid, p))
    out = tmp_path / "bundle.bin"
    subprocess.run(
        [
            bundler,
            "--type=bc",
            "--targets=" + ",".join(t for t, _ in inputs),
            *[f"--input={p}" for _, p in inputs],
            f"--output={out}",
        ],
        check=True,
    )
    (b,) = list_bundles(io.BytesIO(out.read_bytes()))
    assert set(b.target_ids) == _oracle_list(bundler, out) == {t for t, _ in inputs}
    data = out.read_bytes()
    for e, (_, p) in zip(sorted(b.entries, key=lambda e: e.id), sorted(inputs, key=lambda x: x[0])):
        assert data[e.offset : e.offset + e.size] == p.read_bytes()


def test_rocrand_hip_fatbin_matches_oracle(tmp_path: Path) -> None:
    bundler = get_bundler()
    lib = rocrand_library()
    with lib.open("rb") as f:
        (sec,) = [s for s in find_gpu_sections(f) if s.name == ".hip_fatbin"]
        bundles = list_bundles(f, sec.offset, sec.size)
        result = scan_binary(f, name=str(lib))
    section = tmp_path / "hip_fatbin.bin"
    subprocess.run(
        ["objcopy", f"--dump-section=.hip_fatbin={section}", str(lib), str(tmp_path / "discard.o")],
        check=True,
    )
    raw = section.read_bytes()
    assert len(raw) == sec.size
    # clang-offload-bundler 15 reads one bundle per input: compare bundle by bundle
    for i, b in enumerate(bundles):
        part = tmp_path / f"bundle{i}.bin"
        part.write_bytes(raw[b.offset - sec.offset : b.offset - sec.offset + b.size])
        assert set(b.target_ids) == _oracle_list(bundler, part)
    assert {i for b in bundles for i in b.target_ids} == ROCRAND_IDS
    assert result.hip is not None and result.cuda is None and result.errors == ()
    assert result.hip.gfx == (
        "gfx1030",
        "gfx803",
        "gfx900:xnack-",
        "gfx906:xnack-",
        "gfx908:xnack-",
        "gfx90a:xnack+",
        "gfx90a:xnack-",
    )
    # every code object starts with an ELF header (AMDGPU)
    with lib.open("rb") as f:
        for e in bundles[0].entries:
            if e.size:
                f.seek(e.offset)
                assert f.read(4) == b"\x7fELF"
