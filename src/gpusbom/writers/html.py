"""A self-contained HTML report (``-o html=report.html``) for scan, gate and check.

One file for a CI artifact: the CSS is inline, there is no script and nothing is fetched
(a Content-Security-Policy meta tag forbids scripts, images and connections, so even a
string that escaped escaping could not run or call out). It holds the stack summary, the
components, the findings with their status, and the gate and check verdicts when given.
Every value goes through Jinja2's autoescaping: image labels, package names and paths
come from images an attacker may have built.
"""

from __future__ import annotations

from collections import Counter
from importlib import resources
from typing import TYPE_CHECKING, Any, TextIO

from .. import __version__
from ..model import ScanResult
from . import register
from .base import Writer, WriterOptions

if TYPE_CHECKING:
    from ..compat.report import CheckReport
    from ..policy.report import GateReport


def _env() -> Any:
    from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

    here = str(resources.files(__package__) / "templates")
    return Environment(loader=FileSystemLoader(here), undefined=StrictUndefined,
                       autoescape=select_autoescape(default=True, default_for_string=True),
                       trim_blocks=True, lstrip_blocks=True)


def _scan(result: ScanResult) -> dict[str, Any]:
    t = result.target
    comps = []
    for c in sorted(result.components, key=lambda c: (c.type.value, c.name.lower(),
                                                      c.version or "")):
        paths = list(dict.fromkeys(e.path for e in c.evidence if e.path))
        comps.append({"name": c.name, "version": c.version, "type": c.type.value,
                      "ecosystem": c.ecosystem, "purl": c.purl, "paths": paths[:3],
                      "more": max(0, len(paths) - 3)})
    findings = []
    for f in result.findings:
        a = f.advisory
        findings.append({"id": f.id, "severity": f.severity, "kind": f.kind, "title": f.title,
                         "status": a.status if a else None,
                         "advisory": a.advisory if a else None,
                         "installed": a.installed_version if a else None,
                         "fixed": a.fixed_version if a else None,
                         "kev": a.kev if a else None,
                         "description": a.description if a else None})
    return {
        "reference": t.reference, "kind": t.kind, "name": t.name, "digest":
        t.manifest_digest or t.image_id, "platform": t.platform, "labels": dict(t.labels),
        "timestamp": result.timestamp,
        "stacks": [{"display": s.display, "present": s.present, "release": s.release,
                    "parts": [{"display": p.display, "versions": list(p.versions)}
                              for p in s.parts], "notes": list(s.notes)}
                   for s in result.stacks],
        "components": comps, "findings": findings,
        "severities": dict(Counter(f.severity for f in result.findings)),
        "unknowns": [{"collector": u.collector, "reason": u.reason, "path": u.path}
                     for u in result.unknowns][:200],
        "advisory_db": dict(result.advisory_db or {}),
    }


def render_report(*, title: str, scans: list[ScanResult], decisions: list[Any] | None = None,
                  verdicts: list[Any] | None = None) -> str:
    """The report as one HTML document (``decisions``: gate's, ``verdicts``: check's)."""
    gate = [d.to_dict() for d in decisions or []]
    check = [{"image": v.image, "target": v.target, "verdict": v.verdict,
              "reasons": list(v.reasons), "evidence": list(v.evidence[:20]),
              "summary": v.summary(),
              "failing": [{"file": x.file, "verdict": x.verdict, "targets": x.targets}
                          for x in v.failing if x.file],
              "libraries": [{"name": x.name, "verdict": x.verdict, "reason": x.reason,
                             "file": x.file} for x in v.libraries]} for v in verdicts or []]
    text = str(_env().get_template("report.html").render(
        title=title, version=__version__, scans=[_scan(r) for r in scans], gate=gate,
        check=check))
    return text.rstrip("\n") + "\n"


@register
class HtmlWriter(Writer):
    format = "html"
    description = "self-contained HTML report (inline CSS, no script) for CI artifacts"

    def write(self, result: ScanResult, out: TextIO, options: WriterOptions) -> None:
        out.write(render_report(title=f"gpusbom scan: {result.target.reference}",
                                scans=[result]))


@register
class GateHtmlWriter(Writer):
    format = "html"
    subject = "gate"
    description = "self-contained HTML report: the decisions and the scans"

    def write(self, result: GateReport, out: TextIO, options: WriterOptions) -> None:
        out.write(render_report(title="gpusbom gate: " + ", ".join(n for n, _ in result.scans),
                                scans=[r for _, r in result.scans], decisions=result.decisions))


@register
class CheckHtmlWriter(Writer):
    format = "html"
    subject = "check"
    description = "self-contained HTML report: the verdicts and the image's scan"

    def write(self, result: CheckReport, out: TextIO, options: WriterOptions) -> None:
        out.write(render_report(title=f"gpusbom check: {result.image.target.reference}",
                                scans=[result.image], verdicts=result.verdicts))
