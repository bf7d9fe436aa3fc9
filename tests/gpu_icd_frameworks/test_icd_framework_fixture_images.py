"""Scans of the real fixture images (fixtures/recipes.py: ocl-vulkan, triton, torch-cpu),
asserting exactly what the OpenCL / Vulkan / Triton / frameworks collectors add.

Each stack component is identified by (name, version, product, product-version, the paths
our collectors' evidence points at): the Debian or PyPI package owning the files, with the
GPU product merged into it by fusion. Expected versions come from the pinned packages
(Debian: pocl 3.1, ocl-icd 2.3.1, Mesa 22.3.6, Vulkan loader 1.3.239) and from the strings
the real wheel's binaries carry (``Cuda compilation tools, release 12.8, V12.8.93``).
"""

from __future__ import annotations

from typing import Any

import pytest

from gpusbom.model import ScanResult, own_product_version
from gpusbom.scan import scan

LIB = "/usr/lib/x86_64-linux-gnu"
SP = "/usr/local/lib/python3.11/site-packages"
OURS = ("opencl", "vulkan", "triton", "frameworks")


def _scan(name: str) -> ScanResult:
    from fixtures.build import ensure

    # a fixture that cannot be built is a failure of the test setup, never a skip
    return scan(ensure(name).oci_ref)


def _stack_set(res: ScanResult, stacks: tuple[str, ...]) -> set[tuple[Any, ...]]:
    out = set()
    for c in res.components:
        if c.stack not in stacks:
            continue
        paths = tuple(sorted({e.path for e in c.evidence if e.collector in OURS and e.path}))
        out.add(
            (c.name, c.version, c.product_name, own_product_version(c), paths)
        )
    return out


def test_ocl_vulkan_image() -> None:
    res = _scan("ocl-vulkan")
    assert res.unknowns == []
    icd = "/usr/share/vulkan/icd.d"
    assert _stack_set(res, ("opencl", "vulkan")) == {
        ("pocl-opencl-icd", "3.1-3+deb12u1", "pocl", "3.1", ("/etc/OpenCL/vendors/pocl.icd",)),
        ("libpocl2", "3.1-3+deb12u1", "pocl", "3.1", (f"{LIB}/libpocl.so.2.10.0",)),
        (
            "ocl-icd-libopencl1",
            "2.3.1-1",
            "opencl-icd-loader",
            "2.3.1",
            (f"{LIB}/libOpenCL.so.1.0.0",),
        ),
        ("libvulkan1", "1.3.239.0-1", "vulkan-loader", "1.3.239", (f"{LIB}/libvulkan.so.1.3.239",)),
        (
            "mesa-vulkan-drivers",
            "22.3.6-1+deb12u2",
            "mesa",
            "22.3.6",
            (
                f"{LIB}/libvulkan_intel.so",
                f"{LIB}/libvulkan_intel_hasvk.so",
                f"{LIB}/libvulkan_lvp.so",
                f"{LIB}/libvulkan_radeon.so",
                f"{icd}/intel_hasvk_icd.x86_64.json",
                f"{icd}/intel_icd.x86_64.json",
                f"{icd}/lvp_icd.x86_64.json",
                f"{icd}/radeon_icd.x86_64.json",
            ),
        ),
    }
    mesa = next(c for c in res.components if c.name == "mesa-vulkan-drivers")
    assert mesa.properties["vulkan:driver"] == "anv, hasvk, lavapipe, radv"
    assert mesa.cpe == "cpe:2.3:a:mesa3d:mesa:22.3.6:*:*:*:*:*:*:*"
    libpocl = next(c for c in res.components if c.name == "libpocl2")
    assert ("elf", "PoCL 3.1") in {(e.method, e.detail) for e in libpocl.evidence}
    text = {s.stack: s.text() for s in res.stacks}
    assert text["opencl"] == "OpenCL (ICD loader 2.3.1, PoCL 3.1)"
    assert text["vulkan"] == "Vulkan (Mesa 22.3.6, loader 1.3.239)"


@pytest.mark.slow
def test_triton_image() -> None:
    res = _scan("triton")
    assert res.unknowns == []
    t = f"{SP}/triton"
    assert _stack_set(res, ("triton",)) == {
        (
            "triton",
            "3.4.0",
            "triton",
            None,
            (
                f"{t}/__init__.py",
                f"{t}/backends/amd/include/hip/hip_version.h",
                f"{t}/backends/nvidia/bin/cuobjdump",
                f"{t}/backends/nvidia/bin/nvdisasm",
                f"{t}/backends/nvidia/bin/ptxas",
                f"{t}/backends/nvidia/include/cuda.h",
            ),
        ),
    }
    (c,) = [c for c in res.components if c.stack == "triton"]
    assert c.purl == "pkg:pypi/triton@3.4.0"
    assert {k: v for k, v in c.properties.items() if k.startswith("triton:")} == {
        "triton:distribution": "triton",
        "triton:backends": "nvidia, amd",
        "triton:bundled:ptxas": "12.8.93",
        "triton:bundled:cuobjdump": "12.8.55",
        "triton:bundled:nvdisasm": "12.8.55",
        "triton:bundled-tools": "ptxas 12.8.93, cuobjdump 12.8.55, nvdisasm 12.8.55",
        "triton:bundled-header:cuda": "12.8",
        "triton:bundled-header:hip": "6.2.41134",
    }
    # the bundled ptxas / cuda.h / hip_version.h make no CUDA or ROCm install
    st = {s.stack: s for s in res.stacks}
    assert not st["cuda"].present and not st["rocm"].present


@pytest.mark.slow
def test_torch_cpu_image() -> None:
    res = _scan("torch-cpu")
    assert res.unknowns == []
    assert _stack_set(res, ("pytorch",)) == {
        ("torch", "2.13.0+cpu", "torch", None, (f"{SP}/torch/version.py",)),
    }
    (c,) = [c for c in res.components if c.stack == "pytorch"]
    assert c.purl == "pkg:pypi/torch@2.13.0%2Bcpu"
    assert c.properties["built-for"] == "cpu"
    assert c.properties["git-version"] == "cf30153c4c131c8164ee7798e5022d810682e2cb"
    st = {s.stack: s for s in res.stacks}
    assert st["pytorch"].text() == "PyTorch (torch 2.13.0+cpu)"
    assert not st["cuda"].present
