"""End to end: the gpu-binaries collector on real fixture images; its targets land on the
owning packages after fusion."""

from __future__ import annotations

import pytest

from gpusbom.fusion import union_values
from gpusbom.scan import scan

SP = "/usr/local/lib/python3.11/site-packages"

NV_SASS = {
    "nvidia-nvjpeg-cu12": (
        f"{SP}/nvidia/nvjpeg/lib/libnvjpeg.so.12",
        "sm_50,sm_52,sm_60,sm_61,sm_70,sm_75,sm_80,sm_86,sm_89,sm_90,sm_100,sm_101,sm_103,"
        "sm_120,sm_121",
        "compute_121",
    ),
    "nvidia-nvjpeg": (
        f"{SP}/nvidia/cu13/lib/libnvjpeg.so.13",
        "sm_75,sm_80,sm_86,sm_89,sm_90,sm_100,sm_103,sm_110,sm_120,sm_121",
        "compute_121",
    ),
    "nvidia-curand-cu12": (
        f"{SP}/nvidia/curand/lib/libcurand.so.10",
        "sm_50,sm_60,sm_70,sm_75,sm_80,sm_86,sm_89,sm_90",
        "compute_90",
    ),
    "nvidia-nccl-cu12": (
        f"{SP}/nvidia/nccl/lib/libnccl.so.2",
        "sm_50,sm_60,sm_61,sm_70,sm_80,sm_90",
        "compute_90",
    ),
}


def _scan(name: str):  # type: ignore[no-untyped-def]
    from fixtures.build import ensure

    # a fixture that cannot be built is a failure of the test setup, never a skip
    return scan(f"oci:{ensure(name).oci_dir}")


def test_nvidia_wheels_targets_on_wheel_components() -> None:
    result = _scan("nvidia-wheels")
    with_sass = {c.name: c for c in result.components if "cuda:sass" in c.properties}
    assert set(with_sass) == set(NV_SASS)
    for name, (lib, sass, ptx) in NV_SASS.items():
        c = with_sass[name]
        assert c.ecosystem == "pypi"
        assert c.properties["cuda:sass"] == sass
        assert c.properties["cuda:ptx"] == ptx
        assert "stack" not in c.properties or c.properties["stack"] == "cuda"
        ev = [e for e in c.evidence if e.collector == "gpu-binaries"]
        assert [(e.method, e.path) for e in ev] == [("elf", lib)]
    # the binary facts do not rename the product of a package
    assert with_sass["nvidia-nccl-cu12"].properties.get("product") in (None, "nccl")
    # nothing stand-alone is left over from gpu-binaries
    assert not [
        c for c in result.components
        if c.ecosystem == "generic" and any(e.collector == "gpu-binaries" for e in c.evidence)
    ]  # fmt: skip
    assert not [u for u in result.unknowns if u.collector == "gpu-binaries"]


def test_rocm_rocrand_gfx_on_the_deb() -> None:
    result = _scan("rocm")
    hits = [c for c in result.components if "hip:gfx" in c.properties]
    assert [(c.name, c.version, c.ecosystem) for c in hits] == [("librocrand1", "5.3.3-4", "deb")]
    assert hits[0].properties["hip:gfx"] == (
        "gfx1030,gfx803,gfx900:xnack-,gfx906:xnack-,gfx908:xnack-,gfx90a:xnack+,gfx90a:xnack-"
    )
    assert "host" not in hits[0].properties["hip:targets"]
    assert [e.path for e in hits[0].evidence if e.collector == "gpu-binaries"] == [
        "/usr/lib/x86_64-linux-gnu/librocrand.so.1.1"
    ]


def test_union_of_targets_from_several_files() -> None:
    assert union_values("sm_90,sm_100", "sm_80,sm_90a,sm_90") == "sm_80,sm_90,sm_90a,sm_100"
    assert union_values("8.8", "8.10,8.4") == "8.4,8.8,8.10"
