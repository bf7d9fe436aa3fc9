"""What ``gpusbom gate`` concludes: the policy, a decision per target, and the scans."""

from __future__ import annotations

from dataclasses import dataclass

from ..model import ScanResult
from .decision import Decision
from .loader import Policy


@dataclass(frozen=True)
class GateReport:
    """The gate's result, written by the gate writers (``writers/``: table, json, sarif,
    junit, html). ``scans``: (target name, its scan) in the order given."""

    policy: Policy
    decisions: list[Decision]
    scans: list[tuple[str, ScanResult]]

    @property
    def passed(self) -> bool:
        return all(d.passed for d in self.decisions)
