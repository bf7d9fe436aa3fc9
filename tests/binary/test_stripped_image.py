"""An image of GPU software without package metadata, built at test time from pinned real
artifacts (the classifier rows' sources, checked by sha256; an nvcc build), scanned as an OCI
layout. Ground truth is each artifact's own metadata (wheel version, Debian version, nvcc's
gencode list), never the scanner's output.

Classes (one layer), then a second layer deleting one library:

* runfile-style toolkit tree: ``/usr/local/cuda-12.6`` with NVRTC under a short name
  (``libnvrtc.so.12.6``: the file says 12.6, the library 12.6.77);
* cuDNN / NCCL tarball installs, libraries only under their SONAME names
  (``/usr/local/cudnn/lib/libcudnn_graph.so.9`` 9.1.0.70, ``/opt/nccl/lib/libnccl.so.2``
  2.19.3) and a copied ``libcudart.so.12`` (12.4.127);
* an nvcc-built executable and a shared library with the static CUDA runtime and several
  SASS/PTX targets;
* torch without its dist-info (``torch/version.py`` of torch 2.13.0+cpu) with an
  auditwheel-renamed ``torch/lib/libcudart-9335f6a2.so.12``;
* a ROCm tarball layout ``/opt/rocm-5.2.3`` with HIP only as ``libamdhip64.so.5``;
* a oneAPI offline layout ``/opt/intel/oneapi/compiler/2026.2`` with intel-sycl-rt
  2026.2.0's ``libsycl.so.9``;
* a deleted library (whiteout in layer 1): no phantom.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from gpusbom.catalog.classifiers import ROWS

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_classifiers import _member, _nvcc_app

from fixtures.imagetools import WHITEOUT, Symlink, build_image, write_oci_layout

SITE = "usr/local/lib/python3.11/site-packages"
_LIB_SRC = r"""
__global__ void vscale(float *x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a; }
extern "C" int vscale_version(void) { int v = 0; cudaRuntimeGetVersion(&v); return v; }
"""


def _row(rid: str) -> Any:
    return next(r for r in ROWS if r.id == rid)


def _nvcc_lib(tmp: Path) -> bytes:
    sys.path.insert(0, str(ROOT / "fixtures" / "check"))
    import build  # fixtures/check/build.py

    nvcc = build.find_tool("nvcc")
    src = tmp / "vscale.cu"
    src.write_text(_LIB_SRC)
    out = tmp / "libvscale.so"
    subprocess.run(
        [nvcc, "-shared", "-Xcompiler", "-fPIC", "-cudart", "static",
         "-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_86,code=sm_86",
         "-gencode", "arch=compute_90,code=[sm_90,compute_90]", "-o", str(out), str(src)],
        check=True, capture_output=True,
    )  # fmt: skip
    return out.read_bytes()


@pytest.fixture(scope="module")
def scanned(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    from fixtures.fetch import fetch, load_pins
    from gpusbom.cli.app import main

    tmp = tmp_path_factory.mktemp("stripped")
    nvrtc = _member(_row("nvrtc-rodata"), tmp)
    cudnn = _member(_row("cudnn9-getter"), tmp)
    nccl = _member(_row("nccl-getter"), tmp)
    cudart = _member(_row("cudart-getter"), tmp)
    hip = _member(_row("hip-getter"), tmp)
    sycl = _member(_row("sycl-rodata"), tmp)
    app = _nvcc_app(tmp).read_bytes()
    lib = _nvcc_lib(tmp)
    with zipfile.ZipFile(fetch(load_pins()[("wheel", "torch", "2.13.0+cpu")])) as z:
        version_py = z.read("torch/version.py")
    tk = "usr/local/cuda-12.6/targets/x86_64-linux/lib"
    layer0 = [
        (f"{tk}/libnvrtc.so.12.6", nvrtc),
        (f"{tk}/libnvrtc.so.12", Symlink("libnvrtc.so.12.6")),
        ("usr/local/cuda-12.6/bin/app-tool", b"#!/bin/sh\n"),
        ("usr/local/cuda", Symlink("cuda-12.6")),
        ("usr/local/cudnn/lib/libcudnn_graph.so.9", cudnn),
        ("opt/nccl/lib/libnccl.so.2", nccl),
        ("app/lib/libcudart.so.12", cudart),
        ("app/lib/libvscale.so", lib),
        ("usr/local/bin/app", app),
        (f"{SITE}/torch/version.py", version_py),
        (f"{SITE}/torch/lib/libcudart-9335f6a2.so.12", cudart),
        ("opt/rocm-5.2.3/lib/libamdhip64.so.5", hip),
        ("opt/rocm-5.2.3/.info/version", b"5.2.3-109\n"),
        ("opt/intel/oneapi/compiler/2026.2/lib/libsycl.so.9", sycl),
        ("opt/intel/oneapi/compiler/2026.2/env/vars.sh", b"# oneAPI compiler 2026.2\n"),
        ("opt/intel/oneapi/compiler/latest", Symlink("2026.2")),
        ("opt/old/lib/libcudnn_graph.so.9", cudnn),
    ]
    layer1 = [("opt/old/lib/libcudnn_graph.so.9", WHITEOUT)]
    image = build_image([layer0, layer1], compression="zstd")
    layout = write_oci_layout(tmp / "oci", image)
    out = tmp / "out.json"
    assert main(["scan", "--image", f"oci:{layout}", "-q", "-o", f"json={out}"]) == 0
    by: dict[str, list[dict[str, Any]]] = {}
    for c in json.loads(out.read_text())["components"]:
        by.setdefault(c["name"], []).append(c)
    return by


def _at(comps: list[dict[str, Any]], loc: str) -> dict[str, Any]:
    [c] = [c for c in comps if c["properties"].get("location") == loc]
    return c


def test_runfile_toolkit_nvrtc_longer_version_wins(scanned: dict[str, Any]) -> None:
    c = _at(scanned["nvrtc"], "/usr/local/cuda-12.6")
    assert c["version"] == "12.6.77"  # wheel nvidia-cuda-nvrtc-cu12 12.6.77
    methods = {e["method"] for e in c["evidence"]}
    assert {"soname", "elf-rodata"} <= methods  # 12.6 (file name) and 12.6.77, both kept
    # the library's bytes are the wheel's (fingerprint database, #38): exact, and the
    # rodata version (high) agrees
    assert "fingerprint-sha256" in methods
    assert c["properties"]["version-confidence"] == "exact"


def test_tarball_and_soname_only_libraries(scanned: dict[str, Any]) -> None:
    # 9.1.0.70 wheel: its libcudnn_graph.so.9 is in the fingerprint database (cuDNN's PyPI
    # history, #38): the exact release; the getter's 9.1.0 agrees
    cudnn = _at(scanned["cudnn"], "/usr/local/cudnn")
    assert cudnn["version"] == "9.1.0.70"
    assert cudnn["properties"]["identification-confidence"] == "exact"
    assert "disagreement" not in cudnn["properties"]
    nccl = _at(scanned["nccl"], "/opt/nccl")
    assert nccl["version"] == "2.19.3"
    assert {e["method"] for e in nccl["evidence"]} >= {"elf-rodata", "elf-symbol"}
    cudart = _at(scanned["cudart"], "/app")
    # the copied file is the 12.4.127 wheel's libcudart.so.12: the fingerprint database
    # gives the exact release (#38) where its CUDART_VERSION said only 12.4 (medium)
    assert cudart["version"] == "12.4.127"
    assert cudart["properties"]["version-confidence"] == "exact"
    assert cudart["properties"]["identification-method"] == "sha256"


def test_static_cudart_and_targets(scanned: dict[str, Any]) -> None:
    exe = _at(scanned["cudart"], "/usr/local/bin/app")
    assert exe["version"] == "13.0" and exe["properties"]["linkage"] == "static"
    so = _at(scanned["cudart"], "/app/lib/libvscale.so")
    assert so["version"] == "13.0" and so["properties"]["embedded-in"] == "/app/lib/libvscale.so"
    [app] = scanned["app"]
    assert app["type"] == "application"
    assert app["properties"]["cuda:sass"] == "sm_80,sm_90"
    assert app["properties"]["cuda:ptx"] == "compute_90"
    [lib] = scanned["libvscale"]
    assert lib["properties"]["cuda:sass"] == "sm_80,sm_86,sm_90"
    assert lib["properties"]["cuda:ptx"] == "compute_90"


def test_torch_without_metadata_and_renamed_cudart(scanned: dict[str, Any]) -> None:
    [torch] = scanned["torch"]
    assert torch["version"] == "2.13.0+cpu"
    assert torch["properties"]["metadata-missing"] == "true"
    vend = _at(scanned["cudart"], f"/{SITE}/torch")
    assert vend["properties"]["vendored-as"] == "libcudart-9335f6a2.so.12"
    # the renamed copy holds the 12.4.127 wheel's bytes: the fingerprint database (#38)
    assert vend["version"] == "12.4.127"
    assert vend["properties"]["identification-method"] == "sha256"
    assert not [n for n in scanned if n.startswith("nvidia-")]  # no phantom wheel names


def test_rocm_tarball_hip(scanned: dict[str, Any]) -> None:
    [hip] = scanned["hip-runtime"]
    assert hip["version"] == "5.2.21153"  # libamdhip64-5 5.2.3-8: HIP 5.2.21153
    assert hip["properties"]["hip:rocm-release"] == "5.2.3"


def test_oneapi_offline_layout(scanned: dict[str, Any]) -> None:
    """/opt/intel/oneapi/compiler/2026.2 holding intel-sycl-rt 2026.2.0's libsycl.so.9: the
    layout's version directory (2026.2) and the library's own release (2026.2.0)."""
    sycl = _at(scanned["sycl-runtime"], "/opt/intel/oneapi/compiler/2026.2/lib")
    assert sycl["version"] == "2026.2.0"
    layout = [c for comps in scanned.values() for c in comps
              if c["properties"].get("location") == "/opt/intel/oneapi/compiler/2026.2"]
    assert [c["version"] for c in layout] == ["2026.2"]


def test_no_phantom_from_deleted_file(scanned: dict[str, Any]) -> None:
    locs = {c["properties"].get("location") for c in scanned["cudnn"]}
    assert locs == {"/usr/local/cudnn"}
    for comps in scanned.values():
        for c in comps:
            assert not any((e.get("path") or "").startswith("/opt/old/") for e in c["evidence"])
