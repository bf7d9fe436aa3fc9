"""SBOMs made by other tools (cyclonedx-py, sbom4python, cdxgen), read by ``scan --sbom``.

Each SBOM is generated here by the real tool over real packages: a Python environment of
pinned wheels (torch 2.5.1, nvidia-cuda-runtime-cu12 12.4.127, packaging 24.1) and the
``demo`` fixture image. The expected components are what those inputs hold; the expected
findings come from the bundled advisory database (torch < 2.6.0: CVE-2025-32434; Level
Zero loader 1.8.12: INTEL-SA-01274, review).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fixtures.build import ensure
from fixtures.fetch import fetch, load_pins

from . import sbom_tools

EPOCH = "1700000000"


def _scan_sbom(sbom: Path, tmp_path: Path) -> dict[str, Any]:
    out = tmp_path / "out.json"
    cdx = tmp_path / "out.cdx.json"
    proc = subprocess.run(
        [sys.executable, "-m", "gpusbom", "scan", "--sbom", str(sbom), "-q",
         "-o", f"json={out}", "-o", f"cyclonedx-json={cdx}", "-o", "table"],
        capture_output=True, text=True, check=False, timeout=300, env={**os.environ, "SOURCE_DATE_EPOCH": EPOCH},
    )
    assert proc.returncode == 0, proc.stderr
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(cdx.read_text()) is None
    doc: dict[str, Any] = json.loads(out.read_text())
    doc["_table"] = proc.stdout
    return doc


def _findings(doc: dict[str, Any]) -> set[tuple[str, str, str]]:
    names = {c["bom_ref"]: c["name"] for c in doc["components"]}
    return {(f["id"], names[f["components"][0]], f["advisory"]["status"])
            for f in doc.get("findings", []) if f["kind"] == "advisory"}


@pytest.fixture(scope="module")
def pyenv() -> Path:
    pins = load_pins()
    wheels = [
        sbom_tools.torch_wheel(),
        fetch(pins[("wheel", "nvidia-cuda-runtime-cu12", "12.4.127")]),
        fetch(pins[("wheel", "packaging", "24.1")]),
    ]
    return sbom_tools.python_env(wheels)


def test_cyclonedx_py_environment(pyenv: Path, tmp_path: Path) -> None:
    tool = sbom_tools.cyclonedx_py()
    sbom = tmp_path / "env.cdx.json"
    p = subprocess.run([str(tool), "environment", "--output-reproducible", "-o", str(sbom),
                        str(pyenv)], capture_output=True, text=True, check=False, timeout=300,
                       env={**os.environ, "SOURCE_DATE_EPOCH": EPOCH})
    assert p.returncode == 0, p.stderr
    doc = _scan_sbom(sbom, tmp_path)
    comps = {(c["name"], c["version"], c["purl"], c["ecosystem"]) for c in doc["components"]}
    assert comps == {
        ("nvidia-cuda-runtime-cu12", "12.4.127", "pkg:pypi/nvidia-cuda-runtime-cu12@12.4.127",
         "pypi"),
        ("packaging", "24.1", "pkg:pypi/packaging@24.1", "pypi"),
        ("torch", "2.5.1", "pkg:pypi/torch@2.5.1", "pypi"),
    }
    by = {c["name"]: c for c in doc["components"]}
    # the same GPU meaning gpusbom's collectors give these wheels
    assert by["nvidia-cuda-runtime-cu12"]["properties"]["stack"] == "cuda"
    assert by["nvidia-cuda-runtime-cu12"]["properties"]["product"] == "cudart"
    assert by["torch"]["properties"]["stack"] == "pytorch"
    assert by["torch"]["bom_ref"] == "torch==2.5.1"  # the SBOM's own bom-ref is kept
    assert all(e["method"] == "sbom-declared" for c in doc["components"] for e in c["evidence"])
    # torch 2.5.1: exactly the bundled PyTorch record for < 2.6.0 (other findings, on the
    # CUDA runtime wheel, follow the advisory database's CUDA records)
    assert {f for f in _findings(doc) if f[1] == "torch"} == {
        ("CVE-2025-32434", "torch", "affected")}
    f = next(f for f in doc["findings"] if f["id"] == "CVE-2025-32434")
    assert f["advisory"]["fixed_version"] == "2.6.0"
    assert "CVE-2025-32434" in doc["_table"]
    assert next(s for s in doc["stacks"] if s["stack"] == "cuda")["parts"][0]["versions"] == [
        "12.4.127"]


def test_sbom4python_spdx_tag_value(pyenv: Path, tmp_path: Path) -> None:
    tool = sbom_tools.sbom4python()
    site = next(pyenv.parent.parent.glob("lib/python*/site-packages"))
    sbom = tmp_path / "torch.spdx"
    p = subprocess.run([str(tool), "-m", "torch", "--sbom", "spdx", "--format", "tag",
                        "-o", str(sbom)], capture_output=True, text=True, check=False, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(site)})
    assert p.returncode == 0, p.stderr
    assert sbom.read_text().startswith("SPDXVersion: SPDX-2.3")
    doc = _scan_sbom(sbom, tmp_path)
    comps = {(c["name"], c["version"], c["purl"]) for c in doc["components"]}
    # torch (the module asked for, which the document describes) and what it needs;
    # sbom4python resolves the requirements in its own environment, so only assert ours
    assert ("torch", "2.5.1", "pkg:pypi/torch@2.5.1") in comps
    torch = next(c for c in doc["components"] if c["name"] == "torch")
    assert torch["bom_ref"].startswith("SPDXRef-")
    assert doc["target"]["name"] == "torch"
    assert {f for f in _findings(doc) if f[1] == "torch"} == {
        ("CVE-2025-32434", "torch", "affected")}


def test_cdxgen_docker_archive_of_demo(tmp_path: Path) -> None:
    tool = sbom_tools.cdxgen()
    demo = ensure("demo")
    sbom = tmp_path / "demo.cdxgen.json"
    p = subprocess.run([str(tool), "-t", "docker", "-o", str(sbom), str(demo.docker_archive)],
                       capture_output=True, text=True, check=False, timeout=600,
                       env={**os.environ, "CDXGEN_TEMP_DIR": str(tmp_path / "cdxgen-tmp")})
    assert p.returncode == 0 and sbom.exists(), p.stderr[-2000:]
    doc = _scan_sbom(sbom, tmp_path)
    pkgs = {(c["name"], c["version"], c["ecosystem"]) for c in doc["components"]
            if c["ecosystem"] in ("deb", "pypi")}
    # every package gpusbom's own scan of the image finds, as cdxgen names them
    direct = {("base-files", "12.4+deb12u15", "deb"), ("gcc-12-base", "12.2.0-14+deb12u1", "deb"),
              ("libamdhip64-5", "5.2.3-8", "deb"), ("libc6", "2.36-9+deb12u14", "deb"),
              ("libgcc-s1", "12.2.0-14+deb12u1", "deb"), ("libstdc++6", "12.2.0-14+deb12u1", "deb"),
              ("libvulkan1", "1.3.239.0-1", "deb"), ("libze1", "1.8.12-1", "deb"),
              ("ocl-icd-libopencl1", "2.3.1-1", "deb"), ("pocl-opencl-icd", "3.1-3+deb12u1", "deb"),
              ("nvidia-cuda-runtime", "13.0.96", "pypi"),
              ("nvidia-cuda-runtime-cu12", "12.4.127", "pypi"), ("packaging", "24.1", "pypi")}
    assert direct <= pkgs
    by = {(c["name"], c["ecosystem"]): c for c in doc["components"]}
    ze = by[("libze1", "deb")]["properties"]
    assert (ze["stack"], ze["product"], ze["product-version"]) == (
        "level-zero", "level-zero-loader", "1.8.12")
    hip = by[("libamdhip64-5", "deb")]["properties"]
    assert (hip["stack"], hip["product"]) == ("rocm", "hip-runtime")
    # the Level Zero advisory gpusbom's own scan reports (review: no machine-readable range)
    assert ("CVE-2024-31073", "libze1", "review") in _findings(doc)
    assert doc["target"]["kind"] == "image" and doc["target"]["name"] == "demo"
