"""Unit tables of the compatibility rules (issue 10, acceptance 1) and NVIDIA_REQUIRE semantics."""

from __future__ import annotations

import pytest

from gpusbom.compat import evaluate
from gpusbom.compat.arch import (
    ComputeCapability,
    CudaCode,
    GfxTarget,
    code_gfx_runs_on,
    gfx_runs_on,
    ptx_jits_for,
    sass_runs_on,
)
from gpusbom.compat.evaluate import cuda_coverage
from gpusbom.compat.reference_data import (
    driver_can_jit,
    driver_cuda,
    driver_ptx_isa,
    find_model,
    min_driver,
)
from gpusbom.compat.require import Facts, compare_version, requirements
from gpusbom.compat.require import evaluate as req_eval
from gpusbom.model import Component, Evidence, ScanResult, Target

CC = ComputeCapability.parse


def _sass(code: str, cc: str) -> bool:
    c = CudaCode.parse(code)
    assert c is not None and c.kind == "sass"
    return sass_runs_on(c, CC(cc))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("code", "cc", "runs"),
    [
        ("sm_80", "8.0", True), ("sm_80", "8.6", True), ("sm_80", "8.9", True),
        ("sm_80", "9.0", False), ("sm_86", "8.0", False), ("sm_86", "9.0", False),
        ("sm_90", "9.0", True), ("sm_90", "10.0", False),
        ("sm_90a", "9.0", True), ("sm_90a", "10.0", False), ("sm_90a", "8.0", False),
        ("sm_100a", "10.3", False), ("sm_100a", "10.0", True),
        ("sm_100f", "10.0", True), ("sm_100f", "10.3", True), ("sm_100f", "12.0", False),
        ("sm_100f", "11.0", False), ("sm_103f", "10.0", False), ("sm_103f", "10.3", True),
        ("sm_120f", "12.1", True), ("sm_120", "12.1", True), ("sm_121", "12.0", False),
    ],
)
def test_sass_rules(code: str, cc: str, runs: bool) -> None:
    assert _sass(code, cc) is runs


@pytest.mark.parametrize(
    ("code", "cc", "jits"),
    [
        ("compute_80", "9.0", True), ("compute_80", "12.0", True), ("compute_90", "8.9", False),
        ("compute_90a", "9.0", True), ("compute_90a", "10.0", False),
        ("compute_100f", "10.3", True), ("compute_100f", "12.0", False),
        ("compute_100", "12.0", True),
    ],
)
def test_ptx_rules(code: str, cc: str, jits: bool) -> None:
    c = CudaCode.parse(code)
    assert c is not None and c.kind == "ptx"
    assert ptx_jits_for(c, CC(cc)) is jits  # type: ignore[arg-type]


def _lib(**props: str) -> Component:
    return Component(name="libk", version="1.0", properties=dict(props),
                     evidence=[Evidence("gpu-binaries", "elf", "/usr/lib/libk.so.1.0")],
                     bom_ref="generic:libk@1.0")


def test_compute_80_ptx_runs_with_jit_on_9_0() -> None:
    lib = _lib(**{"cuda:ptx": "compute_80", "cuda:ptx-isa": "9.0"})
    v = cuda_coverage(lib, CC("9.0"), "580.159.04")  # type: ignore[arg-type]
    assert v.verdict == "runs-with-jit"
    assert "JIT" in v.reason and "compute_80" in v.reason
    assert v.evidence == ["/usr/lib/libk.so.1.0"]
    # the same PTX at an ISA the driver does not know fails to load
    v = cuda_coverage(_lib(**{"cuda:ptx": "compute_80", "cuda:ptx-isa": "9.1"}),
                      CC("9.0"), "580.159.04")  # type: ignore[arg-type]
    assert v.verdict == "will-fail" and "CUDA_ERROR_UNSUPPORTED_PTX_VERSION" in v.reason
    # SASS wins over PTX; no SASS and no PTX at or below: no kernel image
    both = _lib(**{"cuda:sass": "sm_90", "cuda:ptx": "compute_80", "cuda:ptx-isa": "9.0"})
    assert cuda_coverage(both, CC("9.0"), "580.159.04").verdict == "runs"  # type: ignore[arg-type]
    only80 = _lib(**{"cuda:sass": "sm_80"})
    v = cuda_coverage(only80, CC("9.0"), "580.159.04")  # type: ignore[arg-type]
    assert v.verdict == "will-fail" and "CUDA_ERROR_NO_BINARY_FOR_GPU" in v.reason


def test_driver_tables() -> None:
    assert min_driver("13.0") == "580.65.06"
    assert min_driver("12.4") == "550.54.14"
    assert driver_cuda("580.65.06") == "13.0" and driver_cuda("575.64") == "12.9"
    assert driver_cuda("550.54.14") == "12.4" and driver_cuda("550.54.13") == "12.3"
    assert driver_cuda("580.159.04") == "13.0" and driver_cuda("590.44.01") == "13.1"
    assert driver_cuda("440.33") is None
    assert driver_ptx_isa("580.159.04") == "9.0"
    assert driver_ptx_isa("570.26") == "8.7"  # 8.6 (CUDA 12.7, never released) and 8.7
    assert driver_ptx_isa("535.104.05") == "8.2"
    assert driver_can_jit("580.159.04", "9.0") is True
    assert driver_can_jit("580.159.04", "9.1") is False
    assert driver_can_jit("580.159.04", "9.7") is False  # newer than the table


def _image(env: dict[str, str], *comps: Component) -> ScanResult:
    return ScanResult(target=Target(kind="image", reference="test:image", env=env),
                      components=list(comps))


def _cudart(version: str) -> Component:
    return Component(name="cudart", version=version,
                     properties={"product": "cudart", "stack": "cuda",
                                 "location": "/usr/local/cuda"},
                     evidence=[Evidence("cuda", "soname",
                                        f"/usr/local/cuda/lib64/libcudart.so.{version}")],
                     bom_ref=f"generic:cudart@{version}")


def test_cuda_13_needs_driver_580() -> None:
    img = _image({}, _cudart("13.0.96"))
    bad = evaluate(img, ["H100"], driver="575.64.05")[0]
    assert bad.verdict == "will-fail"
    assert any("580.65.06" in r and "insufficient" in r for r in bad.reasons)
    good = evaluate(img, ["H100"], driver="580.65.06")[0]
    # the runtime fits the driver, but no device code was found: nothing says kernels run
    assert good.verdict == "unchecked"
    assert [lib.verdict for lib in good.libraries] == ["runs"]
    assert good.reasons[0].startswith("no CUDA device code found in the image")


def test_cuda_12_4_needs_550_54_14_or_minor_version_compatibility() -> None:
    img = _image({}, _cudart("12.4.127"))
    v = evaluate(img, ["H100"], driver="550.54.14")[0]
    assert v.verdict == "unchecked" and any("supports CUDA 12.4 >= 12.4" in r for r in v.reasons)
    assert [lib.verdict for lib in v.libraries] == ["runs"]
    v = evaluate(img, ["H100"], driver="535.104.05")[0]  # CUDA 12.2 driver: minor-version compat
    assert v.verdict == "unchecked" and any("minor-version compatibility" in r for r in v.reasons)
    assert [lib.verdict for lib in v.libraries] == ["runs"]
    v = evaluate(img, ["H100"], driver="470.256.02")[0]  # CUDA 11.4 driver: no
    assert v.verdict == "will-fail"


# as official CUDA images write it: one clause per (brand, compat-supported branch)
REQUIRE = ("cuda>=12.4 brand=tesla,driver>=470,driver<471 brand=nvidia,driver>=470,driver<471 "
           "brand=nvidia,driver>=535,driver<536 brand=geforce,driver>=535,driver<536")


def _compat_image() -> ScanResult:
    compat = Component(
        name="cuda-compat", version="550.54.15",
        properties={"product": "cuda-compat", "stack": "nvidia-driver",
                    "location": "/usr/local/cuda-12.4/compat", "driver-branches": "470, 535"},
        evidence=[Evidence("nvidia-driver", "soname",
                           "/usr/local/cuda-12.4/compat/libcuda.so.550.54.15")],
        bom_ref="generic:cuda-compat@550.54.15")
    return _image({"NVIDIA_REQUIRE_CUDA": REQUIRE, "CUDA_VERSION": "12.4.1"},
                  _cudart("12.4.127"), compat)


def test_compat_package_helps_on_h100_not_on_geforce() -> None:
    img = _compat_image()
    # an 11.4 driver (470) cannot run CUDA 12.4 on its own ...
    alone = evaluate(_image({}, _cudart("12.4.127")), ["H100"], driver="470.256.02")[0]
    assert alone.verdict == "will-fail"
    # ... but the image's cuda-compat 550 does, on a data-center GPU of a listed branch
    h100 = evaluate(img, ["H100"], driver="470.256.02")[0]
    # (no device code in this image: unchecked, with the runtime checks passing)
    assert h100.verdict == "unchecked", h100.reasons
    assert [lib.verdict for lib in h100.libraries] == ["runs"]
    assert any(r.startswith("forward compatibility: cuda-compat 550.54.15") for r in h100.reasons)
    assert "/usr/local/cuda-12.4/compat/libcuda.so.550.54.15" in h100.evidence
    # the container starts on a GeForce (brand=geforce clause) but CUDA fails with 804
    rtx = evaluate(img, ["RTX 4090"], driver="535.104.05")[0]
    assert rtx.verdict == "will-fail"
    assert any("cudaErrorCompatNotSupportedOnDevice (804" in r for r in rtx.reasons)
    # a data-center GPU on a branch the compat package does not support
    other = evaluate(img, ["H100"], driver="545.23.08")[0]
    assert other.verdict == "will-fail"
    assert any("branch 545" in r for r in other.reasons)
    # compat older than the driver is not used at all
    new = evaluate(img, ["H100"], driver="580.159.04")[0]
    assert new.verdict == "unchecked" and [lib.verdict for lib in new.libraries] == ["runs"]
    assert any("not newer than driver 580.159.04" in r for r in new.reasons)


def test_gfx_feature_flags() -> None:
    minus, plus = GfxTarget.parse("gfx90a:xnack-"), GfxTarget.parse("gfx90a:xnack+")
    anyx = GfxTarget.parse("gfx90a")
    assert minus and plus and anyx
    assert gfx_runs_on(minus, plus)[0] is False
    assert gfx_runs_on(plus, minus)[0] is False
    assert gfx_runs_on(minus, minus)[0] is True
    assert gfx_runs_on(anyx, plus)[0] is True and gfx_runs_on(anyx, minus)[0] is True
    assert gfx_runs_on(GfxTarget.parse("gfx942:sramecc+:xnack-"),  # type: ignore[arg-type]
                       GfxTarget.parse("gfx90a:sramecc+:xnack-"))[0] is False  # type: ignore[arg-type]
    assert str(GfxTarget.parse("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-:sramecc+")) == \
        "gfx90a:sramecc+:xnack-"
    assert code_gfx_runs_on("gfx9-4-generic:xnack-", GfxTarget.parse("gfx942:xnack-"))[0] == "runs"  # type: ignore[arg-type]
    assert code_gfx_runs_on("gfx9-generic", GfxTarget.parse("gfx942"))[0] == "no"  # type: ignore[arg-type]
    assert code_gfx_runs_on("amdgcnspirv", GfxTarget.parse("gfx1100"))[0] == "jit"  # type: ignore[arg-type]


def test_hip_image_on_gfx_targets() -> None:
    lib = Component(name="librocblas", version="5.3.3",
                    properties={"hip:gfx": "gfx906:xnack-,gfx90a:xnack-,gfx1030"},
                    evidence=[Evidence("gpu-binaries", "elf", "/usr/lib/librocblas.so.0")],
                    bom_ref="generic:librocblas")
    img = _image({}, lib)
    got = {v.target: v.verdict for v in evaluate(img, ["gfx90a:xnack-", "gfx90a:xnack+",
                                                      "gfx1030", "gfx942", "MI300X"])}
    assert got == {"gfx90a:xnack-": "runs", "gfx90a:xnack+": "will-fail", "gfx1030": "runs",
                   "gfx942": "will-fail", "MI300X (gfx942)": "will-fail"}
    # a HIP-only image on an NVIDIA GPU: nothing in it is for that vendor
    na = evaluate(img, ["H100"], driver="580.65.06")[0]
    assert na.verdict == "not-applicable" and "/usr/lib/librocblas.so.0" in na.evidence
    assert "ROCm/HIP only" in na.reasons[0]


@pytest.mark.parametrize(
    ("a", "op", "b", "want"),
    [("13.0", ">=", "12.4", True), ("12.2", ">=", "12.4", False), ("12.4", ">=", "12.4.0", True),
     ("535.104.05", "<", "536", True), ("535.104.05", ">=", "535", True),
     ("12.4.1", "<=", "12.4", False), ("12.4", "=", "12.4.0", True), ("9.0", "!=", "9", False),
     ("12.x", ">=", "12", None)],
)
def test_require_version_compare(a: str, op: str, b: str, want: bool | None) -> None:
    assert compare_version(a, op, b) is want


def test_require_expression() -> None:
    h200 = Facts(cuda="13.0", driver="580.159.04", arch="9.0", brand="nvidia")
    assert req_eval(REQUIRE, h200).ok
    old_dc = Facts(cuda="12.2", driver="535.104.05", arch="9.0", brand="nvidia")
    assert req_eval(REQUIRE, old_dc).ok  # brand=nvidia,driver 535 branch
    tesla_545 = Facts(cuda="12.3", driver="545.23.08", arch="7.0", brand="tesla")
    out = req_eval(REQUIRE, tesla_545)
    assert not out.ok and out.message().startswith("unsatisfied condition: cuda>=12.4, please")
    assert req_eval("arch>=8.0", Facts(arch="7.5")).ok is False
    assert req_eval("arch>=8.0", Facts()).ok is True  # no device: assumed ok
    assert req_eval("cuda>=12.4 bogus=1", old_dc).error == "invalid expression"
    assert req_eval("brand>tesla", h200).error == "invalid expression"
    assert requirements({"NVIDIA_DISABLE_REQUIRE": "true", "NVIDIA_REQUIRE_CUDA": "cuda>=99"})[0] == []
    reqs, _ = requirements({"CUDA_VERSION": "11.8.0"})  # legacy image
    assert reqs == ["cuda>=11.8"]
    reqs, _ = requirements({"NVIDIA_REQUIRE_CUDA": "cuda>=12.0", "NVIDIA_REQUIRE_ARCH": "arch>=8.0",
                            "NVIDIA_REQUIRE_JETPACK": "csv-mounts=all", "CUDA_VERSION": "12.0"})
    assert sorted(reqs) == ["arch>=8.0", "cuda>=12.0"]


def test_require_blocks_container_start() -> None:
    img = _image({"NVIDIA_REQUIRE_CUDA": "cuda>=13.0"})
    v = evaluate(img, ["H100"], driver="570.86.10")[0]
    assert v.verdict == "will-fail"
    assert any("unsatisfied condition: cuda>=13.0" in r for r in v.reasons)


def test_models() -> None:
    for name, cc in (("H200", "9.0"), ("NVIDIA H200", "9.0"), ("H100 80GB HBM3", "9.0"),
                     ("NVIDIA A100-SXM4-40GB", "8.0"), ("B200", "10.0"), ("L4", "8.9"),
                     ("NVIDIA GeForce RTX 4090", "8.9"), ("RTX 5090", "12.0")):
        m = find_model(name)
        assert m is not None and m.cc == cc, name
    assert find_model("Instinct MI300X").gfx == "gfx942"  # type: ignore[union-attr]
    assert find_model("whatever", "0x2335").name == "H200"  # type: ignore[union-attr]
    assert find_model("RTX 4090").data_center is False  # type: ignore[union-attr]
    assert find_model("H100").data_center is True  # type: ignore[union-attr]
