"""Vulkan compute, SYCL and Triton probes, launched for real where they run here.

- Vulkan: the project's GLSL shader (shipped as SPIR-V) on Mesa lavapipe (mesa-vulkan-drivers);
  a broken ICD manifest is an error naming it, never a hang or a crash.
- SYCL: dpctl over Intel's CPU OpenCL runtime from PyPI (intel-opencl-rt) passes; PoCL is
  skipped (no USM); an empty SYCL device list is skipped with the reason.
- Triton: the installed Triton compiles the kernel for sm_90 with its bundled ptxas (no GPU
  needed to compile); with no NVIDIA driver the launch is skipped, saying why.
A planted error (every kernel one tile short) gives ``fail`` with the error size on each.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from gpusbom.cli.app import main
from gpusbom.probe import kernel as K
from gpusbom.probe import run_probes, runner
from gpusbom.probe.vulkan import icd_manifests

LVP = "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json"


def _by(results, backend):
    return [r for r in results if r.backend == backend]


# --- Vulkan --------------------------------------------------------------------------------

def test_shipped_spirv_is_built_from_the_shipped_glsl(tmp_path: Path) -> None:
    src = resources.files("gpusbom.probe").joinpath("shaders", "matmul.comp")
    out = tmp_path / "matmul.spv"
    subprocess.run(["glslangValidator", "-V", "--target-env", "vulkan1.0", "-o", str(out), str(src)],
                   check=True, capture_output=True)
    assert out.read_bytes() == K.shipped_spirv() == K.PRODUCT_KERNELS.vulkan
    assert K.shipped_spirv()[:4] == struct.pack("<I", 0x07230203)  # SPIR-V magic


def test_vulkan_passes_on_lavapipe() -> None:
    rs = _by(run_probes(["vulkan"], timeout=60), "vulkan")
    lvp = [r for r in rs if r.facts.get("icd") == LVP]
    assert len(lvp) == 1, rs
    r = lvp[0]
    assert r.outcome == "pass" and r.max_abs_error == 0.0, r
    assert r.device and r.device.startswith("llvmpipe")
    f = r.facts
    assert f["programming-model"] == "Vulkan compute" and f["device-type"] == "cpu"
    assert f["api-version"].startswith("1.") and int(f["simd-width"]) >= 1
    assert int(f["max-work-group-size"]) >= 256 and int(f["local-memory-bytes"]) >= 2 * 16 * 16 * 4
    assert "Mesa" in f["runtime"] and "libvulkan.so" in f["runtime-library"]
    # no ICD without a device of its kind (Mesa's Intel/AMD drivers here) is an error
    assert not [x for x in rs if x.outcome == "error"], rs


def test_vulkan_icd_manifest_naming_a_missing_library(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tmp_path / "broken_icd.json"
    bad.write_text(json.dumps({"file_format_version": "1.0.0",
                               "ICD": {"library_path": str(tmp_path / "libvulkan_gone.so"),
                                       "api_version": "1.3.0"}}))
    junk = tmp_path / "junk_icd.json"
    junk.write_text("{not json")
    monkeypatch.setenv("VK_DRIVER_FILES", os.pathsep.join([str(bad), str(junk), LVP]))
    assert icd_manifests() == [str(bad), str(junk), LVP]
    rs = _by(run_probes(["vulkan"], timeout=60), "vulkan")
    errors = {r.error_name: r for r in rs if r.outcome == "error"}
    assert set(errors) == {"VK_ICD_LIBRARY_NOT_LOADED", "VK_ICD_MANIFEST_INVALID"}, rs
    assert str(bad) in errors["VK_ICD_LIBRARY_NOT_LOADED"].reason
    assert "libvulkan_gone.so" in errors["VK_ICD_LIBRARY_NOT_LOADED"].reason
    assert str(junk) in errors["VK_ICD_MANIFEST_INVALID"].reason
    assert [r.outcome for r in rs if r.device] == ["pass"]  # the good ICD still probed
    # only the broken one: an error, not a crash, a hang or a pass
    monkeypatch.setenv("VK_DRIVER_FILES", str(bad))
    (only,) = _by(run_probes(["vulkan"], timeout=60), "vulkan")
    assert only.outcome == "error" and only.error_name == "VK_ICD_LIBRARY_NOT_LOADED"


# --- SYCL ------------------------------------------------------------------------------------

def test_sycl_passes_on_intel_cpu_runtime_and_skips_pocl() -> None:
    rs = _by(run_probes(["sycl"], timeout=120), "sycl")
    intel = [r for r in rs if r.facts.get("platform") == "Intel(R) OpenCL"]
    assert len(intel) == 1 and intel[0].outcome == "pass" and intel[0].max_abs_error == 0.0, rs
    f = intel[0].facts
    assert f["programming-model"] == "SYCL" and f["runtime"].startswith("dpctl ")
    assert "libsycl.so" in f["runtime-library"]
    pocl = [r for r in rs if r.facts.get("platform") == "Portable Computing Language"]
    assert pocl and all(r.outcome == "skipped" and "USM" in (r.reason or "") for r in pocl), rs


def test_sycl_empty_device_list_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ONEAPI_DEVICE_SELECTOR", "level_zero:*")  # no Level Zero here
    (r,) = _by(run_probes(["sycl"], timeout=60), "sycl")
    assert r.outcome == "skipped" and r.reason == "dpctl lists no SYCL device"


# --- Triton ----------------------------------------------------------------------------------

def test_triton_compiles_the_kernel_for_sm90_with_its_bundled_ptxas() -> None:
    from gpusbom.probe.triton import compile_kernel

    cubin, md, extra = compile_kernel(K.TRITON_SOURCE, K.KERNEL_ENTRY, 90)
    assert cubin[:4] == b"\x7fELF"
    assert struct.unpack_from("<H", cubin, 18)[0] == 190  # EM_CUDA
    flags = struct.unpack_from("<I", cubin, 48)[0]
    # sm_90 in e_flags: bits 0-7 in the older CUDA ELF ABI, bits 8-15 in the newer one
    # (ptxas of CUDA 12.8 and later, as bundled by Triton 3.7+)
    assert (flags & 0xFF == 90) or ((flags >> 8) & 0xFF == 90), hex(flags)
    assert int(md.num_warps) >= 1 and int(md.shared) >= 0 and extra >= 0


def test_triton_without_a_gpu_is_skipped_saying_why() -> None:
    (r,) = _by(run_probes(["triton"], timeout=60), "triton")
    assert r.outcome == "skipped" and r.facts["programming-model"] == "Triton"
    assert r.reason.startswith("Triton ") and "is installed, but" in r.reason and "CUDA" in r.reason


def test_interpreter_is_the_one_owning_the_package(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    assert runner.interpreter_for("triton") == sys.executable  # this venv has it
    assert runner.interpreter_for("triton", "/opt/x/bin/python3") == "/opt/x/bin/python3"
    env = tmp_path / "env"
    (env / "lib" / "python3.12" / "site-packages" / "gpusbom_probe_pkg").mkdir(parents=True)
    (env / "lib" / "python3.12" / "site-packages" / "gpusbom_probe_pkg" / "__init__.py").write_text("")
    (env / "bin").mkdir()
    os.symlink(sys.executable, env / "bin" / "python3")
    monkeypatch.setenv("PATH", f"{env / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    monkeypatch.delenv("CONDA_PREFIX", raising=False)
    assert runner.interpreter_for("gpusbom_probe_pkg") == str(env / "bin" / "python3")
    assert runner.interpreter_for("gpusbom_no_such_pkg") == sys.executable


# --- planted error, table and SBOM evidence ---------------------------------------------------

def test_planted_error_fails_on_vulkan_and_sycl(test_kernels) -> None:
    test_kernels("probe_test_kernels_wrong_models")
    rs = run_probes(["vulkan", "sycl"], timeout=120)
    got = {(r.backend, r.facts.get("platform") or r.facts.get("icd")): r for r in rs if r.device}
    for key in (("vulkan", LVP), ("sycl", "Intel(R) OpenCL")):
        r = got[key]
        assert r.outcome == "fail" and r.kernel == "TEST-wrong-last-tile-dropped", r
        assert r.max_abs_error is not None and r.max_abs_error > 0


def test_table_and_sbom_name_model_runtime_and_icd(tmp_path: Path, capsys) -> None:
    out = tmp_path / "probe.cdx.json"
    rc = main(["probe", "-b", "vulkan", "-b", "triton", "-o", "table", "-o", f"cyclonedx-json={out}"])
    assert rc == 0
    table = capsys.readouterr().out
    assert "MODEL" in table and "Vulkan compute" in table and "Triton" in table
    assert "lvp_icd.x86_64.json" in table and "libvulkan.so" in table
    doc = json.loads(out.read_text())
    props = {p["name"]: p["value"] for c in doc["components"] for p in c.get("properties", [])}
    assert props["gpusbom:probe:vulkan:programming-model"] == "Vulkan compute"
    assert props["gpusbom:probe:vulkan:icd"] == LVP
    assert "libvulkan.so" in props["gpusbom:probe:vulkan:runtime-library"]
    meta = {p["name"]: p["value"] for p in doc["metadata"].get("properties", [])}
    assert meta["gpusbom:probe:triton:programming-model"] == "Triton"
    assert meta["gpusbom:probe:triton:outcome"] == "skipped"


def test_glslang_is_installed_for_the_build_script() -> None:
    assert shutil.which("glslangValidator"), "scripts/test installs glslang-tools"
