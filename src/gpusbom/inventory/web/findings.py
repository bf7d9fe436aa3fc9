"""The findings of one stored host or image scan as the dashboard lists them: one row per
(finding, component) with the component, its path and the status (the scan's own, or the
triage analysis recorded for that component and vulnerability); suppressed rows apart
(shown collapsed); filters, sort and search by CVE / advisory / component; and the trend
of findings over the subject's scans (a bar chart drawn here as SVG: no script, no CDN).
"""

from __future__ import annotations

from typing import Any

from ...model import ScanResult
from .. import triage

SEVERITIES = ("critical", "high", "medium", "low", "info", "unknown")
SORTS = ("severity", "vulnerability", "component", "status", "path")
STATUSES = ("affected", "review", "accepted", "in_triage", "not-affected", "false_positive",
            "not_affected")
_SEV_RANK = {s: i for i, s in enumerate(SEVERITIES)}
#: bar colours of the trend chart, per severity (style.css has the same for the legend)
COLOURS = {"critical": "#8b0000", "high": "#c62828", "medium": "#b7791f", "low": "#2e7d32",
           "info": "#57606a", "unknown": "#8c959f"}
ROW_LIMIT = 2000


def params_of(query: Any) -> dict[str, str]:
    return {k: str(query.get(k, ""))[:200] for k in ("q", "severity", "status", "sort",
                                                     "order")}


def rows(result: ScanResult, table: dict[tuple[str, str], triage.Analysis],
         params: dict[str, str]) -> dict[str, Any]:
    comps = {c.bom_ref: c for c in result.components}
    out = []
    for f in result.findings:
        a = f.advisory
        names = triage.finding_names(f)
        for ref in (f.components or [None]):
            c = comps.get(ref) if ref else None
            ckey = triage.component_key(c) if c is not None else None
            an = triage.lookup(table, ckey, names)
            status = (a.status if a is not None else None) or f.kind
            shown = an.state if an is not None else status
            out.append({
                "id": f.id, "vulnerability": (a.vulnerability if a else None) or f.id,
                "advisory": a.advisory if a else None, "severity": f.severity or "unknown",
                "title": f.title, "component": c.name if c else "",
                "version": (a.installed_version if a else None) or (c.version if c else None),
                "purl": c.purl if c else None, "key": ckey,
                "path": next((e.path for e in c.evidence if e.path), None) if c else None,
                "scan_status": status, "status": shown,
                "fixed_version": a.fixed_version if a else None,
                "justification": a.justification if a else None,
                "analysis": an.to_dict() if an else None,
                "suppressed": (an.suppresses if an else status == "not-affected"),
            })
    total = len(out)
    q = params.get("q", "").strip().lower()
    if q:
        out = [r for r in out if any(q in str(r[k] or "").lower() for k in (
            "vulnerability", "advisory", "id", "component", "purl", "path", "title"))]
    if params.get("severity"):
        out = [r for r in out if r["severity"] == params["severity"]]
    if params.get("status"):
        out = [r for r in out if r["status"] == params["status"]]
    sort = str(params.get("sort")) if params.get("sort") in SORTS else "severity"

    def order(r: dict[str, Any]) -> tuple[Any, ...]:
        first = _SEV_RANK.get(r["severity"], 9) if sort == "severity" else str(r[sort] or "")
        return (first, r["vulnerability"], r["component"], r["path"] or "")

    out.sort(key=order, reverse=params.get("order") == "desc")
    open_rows = [r for r in out if not r["suppressed"]]
    closed = [r for r in out if r["suppressed"]]
    return {"open": open_rows[:ROW_LIMIT], "suppressed": closed[:ROW_LIMIT],
            "shown": len(out), "total": total, "params": params,
            "severities": list(SEVERITIES), "statuses": list(STATUSES), "sorts": list(SORTS)}


def trend(store: Any, kind: str, subject: str) -> dict[str, Any]:
    """Findings per severity of every scan of a subject, oldest first, with its SVG."""
    from sqlalchemy import select

    from ..schema import finding_counts, scans

    pts: dict[str, dict[str, Any]] = {}
    kinds = ("host",) if kind == "host" else ("image", "sbom")
    with store.engine.connect() as conn:
        fsets: dict[str, list[str]] = {}
        for sid, ts, digest, fset in conn.execute(
                select(scans.c.id, scans.c.ts, scans.c.digest, scans.c.fset).where(
                    scans.c.kind.in_(kinds), scans.c.subject == subject)
                .order_by(scans.c.ts, scans.c.ingested_at, scans.c.id)):
            pts[sid] = {"scan_id": sid, "ts": ts, "digest": digest, "counts": {}, "total": 0}
            fsets.setdefault(fset, []).append(sid)
        for fset, sev, n in conn.execute(
                select(finding_counts.c.set_id, finding_counts.c.severity,
                       finding_counts.c.n).where(finding_counts.c.set_id.in_(list(fsets)))):
            for sid in fsets[fset]:
                pts[sid]["counts"][sev] = n
                pts[sid]["total"] += n
    points = list(pts.values())[-60:]
    return {"points": points, "svg": svg(points)}


def svg(points: list[dict[str, Any]]) -> dict[str, Any]:
    """Stacked bars (one per scan), as shapes the template draws: numbers only, so
    nothing from a scan reaches the SVG but what Jinja escapes."""
    width, height, pad = 640, 160, 24
    top = max((p["total"] for p in points), default=0) or 1
    n = max(len(points), 1)
    slot = (width - 2 * pad) / n
    bar = max(min(slot * 0.7, 48), 2)
    bars = []
    for i, p in enumerate(points):
        x = pad + i * slot + (slot - bar) / 2
        y = height - pad
        for sev in SEVERITIES:
            v = p["counts"].get(sev, 0)
            if not v:
                continue
            h = (height - 2 * pad) * v / top
            y -= h
            bars.append({"x": round(x, 1), "y": round(y, 1), "w": round(bar, 1),
                         "h": round(h, 1), "fill": COLOURS[sev],
                         "label": f"{p['ts'][:10]}: {v} {sev}"})
    labels = [{"x": round(pad + i * slot + slot / 2, 1), "text": p["ts"][:10]}
              for i, p in enumerate(points)] if n <= 12 else []
    return {"width": width, "height": height, "pad": pad, "top": top, "bars": bars,
            "labels": labels, "legend": [{"sev": s, "fill": COLOURS[s]} for s in SEVERITIES
                                         if any(s in p["counts"] for p in points)]}
