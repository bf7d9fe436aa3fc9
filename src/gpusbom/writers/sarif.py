"""SARIF 2.1.0, for code scanning: the one SARIF implementation, for ``gate`` and ``check``.

:func:`sarif_log` builds the document (schema, tool driver, one run) for both; the gate and
check writers give it their rules and results.

Gate (``gpusbom gate -o sarif=PATH``): one run; its rules are the policy's rules. Each
violation is a result (``error``; warnings ``warning``; waived ones carry an accepted
``suppression`` with the exception's reason). A result's location is the evidence path
inside the scanned target (``uriBaseId`` TARGETROOT) when there is one, else the policy file
at the rule's line; the policy line is always a related location. Deterministic: no
timestamps, stable order and fingerprints.

Check (``gpusbom check -o sarif=PATH``): three rules (will-fail, runs-with-jit, runs), one
result per verdict, located at its evidence paths.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import TYPE_CHECKING, Any, TextIO

from .. import __version__
from . import register
from .base import Writer, WriterOptions

if TYPE_CHECKING:
    from ..compat.report import CheckReport
    from ..policy import Decision, Policy, Violation
    from ..policy.report import GateReport

__all__ = ["SARIF_SCHEMA", "sarif_log"]

SARIF_SCHEMA = ("https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/"
                "sarif-schema-2.1.0.json")


def _camel(rule: str) -> str:
    return "".join(p.capitalize() for p in rule.split("_"))


def _policy_location(policy: Policy, line: int | None) -> dict[str, Any]:
    if policy.path.startswith("builtin:"):
        loc: dict[str, Any] = {"uri": f"{policy.path[8:]}.yaml", "uriBaseId": "GPUSBOMPOLICIES"}
    elif os.path.exists(policy.path):
        rel = os.path.relpath(os.path.abspath(policy.path))
        if rel.startswith(".."):
            loc = {"uri": "file://" + os.path.abspath(policy.path)}
        else:
            loc = {"uri": rel.replace(os.sep, "/"), "uriBaseId": "%SRCROOT%"}
    else:
        loc = {"uri": "policy"}
    phys: dict[str, Any] = {"artifactLocation": loc}
    if line:
        phys["region"] = {"startLine": line}
    return {"physicalLocation": phys}


def _result(v: Violation, d: Decision, policy: Policy, rule_index: dict[str, int]) -> dict[str, Any]:
    text = f"{d.target}: {v.subject}: {v.message}" + (f". Fix: {v.fix}" if v.fix else "")
    policy_loc = _policy_location(policy, v.policy_line)
    locations: list[dict[str, Any]] = []
    for path in v.evidence[:1]:
        locations.append({
            "physicalLocation": {"artifactLocation": {"uri": path.lstrip("/"),
                                                      "uriBaseId": "TARGETROOT"}},
            "logicalLocations": [{"name": v.subject, "kind": "module"}],
        })
    related = [{"id": 1, **policy_loc, "message": {"text": f"policy rule {v.rule}"}}]
    for i, path in enumerate(v.evidence[1:], start=2):
        related.append({"id": i, "physicalLocation": {"artifactLocation": {
            "uri": path.lstrip("/"), "uriBaseId": "TARGETROOT"}},
            "message": {"text": "evidence"}})
    if not locations:
        locations = [policy_loc]
        related = related[1:]
    ident = "|".join([d.target, v.rule, v.subject, v.advisory or ""])
    out: dict[str, Any] = {
        "ruleId": v.rule,
        "ruleIndex": rule_index[v.rule],
        "level": "error" if v.level == "error" else "warning",
        "message": {"text": text},
        "locations": locations,
        "partialFingerprints": {
            "gpusbomViolation/v1": hashlib.sha256(ident.encode()).hexdigest()},
        "properties": {"target": d.target, "subject": v.subject,
                       **({"fix": v.fix} if v.fix else {}),
                       **({"advisory": v.advisory} if v.advisory else {}),
                       **({"component": v.component} if v.component else {})},
    }
    if related:
        out["relatedLocations"] = related
    return out


def sarif_log(rules: list[dict[str, Any]], results: list[dict[str, Any]],
              **run: Any) -> str:
    """The SARIF log: gpusbom as the tool with ``rules``, one run of ``results`` and the
    run's other members ``run`` (in order, after ``results``; ``originalUriBaseIds`` first)."""
    bases = run.pop("originalUriBaseIds", None)
    doc = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "gpusbom",
                "version": __version__,
                "semanticVersion": __version__,
                "rules": rules,
            }},
            **({"originalUriBaseIds": bases} if bases is not None else {}),
            "results": results,
            **run,
        }],
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def render_check(report: CheckReport) -> str:
    from ..compat.report import is_ok_reason
    from ..compat.states import FAIL, JIT, NA, RUNS, STATES, UNCHECKED

    kinds = {
        FAIL: ("check/will-fail", "error",
               "The image is predicted to fail on this GPU and driver."),
        NA: ("check/not-applicable", "error",
             "The image holds no runtime and no device code for this GPU's vendor."),
        UNCHECKED: ("check/unchecked", "warning",
                    "The image's GPU code could not be judged (none found, or unreadable)."),
        JIT: ("check/runs-with-jit", "warning",
              "The image runs only after the driver JIT-compiles PTX or SPIR-V at first launch."),
        RUNS: ("check/runs", "note", "The image is predicted to run on this GPU and driver."),
    }
    order = list(reversed(STATES))
    rules = []
    for key in order:
        rid, level, text = kinds[key]
        rules.append({
            "id": rid,
            "name": rid.split("/")[1].replace("-", " ").title().replace(" ", ""),
            "shortDescription": {"text": text},
            "defaultConfiguration": {"level": level},
        })
    results: list[dict[str, Any]] = []
    for v in report.verdicts:
        rid, level, _ = kinds[v.verdict]
        first = next((r for r in v.reasons if not is_ok_reason(r, v)), v.verdict)
        res: dict[str, Any] = {
            "ruleId": rid,
            "ruleIndex": order.index(v.verdict),
            "level": level,
            "message": {"text": f"{v.image} on {v.target}: {v.verdict}: {first}"},
            "properties": {
                "verdict": v.verdict, "target": v.target, "image": v.image,
                "reasons": v.reasons, "summary": v.summary(),
                "failing_files": [{"path": lib.file, "verdict": lib.verdict,
                                   "targets": lib.targets} for lib in v.failing if lib.file],
            },
        }
        locs = [{"physicalLocation": {"artifactLocation": {"uri": _uri(p)}}}
                for p in v.evidence[:20]]
        if locs:
            res["locations"] = locs
        results.append(res)
    return sarif_log(rules, results)


def _uri(path: str) -> str:
    from urllib.parse import quote

    return quote(path.lstrip("/"), safe="/:@")


@register
class GateSarifWriter(Writer):
    format = "sarif"
    subject = "gate"
    description = "SARIF 2.1.0: one result per violation, for code scanning"

    def write(self, result: GateReport, out: TextIO, options: WriterOptions) -> None:
        out.write(render_gate(result.decisions, result.policy))


@register
class CheckSarifWriter(Writer):
    format = "sarif"
    subject = "check"
    description = "SARIF 2.1.0: one result per verdict, for code scanning"

    def write(self, result: CheckReport, out: TextIO, options: WriterOptions) -> None:
        out.write(render_check(result))


def render_gate(decisions: list[Decision], policy: Policy) -> str:
    from ..policy.rules import RULE_TITLES

    rules = list(dict.fromkeys([*policy.rules, *(r for d in decisions for r in d.rules)]))
    rule_index = {r: i for i, r in enumerate(rules)}
    results: list[dict[str, Any]] = []
    for d in decisions:
        for v in d.violations:
            results.append(_result(v, d, policy, rule_index))
        for v in d.warnings:
            results.append(_result(v, d, policy, rule_index))
        for w in d.waived:
            r = _result(w.violation, d, policy, rule_index)
            e = w.exception
            r["suppressions"] = [{
                "kind": "external", "status": "accepted",
                "justification": f"{e.reason} (owner {e.owner}, expires {e.expires.isoformat()})",
                **({"location": _policy_location(policy, e.line)} if e.line else {}),
            }]
            results.append(r)
    return sarif_log(
        [{
            "id": r,
            "name": _camel(r),
            "shortDescription": {"text": RULE_TITLES.get(r, r)},
            "fullDescription": {"text": f"gpusbom policy rule '{r}' "
                                f"(policy {policy.name}): {RULE_TITLES.get(r, r)}."},
            "help": {"text": "See docs/policy.md of gpusbom for the rule and its settings."},
            "defaultConfiguration": {"level": "error"},
            "properties": {"tags": ["gpusbom", "policy", "supply-chain"]},
        } for r in rules],
        results,
        originalUriBaseIds={
            "TARGETROOT": {"description": {
                "text": "Root filesystem of the scanned target (image or host); the "
                "target of each result is in its properties.target."}},
            "GPUSBOMPOLICIES": {"description": {"text": "gpusbom's built-in policies"}},
        },
        properties={
            "policy": {"path": policy.path, "name": policy.name, "sha256": policy.sha256},
            "targets": [{"target": d.target, "passed": d.passed, "rules": d.rules}
                        for d in decisions],
        },
    )
