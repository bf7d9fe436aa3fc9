"""in-toto Statements v1 from gpusbom's results: the ``-o in-toto`` writers of scan, gate and
check, validated against the framework's schema (written from its spec) and its protobuf
bindings, with the SBOM predicates validated against their own schemas."""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import io
import json
import sys
from importlib import resources
from pathlib import Path

import pytest
from cyclonedx.schema import OutputFormat, SchemaVersion
from cyclonedx.validation import make_schemabased_validator
from intoto_check import check_with_bindings, read_bundle, schema_errors
from spdx_tools.spdx.parser.jsonlikedict.json_like_dict_parser import JsonLikeDictParser
from spdx_tools.spdx.validation.document_validator import validate_full_spdx_document

from gpusbom.errors import UsageError
from gpusbom.model import ProbeResult
from gpusbom.writers import WriterOptions, get_writer

_spec = importlib.util.spec_from_file_location(
    "gpusbom_tests_writers_helpers", Path(__file__).parents[1] / "writers" / "helpers.py")
assert _spec and _spec.loader
helpers = sys.modules.get(_spec.name) or importlib.util.module_from_spec(_spec)
if _spec.name not in sys.modules:
    sys.modules[_spec.name] = helpers
    _spec.loader.exec_module(helpers)

CDX = "https://cyclonedx.org/bom"
SPDX = "https://spdx.dev/Document"
TEST_RESULT = "https://in-toto.io/attestation/test-result/v0.1"
VSA = "https://slsa.dev/verification_summary/v1"


def render(result: object, subject: str = "scan") -> str:
    buf = io.StringIO()
    get_writer("in-toto", subject).write(result, buf, WriterOptions())
    return buf.getvalue()


def valid(statement: dict) -> None:
    assert schema_errors(statement) == []
    check_with_bindings(statement)


def test_scan_bundle_sboms() -> None:
    result = helpers.make_result()
    text = render(result)
    assert text == render(helpers.make_result())  # deterministic
    statements = read_bundle(text)
    assert [s["predicateType"] for s in statements] == [CDX, SPDX]
    for s in statements:
        valid(s)
        (subject,) = s["subject"]
        assert subject["digest"] == {"sha256": helpers.MANIFEST_DIGEST.split(":")[1]}
        assert subject["name"] == "nvcr.io/nvidia/cuda"
        assert subject["annotations"] == {"gpusbom:digest": "manifest"}
    cdx, spdx = (s["predicate"] for s in statements)
    # the predicates are the documents the SBOM writers write, and valid as such
    buf = io.StringIO()
    get_writer("cyclonedx-json").write(helpers.make_result(), buf, WriterOptions())
    assert cdx == json.loads(buf.getvalue())
    assert make_schemabased_validator(OutputFormat.JSON, SchemaVersion.V1_6).validate_str(
        json.dumps(cdx)) is None
    assert validate_full_spdx_document(JsonLikeDictParser().parse(spdx)) == []


def test_image_without_manifest_digest_uses_the_image_id() -> None:
    result = helpers.make_result()
    result.target.manifest_digest = None
    (cdx, _) = read_bundle(render(result))
    valid(cdx)
    assert cdx["subject"][0]["digest"] == {"sha256": helpers.IMAGE_ID.split(":")[1]}
    assert cdx["subject"][0]["annotations"] == {"gpusbom:digest": "config"}


def test_directory_scan_has_no_subject() -> None:
    with pytest.raises(UsageError, match="needs an image with a sha256 digest"):
        render(helpers.make_directory_result())


def _probes(*outcomes: str) -> list[ProbeResult]:
    return [ProbeResult(backend="opencl", outcome=o, device=f"cpu-{i}", device_id=f"0:{i}",
                        kernel="vector-add", reason=None if o == "pass" else f"{o} here",
                        max_abs_error=0.0 if o == "pass" else None)
            for i, o in enumerate(outcomes)]


@pytest.mark.parametrize("outcomes,verdict", [
    (("pass", "pass"), "PASSED"), (("pass", "skipped"), "WARNED"),
    (("pass", "fail", "skipped"), "FAILED"), (("timeout",), "FAILED"), (("error",), "FAILED"),
])
def test_probe_test_result(outcomes: tuple[str, ...], verdict: str) -> None:
    result = helpers.make_result()
    result.probes = _probes(*outcomes)
    statements = read_bundle(render(result))
    assert [s["predicateType"] for s in statements] == [CDX, SPDX, TEST_RESULT]
    tr = statements[2]
    valid(tr)
    p = tr["predicate"]
    assert p["result"] == verdict
    names = {o: [f"opencl:0:{i} cpu-{i}" for i, x in enumerate(outcomes) if x == o]
             for o in ("pass", "skipped")}
    assert p["passedTests"] == names["pass"]
    assert p["warnedTests"] == names["skipped"]
    assert len(p["failedTests"]) == sum(o not in ("pass", "skipped") for o in outcomes)


def test_gate_verification_summary() -> None:
    from gpusbom.policy import evaluate, load_policy
    from gpusbom.policy.report import GateReport

    result = helpers.make_result()
    for name in ("default", "strict"):
        pol = load_policy(name)
        decision = evaluate(pol, result, target="img", strict=name == "strict")
        (vsa,) = read_bundle(render(GateReport(pol, [decision], [("img", result)]), "gate"))
        valid(vsa)
        p = vsa["predicate"]
        assert p["verificationResult"] == ("PASSED" if decision.passed else "FAILED")
        assert p["verifiedLevels"] == (["GPUSBOM_GATE_" + name.upper()] if decision.passed
                                       else ["FAILED"])
        text = resources.files("gpusbom.policy").joinpath(f"builtin/{name}.yaml").read_text(
            encoding="utf-8")
        assert p["policy"]["digest"] == {"sha256": hashlib.sha256(text.encode()).hexdigest()}
        assert p["policy"]["uri"].endswith(f"#policy/builtin/{name}.yaml")
        assert p["https://gpusbom.dev/attestation/rules"] == dict(sorted(decision.rules.items()))
        assert len(p["https://gpusbom.dev/attestation/violations"]) == len(decision.violations)
        assert vsa["subject"][0]["digest"]["sha256"] == helpers.MANIFEST_DIGEST.split(":")[1]


def test_check_verification_summary(tmp_path: Path) -> None:
    from gpusbom.compat.run import CheckRequest, run_check

    scan = tmp_path / "scan.json"
    buf = io.StringIO()
    get_writer("json").write(helpers.make_result(), buf, WriterOptions())
    scan.write_text(buf.getvalue())
    for driver in ("470.57.02", "580.65.06"):
        report = run_check(CheckRequest(image=str(scan), gpus=("H100",), driver=driver))
        (vsa,) = read_bundle(render(report, "check"))
        valid(vsa)
        p = vsa["predicate"]
        assert p["verificationResult"] == ("FAILED" if report.failed else "PASSED")
        got = [(v["target"], v["verdict"]) for v in p["https://gpusbom.dev/attestation/verdicts"]]
        assert got == [(v.target, v.verdict) for v in report.verdicts]


def test_validators_can_fail() -> None:
    """The schema and the bindings reject what the spec forbids (so a pass means something)."""
    (good, _) = read_bundle(render(helpers.make_result()))
    bad = copy.deepcopy(good)
    del bad["subject"][0]["digest"]
    assert schema_errors(bad)
    with pytest.raises(ValueError, match="digest"):
        check_with_bindings(bad)
    bad = copy.deepcopy(good)
    bad["_type"] = "https://in-toto.io/Statement/v0.1"
    assert schema_errors(bad)
    bad = copy.deepcopy(good)
    bad["subject"][0]["digest"]["sha256"] = "XYZ"
    assert schema_errors(bad)
    result = helpers.make_result()
    result.probes = _probes("pass")
    tr = read_bundle(render(result))[2]
    tr["predicate"]["result"] = "OK"
    assert schema_errors(tr)
    tr["predicate"]["result"] = "PASSED"
    tr["predicate"]["passed"] = []  # neither a spec field nor a URI-named extension
    assert schema_errors(tr)
    with pytest.raises(Exception, match="passed"):
        check_with_bindings(tr)
