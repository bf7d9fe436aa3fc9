"""The acceptance table: (real fixture image / host scan / SBOM, policy) -> (exit code, exact
violations), through the real CLI (``gpusbom gate``), covering every rule type, valid and
expired exceptions. Violations are compared as (rule, subject, advisory-or-None) sets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpusbom.cli.app import main

FUTURE, PAST = "2099-12-31", "2024-01-01"
COMPAT = "cuda-compat-13-0 580.95.05-0ubuntu1"
# CVSS >= 7.0 driver CVEs of the bulletins that list only branches newer than R470
# (NVIDIA 5586, 5614, 5630, 5670, 5703, 5747, 5821; Linux entries)
R470_HIGH = {
    "CVE-2024-0126", "CVE-2024-0150", "CVE-2025-23244", "CVE-2025-23279", "CVE-2025-23280",
    "CVE-2025-23282", "CVE-2025-33219", "CVE-2025-33220", "CVE-2026-24187", "CVE-2026-24190",
    "CVE-2026-24192", "CVE-2026-24193", "CVE-2026-24194", "CVE-2026-24196",
}
H200_HIGH = {
    "CVE-2025-33219", "CVE-2025-33220", "CVE-2026-24187", "CVE-2026-24190", "CVE-2026-24192",
    "CVE-2026-24193", "CVE-2026-24194", "CVE-2026-24196",
}


# NVIDIA 5755 (CUDA Toolkit, fixed in 13.1): the host's CUDA 13.0 metapackage debs and
# cudart-dev (through its release), each CVE >= 7.0 (CVE-2025-33231 is medium)
# NVIDIA-5755 on the host's CUDA 13.0 debs: one finding per CVE on the three metapackages
# that own the same files (advisories/dedupe.py; the gate names the first), and not affected
# where the host holds none of the tools the vendor names (CVE-2025-33229, cuda-cudart-dev)
TOOLKIT_13 = {("advisories", "cuda-compiler-13-0 13.0.2-1", c)
              for c in ("CVE-2025-33228", "CVE-2025-33230")}

# Intel graphics-driver CVEs of at least medium severity whose records give the versions as
# "See references" (no range: review): INTEL-SA-01259, -01385, -01132 (4 CVEs); the low
# CVE-2024-32667 of INTEL-SA-01163 ("OpenCL(TM) software") is below fail_on: medium
INTEL_GRAPHICS_SEE_REFERENCES = (
    "CVE-2025-20018", "CVE-2025-32453", "CVE-2024-23919", "CVE-2024-34023", "CVE-2024-34170",
    "CVE-2024-38665",
    # Intel's records published after 2025-01-24 that name the graphics driver/software
    # (not "for Windows") with "See references": INTEL-SA-01235, -01253, -01259, -01299
    "CVE-2024-37355", "CVE-2024-38310", "CVE-2024-42410", "CVE-2024-28954", "CVE-2024-29222",
    "CVE-2024-31150", "CVE-2024-47800", "CVE-2025-20003", "CVE-2025-20031", "CVE-2025-20052",
    "CVE-2025-20071", "CVE-2025-20101", "CVE-2025-21099", "CVE-2025-20023", "CVE-2025-24515",
    "CVE-2025-27717")


def _adv(ids: set[str], subject: str = COMPAT) -> set[tuple[str, str, str | None]]:
    return {("advisories", subject, i) for i in ids}


# (id, input name, policy body (under "version: 1"), exit, violations, extra checks)
TABLE = [
    ("advisories-high-host", "host-h200", """
rules:
  advisories: {fail_on: high}
""", 1, _adv(H200_HIGH) | TOOLKIT_13),
    ("advisories-critical-passes", "host-h200", """
rules:
  advisories: {fail_on: critical}
""", 0, set()),
    ("advisories-high-from-cyclonedx", "h200-cdx", """
rules:
  advisories: {fail_on: high}
""", 1, _adv(H200_HIGH, "cuda-compat-13-0 580.95.05-0ubuntu1") | TOOLKIT_13),
    ("advisories-review-is-warning", "intel", """
rules:
  advisories: {fail_on: medium}
""", 0, set()),
    ("advisories-review-fails-when-asked", "intel", """
rules:
  advisories: {fail_on: medium, fail_on_review: true}
""", 1, {("advisories", "intel-opencl-icd 22.43.24595.41-1", "CVE-2024-31073"),
         ("advisories", "libze1 1.8.12-1", "CVE-2024-31073")}
        # the graphics compiler and gmmlib debs are the Intel graphics driver's (catalog);
        # Intel's records of these graphics CVEs give "See references", no versions
        | {("advisories", p, c) for p in ("intel-opencl-icd 22.43.24595.41-1",
                                          "libigc1 1.0.12504.6-1+deb12u1",
                                          "libigdfcl1 1.0.12504.6-1+deb12u1",
                                          "libigdgmm12 22.3.3+ds1-1")
           for c in INTEL_GRAPHICS_SEE_REFERENCES}),
    ("exception-waives-advisories", "host-h200", f"""
rules:
  advisories: {{fail_on: high}}
exceptions:
  - component: cuda-*
    rule: advisories
    reason: compat libraries and the toolkit unused on this node (driver 580.159.04 is loaded)
    owner: platform-team
    expires: "{FUTURE}"
""", 0, set()),
    ("expired-exception-fails", "host-h200", f"""
rules:
  advisories: {{fail_on: high}}
exceptions:
  - advisory: CVE-2025-33219
    reason: accepted until the R580 update
    owner: sec-team
    expires: "{FUTURE}"
  - advisory: CVE-2025-33220
    reason: accepted until the R580 update
    owner: sec-team
    expires: "{PAST}"
""", 1, _adv(H200_HIGH - {"CVE-2025-33219"}) | TOOLKIT_13
        | {("exceptions", "exception (advisory CVE-2025-33220)", None)}),
    ("driver-branches-refused", "host-h200", """
rules:
  driver_branches: {allow: [R535, R550, R570]}
""", 1, {("driver_branches", s, None) for s in (
        "nvidia 580.159.04", "nvidia-uvm 580.159.04", "cuda-compat-13-0 580.95.05",
        "libcuda 580.159.04",
        "libnvidia-ml 580.159.04", "libnvidia-ptxjitcompiler 580.159.04")}),
    ("driver-branches-allowed", "host-h200", """
rules:
  driver_branches: {allow: ["580"]}
""", 0, set()),
    ("minimum-cuda-nccl-image", "nvidia-wheels-image", """
rules:
  minimum_versions: {cuda: "12.4", nccl: "2.21"}
""", 1, {("minimum_versions", "nvidia-cuda-runtime-cu12 12.1.105", None),
         ("minimum_versions", "nvidia-nccl-cu12 2.19.3", None)}),
    ("minimum-cudnn-host", "host-h200", """
rules:
  minimum_versions: {cudnn: "9.15"}
""", 1, None),  # checked below: every cuDNN below 9.15 and none above
    ("minimum-met", "nvidia-wheels", """
rules:
  minimum_versions: {cuda: "12.1", nccl: "2.19.3"}
""", 0, set()),
    ("deny-range", "nvidia-wheels", """
rules:
  deny:
    - {component: nvidia-nccl-cu12, ecosystem: pypi, versions: "<2.20", reason: NCCL 2.19 hangs}
    - {component: pytorch-triton, ecosystem: pypi, reason: nightly}
""", 1, {("deny", "nvidia-nccl-cu12 2.19.3", None)}),
    ("deny-component", "triton", """
rules:
  deny:
    - {component: triton, versions: ">=3.4,<3.5"}
""", 1, {("deny", "triton 3.4.0", None)}),
    ("allow-range-violated", "torch-cpu", """
rules:
  allow:
    - {component: torch, versions: ">=2.14"}
""", 1, {("allow", "torch 2.13.0+cpu", None)}),
    ("allow-range-met", "torch-cpu", """
rules:
  allow:
    - {component: torch, versions: ">=2.13,<3"}
""", 0, set()),
    ("probes-missing-on-host", "host-h200", """
rules:
  probes: {require_pass: true}
""", 1, {("probes", "@target", None)}),
    ("probes-pass-h200-cyclonedx", "h200-probe-cdx", """
rules:
  probes: {require_pass: true, skipped: fail}
""", 0, set()),
    ("probes-not-applicable-to-images", "triton", """
rules:
  probes: {require_pass: true}
""", 0, set()),
    ("completeness-gpu-versions", "host-cpu-only", """
rules:
  completeness: {gpu_versions: true}
""", 1, {("completeness", "nvcc (version unknown)", None),
         ("completeness", "cupti (version unknown)", None)}),
    ("completeness-unknowns", "host-cpu-only", """
rules:
  completeness: {gpu_versions: false, unknowns: true}
""", 1, {("completeness", "unknown from host", None)}),
    ("advisory-db-fresh-enough", "triton", """
rules:
  advisory_db: {max_age_days: 100000}
""", 0, set()),
    ("advisory-db-too-old", "triton", """
rules:
  advisory_db: {max_age_days: 0}
""", 1, {("advisory_db", "advisory database (bundled)", None)}),
    ("compatible-runs", "nvidia-wheels", """
rules:
  compatible_with: {targets: [H100]}
""", 0, set()),
    ("compatible-will-fail", "nvidia-wheels", """
rules:
  compatible_with: {targets: [H100, V100, gfx942]}
""", 1, {("compatible_with", "V100 (sm_70), driver unknown", None),
         ("compatible_with", "gfx942", None)}),
    ("compatible-jit-refused", "nvidia-wheels", """
rules:
  compatible_with: {targets: [B200], allow_jit: false}
""", 1, {("compatible_with", "B200 (sm_100), driver unknown", None)}),
    ("compatible-jit-allowed", "nvidia-wheels", """
rules:
  compatible_with: {targets: [B200]}
""", 0, set()),
    # an R470 driver: no bulletin since 2024 lists R470, each lists newer branches only, so
    # its findings are unsupported-branch ("earlier branch releases ... may also be
    # affected"): not gated by default, failed on request (high and above only)
    ("unsupported-branch-not-gated-by-default", "old-driver-cdx", """
rules:
  advisories: {fail_on: high}
""", 0, set()),
    ("unsupported-branch-fails-when-asked", "old-driver-cdx", """
rules:
  advisories: {fail_on: high, fail_on_unsupported_branch: true}
""", 1, _adv(R470_HIGH, "libcuda 470.256.02")),
    ("unsupported-branch-below-threshold-passes", "old-driver-cdx", """
rules:
  advisories: {fail_on: critical, fail_on_unsupported_branch: true}
""", 0, set()),
    ("unsupported-branch-option-leaves-affected-alone", "host-h200", """
rules:
  advisories: {fail_on: high, fail_on_unsupported_branch: true}
""", 1, _adv(H200_HIGH) | TOOLKIT_13),
]


@pytest.fixture(scope="session")
def old_driver_cdx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CycloneDX 1.6 SBOM (written for the test, as Syft writes a generic purl) of an
    R470 driver library."""
    out = tmp_path_factory.mktemp("cdx") / "old-driver.cdx.json"
    out.write_text(json.dumps({
        "bomFormat": "CycloneDX", "specVersion": "1.6", "version": 1,
        "serialNumber": "urn:uuid:3e671687-395b-41f5-a30f-a58921a69b79",
        "components": [{"type": "library", "bom-ref": "drv", "name": "libcuda",
                        "version": "470.256.02",
                        "purl": "pkg:generic/nvidia/libcuda@470.256.02"}]}))
    return out


@pytest.fixture(scope="session")
def h200_cdx(inputs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CycloneDX 1.6 SBOM of the h200 host scan (what another pipeline step would keep)."""
    out = tmp_path_factory.mktemp("cdx") / "h200.cdx.json"
    assert main(["scan", "-q", "--root", str(inputs["root-h200"]),
                 "-o", f"cyclonedx-json={out}"]) == 0
    return out


def run_gate(target: Path, policy: Path, tmp: Path, *extra: str) -> tuple[int, dict]:
    report = tmp / "gate.json"
    code = main(["gate", "-q", "--policy", str(policy), str(target), "-o", f"json={report}",
                 *extra])
    data = json.loads(report.read_text()) if report.exists() else {}
    return code, data


@pytest.mark.parametrize(("name", "target", "body", "exit_code", "expected"), TABLE,
                         ids=[row[0] for row in TABLE])
def test_gate_table(name, target, body, exit_code, expected, inputs, h200_cdx, old_driver_cdx,
                    tmp_path) -> None:
    policy = tmp_path / f"{name}.yaml"
    policy.write_text("version: 1\n" + body.lstrip("\n"))
    path = {"h200-cdx": h200_cdx, "old-driver-cdx": old_driver_cdx}.get(target) or inputs[target]
    code, report = run_gate(path, policy, tmp_path)
    assert code == exit_code, report
    (decision,) = report["targets"]
    got = {(v["rule"], v["subject"], v["advisory"]) for v in decision["violations"]}
    if name == "minimum-cudnn-host":
        assert got and all(r == "minimum_versions" and "cudnn" in s or "cuDNN" in s
                           for r, s, _ in got), got
        assert any(" 9.14.0" in v["message"] for v in decision["violations"])
        assert not any("9.19" in v["message"] for v in decision["violations"])
        return
    if expected and ("probes", "@target", None) in expected:
        expected = {("probes", str(path), None)}  # the target as named
    assert got == expected
    assert len(decision["violations"]) == len(expected)  # no duplicates
    if name == "unsupported-branch-fails-when-asked":
        assert all("unsupported-branch" in v["message"] and "fixed branches" not in v["fix"]
                   and v["fix"].startswith("move nvidia-driver to a branch the vendor still "
                                           "fixes (R5") for v in decision["violations"])
    for v in decision["violations"]:
        assert v["fix"], v  # every violation says how to fix it
        assert v["policy_line"], v  # and which policy line refused it
    assert decision["passed"] is (exit_code == 0)


def test_waived_violations_are_listed(inputs, tmp_path) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text(f"""version: 1
rules:
  advisories: {{fail_on: high}}
exceptions:
  - advisory: CVE-2025-33219
    reason: accepted until the R580 update
    owner: sec-team
    expires: "{FUTURE}"
""")
    code, report = run_gate(inputs["host-h200"], policy, tmp_path)
    (d,) = report["targets"]
    assert code == 1
    assert [(w["advisory"], w["exception"]["owner"], w["exception"]["line"])
            for w in d["waived"]] == [("CVE-2025-33219", "sec-team", 5)]
    assert d["rules"] == {"advisories": "fail", "exceptions": "pass"}


def test_review_findings_are_warnings(inputs, tmp_path) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text("version: 1\nrules:\n  advisories: {fail_on: medium}\n")
    code, report = run_gate(inputs["intel"], policy, tmp_path)
    (d,) = report["targets"]
    assert code == 0 and not d["violations"]
    # intel-opencl-icd, libze1, and the graphics compiler / gmmlib debs (libigc1,
    # libigdfcl1, libigdgmm12: the Intel graphics driver's, per the catalog)
    assert sorted(w["advisory"] for w in d["warnings"]) == sorted(
        ["CVE-2024-31073", "CVE-2024-31073"] + list(INTEL_GRAPHICS_SEE_REFERENCES) * 4)
    assert all(w["level"] == "warning" for w in d["warnings"])


def test_probe_results_from_pocl(probe_inputs, tmp_path) -> None:
    """Real OpenCL runs on PoCL: the product kernel passes, the wrong test kernel fails."""
    policy = tmp_path / "p.yaml"
    policy.write_text("version: 1\nrules:\n  probes: {require_pass: true}\n")
    code, report = run_gate(probe_inputs["probe-pass"], policy, tmp_path)
    assert code == 0 and report["targets"][0]["rules"] == {"probes": "pass"}
    failing = json.loads(probe_inputs["probe-fail"].read_text())["probes"]
    devices = [p for p in failing if p["device"] is not None]
    assert devices and all(p["outcome"] == "fail" for p in devices)
    code, report = run_gate(probe_inputs["probe-fail"], policy, tmp_path)
    (d,) = report["targets"]
    assert code == 1
    assert {(v["rule"], v["subject"]) for v in d["violations"]} == {
        ("probes", f"opencl:{p['device_id']} ({p['device']})") for p in devices}
    assert all(v["message"].startswith("probe fail: ") for v in d["violations"])


def test_strict_flag_makes_unknowns_fail(inputs, tmp_path) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text("version: 1\nrules:\n  advisories: {fail_on: critical}\n")
    assert run_gate(inputs["host-cpu-only"], policy, tmp_path)[0] == 0
    code, report = run_gate(inputs["host-cpu-only"], policy, tmp_path, "--strict")
    assert code == 1
    assert [(v["rule"], v["subject"]) for v in report["targets"][0]["violations"]] == [
        ("completeness", "unknown from host")]


def test_several_targets_one_failing(inputs, tmp_path) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text("version: 1\nrules:\n  advisories: {fail_on: high}\n")
    report = tmp_path / "r.json"
    code = main(["gate", "-q", "-p", str(policy), str(inputs["triton"]), str(inputs["host-h200"]),
                 "-o", f"json={report}"])
    data = json.loads(report.read_text())
    assert code == 1 and data["passed"] is False
    assert [t["passed"] for t in data["targets"]] == [True, False]


def test_builtin_policies(inputs, tmp_path) -> None:
    code, report = run_gate(inputs["torch-cpu"], Path("default"), tmp_path)
    assert code == 0 and report["policy"]["path"] == "builtin:default"
    code, report = run_gate(inputs["host-h200"], Path("strict"), tmp_path)
    assert code == 1
    rules = report["targets"][0]["rules"]
    assert rules["advisories"] == "fail" and rules["probes"] == "fail"
    assert rules["driver_branches"] == "pass"


def test_human_summary(inputs, tmp_path, capsys) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text("version: 1\nrules:\n  minimum_versions: {nccl: \"2.21\"}\n")
    assert main(["gate", "-p", str(policy), str(inputs["nvidia-wheels"])]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"gpusbom gate: FAIL  {inputs['nvidia-wheels']}")
    assert ("[x] error minimum_versions: nvidia-nccl-cu12 2.19.3: nccl 2.19.3 is below the "
            "minimum nccl 2.21") in out
    assert "evidence: /usr/local/lib/python3.11/site-packages/nvidia_nccl_cu12-2.19.3.dist-info/METADATA, /usr/local/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so.2" in out
    assert "fix: upgrade nccl to 2.21 or later" in out
