"""CUDA fatbin decoding vs cuobjdump on libraries built here with nvcc (every compress mode)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from gpubin_oracles import cuobjdump_headers, cuobjdump_list, get_cuobjdump, get_nvcc

from gpusbom.binary import find_gpu_sections, list_fatbin, scan_binary, scan_cuda

KERNELS = r"""
__global__ void add(float* a, const float* b, int n)
{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] += b[i]; }
__global__ void scale(float* a, float s, int n)
{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] *= s; }
__device__ float sq(float x) { return x * x; }
__global__ void square(float* a, int n)
{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] = sq(a[i]); }
extern "C" void launch(float* a, const float* b, int n)
{ add<<<(n + 255) / 256, 256>>>(a, b, n); scale<<<1, 1>>>(a, 2.f, n); square<<<1, 1>>>(a, n); }
"""

# sm_75/sm_80 plain, sm_90a ('a'), sm_100f ('f' family), sm_120 PTX only, sm_100a SASS + PTX,
# compute_103f PTX ('f' PTX)
GENCODES = [
    "arch=compute_75,code=sm_75",
    "arch=compute_80,code=sm_80",
    "arch=compute_90a,code=sm_90a",
    "arch=compute_100f,code=sm_100f",
    "arch=compute_100a,code=[sm_100a,compute_100a]",
    "arch=compute_103f,code=compute_103f",
    "arch=compute_120,code=compute_120",
]
MODES = ["none", "default", "size", "speed", "balance"]
EXPECTED_COMPRESSION = {
    "none": set(),
    "default": {"zstd"},
    "size": {"zstd"},
    "speed": {"lz4"},
    "balance": {"zstd"},
}


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    nvcc = get_nvcc()
    d = tmp_path_factory.mktemp("nvcc")
    (d / "k.cu").write_text(KERNELS)
    gen = [x for g in GENCODES for x in ("-gencode", g)]
    for mode in MODES:
        subprocess.run(
            [
                nvcc,
                "-shared",
                "-Xcompiler",
                "-fPIC",
                f"--compress-mode={mode}",
                *gen,
                "-o",
                str(d / f"k_{mode}.so"),
                str(d / "k.cu"),
            ],
            check=True,
            capture_output=True,
            timeout=600,
        )
    # relocatable device code: __nv_relfatbin with an LTO-IR (nvvm) entry
    subprocess.run(
        [
            nvcc,
            "-dc",
            "-Xcompiler",
            "-fPIC",
            "-gencode",
            "arch=compute_90,code=lto_90",
            "-gencode",
            "arch=compute_80,code=sm_80",
            "-gencode",
            "arch=compute_75,code=compute_75",
            "-o",
            str(d / "k_rdc.o"),
            str(d / "k.cu"),
        ],
        check=True,
        capture_output=True,
        timeout=600,
    )
    # standalone fatbin file
    subprocess.run(
        [
            nvcc,
            "-fatbin",
            "-gencode",
            "arch=compute_80,code=[sm_80,compute_80]",
            "-gencode",
            "arch=compute_90a,code=sm_90a",
            "-o",
            str(d / "k.fatbin"),
            str(d / "k.cu"),
        ],
        check=True,
        capture_output=True,
        timeout=600,
    )
    return d


@pytest.fixture(scope="module")
def cuobjdump() -> str:
    return get_cuobjdump()


def _entries(path: Path):
    with path.open("rb") as f:
        entries, targets = scan_cuda(f, name=str(path))
    assert targets.errors == ()
    return entries, targets


def _compare_with_cuobjdump(cuobjdump: str, path: Path) -> None:
    entries, _ = _entries(path)
    ours = [("ELF" if e.kind == "elf" else "PTX", e.list_name) for e in entries if e.list_name]
    assert ours == cuobjdump_list(cuobjdump, path)
    theirs = cuobjdump_headers(cuobjdump, path)
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
    assert mine == theirs


@pytest.mark.parametrize("mode", MODES)
def test_shared_library_matches_cuobjdump(build_dir: Path, cuobjdump: str, mode: str) -> None:
    path = build_dir / f"k_{mode}.so"
    _compare_with_cuobjdump(cuobjdump, path)
    _, t = _entries(path)
    assert t.sass == ("sm_75", "sm_80", "sm_90a", "sm_100a", "sm_100f")
    assert t.ptx == ("compute_100a", "compute_103f", "compute_120")
    assert t.ptx_isa == ("9.0",)
    assert set(t.compressed) == EXPECTED_COMPRESSION[mode]
    assert t.all_64bit


def test_relocatable_object_with_lto(build_dir: Path, cuobjdump: str) -> None:
    path = build_dir / "k_rdc.o"
    with path.open("rb") as f:
        names = [s.name for s in find_gpu_sections(f)]
    assert "__nv_relfatbin" in names
    _compare_with_cuobjdump(cuobjdump, path)
    _, t = _entries(path)
    assert (t.sass, t.ptx, t.lto) == (("sm_80",), ("compute_75",), ("lto_90",))


def test_standalone_fatbin(build_dir: Path, cuobjdump: str) -> None:
    path = build_dir / "k.fatbin"
    _compare_with_cuobjdump(cuobjdump, path)
    with path.open("rb") as f:
        r = scan_binary(f)
    assert r.cuda is not None and r.cuda.sass == ("sm_80", "sm_90a")
    assert r.cuda.ptx == ("compute_80",)


def test_section_slice_api(build_dir: Path) -> None:
    path = build_dir / "k_size.so"
    with path.open("rb") as f:
        (sec,) = [s for s in find_gpu_sections(f) if s.name == ".nv_fatbin"]
        entries = list_fatbin(f, sec.offset, sec.size)
        for e in entries:
            assert (
                sec.offset <= e.offset < e.payload_offset + e.payload_size <= sec.offset + sec.size
            )
            f.seek(e.payload_offset)
            assert f.read(4) == b"\x28\xb5\x2f\xfd"  # size mode: every payload is zstd
            assert 0 < e.compressed_size <= e.payload_size < e.uncompressed_size
