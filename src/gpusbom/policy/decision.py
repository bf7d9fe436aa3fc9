"""What a gate concludes about one target: violations, waived violations, warnings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .loader import PolicyException

__all__ = ["Decision", "Violation", "Waived"]

#: per-rule outcomes in a Decision
PASS, FAIL, NOT_APPLICABLE = "pass", "fail", "not-applicable"


@dataclass(frozen=True)
class Violation:
    """One thing a rule refuses. ``level`` is ``error`` (fails the gate) or ``warning``
    (shown, never fails: e.g. ``review`` advisories without ``fail_on_review``)."""

    rule: str
    subject: str  # what is wrong: "cuda-compat-13-0 580.95.05-0ubuntu1", "opencl:0:0", ...
    message: str
    fix: str | None = None
    evidence: tuple[str, ...] = ()  # paths inside the target
    component: str | None = None  # bom-ref
    names: tuple[str, ...] = ()  # names an exception's ``component`` may match
    advisory: str | None = None  # vulnerability id (CVE) for advisory violations
    aliases: tuple[str, ...] = ()  # advisory record id and other ids
    level: str = "error"
    policy_line: int | None = None

    def key(self) -> tuple[str, str, str]:
        return (self.rule, self.subject, self.advisory or self.message)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule, "subject": self.subject, "message": self.message,
            "fix": self.fix, "evidence": list(self.evidence), "component": self.component,
            "advisory": self.advisory, "aliases": list(self.aliases), "level": self.level,
            "policy_line": self.policy_line,
        }


@dataclass(frozen=True)
class Waived:
    violation: Violation
    exception: PolicyException

    def to_dict(self) -> dict[str, Any]:
        e = self.exception
        return {**self.violation.to_dict(), "exception": {
            "reason": e.reason, "owner": e.owner, "expires": e.expires.isoformat(),
            "rule": e.rule, "advisory": e.advisory, "component": e.component,
            "target": e.target, "line": e.line}}


@dataclass
class Decision:
    target: str  # the target as the user named it
    policy: str  # policy path (or builtin:NAME / --fail-on)
    target_kind: str = ""
    violations: list[Violation] = field(default_factory=list)
    waived: list[Waived] = field(default_factory=list)
    warnings: list[Violation] = field(default_factory=list)
    rules: dict[str, str] = field(default_factory=dict)  # rule -> pass | fail | not-applicable
    notes: dict[str, str] = field(default_factory=dict)  # rule -> why not applicable

    @property
    def passed(self) -> bool:
        return not self.violations

    def by_rule(self, rule: str) -> list[Violation]:
        return [v for v in self.violations if v.rule == rule]

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target, "target_kind": self.target_kind, "passed": self.passed,
            "rules": dict(self.rules), "notes": dict(self.notes),
            "violations": [v.to_dict() for v in self.violations],
            "waived": [w.to_dict() for w in self.waived],
            "warnings": [v.to_dict() for v in self.warnings],
        }
