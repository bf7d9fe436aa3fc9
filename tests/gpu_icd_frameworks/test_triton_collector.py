"""The triton collector on the real triton 3.6.0 wheel (pinned, cached outside the repo).

Only the members the collector reads are unpacked (plus the dist-info), into a temporary
root laid out as pip installs it. Expected tool versions are the ``Cuda compilation tools``
strings of the real binaries; expected backends are the wheel's ``triton/backends`` dirs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from gpuicd_util import SITE, by_stack, collect, extract, triples

from gpusbom.collectors.triton import dist_info_name, py_string_assign
from gpusbom.model import product_properties

TRITON = "triton-3.6.0-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl"
SP = "/" + SITE

WANT_PROPS = {
    "stack": "triton",
    "product": "triton",
    "triton:distribution": "triton",
    "triton:backends": "nvidia, amd",
    "triton:bundled:ptxas": "12.8.93",
    "triton:bundled:ptxas-blackwell": "12.9.86",
    "triton:bundled:cuobjdump": "12.8.55",
    "triton:bundled:nvdisasm": "12.8.55",
    "triton:bundled-header:cuda": "12.8",
    "triton:bundled-header:hip": "7.1.25424",
}


def _want(name: str) -> bool:
    return name in (
        "triton/__init__.py",
        "triton/backends/__init__.py",
        "triton/backends/nvidia/__init__.py",
        "triton/backends/amd/__init__.py",
        "triton/backends/nvidia/include/cuda.h",
        "triton/backends/amd/include/hip/hip_version.h",
    ) or name.startswith("triton/backends/nvidia/bin/")


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    r = tmp_path_factory.mktemp("triton-root")
    extract(TRITON, r, _want)
    return r


def test_triton_alone(root: Path) -> None:
    comps, unknowns = collect(root, ["triton"])
    assert unknowns == []
    assert triples(comps, "triton") == {("triton", "3.6.0", SP)}
    (c,) = by_stack(comps, "triton")
    view = {**c.properties, **product_properties(c)}  # as the SBOMs show it
    for k, v in WANT_PROPS.items():
        assert view[k] == v, k
    assert c.properties["package-dir"] == SP + "/triton"
    assert c.purl == "pkg:generic/openai/triton@3.6.0"
    ev = {(e.method, e.path) for e in c.evidence}
    assert ("version-file", SP + "/triton/__init__.py") in ev
    assert ("elf", SP + "/triton/backends/nvidia/bin/ptxas") in ev
    details = {e.detail for e in c.evidence if e.method == "elf"}
    assert "Cuda compilation tools, release 12.8, V12.8.93" in details
    assert "release" not in c.properties  # no stack release: bundled ptxas is no CUDA toolkit


def test_triton_merges_into_its_wheel(root: Path) -> None:
    """With the python cataloger claiming the wheel's RECORD, the observation becomes part of
    the pkg:pypi/triton component (no stand-alone generic triton)."""
    comps, unknowns = collect(root, ["python", "triton"])
    assert unknowns == []
    (c,) = by_stack(comps, "triton")
    assert (c.name, c.version, c.purl) == ("triton", "3.6.0", "pkg:pypi/triton@3.6.0")
    assert c.properties["triton:bundled:ptxas"] == "12.8.93"
    assert not [x for x in comps if x.purl and x.purl.startswith("pkg:generic/openai/")]


def test_bundled_ptxas_is_not_a_cuda_toolkit(root: Path) -> None:
    """All collectors together: nothing in a triton wheel makes a CUDA release or toolkit."""
    comps, _ = collect(root)
    for c in comps:
        if c.stack == "cuda":
            assert "release" not in c.properties, (c.name, c.version, c.properties)


def test_pytorch_triton_rocm_layout(tmp_path: Path) -> None:
    """Another distribution of the same package dir: named by its dist-info, version from
    triton/__init__.py (the dist version carries a local tag)."""
    site = tmp_path / SITE
    di = site / "pytorch_triton_rocm-3.1.0+cf34004b8a.dist-info"
    di.mkdir(parents=True)
    (di / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: pytorch-triton-rocm\nVersion: 3.1.0+cf34004b8a\n"
    )
    (site / "triton/backends/amd").mkdir(parents=True)
    (site / "triton/__init__.py").write_text('"""x"""\n__version__ = "3.1.0"\n')
    (site / "triton/backends/amd/__init__.py").write_text("")
    comps, _ = collect(tmp_path, ["triton"])
    (c,) = by_stack(comps, "triton")
    assert (c.version, c.properties["triton:distribution"]) == ("3.1.0", "pytorch-triton-rocm")
    assert c.properties["triton:backends"] == "amd"
    assert not any(k.startswith("triton:bundled") for k in c.properties)


def test_helpers() -> None:
    assert dist_info_name("/x/pytorch_triton_xpu-3.4.0.dist-info") == (
        "pytorch-triton-xpu",
        "3.4.0",
    )
    assert dist_info_name("/x/triton-3.6.0.dist-info") == ("triton", "3.6.0")
    assert dist_info_name("/x/notadist") is None
    assert py_string_assign("__version__ = version = '0.11.0'\n", "__version__") == "0.11.0"
    assert py_string_assign('_version: str = "0.10.2"\n', "_version") == "0.10.2"
    assert py_string_assign("x__version__ = '1'\n", "__version__") is None
