"""Check verdicts as a report (``CheckReport``), and the table and JSON text of them; the
writers of ``gpusbom check`` (``writers/``: table, json, sarif, html) render it."""

from __future__ import annotations

import json
from dataclasses import dataclass

from .. import __version__
from ..model import ScanResult
from .states import FAIL, GREEN, JIT, RUNS, UNCHECKED
from .verdicts import Verdict

SCHEMA = "gpusbom/check/1"


@dataclass(frozen=True)
class CheckReport:
    """What ``gpusbom check`` concludes: the image's scan and a verdict per target."""

    image: ScanResult
    verdicts: list[Verdict]

    @property
    def failed(self) -> bool:
        """Some verdict is not green (``will-fail``, ``not-applicable``, ``unchecked``)."""
        return not self.passes()

    def passes(self, *, require_runs: bool = False, allow_unchecked: bool = False) -> bool:
        """The gate: every verdict green (``runs``/``runs-with-jit``); ``require_runs``: every
        verdict ``runs``; ``allow_unchecked``: ``unchecked`` passes too."""
        ok = {RUNS} if require_runs else set(GREEN)
        if allow_unchecked:
            ok.add(UNCHECKED)
        return all(v.verdict in ok for v in self.verdicts)

    @property
    def jit(self) -> bool:
        return any(v.verdict == JIT for v in self.verdicts)


def to_json(verdicts: list[Verdict]) -> str:
    doc = {
        "schema": SCHEMA,
        "tool": {"name": "gpusbom", "version": __version__},
        "verdicts": [v.to_dict() for v in verdicts],
    }
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def to_table(verdicts: list[Verdict], *, verbose: bool = False) -> str:
    lines: list[str] = []
    width = max((len(v.target) for v in verdicts), default=6)
    for image in dict.fromkeys(v.image for v in verdicts):
        lines.append(f"IMAGE {image}")
        lines.append(f"  {'TARGET'.ljust(width)}  {'VERDICT'.ljust(14)}  BINARIES AND RUNTIMES")
        for v in (x for x in verdicts if x.image == image):
            s = v.summary()
            comp = f"{s[RUNS]} runs, {s[JIT]} jit, {s[FAIL]} fail" + (
                f", {s[UNCHECKED]} unchecked" if s[UNCHECKED] else "")
            lines.append(f"  {v.target.ljust(width)}  {v.verdict.ljust(14)}  {comp}")
        for v in (x for x in verdicts if x.image == image):
            lines.append("")
            lines.append(f"  {v.target}: {v.verdict}")
            shown = v.reasons if verbose else [
                r for r in v.reasons
                if v.verdict == RUNS or not is_ok_reason(r, v)
            ]
            for r in shown:
                lines.append(f"    - {r}")
            for lib in v.failing:
                if lib.file:
                    lines.append(f"    failing file: {lib.file} ({_targets(lib.targets)})")
            if v.evidence and v.verdict != RUNS:
                lines.append("    evidence: " + ", ".join(v.evidence[:6])
                             + (f" (+{len(v.evidence) - 6} more)" if len(v.evidence) > 6 else ""))
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def is_ok_reason(reason: str, v: Verdict) -> bool:
    """In a failing verdict's table, leave out the reasons of components that run."""
    return any(lib.reason == reason and lib.verdict == RUNS for lib in v.libraries)


def _targets(t: dict[str, str]) -> str:
    keys = ("cuda:sass", "cuda:ptx", "cuda:lto", "hip:gfx")
    parts = [f"{k.split(':')[1].upper()} {t[k].replace(',', ' ')}" for k in keys if t.get(k)]
    return "; ".join(parts) or "no targets"
