"""`gpusbom check` end to end: a real image (the nvidia-wheels fixture: CUDA 12 and 13 wheels
with fatbins) against the real H200 host snapshot (acceptance 4); outputs, exit codes, errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpusbom.cli.app import main

ROOT = Path(__file__).resolve().parents[2]


def _run(args: list[str], tmp_path: Path) -> tuple[int, dict]:  # type: ignore[type-arg]
    out = tmp_path / "v.json"
    rc = main(["check", *args, "-o", f"json={out}"])
    return rc, json.loads(out.read_text())


def test_nvidia_wheels_on_h200(wheels_scan: Path, h200_json: Path, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    rc, doc = _run([str(wheels_scan), "--against", str(h200_json)], tmp_path)
    assert rc == 0
    (v,) = doc["verdicts"]
    assert v["verdict"] == "runs"
    assert v["gpu"]["label"] == "NVIDIA H200" and v["gpu"]["count"] == 2
    assert v["driver"] == "580.159.04"
    reasons = "\n".join(v["reasons"])
    # the env requirement, as nvidia-container-cli evaluates it on this host
    assert "NVIDIA_REQUIRE: satisfied: cuda>=12.4" in reasons and "cuda=13.0" in reasons
    # every cudart copy against the driver
    for rt in ("cudart 13.0.96", "cudart 12.4.127", "cudart 12.1.105"):
        assert f"{rt} (" in reasons, rt
    assert "driver 580.159.04 supports CUDA 13.0 >= 13.0" in reasons
    # every library with fatbins has sm_90 SASS: one verdict per file, named after its package
    libs = {lib["name"].split(" /")[0]: lib for lib in v["libraries"]
            if lib["kind"] == "cuda-code"}
    assert set(libs) == {"nvidia-curand-cu12 10.3.5.147", "nvidia-nccl-cu12 2.19.3",
                         "nvidia-nvjpeg 13.0.2.28", "nvidia-nvjpeg-cu12 12.4.0.76"}
    assert all(lib["file"] == lib["evidence"][0] and lib["targets"]["cuda:sass"]
               for lib in libs.values())
    assert all(lib["verdict"] == "runs" and "SASS sm_90 runs on sm_90" in lib["reason"]
               for lib in libs.values())
    assert libs["nvidia-nccl-cu12 2.19.3"]["evidence"] == [
        "/usr/local/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so.2"]
    # the table a person reads
    assert main(["check", str(wheels_scan), "--against", str(h200_json)]) == 0
    table = capsys.readouterr().out
    assert "2 x NVIDIA H200 (sm_90), driver 580.159.04" in table and "runs" in table


def test_nvidia_wheels_what_if(wheels_scan: Path, tmp_path: Path) -> None:
    # a CUDA 12.8 driver: the CUDA 13 wheels cannot run
    rc, doc = _run([str(wheels_scan), "--gpu", "H200", "--driver", "570.172.08"], tmp_path)
    assert rc == 1
    (v,) = doc["verdicts"]
    assert v["verdict"] == "will-fail"
    assert any(r.startswith("cudart 13.0.96 (nvidia-cuda-runtime): needs a driver for CUDA 13.0 "
                            "(>= 580.65.06)") for r in v["reasons"])
    # a V100 (7.0): the CUDA 13 nvJPEG has no sm_70 and no PTX at or below
    rc, doc = _run([str(wheels_scan), "--gpu", "V100", "--driver", "580.65.06"], tmp_path)
    (v,) = doc["verdicts"]
    assert v["verdict"] == "will-fail"
    assert any(r.startswith("nvidia-nvjpeg 13.0.2.28 /usr/local/lib/python3.11/site-packages/"
                            "nvidia/cu13/lib/libnvjpeg.so.13: no SASS for sm_70")
               for r in v["reasons"])
    # a B300 (10.3): cuRAND 12 and NCCL 12 have sm_90 SASS and compute_90 PTX only: JIT
    rc, doc = _run([str(wheels_scan), "--gpu", "B300", "--driver", "580.65.06"], tmp_path)
    assert rc == 0
    (v,) = doc["verdicts"]
    assert v["verdict"] == "runs-with-jit"
    assert main(["check", str(wheels_scan), "--gpu", "B300", "--driver", "580.65.06",
                 "--fail-on-jit", "-o", f"json={tmp_path / 'x.json'}"]) == 1


def test_sarif(wheels_scan: Path, tmp_path: Path) -> None:
    out = tmp_path / "check.sarif"
    rc = main(["check", str(wheels_scan), "--gpu", "V100", "--gpu", "H100", "--driver",
               "580.65.06", "-o", f"sarif={out}", "-o", f"json={tmp_path / 'c.json'}"])
    assert rc == 1
    doc = json.loads(out.read_text())
    assert doc["version"] == "2.1.0" and doc["$schema"].endswith("sarif-schema-2.1.0.json")
    run = doc["runs"][0]
    rules = [r["id"] for r in run["tool"]["driver"]["rules"]]
    assert rules == ["check/will-fail", "check/not-applicable", "check/unchecked",
                     "check/runs-with-jit", "check/runs"]
    by = {r["properties"]["target"]: r for r in run["results"]}
    v100 = by["V100 (sm_70), driver 580.65.06"]
    assert v100["ruleId"] == "check/will-fail" and v100["level"] == "error"
    assert rules[v100["ruleIndex"]] == v100["ruleId"]
    uris = [loc["physicalLocation"]["artifactLocation"]["uri"] for loc in v100["locations"]]
    assert "usr/local/lib/python3.11/site-packages/nvidia/cu13/lib/libnvjpeg.so.13" in uris
    failing = v100["properties"]["failing_files"]
    assert failing[0]["path"].endswith("/libnvjpeg.so.13") and failing[0]["targets"]["cuda:sass"]
    assert by["H100 (sm_90), driver 580.65.06"]["level"] == "note"
    # the official OASIS SARIF 2.1.0 schema (vendored with its source in tests/policy/)
    import jsonschema

    schema_path = Path(__file__).resolve().parents[1] / "policy" / "sarif-schema-2.1.0.json"
    schema = json.loads(schema_path.read_text())
    jsonschema.Draft4Validator(schema, format_checker=jsonschema.FormatChecker()).validate(doc)


def test_usage_and_input_errors(wheels_scan: Path, h200_json: Path, tmp_path: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    w = str(wheels_scan)
    assert main(["check", w]) == 2  # no target
    assert main(["check", w, "--host", "--gpu", "H100"]) == 2  # two targets
    assert main(["check", w, "--against", str(h200_json), "--driver", "580.65.06"]) == 2
    assert main(["check", w, "--gpu", "Z9000"]) == 2
    assert main(["check", w, "--gpu", "H100", "-o", "xml"]) == 2
    capsys.readouterr()
    out = tmp_path / "never.json"
    assert main(["check", str(tmp_path / "missing.json"), "--gpu", "H100",
                 "-o", f"json={out}"]) == 3
    assert not out.exists()
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "gpusbom/scan/1", "components": [')
    assert main(["check", str(bad), "--gpu", "H100", "-o", f"json={out}"]) == 3
    assert main(["check", w, "--against", str(tmp_path / "nohost.json")]) == 3
    # an image scan given as the host
    assert main(["check", w, "--against", w, "-o", f"json={out}"]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("gpusbom: error: --against ") and "not of a host" in err[-1]
    assert not out.exists()


def test_host_without_gpu(wheels_scan: Path, tmp_path: Path) -> None:
    host = json.loads(Path(wheels_scan).read_text())
    host["target"]["kind"] = "host"
    host["target"]["reference"] = "host:/nogpu"
    host["components"] = []
    p = tmp_path / "nogpu.json"
    p.write_text(json.dumps(host))
    rc, doc = _run([str(wheels_scan), "--against", str(p)], tmp_path)
    assert rc == 1 and doc["verdicts"][0]["verdict"] == "will-fail"
    assert "no NVIDIA, AMD or Intel GPU" in doc["verdicts"][0]["reasons"][0]


def test_inventory_target(wheels_scan: Path, h200_json: Path, tmp_path: Path) -> None:
    from gpusbom.inventory import push_scan
    from gpusbom.model import ScanResult

    url = f"sqlite:///{tmp_path}/inventory.db"
    push_scan(ScanResult.from_dict(json.loads(h200_json.read_text())), url)
    rc, doc = _run([str(wheels_scan), "--inventory", url], tmp_path)
    assert rc == 0
    (v,) = doc["verdicts"]
    assert v["verdict"] == "runs" and v["gpu"]["label"] == "NVIDIA H200"
    assert v["driver"] == "580.159.04"
    empty = f"sqlite:///{tmp_path}/empty.db"
    assert main(["check", str(wheels_scan), "--inventory", empty]) == 3


def test_cyclonedx_inputs(wheels_scan: Path, h200_json: Path, tmp_path: Path) -> None:
    """The image and the host as CycloneDX SBOMs (gpusbom.sbomin) give the same verdict."""
    from fixtures.build import ensure

    img_cdx, host_cdx = tmp_path / "img.cdx.json", tmp_path / "host.cdx.json"
    assert main(["scan", ensure("nvidia-wheels").oci_ref, "-q",
                 "-o", f"cyclonedx-json={img_cdx}"]) == 0
    host_root = Path(json.loads(h200_json.read_text())["target"]["reference"].split(":", 1)[1])
    if not host_root.is_dir():
        pytest.skip("the materialised H200 snapshot is gone")
    assert main(["scan", "--root", str(host_root), "-q", "-o", f"cyclonedx-json={host_cdx}"]) == 0
    _, want = _run([str(wheels_scan), "--against", str(h200_json)], tmp_path)
    _, got = _run([str(img_cdx), "--against", str(host_cdx)], tmp_path)
    assert [v["verdict"] for v in got["verdicts"]] == [v["verdict"] for v in want["verdicts"]]
    assert got["verdicts"][0]["summary"] == want["verdicts"][0]["summary"]


def test_verify_script_without_driver(tmp_path: Path, nvcc_fixtures: Path) -> None:
    env = dict(os.environ, LD_LIBRARY_PATH="/nonexistent")
    proc = subprocess.run([sys.executable, str(ROOT / "fixtures/check/verify_on_gpu.py"),
                           "--fixtures", str(nvcc_fixtures), "--out", str(tmp_path)],
                          capture_output=True, text=True, env=env, check=False)
    try:
        import ctypes

        ctypes.CDLL("libcuda.so.1")
        pytest.skip("a CUDA driver is installed here: the script would use the GPU")
    except OSError:
        pass
    assert proc.returncode == 3
    assert proc.stderr.strip() == "verify_on_gpu: no CUDA driver: libcuda.so.1 cannot be loaded"
    proc = subprocess.run([sys.executable, str(ROOT / "fixtures/check/verify_on_gpu.py"),
                           "--fixtures", str(tmp_path / "none"), "--out", str(tmp_path)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 3 and "no fixtures in" in proc.stderr
