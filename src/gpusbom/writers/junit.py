"""JUnit XML report of a gate run (``gpusbom gate -o junit=PATH``).

One ``testsuite`` per target, one ``testcase`` per policy rule: a rule with violations is a
``failure`` (one line per violation), a rule that does not apply to the target is
``skipped``; waived violations and warnings go to the testcase's ``system-out``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import TextIO

from ..policy.decision import FAIL, NOT_APPLICABLE, Decision, Violation
from ..policy.loader import Policy
from ..policy.report import GateReport
from . import register
from .base import Writer, WriterOptions

__all__ = ["GateJunitWriter", "render"]


def _line(v: Violation) -> str:
    s = f"{v.subject}: {v.message}"
    if v.evidence:
        s += f" [evidence: {', '.join(v.evidence)}]"
    if v.fix:
        s += f" [fix: {v.fix}]"
    return s


def render(decisions: list[Decision], policy: Policy) -> str:
    root = ET.Element("testsuites", name=f"gpusbom gate ({policy.name})")
    totals = {"tests": 0, "failures": 0, "skipped": 0}
    for d in decisions:
        suite = ET.SubElement(root, "testsuite", name=d.target)
        counts = {"tests": 0, "failures": 0, "skipped": 0}
        for rule, status in d.rules.items():
            counts["tests"] += 1
            case = ET.SubElement(suite, "testcase", name=rule,
                                 classname=f"gpusbom.gate.{policy.name}")
            bad = d.by_rule(rule)
            if status == FAIL:
                counts["failures"] += 1
                f = ET.SubElement(case, "failure", type=rule,
                                  message=f"{len(bad)} violation(s): {_line(bad[0])}")
                f.text = "\n".join(_line(v) for v in bad) + "\n"
            elif status == NOT_APPLICABLE:
                counts["skipped"] += 1
                ET.SubElement(case, "skipped", message=d.notes.get(rule, "not applicable"))
            out = [f"waived: {_line(w.violation)} (exception: {w.exception.reason}; owner "
                   f"{w.exception.owner}; expires {w.exception.expires.isoformat()})"
                   for w in d.waived if w.violation.rule == rule]
            out += [f"warning: {_line(v)}" for v in d.warnings if v.rule == rule]
            if out:
                ET.SubElement(case, "system-out").text = "\n".join(out) + "\n"
        for k, n in counts.items():
            suite.set(k, str(n))
            totals[k] += n
        suite.set("errors", "0")
    for k, n in totals.items():
        root.set(k, str(n))
    root.set("errors", "0")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


@register
class GateJunitWriter(Writer):
    format = "junit"
    subject = "gate"
    description = "JUnit XML: a test suite per target, a test case per rule"

    def write(self, result: GateReport, out: TextIO, options: WriterOptions) -> None:
        out.write(render(result.decisions, result.policy))
