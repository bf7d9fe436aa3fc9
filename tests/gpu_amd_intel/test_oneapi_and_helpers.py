"""oneAPI layouts and wheels, Level Zero / compute-runtime file-name rules, shared helpers.

The oneAPI trees and wheel metadata here are HAND-WRITTEN (Intel's installers and wheels are
not in any reachable archive): directory names and files follow the layouts Intel
documents (/opt/intel/oneapi/<component>/<version>/env/vars.sh with `latest` links; the
2024.0+ unified /opt/intel/oneapi/<version>/oneapi-vars.sh), wheel metadata is core
metadata 2.1 with the dist-info RECORD pip writes. Library files are empty: only their
names are read.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from amd_intel_util import build_root, by_product, observe_dir, triples

from gpusbom.collectors._amd_intel import header_defines, soname_version, upstream_version
from gpusbom.collectors.rocm import parse_info_version, parse_rocm_version_h
from gpusbom.model import Component
from gpusbom.stack import summarize

SP = "/usr/local/lib/python3.11/site-packages"
ONEAPI = "/opt/intel/oneapi"


def _wheel(name: str, dist: str, version: str) -> dict[str, bytes]:
    di = f"{SP}/{dist}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: x\n\n".encode()
    record = (
        f"{dist}-{version}.dist-info/METADATA,,\n{dist}-{version}.dist-info/RECORD,,\n"
    ).encode()
    return {f"{di}/METADATA": meta, f"{di}/RECORD": record, f"{di}/INSTALLER": b"pip\n"}


def test_oneapi_component_and_unified_layouts(tmp_path: Path) -> None:
    files = {
        f"{ONEAPI}/setvars.sh": b"",
        f"{ONEAPI}/compiler/2024.0/env/vars.sh": b"",
        f"{ONEAPI}/compiler/2024.1/env/vars.sh": b"",
        f"{ONEAPI}/mkl/2024.0/env/vars.sh": b"",
        f"{ONEAPI}/tbb/2021.11/env/vars.sh": b"",
        f"{ONEAPI}/dnnl/2024.0/lib/README": b"",  # no vars.sh: the directory is the evidence
        f"{ONEAPI}/newthing/1.0/env/vars.sh": b"",
        f"{ONEAPI}/2025.0/oneapi-vars.sh": b"",
        f"{ONEAPI}/licensing/2024.0/license.txt": b"",
    }
    links = {
        f"{ONEAPI}/compiler/latest": "2024.1",
        f"{ONEAPI}/mkl/latest": "2024.0",
        f"{ONEAPI}/mkl/2024": "2024.0",  # an alias, not a second install
    }
    root = build_root(tmp_path / "root", [], extra_files=files, extra_links=links)
    mine, fused, unknowns = observe_dir(root)
    assert unknowns == []
    assert triples(mine) == {
        ("dpcpp-compiler", "2024.0", f"{ONEAPI}/compiler/2024.0/env/vars.sh"),
        ("dpcpp-compiler", "2024.1", f"{ONEAPI}/compiler/2024.1/env/vars.sh"),
        ("mkl", "2024.0", f"{ONEAPI}/mkl/2024.0/env/vars.sh"),
        ("tbb", "2021.11", f"{ONEAPI}/tbb/2021.11/env/vars.sh"),
        ("onednn", "2024.0", f"{ONEAPI}/dnnl/2024.0"),
        ("oneapi-newthing", "1.0", f"{ONEAPI}/newthing/1.0/env/vars.sh"),
        ("oneapi", "2025.0", f"{ONEAPI}/2025.0/oneapi-vars.sh"),
    }
    latest = {(c.name, c.version) for c in mine if c.properties.get("latest") == "true"}
    assert latest == {("dpcpp-compiler", "2024.1"), ("mkl", "2024.0")}
    (toolkit,) = by_product(mine, "oneapi")
    assert toolkit.properties["release"] == "2025.0"
    assert toolkit.properties["layout"] == "unified"
    assert all(c.stack == "oneapi" for c in mine)
    assert all(c.purl and c.purl.startswith("pkg:generic/intel/") for c in mine)
    one = next(s for s in summarize(fused) if s.stack == "oneapi")
    assert one.release == "2025.0"


def test_oneapi_wheels_tag_the_python_packages(tmp_path: Path) -> None:
    files: dict[str, bytes] = {}
    for name, dist, ver in [
        ("intel-sycl-rt", "intel_sycl_rt", "2025.0.4"),
        ("dpcpp-cpp-rt", "dpcpp_cpp_rt", "2025.0.4"),
        ("intel-cmplr-lib-rt", "intel_cmplr_lib_rt", "2025.0.4"),
        ("mkl", "mkl", "2025.0.1"),
        ("onednn", "onednn", "2025.0.0"),
        ("intel-opencl-rt", "intel_opencl_rt", "2025.0.4"),
        ("impi-rt", "impi_rt", "2021.14.1"),
        ("tbb", "tbb", "2022.0.0"),
        ("intel-openmp", "intel_openmp", "2025.0.4"),
        ("mkl-fft", "mkl_fft", "1.3.11"),  # not Intel's oneAPI runtime: ignored
    ]:
        files.update(_wheel(name, dist, ver))
    root = build_root(tmp_path / "root", [], extra_files=files)
    mine, fused, unknowns = observe_dir(root)
    assert unknowns == []
    meta = lambda d, v: f"{SP}/{d}-{v}.dist-info/METADATA"
    assert triples(mine) == {
        ("sycl-runtime", "2025.0.4", meta("intel_sycl_rt", "2025.0.4")),
        ("dpcpp-runtime", "2025.0.4", meta("dpcpp_cpp_rt", "2025.0.4")),
        ("compiler-runtime", "2025.0.4", meta("intel_cmplr_lib_rt", "2025.0.4")),
        ("mkl", "2025.0.1", meta("mkl", "2025.0.1")),
        ("onednn", "2025.0.0", meta("onednn", "2025.0.0")),
        ("intel-opencl-cpu-runtime", "2025.0.4", meta("intel_opencl_rt", "2025.0.4")),
        ("intel-mpi", "2021.14.1", meta("impi_rt", "2021.14.1")),
        ("tbb", "2022.0.0", meta("tbb", "2022.0.0")),
        ("intel-openmp", "2025.0.4", meta("intel_openmp", "2025.0.4")),
    }
    # fusion: each observation went into its PyPI component (RECORD lists METADATA)
    tagged = {
        (c.name, c.ecosystem, c.product_name)
        for c in fused
        if c.stack == "oneapi"
    }
    assert ("mkl", "pypi", "mkl") in tagged and ("intel-sycl-rt", "pypi", "sycl-runtime") in tagged
    assert all(eco == "pypi" for _, eco, _ in tagged)
    assert len(tagged) == 9


def test_level_zero_and_compute_runtime_file_names_without_packages(tmp_path: Path) -> None:
    lib = "/usr/lib/x86_64-linux-gnu"
    files = {
        f"{lib}/libze_loader.so.1.19.2": b"",
        f"{lib}/libze_intel_gpu.so.1.6.32224": b"",
        f"{lib}/libze_intel_gpu_legacy1.so.1.5.30872": b"",
        f"{lib}/intel-opencl/libigdrcl.so": b"",
        f"{lib}/intel-opencl/libigdrcl_legacy1.so": b"",
        f"{lib}/libigc.so.2.5.6": b"",
        f"{lib}/libigdgmm.so.12.5.0": b"",
        "/usr/bin/ocloc-24.52.32224.5": b"",
        "/usr/bin/oclocfoo": b"",
        "/etc/OpenCL/vendors/intel_legacy1.icd": b"libigdrcl_legacy1.so\n",
    }
    root = build_root(
        tmp_path / "root",
        [],
        extra_files=files,
        extra_links={"/usr/bin/ocloc": "ocloc-24.52.32224.5"},
    )
    mine, _, unknowns = observe_dir(root)
    assert unknowns == []
    assert triples(mine) == {
        ("level-zero-loader", "1.19.2", f"{lib}/libze_loader.so.1.19.2"),
        ("level-zero-gpu-driver", "1.6.32224", f"{lib}/libze_intel_gpu.so.1.6.32224"),
        (
            "level-zero-gpu-driver-legacy",
            "1.5.30872",
            f"{lib}/libze_intel_gpu_legacy1.so.1.5.30872",
        ),
        # no package, no version in the name: unknown, never invented
        ("intel-compute-runtime", None, f"{lib}/intel-opencl/libigdrcl.so"),
        ("intel-compute-runtime", None, f"{lib}/intel-opencl/libigdrcl_legacy1.so"),
        ("igc", None, f"{lib}/libigc.so.2.5.6"),
        ("gmmlib", None, f"{lib}/libigdgmm.so.12.5.0"),
        ("ocloc", "24.52.32224.5", "/usr/bin/ocloc-24.52.32224.5"),
    }
    legacy = [c for c in by_product(mine, "intel-compute-runtime") if c.properties.get("variant")]
    assert [e.path for e in legacy[0].evidence] == [
        f"{lib}/intel-opencl/libigdrcl_legacy1.so",
        "/etc/OpenCL/vendors/intel_legacy1.icd",
    ]


@pytest.mark.parametrize(
    ("text", "want"),
    [("6.2.0\n", ("6.2.0", None)), ("5.7.0-63\n", ("5.7.0", "63")), ("6.3.1.1\n", ("6.3.1.1", None)),
     ("\n6.0.2\n", ("6.0.2", None)), ("garbage\n", None), ("", None)],
)  # fmt: skip
def test_parse_info_version(text: str, want: object) -> None:
    assert parse_info_version(text) == want


def test_parse_rocm_version_h_and_defines() -> None:
    h = "#define ROCM_VERSION_MAJOR   6\n#define ROCM_VERSION_MINOR   2 // c\n#define ROCM_VERSION_PATCH 0\n"
    assert parse_rocm_version_h(h) == "6.2.0"
    assert parse_rocm_version_h("#define ROCM_VERSION_MAJOR @VERSION_MAJOR@\n") is None
    assert header_defines('# define X "a" /* c */\n', ["X"]) == {"X": "a"}


@pytest.mark.parametrize(
    ("path", "stem", "want"),
    [("/l/libamdhip64.so.5.2.21153", "libamdhip64", "5.2.21153"), ("/l/libigdrcl.so", "libigdrcl", None),
     ("/l/libze_intel_gpu_legacy1.so.1.5.3", "libze_intel_gpu", None), ("/l/libfoo.so.1.x", "libfoo", None)],
)  # fmt: skip
def test_soname_version(path: str, stem: str, want: str | None) -> None:
    assert soname_version(path, stem) == want


@pytest.mark.parametrize(
    ("eco", "version", "want"),
    [("deb", "5.3.3+dfsg-2~deb12u1", "5.3.3"), ("deb", "22.3.3+ds1-1", "22.3.3"),
     ("deb", "1:5.2.3-8", "5.2.3"), ("deb", "1.0.12504.6-1+deb12u1", "1.0.12504.6"),
     ("rpm", "22.43.24595.41-1.el9", "22.43.24595.41"), ("pypi", "2025.0.4", "2025.0.4"),
     ("deb", "1.8.12", "1.8.12")],
)  # fmt: skip
def test_upstream_version(eco: str, version: str, want: str) -> None:
    assert upstream_version(Component(name="x", version=version, ecosystem=eco)) == want
