"""The attestation outputs through the CLI: ``scan -o in-toto``, ``gate -o in-toto`` and
``gpusbom attest --probe`` (the probes run for real on PoCL's CPU OpenCL device)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from intoto_check import check_with_bindings, read_bundle, schema_errors

from fixtures import imagetools as it

GPUSBOM = [sys.executable, "-m", "gpusbom"]
ENV = {**os.environ, "SOURCE_DATE_EPOCH": "1700000000"}


def _layout(tmp: Path) -> tuple[str, str]:
    img = it.build_image([[("/etc/os-release", b"ID=debian\nVERSION_ID=\"12\"\n")],
                          [("/usr/lib/python3/dist-packages/six-1.16.0.dist-info/METADATA",
                            b"Metadata-Version: 2.1\nName: six\nVersion: 1.16.0\n")]])
    it.write_oci_layout(tmp / "layout", img, tag="v1")
    return f"oci:{tmp / 'layout'}:v1", img.manifest_digest


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*GPUSBOM, *args], capture_output=True, text=True, env=ENV,
                          timeout=300, check=False)


def test_scan_and_gate_write_in_toto(tmp_path: Path) -> None:
    ref, digest = _layout(tmp_path)
    out = tmp_path / "scan.intoto.jsonl"
    proc = run("scan", ref, "-o", f"in-toto={out}", "-q")
    assert proc.returncode == 0, proc.stderr
    statements = read_bundle(out.read_text())
    assert [s["predicateType"] for s in statements] == ["https://cyclonedx.org/bom",
                                                        "https://spdx.dev/Document"]
    for s in statements:
        assert schema_errors(s) == []
        check_with_bindings(s)
        assert s["subject"][0]["digest"] == {"sha256": digest.split(":")[1]}
    names = {c["name"] for c in statements[0]["predicate"]["components"]}
    assert "six" in names
    gate = tmp_path / "gate.intoto.jsonl"
    proc = run("gate", ref, "-o", f"in-toto={gate}", "-q")
    assert proc.returncode == 0, proc.stderr
    (vsa,) = read_bundle(gate.read_text())
    assert schema_errors(vsa) == []
    assert vsa["predicate"]["verificationResult"] == "PASSED"
    assert vsa["subject"][0]["digest"] == {"sha256": digest.split(":")[1]}
    # a directory has no digest: one line, exit 2, and no file
    bad = tmp_path / "dir.intoto.jsonl"
    (tmp_path / "root").mkdir()
    proc = run("scan", f"dir:{tmp_path / 'root'}", "-o", f"in-toto={bad}", "-q")
    assert proc.returncode == 2, proc.stderr
    assert "needs an image with a sha256 digest" in proc.stderr
    assert not bad.exists()


def test_attest_probe_results_are_a_test_result(tmp_path: Path) -> None:
    ref, digest = _layout(tmp_path)
    out = tmp_path / "a.intoto.jsonl"
    proc = run("attest", ref, "--probe", "--probe-timeout", "60", "--sbom-format", "cyclonedx",
               "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    statements = read_bundle(out.read_text())
    assert [s["predicateType"] for s in statements] == [
        "https://cyclonedx.org/bom", "https://in-toto.io/attestation/test-result/v0.1"]
    tr = statements[1]
    assert schema_errors(tr) == []
    check_with_bindings(tr)
    assert tr["subject"][0]["digest"] == {"sha256": digest.split(":")[1]}
    p = tr["predicate"]
    # PoCL's CPU device runs the OpenCL kernel: a real pass; the absent GPU stacks are skips
    assert any(t.startswith("opencl:") for t in p["passedTests"]), p
    assert any(t.startswith("cuda") for t in p["warnedTests"]), p
    assert p["result"] == ("FAILED" if p["failedTests"] else "WARNED")
