"""Predictions for nvcc-built fixture binaries on the H200 (sm_90, driver 580.159.04):
issue 10 acceptance 2. The same predictions are checked against the real GPU by
fixtures/check/verify_on_gpu.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpusbom.cli.app import main

#: what NVIDIA's rules say of each fixture on compute capability 9.0 with a CUDA 13.0 driver
H200 = {
    "sm80_sass": "will-fail",  # SASS 8.0 does not run on major 9
    "sm86_sass": "will-fail",
    "sm90_sass": "runs",
    "sm90a_sass": "runs",  # 'a' runs on exactly 9.0
    "sm100_sass": "will-fail",  # SASS of a newer major
    "sm100f_sass": "will-fail",  # family 10.x only
    "ptx80": "runs-with-jit",  # PTX 8.0 <= 9.0: JIT
    "ptx90a": "runs-with-jit",  # 'a' PTX for exactly 9.0
    "ptx100": "will-fail",  # PTX above the device
    "sm80_ptx80": "runs-with-jit",  # the SASS does not fit, the PTX does
    "ptx_newer_isa": "will-fail",  # PTX ISA 9.1 > 9.0 of a CUDA 13.0 driver
}


def _per_file(doc: dict) -> dict[str, str]:  # type: ignore[type-arg]
    got: dict[str, str] = {}
    for v in doc["verdicts"]:
        for lib in v["libraries"]:
            for ev in lib["evidence"]:
                base = ev.rsplit("/", 1)[-1]
                stem = base.removesuffix(".fatbin")
                if base.startswith("lib") and ".so" in base:
                    stem = "lib:" + base[3:].split(".so")[0]
                got[stem] = lib["verdict"]
    return got


def _check(args: list[str], tmp_path: Path) -> tuple[int, dict]:  # type: ignore[type-arg]
    out = tmp_path / "check.json"
    rc = main(["check", *args, "-o", f"json={out}"])
    return rc, json.loads(out.read_text())


def test_manifest(nvcc_fixtures: Path) -> None:
    m = json.loads((nvcc_fixtures / "manifest.json").read_text())
    assert {f["name"] for f in m["fixtures"]} == set(H200)
    newer = next(f for f in m["fixtures"] if f["name"] == "ptx_newer_isa")
    # the edited PTX is newer than what nvcc writes, and newer than driver 580 JITs
    assert tuple(map(int, newer["ptx_isa"].split("."))) > tuple(
        map(int, newer["nvcc_ptx_isa"].split(".")))
    from gpusbom.binary import scan_cuda

    with open(nvcc_fixtures / "fatbin" / "ptx_newer_isa.fatbin", "rb") as f:
        _, t = scan_cuda(f, name="ptx_newer_isa.fatbin")
    assert t.ptx == ("compute_80",) and t.ptx_isa == (newer["ptx_isa"],) and not t.sass


@pytest.mark.parametrize("how", ["gpu", "host"])
def test_h200_predictions(nvcc_fixtures: Path, h200_json: Path, tmp_path: Path, how: str) -> None:
    args = (["--gpu", "H200", "--driver", "580.159.04"] if how == "gpu"
            else ["--against", str(h200_json)])
    rc, doc = _check([f"dir:{nvcc_fixtures}", *args], tmp_path)
    assert rc == 1  # some fixtures will fail: a predicted failure exits 1
    got = _per_file(doc)
    assert {k: got.get(k) for k in H200} == H200
    # the shared libraries carry the same targets, so the same verdicts
    assert {k: got.get("lib:" + k) for k in H200 if k != "ptx_newer_isa"} == {
        k: v for k, v in H200.items() if k != "ptx_newer_isa"}
    (v,) = doc["verdicts"]
    assert v["verdict"] == "will-fail"
    assert v["gpu"]["compute_capability"] == "9.0" and v["driver"] == "580.159.04"
    if how == "host":
        assert v["gpu"]["count"] == 2 and v["host"].endswith("h200")
    reasons = "\n".join(v["reasons"])
    # each reason names the file (a stand-alone file component: its path)
    assert "/fatbin/ptx_newer_isa.fatbin: no SASS for sm_90; PTX compute_80 is ISA 9.1, newer " \
           "than driver 580.159.04 can JIT (up to ISA 9.0" in reasons
    assert "/fatbin/sm80_sass.fatbin: no SASS for sm_90 (has sm_80); no PTX: " \
           "CUDA_ERROR_NO_BINARY_FOR_GPU" in reasons
    assert any(p.endswith("/fatbin/sm100_sass.fatbin") for p in v["evidence"])


def test_other_gpus(nvcc_fixtures: Path, tmp_path: Path) -> None:
    _, doc = _check([f"dir:{nvcc_fixtures}", "--gpu", "A10", "--gpu", "B200", "--gpu", "sm_80",
                      "--driver", "590.44.01"], tmp_path)
    by = {v["gpu"]["label"]: _per_file({"verdicts": [v]}) for v in doc["verdicts"]}
    assert by["A10"]["sm80_sass"] == "runs" and by["A10"]["sm86_sass"] == "runs"  # 8.6
    assert by["sm_80"]["sm86_sass"] == "will-fail"
    assert by["B200"]["sm100f_sass"] == "runs" and by["B200"]["sm100_sass"] == "runs"
    assert by["B200"]["ptx100"] == "runs-with-jit" and by["B200"]["ptx90a"] == "will-fail"
    # a CUDA 13.1 driver JITs PTX ISA 9.1
    assert by["B200"]["ptx_newer_isa"] == "runs-with-jit"
