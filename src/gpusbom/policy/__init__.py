"""The CI policy gate: policy files, their rules, and the decision for a scanned target.

- ``load_policy(path | "default" | "strict") -> Policy`` (loader.py): YAML, JSON Schema
  (``builtin/policy.schema.json``), semantic checks; ``ConfigError`` naming file, line, rule.
- ``evaluate(policy, result, ...) -> Decision``: every rule of the policy (rules.py) over
  the internal model, then exceptions: a valid one waives what it matches (listed as
  waived), an expired one is a violation of its own.
- ``fail_on_severity(result, severity)`` / ``parse_severity(text)``: ``scan --fail-on``.
- ``print_summary(decision, stream)``: the human summary.
- ``render_json``, ``print_summary`` and ``report.GateReport``: what the gate writers
  (``writers/``: table, json, sarif, junit, html) write.
"""

from __future__ import annotations

import datetime as _dt
import fnmatch
import json
from typing import Any, TextIO

from ..errors import UsageError
from ..model import ScanResult
from .decision import FAIL, NOT_APPLICABLE, PASS, Decision, Violation, Waived
from .loader import BUILTIN, Policy, PolicyException, load_policy, load_policy_text
from .rules import RULE_FUNCS, RULE_TITLES, SEVERITIES, RuleContext

__all__ = [
    "BUILTIN",
    "RULE_TITLES",
    "Decision",
    "Policy",
    "PolicyException",
    "Violation",
    "Waived",
    "evaluate",
    "fail_on_severity",
    "load_policy",
    "load_policy_text",
    "parse_severity",
    "print_summary",
    "render_json",
]


def parse_severity(text: str) -> str:
    """``--fail-on`` value: critical, high, medium or low (any case); ``UsageError`` else."""
    value = (text or "").strip().lower()
    if value not in SEVERITIES:
        raise UsageError(f"--fail-on {text!r}: choose one of {', '.join(SEVERITIES)}")
    return value


def _exception_matches(e: PolicyException, v: Violation, target: str) -> bool:
    if e.rule is not None and e.rule != v.rule:
        return False
    if e.advisory is not None:
        ids = {x.upper() for x in (v.advisory, *v.aliases) if x}
        if e.advisory.strip().upper() not in ids:
            return False
    if e.component is not None:
        pat = e.component.strip().lower()
        names = [n.lower() for n in (*v.names, v.subject)]
        if not any(fnmatch.fnmatchcase(n, pat) for n in names):
            return False
    return e.target is None or fnmatch.fnmatchcase(target, e.target)


def evaluate(
    policy: Policy,
    result: ScanResult,
    *,
    target: str | None = None,
    strict: bool = False,
    db: Any = None,
    today: _dt.date | None = None,
    now: _dt.datetime | None = None,
) -> Decision:
    """Apply ``policy`` to one scanned target.

    ``strict``: unknowns fail (as ``completeness: {unknowns: true}``), with the rule added
    when the policy lacks it. ``db``: the AdvisoryDB the findings were matched with (for
    ``advisory_db``; else ``result.advisory_db`` or the active database). ``today`` /
    ``now``: for exception expiry and database age (default: the clock).
    """
    name = target or result.target.reference
    if now is None:
        from ..clock import now as _clock_now

        now = _clock_now()
    today = today or now.date()
    ctx = RuleContext(result=result, policy=policy, strict=strict, db=db, now=now, target=name)
    decision = Decision(target=name, policy=policy.path, target_kind=result.target.kind)
    rules = dict(policy.rules)
    if strict and "completeness" not in rules:
        rules["completeness"] = {"gpu_versions": False, "unknowns": True}
    found: list[Violation] = []
    for rule, settings in rules.items():
        got = RULE_FUNCS[rule](ctx, settings)
        if got is None:
            decision.notes[rule] = _not_applicable_note(rule, result)
            continue
        found.extend(got)
    active = [e for e in policy.exceptions if not e.expired(today)]
    for v in found:
        if v.level != "error":
            decision.warnings.append(v)
            continue
        waiver = next((e for e in active if _exception_matches(e, v, name)), None)
        if waiver is not None:
            decision.waived.append(Waived(v, waiver))
        else:
            decision.violations.append(v)
    for e in policy.exceptions:
        if e.expired(today):
            decision.violations.append(Violation(
                rule="exceptions", subject=f"exception ({e.describe()})",
                message=f"expired on {e.expires.isoformat()} (owner {e.owner}; reason: "
                f"{e.reason}); it waives nothing",
                fix="fix what it waived and delete it, or renew it with a new expiry date",
                policy_line=e.line,
            ))
    for rule in rules:
        decision.rules[rule] = (NOT_APPLICABLE if rule in decision.notes
                                else FAIL if decision.by_rule(rule) else PASS)
    if policy.exceptions:
        decision.rules["exceptions"] = FAIL if decision.by_rule("exceptions") else PASS
    return decision


def _not_applicable_note(rule: str, result: ScanResult) -> str:
    return {
        "probes": f"no probe results (target kind: {result.target.kind or 'unknown'})",
        "driver_branches": "no NVIDIA driver component",
        "minimum_versions": "none of the products is present",
        "allow": "none of the components is present",
    }.get(rule, "not applicable")


def fail_on_severity(result: ScanResult, severity: str) -> Decision:
    """``gpusbom scan --fail-on SEVERITY``: affected advisories at or above it fail."""
    sev = parse_severity(severity)
    policy = Policy(path=f"--fail-on {sev}", name=f"fail-on-{sev}",
                    rules={"advisories": {"fail_on": sev}})
    return evaluate(policy, result)


def print_summary(decision: Decision, stream: TextIO) -> None:
    """The human summary: one block per violation (rule, component, evidence, fix)."""
    w = stream.write
    status = "PASS" if decision.passed else "FAIL"
    w(f"gpusbom gate: {status}  {decision.target}  (policy {decision.policy})\n")
    for v in decision.violations:
        _block(w, "x", v)
    for wv in decision.waived:
        e = wv.exception
        w(f"  waived  {wv.violation.rule}: {wv.violation.subject}: {wv.violation.message}\n")
        w(f"      exception: {e.reason} (owner {e.owner}, expires {e.expires.isoformat()}"
          + (f", policy line {e.line}" if e.line else "") + ")\n")
    for v in decision.warnings:
        _block(w, "!", v)
    rules = ", ".join(f"{r} {s}" for r, s in decision.rules.items())
    w(f"  {len(decision.violations)} violation(s), {len(decision.waived)} waived, "
      f"{len(decision.warnings)} warning(s); rules: {rules}\n")


def _block(w: Any, mark: str, v: Violation) -> None:
    kind = "error" if v.level == "error" else "warning"
    w(f"  [{mark}] {kind} {v.rule}: {v.subject}: {v.message}\n")
    if v.evidence:
        w(f"      evidence: {', '.join(v.evidence)}\n")
    if v.fix:
        w(f"      fix: {v.fix}\n")


def render_json(decisions: list[Decision], policy: Policy) -> str:
    doc = {
        "schema": "gpusbom/gate/1",
        "policy": {"path": policy.path, "name": policy.name, "sha256": policy.sha256,
                   "rules": list(policy.rules)},
        "passed": all(d.passed for d in decisions),
        "targets": [d.to_dict() for d in decisions],
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
