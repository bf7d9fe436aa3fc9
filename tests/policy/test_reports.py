"""Gate reports: SARIF 2.1.0 validates against the official schema, JUnit XML parses with
junitparser (a real consumer), JSON round-trips; all deterministic."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
from junitparser import Failure, JUnitXml, Skipped

from gpusbom.cli.app import main

HERE = Path(__file__).resolve().parent
POLICY = """version: 1
rules:
  advisories: {fail_on: medium}
  driver_branches: {allow: [R570]}
  probes: {require_pass: true}
  advisory_db: {max_age_days: 100000}
exceptions:
  - advisory: CVE-2025-33219
    reason: accepted until the R580 update
    owner: sec-team
    expires: "2099-12-31"
  - component: libnvidia-ml
    rule: driver_branches
    reason: legacy monitoring
    owner: ops
    expires: "2024-06-30"
"""


def _gate(tmp_path: Path, inputs: dict[str, Path]) -> tuple[int, Path]:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    out = tmp_path / "out"
    code = main(["gate", "-q", "-p", str(policy), str(inputs["host-h200"]), str(inputs["intel"]),
                 "-o", f"sarif={out}.sarif", "-o", f"junit={out}.xml", "-o", f"json={out}.json"])
    return code, out


def test_sarif_validates_against_the_official_schema(inputs, tmp_path) -> None:
    code, out = _gate(tmp_path, inputs)
    assert code == 1
    doc = json.loads(Path(f"{out}.sarif").read_text())
    schema = json.loads((HERE / "sarif-schema-2.1.0.json").read_text())
    jsonschema.Draft4Validator(schema, format_checker=jsonschema.FormatChecker()).validate(doc)
    (run,) = doc["runs"]
    rules = [r["id"] for r in run["tool"]["driver"]["rules"]]
    assert rules == ["advisories", "driver_branches", "probes", "advisory_db", "exceptions"]
    results = run["results"]
    assert {r["ruleId"] for r in results} == {"advisories", "driver_branches", "probes",
                                              "exceptions"}
    for r in results:
        assert rules[r["ruleIndex"]] == r["ruleId"]
        assert r["locations"] and r["message"]["text"]
    # a violation with evidence points at the file inside the target, and at the policy line
    adv = next(r for r in results if r["ruleId"] == "advisories" and "suppressions" not in r)
    loc = adv["locations"][0]["physicalLocation"]["artifactLocation"]
    assert loc == {"uri": "usr/local/cuda-13.0/compat/libcuda.so.580.95.05",
                   "uriBaseId": "TARGETROOT"}
    rel = adv["relatedLocations"][0]["physicalLocation"]
    assert rel["region"] == {"startLine": 3}
    # the waived advisory is a suppressed result; the expired exception is an error result
    waived = [r for r in results if "suppressions" in r]
    assert [r["properties"]["advisory"] for r in waived] == ["CVE-2025-33219"]
    assert waived[0]["suppressions"][0]["status"] == "accepted"
    expired = [r for r in results if r["ruleId"] == "exceptions"]
    assert len(expired) == 2  # one per target
    assert expired[0]["locations"][0]["physicalLocation"]["region"] == {"startLine": 12}
    # intel's review findings are warnings
    assert {r["level"] for r in results if r["properties"]["target"] == str(inputs["intel"])} \
        == {"warning", "error"}
    # deterministic
    first = Path(f"{out}.sarif").read_text()
    _gate(tmp_path, inputs)
    assert Path(f"{out}.sarif").read_text() == first


def test_junit_parses_with_junitparser(inputs, tmp_path) -> None:
    _, out = _gate(tmp_path, inputs)
    xml = JUnitXml.fromfile(f"{out}.xml")
    suites = list(xml)
    assert [s.name for s in suites] == [str(inputs["host-h200"]), str(inputs["intel"])]
    host, intel = suites
    cases = {c.name: c for c in host}
    assert list(cases) == ["advisories", "driver_branches", "probes", "advisory_db", "exceptions"]
    assert isinstance(cases["advisories"].result[0], Failure)
    assert cases["advisory_db"].result == []  # passed
    assert host.tests == 5 and host.failures == 4 and host.skipped == 0
    icases = {c.name: c for c in intel}
    assert isinstance(icases["probes"].result[0], Skipped)
    assert isinstance(icases["driver_branches"].result[0], Skipped)
    assert icases["advisories"].result == []  # review findings are warnings, not failures
    assert "warning: intel-opencl-icd" in (icases["advisories"].system_out or "")
    assert intel.failures == 1  # the expired exception
    assert "expired on 2024-06-30" in icases["exceptions"].result[0].message


def test_json_report(inputs, tmp_path) -> None:
    _, out = _gate(tmp_path, inputs)
    data = json.loads(Path(f"{out}.json").read_text())
    assert data["schema"] == "gpusbom/gate/1" and data["passed"] is False
    host = data["targets"][0]
    assert host["rules"] == {"advisories": "fail", "driver_branches": "fail", "probes": "fail",
                             "advisory_db": "pass", "exceptions": "fail"}
    # the expired exception waives nothing: libnvidia-ml is still a violation
    assert any(v["subject"] == "libnvidia-ml 580.159.04" for v in host["violations"])
