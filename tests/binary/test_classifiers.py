"""Binary classifier rows on real bytes, and the getter decoder on hostile ones.

Every row of ``gpusbom.catalog.classifiers.ROWS`` has one snippet test: the member the
row's ``source`` names is taken, at test time, from the pinned real artifact (PyPI wheel or
Debian package, fetched into the fixture cache and checked against the row's sha256; an
executable built here with nvcc), nothing is committed. ``rodata`` rows are cut down to the
ELF header plus 4 KiB around the anchor; ``symbol`` rows need the symbol and section tables,
so they get the whole member; the rows of a framework library (libraries linked statically
into torch's ``libtorch_cuda.so``) stream its member once, with all of them. The scanner is fed the snippet in 1 MiB chunks, as a layer
streams, and must give exactly the version the artifact's own metadata says (``expect``).

The hostile tests patch a real ``libcudart.so.12`` (pinned wheel): a jump loop at the getter,
a call loop, a symbol pointing outside its section. The decoder must end, quickly, with no
constant (or a clear error), never executing anything.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpusbom.binary.getters import MAX_INSNS, read_getter
from gpusbom.catalog.classifiers import ROWS, Row, apply_rule
from gpusbom.collectors._classify import ClassifierScanner, hits

ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / "fixtures" / "check"


def _fetch(row: Row) -> Path:
    sys.path.insert(0, str(ROOT))
    from fixtures.fetch import Pin, fetch

    s = row.source
    arch = "amd64" if s.kind == "deb" else ""
    return fetch(Pin(s.kind, s.name, s.version, s.file, s.sha256, s.size, arch))


def _member(row: Row, tmp: Path) -> bytes:
    """The member bytes of the row's pinned artifact."""
    s = row.source
    if s.kind == "nvcc":
        return (_nvcc_app(tmp)).read_bytes()
    if s.kind == "static-link":
        return _static_link_app(row).read_bytes()
    art = _fetch(row)
    if s.kind == "wheel":
        with zipfile.ZipFile(art) as z:
            return z.read(s.member)
    # a .deb: ar archive holding data.tar.*; dpkg-deb is on every Debian machine
    out = tmp / "deb"
    subprocess.run(["dpkg-deb", "-x", str(art), str(out)], check=True)
    return (out / s.member).read_bytes()


_APP_SRC = r"""
#include <cstdio>
__global__ void vadd(const float *a, const float *b, float *c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = a[i] + b[i]; }
int main() { int v = 0; cudaRuntimeGetVersion(&v); printf("%d\n", v);
  vadd<<<1, 1>>>(0, 0, 0, 0); return 0; }
"""


def _nvcc_app(tmp: Path) -> Path:
    """An executable with the static CUDA runtime (nvcc's default) and sm_80 + sm_90 SASS
    and compute_90 PTX, built here (the nvcc fixtures' toolchain)."""
    sys.path.insert(0, str(CHECK))
    import build  # fixtures/check/build.py

    try:
        nvcc = build.find_tool("nvcc")
    except build.ToolMissing as exc:
        pytest.skip(f"nvcc: {exc}")
    src = tmp / "app.cu"
    src.write_text(_APP_SRC)
    out = tmp / "app"
    subprocess.run(
        [nvcc, "-cudart", "static", "-gencode", "arch=compute_80,code=sm_80",
         "-gencode", "arch=compute_90,code=[sm_90,compute_90]", "-o", str(out), str(src)],
        check=True, capture_output=True,
    )  # fmt: skip
    return out


def _static_link_app(row: Row) -> Path:
    """The executable ``fixtures/static_link.py`` links, with gcc, against the static
    archives of the row's pinned Debian package (cached outside the repository)."""
    sys.path.insert(0, str(ROOT))
    from fixtures import static_link

    [release] = [k for k, p in static_link.CUDA_DEV.items()
                 if (p.version, p.path, p.sha256) == (row.source.version, row.source.file,
                                                       row.source.sha256)]
    try:
        return static_link.build(release).app
    except static_link.LinkUnavailable as exc:
        pytest.skip(f"static link: {exc}")


def _wheel_chunks(row: Row, size: int = 1 << 20) -> Iterator[bytes]:
    """The member of the row's pinned wheel in ``size`` chunks, never whole: cuBLASLt's
    library is 749 MB (read whole, the test process peaked at 2.3 GB)."""
    with zipfile.ZipFile(_fetch(row)) as z, z.open(row.source.member) as src:
        while chunk := src.read(size):
            yield chunk


def _snippet(row: Row, data: bytes) -> bytes:
    if row.evidence == "symbol":
        return data
    # where the row's regex matches (a framework library may also hold the anchor in its
    # own strings: torch's ", NCCL version " log format)
    m = re.search(row.pattern, data, re.DOTALL)
    assert m is not None, f"{row.id}: pattern not in {row.source.member}"
    at = m.start()
    return data[:64] + data[max(64, at - 2048) : at + 2048]


def _scan(rows: tuple[Row, ...], data: bytes, capture: int) -> dict[str, object] | None:
    sc = ClassifierScanner(rows, capture)
    for i in range(0, len(data), 1 << 20):
        sc.feed(data[i : i + (1 << 20)])
    return sc.close()


def _path(row: Row) -> str:
    if "<executable>" in row.globs:
        return "/usr/local/bin/app"
    name = row.source.member.rsplit("/", 1)[-1]
    return "/opt/lib/" + name


#: framework-library rows (``head: fatbin``, ``before_fatbin``) of one pinned member, scanned
#: once per test worker with all of them (a 1 GB library is inflated once, not once per row)
_FRAMEWORK_SCANS: dict[tuple[str, str], dict[str, object] | None] = {}


def _framework_scan(row: Row) -> dict[str, object] | None:
    key = (row.source.file, row.source.member)
    if key not in _FRAMEWORK_SCANS:
        group = tuple(r for r in ROWS if (r.head_until_fatbin or r.before_fatbin)
                      and (r.source.file, r.source.member) == key)
        sc = ClassifierScanner(group, max(r.capture for r in group))
        for chunk in _wheel_chunks(row, 4 << 20):
            sc.feed(chunk)
        _FRAMEWORK_SCANS[key] = sc.close()
    return _FRAMEWORK_SCANS[key]


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_row_snippet(row: Row, tmp_path: Path) -> None:
    if (row.head_until_fatbin or row.before_fatbin) and row.source.kind == "wheel":
        # a statically linked library inside a framework library: the member streams as a
        # layer streams it (the scanner keeps what it needs: the bytes before the device
        # code and the section headers on), with every row of that member
        analysis = _framework_scan(row)
    elif row.head and row.evidence == "symbol" and row.source.kind == "wheel":
        # a row with a head keeps a sparse view of a file larger than its capture: the
        # member is streamed as a layer streams it
        sc = ClassifierScanner((row,), row.capture)
        for chunk in _wheel_chunks(row):
            sc.feed(chunk)
        analysis = sc.close()
    else:
        data = _snippet(row, _member(row, tmp_path))
        analysis = _scan((row,), data, row.capture if row.head else max(row.capture, len(data)))
    found = [h for h in hits(analysis, _path(row)) if h.row.id == row.id]
    assert found, f"{row.id} found nothing in {row.source.name} {row.source.version}"
    if row.source.expect == "present":
        assert found[0].version is None and found[0].raw
    else:
        assert found[0].version == row.source.expect
    # the same bytes under a name the row does not cover give nothing
    assert not [h for h in hits(analysis, "/opt/lib/libunrelated.so.1") if h.row.id == row.id] \
        or "*.so*" in row.globs


def test_row_snippet_fails_on_other_bytes(tmp_path: Path) -> None:
    """The snippet test can fail: a row on another row's artifact finds nothing."""
    nvrtc = next(r for r in ROWS if r.id == "nvrtc-rodata")
    nccl = next(r for r in ROWS if r.id == "nccl-getter")
    data = _member(nvrtc, tmp_path)
    analysis = _scan((nccl,), data, len(data))
    assert not hits(analysis, "/opt/lib/libnccl.so.2")


def test_rules() -> None:
    assert apply_rule("code-10000", 21903) == "2.19.3"
    assert apply_rule("code-10000", 90100) == "9.1.0"
    assert apply_rule("code-1000", 8905) == "8.9.5"
    assert apply_rule("cuda-code", 12040) == "12.4"
    assert apply_rule("cuda-code", 12045) is None  # not a CUDART_VERSION
    assert apply_rule("hip-code", 50221153) == "5.2.21153"
    assert apply_rule("code-10000", 4) is None  # ncclInvalidArgument, not a version
    # cuBLAS: x1000 through 11.x's early releases, x10000 from 11.11 (Debian's 11.11.3.6 and
    # the PyPI 12.x wheels); read with x10000, 10.2.1's 10201 was "1.2.1" (#38)
    assert apply_rule("cublas-code", 10201) == "10.2.1"
    assert apply_rule("cublas-code", 10202) == "10.2.2"
    assert apply_rule("cublas-code", 111103) == "11.11.3"
    assert apply_rule("cublas-code", 120903) == "12.9.3"
    assert apply_rule("cublas-code", 12103) == "11.11.3"  # an 11.x minor past 9, x1000
    assert apply_rule("cublas-code", 7) is None  # CUBLAS_STATUS_INVALID_VALUE
    assert apply_rule("nccl-code", 2408) == "2.4.8"  # NCCL before 2.9
    assert apply_rule("nccl-code", 21903) == "2.19.3"
    assert apply_rule("nccl-code", 4) is None
    assert apply_rule("cudnn-code", 7605) == "7.6.5"
    assert apply_rule("cudnn-code", 92400) == "9.24.0"
    assert apply_rule("lib-code", 10102) == "10.1.2"  # cuFFT / cuRAND of CUDA 10.2
    assert apply_rule("lib-code", 12510) == "12.5.10"  # cuSPARSE 12.5.10
    assert apply_rule("underscored", "7_6_5_32") == "7.6.5.32"
    # NPP's NppLibraryVersion {major, minor, build}, read where nppGetLibVersion points
    assert apply_rule("npp-struct", "12.2.5") == "12.2.5"
    assert apply_rule("npp-struct", "11.8.0") == "11.8.0"
    assert apply_rule("npp-struct", "0.0.0") is None  # zeroed data (.bss), not a version
    assert apply_rule("npp-struct", "12.-1.5") is None
    assert apply_rule("npp-struct", "12.2") is None  # not three words


# -- hostile snippets ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cudart(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    row = next(r for r in ROWS if r.id == "cudart-getter")
    return _member(row, tmp_path_factory.mktemp("cudart"))


def _symbol(data: bytes, name: str) -> tuple[int, int, int]:
    """(file offset of the .dynsym entry, symbol value, file offset of the code)."""
    from elftools.elf.elffile import ELFFile

    elf = ELFFile(io.BytesIO(data))
    dynsym = elf.get_section_by_name(".dynsym")
    for i, sym in enumerate(dynsym.iter_symbols()):
        if sym.name == name:
            entry = dynsym["sh_offset"] + i * dynsym["sh_entsize"]
            sec = elf.get_section(sym["st_shndx"])
            code = sym["st_value"] - sec["sh_addr"] + sec["sh_offset"]
            return entry, sym["st_value"], code
    raise AssertionError(name)


def test_getter_on_real_cudart(cudart: bytes) -> None:
    r = read_getter(io.BytesIO(cudart), "cudaRuntimeGetVersion", kind="out")
    assert r.error is None and [c.value for c in r.candidates] == [12040]
    assert r.candidates[0].depth == 1  # stored by the callee the wrapper calls


def test_hostile_jump_loop(cudart: bytes) -> None:
    _, _, code = _symbol(cudart, "cudaRuntimeGetVersion")
    bad = bytearray(cudart)
    bad[code : code + 2] = b"\xeb\xfe"  # jmp . (a loop onto itself)
    t0 = time.perf_counter()
    r = read_getter(io.BytesIO(bytes(bad)), "cudaRuntimeGetVersion", kind="out")
    assert time.perf_counter() - t0 < 5
    assert r.error is None and r.candidates == ()


def test_hostile_call_loop(cudart: bytes) -> None:
    """A getter that calls itself, forever: every function is entered once."""
    _, value, code = _symbol(cudart, "cudaRuntimeGetVersion")
    bad = bytearray(cudart)
    rel = (value - (value + 5)) & 0xFFFFFFFF
    for k in range(0, 400, 5):  # call <entry>, over and over
        bad[code + k : code + k + 5] = b"\xe8" + ((rel - k) & 0xFFFFFFFF).to_bytes(4, "little")
    r = read_getter(io.BytesIO(bytes(bad)), "cudaRuntimeGetVersion", kind="out")
    assert r.candidates == ()
    assert r.error is None


def test_hostile_symbol_outside_section(cudart: bytes) -> None:
    entry, _, _ = _symbol(cudart, "cudaRuntimeGetVersion")
    bad = bytearray(cudart)
    bad[entry + 8 : entry + 16] = (0x7FFF_FFFF_0000).to_bytes(8, "little")  # st_value
    r = read_getter(io.BytesIO(bytes(bad)), "cudaRuntimeGetVersion", kind="out")
    assert r.candidates == ()
    assert r.error is not None and "outside its section" in r.error


def test_hostile_truncated_and_not_elf(cudart: bytes) -> None:
    r = read_getter(io.BytesIO(cudart[:4096]), "cudaRuntimeGetVersion", kind="out")
    assert r.candidates == () and r.error
    r = read_getter(io.BytesIO(b"\x7fELF" + b"\xff" * 60), "x", kind="return")
    assert r.candidates == () and r.error
    assert MAX_INSNS <= 4096


def test_scanner_drops_non_elf_and_bounds_memory() -> None:
    row = next(r for r in ROWS if r.id == "nccl-getter")
    sc = ClassifierScanner((row,), 1 << 20)
    sc.feed(b"#!/bin/sh\n" + b"x" * 100)
    assert sc.done and sc.close() is None
    sc = ClassifierScanner((row,), 1 << 20)
    sc.feed(b"\x7fELF" + b"\0" * (1 << 20))  # past the capture: references dropped
    assert sc._chunks is None


def test_static_cudart_targets_in_executable(tmp_path: Path) -> None:
    """An nvcc executable: static cudart 13.0 from its .symtab getter, its SASS and PTX
    targets from the fatbin (gpu-binaries on executables), as separate components."""
    from gpusbom.cli.app import main

    app = _nvcc_app(tmp_path)
    root = tmp_path / "root"
    (root / "usr/local/bin").mkdir(parents=True)
    shutil.copy(app, root / "usr/local/bin/app")
    out = tmp_path / "out.json"
    assert main(["scan", "--root", str(root), "--analyze-binaries", "-q", "-o", f"json={out}"]) == 0
    comps = json.loads(out.read_text())["components"]
    cudart = [c for c in comps if c["name"] == "cudart"]
    assert len(cudart) == 1 and cudart[0]["version"] == "13.0"
    p = cudart[0]["properties"]
    assert p["linkage"] == "static" and p["embedded-in"] == "/usr/local/bin/app"
    assert p["version-method"] == "elf-symbol" and p["version-confidence"] == "medium"
    [exe] = [c for c in comps if c["name"] == "app"]
    assert exe["type"] == "application"
    assert exe["properties"]["cuda:sass"] == "sm_80,sm_90"
    assert exe["properties"]["cuda:ptx"] == "compute_90"


def test_torch_without_dist_info_and_vendored_cudart(tmp_path: Path) -> None:
    """torch whose dist-info was deleted: the version module names it (metadata-missing,
    medium confidence); an auditwheel-renamed libcudart in torch/lib is cudart 12.4.127's
    runtime (CUDART_VERSION 12040 from its getter: a short form; the fingerprint database
    knows the file: 12.4.127, exact). No phantom: the
    nvidia-* wheels torch's metadata would name are not installed, nothing names them."""
    sys.path.insert(0, str(ROOT))
    from fixtures.fetch import fetch as fetch_pin
    from fixtures.fetch import load_pins
    from gpusbom.cli.app import main

    torch_whl = fetch_pin(load_pins()[("wheel", "torch", "2.13.0+cpu")])
    site = tmp_path / "root/usr/local/lib/python3.11/site-packages"
    with zipfile.ZipFile(torch_whl) as z:
        version_py = z.read("torch/version.py")
    (site / "torch/lib").mkdir(parents=True)
    (site / "torch/version.py").write_bytes(version_py)
    cudart_row = next(r for r in ROWS if r.id == "cudart-getter")
    (site / "torch/lib/libcudart-9335f6a2.so.12").write_bytes(_member(cudart_row, tmp_path))
    out = tmp_path / "out.json"
    root = str(tmp_path / "root")
    assert main(["scan", "--root", root, "--analyze-binaries", "-q", "-o", f"json={out}"]) == 0
    comps = json.loads(out.read_text())["components"]
    [torch] = [c for c in comps if c["name"] == "torch"]
    assert torch["version"] == "2.13.0+cpu"
    assert torch["properties"]["metadata-missing"] == "true"
    assert torch["properties"]["version-confidence"] == "medium"
    [cudart] = [c for c in comps if c["name"] == "cudart"]
    # the renamed copy's bytes are cudart 12.4.127's (the fingerprint database knows its
    # SHA-256): the exact version, above the getter's short form (12040 -> 12.4)
    assert cudart["version"] == "12.4.127"
    assert cudart["properties"]["vendored-as"] == "libcudart-9335f6a2.so.12"
    assert cudart["properties"]["identification-confidence"] == "exact"
    assert cudart["properties"]["version-confidence"] == "exact"
    assert cudart["properties"]["fingerprint-file"] == "libcudart.so.12"
    names = {c["name"] for c in comps}
    assert not {n for n in names if n.startswith("nvidia-")}


def test_copied_icd_loader_without_package(tmp_path: Path) -> None:
    """ocl-icd's loader copied without its package: its own version string (2.3.1, the
    ocl-icd-libopencl1 2.3.1-1 deb's upstream version), not the 1.0.0 ABI of its name."""
    from gpusbom.cli.app import main

    row = next(r for r in ROWS if r.id == "ocl-icd-rodata")
    lib = tmp_path / "root/usr/lib/x86_64-linux-gnu"
    lib.mkdir(parents=True)
    (lib / "libOpenCL.so.1.0.0").write_bytes(_member(row, tmp_path))
    (lib / "libOpenCL.so.1").symlink_to("libOpenCL.so.1.0.0")
    out = tmp_path / "out.json"
    root = str(tmp_path / "root")
    assert main(["scan", "--root", root, "--analyze-binaries", "-q", "-o", f"json={out}"]) == 0
    [loader] = [c for c in json.loads(out.read_text())["components"]
                if c["name"] == "opencl-icd-loader"]
    assert loader["version"] == "2.3.1"
    assert loader["properties"]["version-method"] == "elf-rodata"
    assert loader["properties"]["soname-version"] == "1.0.0"


def test_rocm_tarball_layout_hip_from_its_getter(tmp_path: Path) -> None:
    """A tarball-style /opt/rocm-5.2.3 tree (real Debian ROCm 5.2.3 libraries, relocated, no
    package database), HIP present only under its soname: HIP 5.2.21153 from its own
    hipRuntimeGetVersion constant, mapped to ROCm 5.2.3 through the HIP/ROCm table (AMD's
    hip-runtime-amd_5.2.21153.50203 package of ROCm 5.2.3); the install's release from
    .info/version."""
    from gpusbom.cli.app import main

    hip = next(r for r in ROWS if r.id == "hip-getter")
    lib = tmp_path / "root/opt/rocm-5.2.3/lib"
    lib.mkdir(parents=True)
    (lib / "libamdhip64.so.5").write_bytes(_member(hip, tmp_path))
    info = tmp_path / "root/opt/rocm-5.2.3/.info"
    info.mkdir()
    (info / "version").write_text("5.2.3-109\n")
    out = tmp_path / "out.json"
    root = str(tmp_path / "root")
    assert main(["scan", "--root", root, "--analyze-binaries", "-q", "-o", f"json={out}"]) == 0
    comps = json.loads(out.read_text())["components"]
    [hipc] = [c for c in comps if c["name"] == "hip-runtime"]
    assert hipc["version"] == "5.2.21153"
    assert hipc["properties"]["hip:rocm-release"] == "5.2.3"
    assert hipc["properties"]["version-method"] == "elf-symbol"
    assert any(e["method"] == "elf-symbol" and "50221153" in e["detail"]
               for e in hipc["evidence"])
    assert {c["version"] for c in comps if c["name"] == "rocm-core"} == {"5.2.3"}


def test_unpacked_sycl_runtime_wheel_without_dist_info(tmp_path: Path) -> None:
    """intel-sycl-rt 2026.2.0's libsycl.so unpacked without its dist-info (as a COPY of
    /usr/local/lib would leave it): the runtime's release from the library itself."""
    from gpusbom.cli.app import main

    row = next(r for r in ROWS if r.id == "sycl-rodata")
    lib = tmp_path / "root/usr/local/lib"
    lib.mkdir(parents=True)
    (lib / "libsycl.so.9.0.0").write_bytes(_member(row, tmp_path))
    (lib / "libsycl.so.9").symlink_to("libsycl.so.9.0.0")
    out = tmp_path / "out.json"
    root = str(tmp_path / "root")
    assert main(["scan", "--root", root, "--analyze-binaries", "-q", "-o", f"json={out}"]) == 0
    [c] = [c for c in json.loads(out.read_text())["components"] if c["name"] == "sycl-runtime"]
    assert c["version"] == "2026.2.0"
    assert c["properties"]["metadata-missing"] == "true"
    assert c["properties"]["version-confidence"] == "medium"


def test_chunk_search_equals_the_joined_buffer_search(monkeypatch: pytest.MonkeyPatch) -> None:
    """``feed`` searches a chunk without joining it to the previous chunk's tail when no
    anchor starts in that tail: the same values, in the same order, as searching the joined
    buffer (forced here), for hits across and near chunk borders, truncated matches and
    more than MAX_VALUES values, over random chunkings."""
    import random

    from gpusbom.collectors import _classify

    rows = tuple(r for r in ROWS if r.evidence == "rodata")
    rnd = random.Random(1912)
    pieces = [b"NCCL version 2.21.5+cuda12.4\0", b"NCCL version 2.19.3\0", b"NCCL version 2.",
              b"Cuda compilation tools, release 12.4, V12.4.131", b"OpenCL ICD Loader\0003.0.6\0",
              b"_ZN7cutlass6detail", b"libcudart_static_" + b"ab" * 20,
              b"AMD clang version 17.0.0 (https://github.com/RadeonOpenCompute roc-6.1.2 )",
              *(f"NCCL version 2.{i}.0\0".encode() for i in range(12))]
    data = b"\x7fELF\x02\x01\x01" + b"\0" * 57
    for _ in range(400):
        data += rnd.choice(pieces) if rnd.random() < 0.3 else rnd.randbytes(rnd.randrange(1, 900))
    # and with a CUDA fatbin header part way: rows that stop before the device code
    # (nccl-static, cutlass-static) find what lies before it only
    head = (b"\x7fELF\x02\x01\x01" + b"\0" * 57 + rnd.randbytes(5000) + b"NCCL version 2.1.0\0"
            + rnd.randbytes(1000))
    at = len(head) + rnd.randrange(0, 600)
    datasets = [data, head + rnd.randbytes(at - len(head)) + _classify._FATBIN_HEADER + data[64:]]

    def scan(chunks: list[bytes], joined: bool) -> object:
        if joined:
            monkeypatch.setattr(_classify.ClassifierScanner, "_in_chunk", lambda self, c: False)
        sc = ClassifierScanner(rows, 0)
        for c in chunks:
            sc.feed(c)
        monkeypatch.undo()
        return sc.close()

    fast_used = 0
    orig = _classify.ClassifierScanner._in_chunk
    for i in range(60):
        data = datasets[i % 2]
        cuts = sorted(set(rnd.sample(range(1, len(data)), rnd.randrange(1, 300)))
                      | ({at + rnd.randrange(1, 8)} if i % 4 == 1 else set()))  # split header
        chunks = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
        want = scan(chunks, joined=True)
        calls: list[bool] = []
        monkeypatch.setattr(_classify.ClassifierScanner, "_in_chunk",
                            lambda self, c: calls.append(orig(self, c)) or calls[-1])
        assert scan(chunks, joined=False) == want
        fast_used += sum(calls)
        assert want  # values were found
    assert fast_used > 100  # the chunk-only search did run
