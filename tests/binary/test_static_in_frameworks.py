"""Libraries linked statically into framework libraries, and cuBLAS / cuBLASLt apart.

Real bytes only, from pinned PyPI wheels fetched into the fixture cache at test time
(``classifiers.yaml`` rows name them): torch 1.13.1 (its ``libtorch_cuda_cpp.so`` carries
NCCL statically, its ``libtorch_cuda_cu.so`` CUTLASS kernels) and nvidia-cublas-cu12
12.9.3.13. Ground truth comes from the artifacts themselves: the NCCL version the torch
library's own ``ncclGetVersion`` constant gives (decoded independently, from its
``.dynsym``), the cuBLAS wheel's version (12.9.3.13; ``CUBLAS_VERSION`` 120903).
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from pathlib import Path

import pytest
from test_classifiers import _fetch, _wheel_chunks

from gpusbom.binary.getters import read_getter
from gpusbom.catalog.classifiers import ROWS, Row
from gpusbom.collectors._classify import _FATBIN_HEADER, KEEP_IN_MEMORY, ClassifierScanner, hits

SITE = "usr/local/lib/python3.11/site-packages"


def _row(row_id: str) -> Row:
    return next(r for r in ROWS if r.id == row_id)


def _scan_root(root: Path, out: Path) -> list[dict[str, object]]:
    from gpusbom.cli.app import main

    rc = main(["scan", "--root", str(root), "--analyze-binaries", "-q", "-o", f"json={out}"])
    assert rc == 0
    comps: list[dict[str, object]] = json.loads(out.read_text())["components"]
    return comps


@pytest.fixture(scope="module")
def torch_cpp(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    row = _row("nccl-static-rodata")
    with zipfile.ZipFile(_fetch(row)) as z:
        return z.read(row.source.member)


def test_static_nccl_in_torch_library(torch_cpp: bytes, tmp_path: Path) -> None:
    """torch 1.13.1's libtorch_cuda_cpp.so (no libnccl NEEDED): NCCL 2.14.3 as a component
    of that library, read from its banner string; the library's own ncclGetVersion constant
    (21403) is the ground truth. torch's metadata is gone (version.py only); the cuDNN and
    cuBLAS it loads are not installed, so nothing names them (no phantom)."""
    truth = read_getter(io.BytesIO(torch_cpp), "ncclGetVersion", kind="out")
    assert truth.error is None and [c.value for c in truth.candidates] == [21403]

    root = tmp_path / "root"
    lib = root / SITE / "torch/lib"
    lib.mkdir(parents=True)
    (lib / "libtorch_cuda_cpp.so").write_bytes(torch_cpp)
    with zipfile.ZipFile(_fetch(_row("nccl-static-rodata"))) as z:
        (lib.parent / "version.py").write_bytes(z.read("torch/version.py"))
    comps = _scan_root(root, tmp_path / "out.json")
    [nccl] = [c for c in comps if c["name"] == "nccl"]
    assert nccl["version"] == "2.14.3"
    props = nccl["properties"]
    assert isinstance(props, dict)
    assert props["linkage"] == "static"
    assert props["embedded-in"].endswith("/torch/lib/libtorch_cuda_cpp.so")
    assert props["version-method"] == "elf-rodata" and props["version-confidence"] == "high"
    ev = nccl["evidence"]
    assert isinstance(ev, list)
    assert any(e["method"] == "elf-rodata" and "nccl-static-rodata: 2.14.3" in e["detail"]
               for e in ev)
    [torch] = [c for c in comps if c["name"] == "torch"]
    assert torch["version"] == "1.13.1+cu117"
    names = {c["name"] for c in comps}
    assert not names & {"cudnn", "cublas", "cublaslt", "cutlass"}


def test_cutlass_presence_only(tmp_path: Path) -> None:
    """CUTLASS kernels in torch 1.13.1's libtorch_cuda_cu.so: present, no version (CUTLASS
    has none in the binary), said so with low confidence."""
    row = _row("cutlass-static-rodata")
    with zipfile.ZipFile(_fetch(row)) as z:
        data = z.read(row.source.member)
    sc = ClassifierScanner((row,), 0)
    for i in range(0, len(data), 4 << 20):
        sc.feed(data[i : i + (4 << 20)])
    path = f"/{SITE}/torch/lib/libtorch_cuda_cu.so"
    [h] = hits(sc.close(), path)
    assert h.version is None and h.raw.startswith("_ZN7cutlass")
    assert h.method == "elf-rodata" and h.row.confidence == "low"
    # the presence row stopped at its first match, long before the file's end
    assert sc.done


def test_search_ends_at_the_fatbin(torch_cpp: bytes) -> None:
    """A before_fatbin row does not look past the first fatbin header: the same NCCL banner
    after one is not read (device code, not .rodata); before it, it is."""
    row = _row("nccl-static-rodata")
    m = re.search(row.pattern, torch_cpp, re.DOTALL)
    assert m is not None
    banner = torch_cpp[m.start() : m.end()]
    head = torch_cpp[:64]
    filler = b"\0" * 4096

    def scan(data: bytes) -> list[str | None]:
        sc = ClassifierScanner((row,), 0)
        for i in range(0, len(data), 1000):  # odd chunk size: the header may straddle
            sc.feed(data[i : i + 1000])
        return [h.version for h in hits(sc.close(), "/x/libtorch_cuda_cpp.so")]

    assert scan(head + filler + banner + filler + _FATBIN_HEADER + filler) == ["2.14.3"]
    assert scan(head + filler + _FATBIN_HEADER + filler + banner + filler) == []
    # the real library: its banner lies before its .nv_fatbin
    assert torch_cpp.find(_FATBIN_HEADER) > m.start()


def test_cublas_and_cublaslt_apart(tmp_path: Path) -> None:
    """libcublas.so.12 and libcublasLt.so.12 of nvidia-cublas-cu12 12.9.3.13 copied without
    the wheel's metadata: two components, each its own. The fingerprint database knows both
    files (12.9.3.13, exact); cuBLASLt's own cublasLtGetVersion constant (12.9.3, read from
    the 749 MB library kept sparsely: head and section headers) stays as its evidence and
    agrees (a prefix)."""
    row = _row("cublaslt-getter")
    lib = tmp_path / "root/opt/blas/lib"
    lib.mkdir(parents=True)
    with zipfile.ZipFile(_fetch(row)) as z:
        for name in ("libcublas.so.12", "libcublasLt.so.12"):
            with z.open(f"nvidia/cublas/lib/{name}") as src, open(lib / name, "wb") as dst:
                while chunk := src.read(16 << 20):
                    dst.write(chunk)
    comps = _scan_root(tmp_path / "root", tmp_path / "out.json")
    [lt] = [c for c in comps if c["name"] == "cublaslt"]
    [blas] = [c for c in comps if c["name"] == "cublas"]
    for c in (lt, blas):
        assert c["version"] == "12.9.3.13"
        assert c["properties"]["identification-confidence"] == "exact"  # type: ignore[index]
        assert c["properties"]["fingerprint-source"] == "pypi:nvidia-cublas-cu12==12.9.3.13"  # type: ignore[index]
        assert "disagreement" not in c["properties"]  # type: ignore[operator]
    assert any("cublasLtGetVersion" in e["detail"] and "120903" in e["detail"]
               for e in lt["evidence"])  # type: ignore[union-attr]
    assert {e["path"] for e in blas["evidence"]} == {"/opt/blas/lib/libcublas.so.12"}  # type: ignore[union-attr]


def test_sparse_capture_is_bounded_and_fails_cleanly(tmp_path: Path) -> None:
    """The 749 MB libcublasLt.so.12 through the cublaslt-getter row: only the head and the
    section header table are kept, at most KEEP_IN_MEMORY bytes of them in memory (the rest in
    an unnamed temporary file); with a head that ends before the getter (at
    16 MB), the decode finds nothing and says why (the holes read as the end of the file),
    never a made-up version."""
    import dataclasses

    row = _row("cublaslt-getter")

    def feed(r: Row) -> tuple[ClassifierScanner, dict[str, object] | None]:
        sc = ClassifierScanner((r,), r.capture)
        kept = in_memory = 0
        for chunk in _wheel_chunks(row, 4 << 20):  # streamed: never the 749 MB whole
            sc.feed(chunk)
            items = sc._chunks.items if sc._chunks is not None else []
            kept = max(kept, sum(len(c) for _, c in items))
            in_memory = max(in_memory, sum(len(c) for _, c in items if isinstance(c, bytes)))
        assert kept <= r.head + 2 * (4 << 20)  # the head, plus the chunk of the table
        assert r.head // 2 < kept
        assert in_memory <= KEEP_IN_MEMORY
        return sc, sc.close()

    _, analysis = feed(row)
    [h] = hits(analysis, "/opt/lib/libcublasLt.so.12")
    assert h.version == "12.9.3"
    short = dataclasses.replace(row, head=8 << 20, capture=8 << 20)
    _, analysis = feed(short)
    assert hits(analysis, "/opt/lib/libcublasLt.so.12") == []
    assert analysis is not None
    [rec] = [v["getters"]["cublaslt-getter"] for v in analysis.values()]  # type: ignore[index]
    assert rec.get("error") or rec.get("candidates") == []


def test_framework_capture_keeps_the_code_not_the_device_code() -> None:
    """torch 1.5.0's 1 GB libtorch_cuda.so through its static-getter rows (``head: fatbin``):
    only the bytes before its first fatbin header (code and data, 126 MB) and those from its
    section header table on (auditwheel's patchelf moved .dynstr there) are kept, at most
    KEEP_IN_MEMORY of them in memory (the rest in an unnamed temporary file); the 900 MB of
    device code between are not. Every getter decodes from what was kept."""
    rows = tuple(r for r in ROWS if r.head_until_fatbin)
    row = rows[0]
    sc = ClassifierScanner(rows, 0)
    kept = in_memory = seen = shoff = 0
    fatbin_at = -1
    for chunk in _wheel_chunks(row, 4 << 20):
        if not seen:
            shoff = int.from_bytes(chunk[0x28:0x30], "little")  # the section header table
        if fatbin_at < 0 and chunk.find(_FATBIN_HEADER) >= 0:
            fatbin_at = seen + chunk.find(_FATBIN_HEADER)
        seen += len(chunk)
        sc.feed(chunk)
        items = sc._chunks.items if sc._chunks is not None else []
        kept = max(kept, sum(len(c) for _, c in items))
        in_memory = max(in_memory, sum(len(c) for _, c in items if isinstance(c, bytes)))
    assert 0 < fatbin_at < seen // 4 and seen - shoff < 32 << 20
    # the head (to the chunk holding the first fatbin header), the tail from the table on
    assert kept <= fatbin_at + (4 << 20) + (seen - shoff) + (64 << 10) + (4 << 20)
    assert kept < seen // 6
    assert in_memory <= KEEP_IN_MEMORY
    found = {h.row.id: h.version for h in hits(sc.close(), "/x/torch/lib/libtorch_cuda.so")}
    assert found == {"cudnn-static-getter": "7.6.5", "cublaslt-static-getter": "10.2.2",
                     "cublas-static-symbol": None, "cufft-static-getter": "10.1.2",
                     "curand-static-getter": "10.1.2", "cusparse-static-getter": "10.3.1",
                     "nccl-static-getter": "2.4.8"}
