"""Old CUDA (#38): torch 1.x built for CUDA 10.x, and cuBLAS 10.x/11.x copied without
metadata. gpusbom gets the CUDA release, cuBLAS and the statically linked cuDNN right, or
says ``unknown``; never an impossible version (cuBLAS ``1.2.2``).

Real artifacts only, downloaded by pinned name, version and sha256 into the fixture cache
(``~/.cache/gpusbom/fixtures/downloads``, outside the repository; one download at a time
under a file lock), members read from the archives without extracting the rest:

- ``torch==1.5.0`` (cp38 manylinux1 wheel on PyPI, 752 MB, CUDA 10.2): its 1 GB
  ``libtorch_cuda.so`` links cuBLAS/cuBLASLt, cuDNN 7, cuFFT, cuRAND, cuSPARSE and NCCL
  statically; ``libcudart`` and ``libnvrtc`` are vendored under auditwheel's names;
- Ubuntu 20.04's ``libcublaslt10`` 10.1.243-3 (cuBLAS 10.2.1.243, the CUDA 10.1 update 2
  release) and Debian 12's ``libcublaslt11`` 11.11.3.6~11.8.0-5~deb12u1.

Ground truth is never the scanner's output: the constants each library's own getters
hold, decoded independently (``read_getter`` on the whole file), the version strings in the
files (a regular expression on their bytes), the wheel's ``torch/version.py`` and the
distro packages' versions (the library file names they ship).
"""

from __future__ import annotations

import fcntl
import io
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from .dirscan import scan_dir

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from fixtures.fetch import Pin, cache_root, fetch  # noqa: E402

from gpusbom.binary.getters import read_getter  # noqa: E402
from gpusbom.catalog.classifiers import apply_rule  # noqa: E402
from gpusbom.fingerprints.active import load_bundled  # noqa: E402

TORCH = Pin("wheel", "torch", "1.5.0", "torch-1.5.0-cp38-cp38-manylinux1_x86_64.whl",
            "ecdc2ea4011e3ec04937b6b9e803ab671c3ac04e81b1df20354e01453e508b2f", 751997665)
CUBLASLT10 = Pin("deb", "libcublaslt10", "10.1.243-3",
                 "pool/multiverse/n/nvidia-cuda-toolkit/libcublaslt10_10.1.243-3_amd64.deb",
                 "4a9ff2c0f3203650d080aae7d1a4806fdd101c5ef7c4fbb608d8e7fc6fe2abd9", 9248628,
                 "amd64")
CUBLASLT11 = Pin("deb", "libcublaslt11", "11.11.3.6~11.8.0-5~deb12u1",
                 "pool/non-free/n/nvidia-cuda-toolkit/"
                 "libcublaslt11_11.11.3.6~11.8.0-5~deb12u1_amd64.deb",
                 "078aa59e43c8d8c58b816160c37391913c78c23185f81a98ee29bbdddf6d04a7", 206493700,
                 "amd64")
UBUNTU = "https://archive.ubuntu.com/ubuntu"
DEBIAN = "https://deb.debian.org/debian"
SITE = "usr/local/lib/python3.8/site-packages"


def pinned(pin: Pin, base_uris: tuple[str, ...] = ()) -> Path:
    """The pinned file from the fixture cache, downloaded once (a lock per file: two test
    workers never fetch the same 752 MB twice); skipped when it cannot be obtained."""
    from fixtures.fetch import PinError

    root = cache_root() / "downloads"
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".lock-{pin.filename}", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return fetch(pin, base_uris=list(base_uris) or None)
        except PinError as e:
            pytest.skip(f"cannot obtain {pin.filename}: {e}")


def _deb_member(pin: Pin, member: str, dest: Path, base: str) -> Path:
    """One file of a pinned .deb, through dpkg-deb and tar (the rest is not written)."""
    deb = pinned(pin, (base,))
    dest.parent.mkdir(parents=True, exist_ok=True)
    tar = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE)
    with open(dest, "wb") as out:
        subprocess.run(["tar", "-xO", f"./{member}"], stdin=tar.stdout, stdout=out, check=True)
    assert tar.wait() == 0
    return dest


def _cuda_versions_are_never_impossible(doc: dict[str, Any]) -> None:
    idx = load_bundled().release_index()
    for c in doc["components"]:
        for p in c.get("products") or []:
            check = idx.check(p["name"], p.get("version"))
            assert check is None or check.status != "rejected", (c["name"], p, check)


# ------------------------------------------------------------------------------ cuBLAS 10/11


def test_cublaslt_10_vendored_is_10_2_1_never_1_2_1(tmp_path: Path) -> None:
    """cuBLASLt of CUDA 10.1 update 2 (Ubuntu's libcublaslt10 ships
    ``libcublasLt.so.10.2.1.243``) renamed as auditwheel renames it: its getter returns
    10201, cuBLAS's x1000 code of that era. Read with the x10000 rule of cuBLAS 12 it is
    ``1.2.1`` (what gpusbom reported before): a version no cuBLAS ever had, which the release
    lists reject; the cuBLAS code rule gives 10.2.1, a listed release."""
    real = _deb_member(CUBLASLT10, "usr/lib/x86_64-linux-gnu/libcublasLt.so.10.2.1.243",
                       tmp_path / "libcublasLt.so.10.2.1.243", UBUNTU)
    truth = read_getter(io.BytesIO(real.read_bytes()), "cublasLtGetVersion", kind="return")
    assert truth.error is None and [c.value for c in truth.candidates] == [10201]
    assert apply_rule("code-10000", 10201) == "1.2.1"  # the old reading
    idx = load_bundled().release_index()
    assert idx.check("cublaslt", "1.2.1").status == "rejected"  # type: ignore[union-attr]

    lib = tmp_path / "root" / "opt" / "app" / "lib" / "libcublasLt-3f1b2c4d.so.10"
    lib.parent.mkdir(parents=True)
    lib.write_bytes(real.read_bytes())
    doc = scan_dir(tmp_path / "root", tmp_path / "out.json")
    [lt] = [c for c in doc["components"] if c["name"] == "cublaslt"]
    assert lt["version"] == "10.2.1"
    props = lt["properties"]
    assert props["release-check"] == "release"
    assert "rejected-versions" not in props
    assert props["version-method"] == "elf-symbol" and props["version-confidence"] == "high"
    _cuda_versions_are_never_impossible(doc)


def test_cublaslt_11_11_uses_the_x10000_code(tmp_path: Path) -> None:
    """cuBLAS 11.11.3.6 (CUDA 11.8; Debian's libcublaslt11 11.11.3.6~11.8.0): its getter
    already returns the x10000 code (111103), so the cuBLAS rule reads 11.11.3."""
    real = _deb_member(CUBLASLT11, "usr/lib/x86_64-linux-gnu/libcublasLt.so.11.11.3.6",
                       tmp_path / "root" / "opt" / "lib" / "libcublasLt.so.11", DEBIAN)
    with open(real, "rb") as f:
        truth = read_getter(f, "cublasLtGetVersion", kind="return")
    assert truth.error is None and {c.value for c in truth.candidates} == {111103}
    doc = scan_dir(tmp_path / "root", tmp_path / "out.json")
    [lt] = [c for c in doc["components"] if c["name"] == "cublaslt"]
    assert lt["version"] == "11.11.3"
    assert lt["properties"]["release-check"] == "release"
    _cuda_versions_are_never_impossible(doc)


# ------------------------------------------------------------------------------ torch 1.5.0


@pytest.fixture(scope="module")
def torch15(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """torch 1.5.0's lib directory and version.py under a site-packages, without its
    dist-info (a vendored copy: what the binaries say is all there is)."""
    wheel = pinned(TORCH)
    root = tmp_path_factory.mktemp("torch15")
    keep = ("torch/lib/libtorch_cuda.so", "torch/lib/libcudart-80664282.so.10.2",
            "torch/lib/libnvrtc-08c4863f.so.10.2", "torch/version.py")
    with zipfile.ZipFile(wheel) as z:
        for name in keep:
            dest = root / SITE / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            with z.open(name) as src, open(dest, "wb") as out:
                while chunk := src.read(16 << 20):
                    out.write(chunk)
    return root


def _truth(lib: Path) -> dict[str, int]:
    """The constants of the library's own getters (decoded from the whole file)."""
    out = {}
    with open(lib, "rb") as f:
        for symbol, kind in (("cublasLtGetVersion", "return"), ("cudnnGetVersion", "return"),
                             ("cufftGetVersion", "out"), ("curandGetVersion", "out"),
                             ("cusparseGetVersion", "out1"), ("ncclGetVersion", "out")):
            r = read_getter(f, symbol, kind=kind)  # type: ignore[arg-type]
            assert r.error is None and len({c.value for c in r.candidates}) == 1, (symbol, r)
            out[symbol] = r.candidates[0].value
    return out


def test_torch_1_5_cuda_10_2_static_libraries(torch15: Path, tmp_path: Path) -> None:
    lib = torch15 / SITE / "torch/lib/libtorch_cuda.so"
    truth = _truth(lib)
    assert truth == {"cublasLtGetVersion": 10202, "cudnnGetVersion": 7605,
                     "cufftGetVersion": 10102, "curandGetVersion": 10102,
                     "cusparseGetVersion": 10301, "ncclGetVersion": 2408}
    data = lib.read_bytes()
    tags = set(re.findall(rb"cudnn_version_(\d+_\d+_\d+_\d+)_c[0-9a-f]+", data))
    assert tags == {b"7_6_5_32"}  # cuDNN 7.6.5.32, linked statically
    del data
    version_py = (torch15 / SITE / "torch/version.py").read_text()
    assert "cuda = '10.2'" in version_py

    doc = scan_dir(torch15, tmp_path / "out.json", "cyclonedx-json", "spdx-json")
    by = {c["name"]: c for c in doc["components"]}
    want = {"cublaslt": "10.2.2", "cublas": "10.2.2", "cudnn": "7.6.5.32", "cufft": "10.1.2",
            "curand": "10.1.2", "cusparse": "10.3.1", "nccl": "2.4.8"}
    for name, version in want.items():
        c = by[name]
        assert c["version"] == version, (name, c["version"], c["properties"])
        props = c["properties"]
        assert props["linkage"] == "static"
        assert props["embedded-in"] == f"/{SITE}/torch/lib/libtorch_cuda.so"
        assert "rejected-versions" not in props
    # the CUDA release: the vendored runtime's getter (10020: 10.2) and NVRTC's banner
    assert by["cudart"]["version"] == "10.2"
    assert by["nvrtc"]["version"] == "10.2.89"
    assert by["torch"]["version"] == "1.5.0"
    assert by["torch"]["properties"]["built-for"] == "cuda 10.2"
    # how each was decided
    assert by["cudnn"]["properties"]["version-method"] == "elf-rodata"
    assert by["cublaslt"]["properties"]["version-method"] == "elf-symbol"
    assert by["cublas"]["properties"]["version-method"] == "sibling"  # its Lt's release
    statuses = {n: by[n]["properties"]["release-check"] for n in want}
    assert statuses["cublaslt"] == statuses["cublas"] == "release"  # cuBLAS 10.2.2.89
    assert statuses["cudnn"] == "release" and statuses["nccl"] == "release"
    _cuda_versions_are_never_impossible(doc)

    # linkage and embedded-in in CycloneDX and SPDX too
    cdx = json.loads((tmp_path / "out.cyclonedx-json").read_text())
    [c] = [c for c in cdx["components"] if c["name"] == "cudnn"]
    props = {p["name"]: p["value"] for p in c["properties"]}
    assert props["gpusbom:linkage"] == "static"
    assert props["gpusbom:embedded-in"].endswith("/torch/lib/libtorch_cuda.so")
    spdx = (tmp_path / "out.spdx-json").read_text()
    assert "linkage" in spdx and "embedded-in" in spdx and "7.6.5.32" in spdx
