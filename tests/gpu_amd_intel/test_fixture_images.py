"""ROCm / Level Zero / Intel GPU collectors on the project's real fixture images
(fixtures/recipes.py: demo, rocm, intel), scanned end to end through ``gpusbom.scan``.

Asserted: the exact set of (product, product version, evidence path) our collectors add,
and the package component each observation was fused into.
"""

from __future__ import annotations

from typing import Any

import pytest

from fixtures.build import ensure
from gpusbom.model import own_product_version
from gpusbom.scan import scan

MINE = {"rocm", "intel-oneapi", "level-zero", "intel-gpu"}
LIB = "/usr/lib/x86_64-linux-gnu"


def _ours(result: Any) -> tuple[set[tuple[str, str, str]], dict[str, str]]:
    """({(product, version, path)}, {path: the component's name@version})."""
    seen: set[tuple[str, str, str]] = set()
    where: dict[str, str] = {}
    for c in result.components:
        for e in c.evidence:
            if e.collector in MINE:
                ver = own_product_version(c) or c.version
                seen.add((c.product_name, ver, e.path))
                where[e.path] = f"{c.name}@{c.version}"
    return seen, where


@pytest.fixture(scope="module")
def demo() -> Any:
    return scan(ensure("demo").oci_ref)


def test_demo_image(demo: Any) -> None:
    seen, where = _ours(demo)
    assert seen == {
        ("hip-runtime", "5.2.21153", f"{LIB}/libamdhip64.so.5.2.21153"),
        ("level-zero-loader", "1.8.12", f"{LIB}/libze_loader.so.1.8.0"),
    }
    assert where == {
        f"{LIB}/libamdhip64.so.5.2.21153": "libamdhip64-5@5.2.3-8",
        f"{LIB}/libze_loader.so.1.8.0": "libze1@1.8.12-1",
    }
    rocm = next(s for s in demo.stacks if s.stack == "rocm")
    assert rocm.present and rocm.release is None  # a lone distro HIP: no ROCm release
    hip = next(c for c in demo.components if c.name == "libamdhip64-5")
    assert hip.properties["install"] == "distro-package"


def test_rocm_image() -> None:
    result = scan(ensure("rocm").oci_ref)
    seen, where = _ours(result)
    assert seen == {
        ("hsakmt", "5.2.3", f"{LIB}/libhsakmt.so.1.0.6"),
        ("hsa-runtime", "5.2.3", f"{LIB}/libhsa-runtime64.so.1.5.0"),
        ("hip-runtime", "5.2.21153", f"{LIB}/libamdhip64.so.5.2.21153"),
        ("rocminfo", "5.2.3", "/usr/bin/rocminfo"),
        ("rocm-smi-lib", "5.2.3", "/usr/lib/librocm_smi64.so.1.0"),
        ("rocm-smi", "5.2.3", "/usr/bin/rocm-smi"),
        ("rocrand", "5.3.3", f"{LIB}/librocrand.so.1.1"),
        ("hiprand", "5.3.3", f"{LIB}/libhiprand.so.1.1"),
    }
    assert {v.split("@")[0] for v in where.values()} == {
        "libhsakmt1", "libhsa-runtime64-1", "libamdhip64-5", "rocminfo", "librocm-smi64-1",
        "rocm-smi", "librocrand1", "libhiprand1",
    }  # fmt: skip
    rocm = next(s for s in result.stacks if s.stack == "rocm")
    assert rocm.present and rocm.release is None
    assert not [
        c
        for c in result.components
        if c.properties.get("release") and c.stack == "rocm"
    ]


def test_intel_image() -> None:
    result = scan(ensure("intel").oci_ref)
    seen, where = _ours(result)
    neo = ("intel-compute-runtime", "22.43.24595.41")
    assert seen == {
        ("level-zero-loader", "1.8.12", f"{LIB}/libze_loader.so.1.8.0"),
        (*neo, f"{LIB}/intel-opencl/libigdrcl.so"),
        (*neo, "/etc/OpenCL/vendors/intel.icd"),
        # fused into intel-opencl-icd, so shown under that package's (first) product
        (*neo, f"{LIB}/libze_intel_gpu.so.1.3.24595"),
        (*neo, "/usr/bin/ocloc"),
        ("igc", "1.0.12504.6", f"{LIB}/libigc.so.1.0.1"),
        ("igc", "1.0.12504.6", f"{LIB}/libigdfcl.so.1.0.1"),
        ("gmmlib", "22.3.3", f"{LIB}/libigdgmm.so.12.3.0"),
    }
    # intel-opencl-icd holds three products (OpenCL driver, L0 GPU driver, ocloc); fusion
    # names the package after the first one it adopts
    icd = {p for p, _, path in seen if where[path] == "intel-opencl-icd@22.43.24595.41-1"}
    assert icd == {"intel-compute-runtime"}
    assert {path for _, _, path in seen if where[path].startswith("intel-opencl-icd@")} == {
        f"{LIB}/intel-opencl/libigdrcl.so",
        "/etc/OpenCL/vendors/intel.icd",
        f"{LIB}/libze_intel_gpu.so.1.3.24595",
        "/usr/bin/ocloc",
    }
    assert {v.split("@")[0] for v in where.values()} == {
        "libze1", "libigc1", "libigdfcl1", "libigdgmm12", "intel-opencl-icd",
    }  # fmt: skip
