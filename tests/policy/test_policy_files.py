"""Policy files: malformed ones are exit 3 with one line naming file, line and rule; the
built-in policies are the files in policies/; --fail-on; bad targets and outputs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpusbom.cli.app import main

ROOT = Path(__file__).resolve().parents[2]

MALFORMED = [
    ("wrong-type", """version: 1
rules:
  advisories:
    fail_on: [high]
""", ":4: rule 'advisories': fail_on: ['high'] is not one of critical, high, medium, low"),
    ("wrong-type-number-version", """version: 1
rules:
  minimum_versions:
    cuda: 12.4
""", (":4: rule 'minimum_versions': cuda: expected string, got a number 12.4 "
     "(write versions and dates as quoted strings: '12.4')")),
    ("unknown-rule", """version: 1
rules:
  advisories: {fail_on: high}
  max_cuda: "12.4"
""", (":4: rule 'max_cuda': unknown rule 'max_cuda'; rules are: advisories, driver_branches, "
     "minimum_versions, deny, allow, probes, completeness, advisory_db, compatible_with")),
    ("bad-version-range", """version: 1
rules:
  deny:
    - component: torch
      versions: "=>2.0"
""", (":5: rule 'deny': torch: bad version range '=>2.0': clause '=>2.0' is not OP VERSION "
     "(OP: >=, >, <=, <, ==, !=)")),
    ("bad-version-in-range", """version: 1
rules:
  allow:
    - component: torch
      versions: ">=two"
""", ":5: rule 'allow': torch: bad version range '>=two': 'two' is not a version"),
    ("bad-minimum-version", """version: 1
rules:
  minimum_versions:
    cudnn: "nine"
""", ":4: rule 'minimum_versions': cudnn: 'nine' is not a version"),
    ("bad-date", """version: 1
rules:
  advisories: {fail_on: high}
exceptions:
  - advisory: CVE-2025-33219
    reason: r
    owner: o
    expires: 2025-13-45
""", ":8: rule 'exceptions': expires: '2025-13-45' is not a date (YYYY-MM-DD)"),
    ("bad-date-format", """version: 1
rules:
  advisories: {fail_on: high}
exceptions:
  - advisory: CVE-2025-33219
    reason: r
    owner: o
    expires: next week
""", ":8: rule 'exceptions': expires: 'next week' is not a date (YYYY-MM-DD)"),
    ("exception-without-owner", """version: 1
rules:
  advisories: {fail_on: high}
exceptions:
  - advisory: CVE-2025-33219
    reason: r
    expires: "2030-01-01"
""", ":5: rule 'exceptions': exceptions.0: missing 'owner'"),
    ("bad-driver-branch", """version: 1
rules:
  driver_branches: {allow: [R580, latest]}
""", ":3: rule 'driver_branches': allow.1: 'latest' is not a driver branch (R580, 580)"),
    ("duplicate-key", """version: 1
rules:
  advisories: {fail_on: high}
  advisories: {fail_on: low}
""", ":4: duplicate key 'advisories' (first on line 3)"),
    ("yaml-syntax", """version: 1
rules:
  advisories: {fail_on: high
""", ":4: not valid YAML"),
    ("bad-compat-target", """version: 1
rules:
  compatible_with:
    targets: [H100, Banana9]
""", ":4: rule 'compatible_with': target 'Banana9': GPU target 'Banana9': unknown model"),
]


@pytest.mark.parametrize(("name", "text", "message"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_policy_exit_3(name, text, message, tmp_path, capsys, inputs) -> None:
    policy = tmp_path / f"{name}.yaml"
    policy.write_text(text)
    report = tmp_path / "out.sarif"
    code = main(["gate", "-p", str(policy), str(inputs["triton"]), "-o", f"sarif={report}"])
    err = capsys.readouterr().err
    assert code == 3
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"gpusbom: error: {policy}{message}"), lines[0]
    assert not report.exists()  # no partial output


def test_missing_policy_and_missing_target(tmp_path, capsys, inputs) -> None:
    assert main(["gate", "-p", str(tmp_path / "nope.yaml"), str(inputs["triton"])]) == 3
    assert "nope.yaml: policy file not found" in capsys.readouterr().err
    report = tmp_path / "r.json"
    code = main(["gate", "-p", "default", str(inputs["triton"]), str(tmp_path / "missing.tar"),
                 "-o", f"json={report}"])
    assert code == 3 and not report.exists()
    assert "missing.tar" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text('{"bomFormat": "CycloneDX", ')
    assert main(["gate", "-p", "default", f"sbom:{bad}"]) == 3


def test_usage_errors(capsys, inputs, tmp_path) -> None:
    assert main(["gate", "-p", "default"]) == 2
    # a format gate does not write (SBOMs are scan's): usage error, nothing written
    assert main(["gate", "-p", "default", "-o", f"spdx-json={tmp_path / 'x'}", str(inputs["triton"])]) == 2
    assert not (tmp_path / "x").exists()
    assert main(["gate", "-p", "default", "--probe", str(inputs["triton"])]) == 2


def test_builtin_policies_are_the_files_in_policies() -> None:
    builtin = ROOT / "src" / "gpusbom" / "policy" / "builtin"
    for name in ("default.yaml", "strict.yaml", "policy.schema.json"):
        assert (ROOT / "policies" / name).read_bytes() == (builtin / name).read_bytes(), name


def test_policies_validate(tmp_path) -> None:
    from gpusbom.policy import load_policy

    for name in ("default.yaml", "strict.yaml"):
        p = load_policy(str(ROOT / "policies" / name))
        assert p.rules and p.name == name[:-5]
    strict = load_policy("strict")
    assert strict.rules["advisories"]["fail_on"] == "high"
    assert strict.rules["advisory_db"] == {"max_age_days": 7}


# ---------------------------------------------------------------- scan --fail-on


def test_scan_fail_on(inputs, capsys) -> None:
    root = str(inputs["root-h200"])
    assert main(["scan", "-q", "--root", root, "-o", f"json={os.devnull}",
                 "--fail-on", "high"]) == 1
    err = capsys.readouterr().err
    assert "gpusbom gate: FAIL" in err and "CVE-2025-33219" in err
    assert "fix: upgrade nvidia-driver to 580.126.09" in err
    assert main(["scan", "-q", "--root", root, "-o", f"json={os.devnull}",
                 "--fail-on", "CRITICAL"]) == 0


def test_scan_image_fail_on(inputs, capsys) -> None:
    image = f"oci-archive:{inputs['intel-image']}"
    # the intel image's findings are all review (no vendor range): --fail-on counts affected
    assert main(["scan", "-q", image, "-o", f"json={os.devnull}", "--fail-on", "low"]) == 0
    sbom = str(inputs["host-h200"])
    assert main(["scan", "-q", "--sbom", sbom, "-o", f"json={os.devnull}",
                 "--fail-on", "high"]) == 1
    capsys.readouterr()
    assert main(["scan", "-q", image, "--fail-on", "bogus"]) == 2
    assert "--fail-on 'bogus': choose one of critical, high, medium, low" in capsys.readouterr().err
