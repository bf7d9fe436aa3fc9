"""Render check verdicts: a table a person reads, JSON, SARIF 2.1.0."""

from __future__ import annotations

import json
from typing import Any

from .. import __version__
from .evaluate import FAIL, JIT, RUNS, Verdict

SCHEMA = "gpusbom/check/1"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_RULES = {
    FAIL: ("check/will-fail", "error",
           "The image is predicted to fail on this GPU and driver."),
    JIT: ("check/runs-with-jit", "warning",
          "The image runs only after the driver JIT-compiles PTX or SPIR-V at first launch."),
    RUNS: ("check/runs", "note", "The image is predicted to run on this GPU and driver."),
}


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
        lines.append(f"  {'TARGET'.ljust(width)}  {'VERDICT'.ljust(13)}  COMPONENTS")
        for v in (x for x in verdicts if x.image == image):
            s = v.summary()
            comp = f"{s[RUNS]} runs, {s[JIT]} jit, {s[FAIL]} fail"
            lines.append(f"  {v.target.ljust(width)}  {v.verdict.ljust(13)}  {comp}")
        for v in (x for x in verdicts if x.image == image):
            lines.append("")
            lines.append(f"  {v.target}: {v.verdict}")
            shown = v.reasons if verbose else [
                r for r in v.reasons
                if v.verdict == RUNS or not _is_ok_reason(r, v)
            ]
            for r in shown:
                lines.append(f"    - {r}")
            if v.evidence and v.verdict != RUNS:
                lines.append("    evidence: " + ", ".join(v.evidence[:6])
                             + (f" (+{len(v.evidence) - 6} more)" if len(v.evidence) > 6 else ""))
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def _is_ok_reason(reason: str, v: Verdict) -> bool:
    """In a failing verdict's table, leave out the reasons of components that run."""
    return any(lib.reason == reason and lib.verdict == RUNS for lib in v.libraries)


def to_sarif(verdicts: list[Verdict]) -> str:
    rules = []
    for key in (FAIL, JIT, RUNS):
        rid, level, text = _RULES[key]
        rules.append({
            "id": rid,
            "name": rid.split("/")[1].replace("-", " ").title().replace(" ", ""),
            "shortDescription": {"text": text},
            "defaultConfiguration": {"level": level},
        })
    results: list[dict[str, Any]] = []
    for v in verdicts:
        rid, level, _ = _RULES[v.verdict]
        first = next((r for r in v.reasons if not _is_ok_reason(r, v)), v.verdict)
        res: dict[str, Any] = {
            "ruleId": rid,
            "ruleIndex": [FAIL, JIT, RUNS].index(v.verdict),
            "level": level,
            "message": {"text": f"{v.image} on {v.target}: {v.verdict}: {first}"},
            "properties": {
                "verdict": v.verdict, "target": v.target, "image": v.image,
                "reasons": v.reasons, "summary": v.summary(),
            },
        }
        locs = [{"physicalLocation": {"artifactLocation": {"uri": _uri(p)}}}
                for p in v.evidence[:20]]
        if locs:
            res["locations"] = locs
        results.append(res)
    doc = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "gpusbom", "version": __version__,
                "rules": rules,
            }},
            "results": results,
        }],
    }
    return json.dumps(doc, indent=2) + "\n"


def _uri(path: str) -> str:
    from urllib.parse import quote

    return quote(path.lstrip("/"), safe="/:@")


RENDERERS = {"table": to_table, "json": to_json, "sarif": to_sarif}
