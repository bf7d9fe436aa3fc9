"""The predicates gpusbom attests, each built from a result the other commands already have.

======================  ==============================================  ==================
what                    predicateType                                    from
======================  ==============================================  ==================
CycloneDX SBOM          ``https://cyclonedx.org/bom``                     ``scan``
SPDX 2.3 SBOM           ``https://spdx.dev/Document``                     ``scan``
GPU probe results       ``https://in-toto.io/attestation/test-result/v0.1``  ``scan --probe``
gate / check decisions  ``https://slsa.dev/verification_summary/v1``       ``gate``, ``check``
======================  ==============================================  ==================

The SBOM predicates are the documents the ``cyclonedx-json`` and ``spdx-json`` writers
write (their own schemas validate them). Probe results follow the Test Result predicate:
one test per probed device (``<backend>:<device-id> <device>``), ``PASSED`` when every one
passed, ``FAILED`` when one failed, erred or timed out, ``WARNED`` when some were skipped
(no runtime or device) and none failed. Gate and check decisions are verification results:
the in-toto framework's vetted predicate for them is SLSA's Verification Summary (VSA v1,
``spec/predicates/vsa.md``); ``verifiedLevels`` holds gpusbom's own values (the spec allows
custom ones that do not start with ``SLSA_``), and the per-rule or per-GPU detail goes to
extension fields named by URI, as the parsing rules ask.
"""

from __future__ import annotations

import io
import json
import re
from typing import Any

from .. import __version__
from ..clock import scan_timestamp
from ..model import ProbeResult, ScanResult
from ..writers import WriterOptions, get_writer
from .statement import Statement, subject_of

__all__ = [
    "CYCLONEDX",
    "SPDX",
    "TEST_RESULT",
    "VSA",
    "check_statements",
    "gate_statements",
    "probe_statement",
    "sbom_statements",
    "scan_statements",
]

CYCLONEDX = "https://cyclonedx.org/bom"
SPDX = "https://spdx.dev/Document"
TEST_RESULT = "https://in-toto.io/attestation/test-result/v0.1"
VSA = "https://slsa.dev/verification_summary/v1"

#: gpusbom as a verifier / test harness (a TypeURI)
VERIFIER = "https://gpusbom.dev/verifier"
_EXT = "https://gpusbom.dev/attestation/"
_TOOL = f"pkg:pypi/gpusbom@{__version__}"


def _document(result: ScanResult, fmt: str, options: WriterOptions) -> dict[str, Any]:
    buf = io.StringIO()
    get_writer(fmt).write(result, buf, options)
    doc: dict[str, Any] = json.loads(buf.getvalue())
    return doc


def sbom_statements(result: ScanResult, options: WriterOptions | None = None,
                    formats: tuple[str, ...] = ("cyclonedx", "spdx")) -> list[Statement]:
    subject = subject_of(result.target)
    options = options or WriterOptions()
    out = []
    if "cyclonedx" in formats:
        out.append(Statement(subject, CYCLONEDX, _document(result, "cyclonedx-json", options)))
    if "spdx" in formats:
        out.append(Statement(subject, SPDX, _document(result, "spdx-json", options)))
    return out


def _test_name(p: ProbeResult) -> str:
    where = f"{p.backend}:{p.device_id}" if p.device_id is not None else p.backend
    return f"{where} {p.device}" if p.device else where


def probe_statement(result: ScanResult) -> Statement | None:
    """The probes' Test Result, or None when no probe ran."""
    if not result.probes:
        return None
    passed = [_test_name(p) for p in result.probes if p.outcome == "pass"]
    warned = [_test_name(p) for p in result.probes if p.outcome == "skipped"]
    failed = [_test_name(p) for p in result.probes if p.outcome not in ("pass", "skipped")]
    verdict = "FAILED" if failed else ("WARNED" if warned else "PASSED")
    backends = sorted({p.backend for p in result.probes})
    predicate: dict[str, Any] = {
        "result": verdict,
        "configuration": [{
            "name": "gpusbom probe", "uri": _TOOL,
            "annotations": {"backends": backends,
                            "kernels": sorted({p.kernel for p in result.probes if p.kernel})},
        }],
        "passedTests": passed, "warnedTests": warned, "failedTests": failed,
        _EXT + "probes": [_probe_detail(p) for p in result.probes],
    }
    return Statement(subject_of(result.target), TEST_RESULT, predicate)


def _probe_detail(p: ProbeResult) -> dict[str, Any]:
    d: dict[str, Any] = {"test": _test_name(p), "outcome": p.outcome}
    for k, v in (("reason", p.reason), ("errorName", p.error_name), ("errorCode", p.error_code),
                 ("maxAbsError", p.max_abs_error), ("kernel", p.kernel)):
        if v is not None:
            d[k] = v
    return d


def scan_statements(result: ScanResult, options: WriterOptions | None = None) -> list[Statement]:
    """Everything a scan can attest: both SBOMs, and the probe results when probes ran."""
    out = sbom_statements(result, options)
    probe = probe_statement(result)
    if probe is not None:
        out.append(probe)
    return out


def _level(name: str) -> str:
    word = re.sub(r"[^A-Z0-9]+", "_", name.upper()).strip("_") or "POLICY"
    return f"GPUSBOM_{word}"


def _policy_uri(path: str) -> str:
    if path.startswith("builtin:"):
        return f"{_TOOL}#policy/builtin/{path.split(':', 1)[1]}.yaml"
    return path if "://" in path else f"file:{path}"


def gate_statements(report: Any) -> list[Statement]:
    """One verification summary per gated image (a ``policy.GateReport``)."""
    scans = dict(report.scans)
    policy = report.policy
    out = []
    for d in report.decisions:
        scan = scans.get(d.target)
        if scan is None:
            continue
        subject = subject_of(scan.target)
        pol: dict[str, Any] = {"uri": _policy_uri(policy.path)}
        if policy.sha256:
            pol["digest"] = {"sha256": policy.sha256}
        predicate: dict[str, Any] = {
            "verifier": {"id": VERIFIER},
            "timeVerified": scan.timestamp or scan_timestamp(),
            "resourceUri": subject.uri or subject.name,
            "policy": pol,
            "verificationResult": "PASSED" if d.passed else "FAILED",
            "verifiedLevels": [_level(f"gate_{policy.name}")] if d.passed else ["FAILED"],
            _EXT + "rules": dict(sorted(d.rules.items())),
            _EXT + "violations": [v.to_dict() for v in d.violations],
            _EXT + "waived": len(d.waived),
            _EXT + "warnings": len(d.warnings),
            _EXT + "tool": _TOOL,
        }
        out.append(Statement(subject, VSA, predicate))
    return out


def check_statements(report: Any) -> list[Statement]:
    """The compatibility verdicts of ``gpusbom check`` (a ``compat.CheckReport``) as one
    verification summary: PASSED when nothing is ``will-fail``."""
    scan = report.image
    subject = subject_of(scan.target)
    failed = report.failed
    verdicts = sorted({v.verdict for v in report.verdicts})
    predicate: dict[str, Any] = {
        "verifier": {"id": VERIFIER},
        "timeVerified": scan.timestamp or scan_timestamp(),
        "resourceUri": subject.uri or subject.name,
        "policy": {"uri": f"{_TOOL}#check"},
        "verificationResult": "FAILED" if failed else "PASSED",
        "verifiedLevels": ["FAILED"] if failed else
        [_level("check_" + ("runs_with_jit" if "runs-with-jit" in verdicts else "runs"))],
        _EXT + "verdicts": [{"target": v.target, "verdict": v.verdict, "driver": v.driver,
                             "host": v.host, "reasons": list(v.reasons)}
                            for v in report.verdicts],
        _EXT + "tool": _TOOL,
    }
    return [Statement(subject, VSA, predicate)]
