"""From a ``ScanResult`` to inventory rows: the scan's identity (content hash), its
subject (which host or image it describes) and the rows of every table."""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import zlib
from typing import Any

from ..model import ComponentType, ScanResult, product_properties

GPU_TARGET_KEYS = ("cuda:sass", "cuda:ptx", "cuda:lto", "hip:targets", "built-for")


def canonical_json(result: ScanResult) -> bytes:
    return json.dumps(result.to_document(), sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False).encode("utf-8")


def scan_id(result: ScanResult) -> str:
    """sha256 of the scan's canonical JSON: the same scan always gets the same id."""
    return scan_id_of_bytes(canonical_json(result))


def scan_id_of_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def name_key(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(".", "-")


def scan_kind(result: ScanResult) -> str:
    t = result.target
    if t.kind == "host":
        return "host"
    if t.kind in ("image", "directory") and t.source != "sbom":
        return "image"
    return "sbom"


def subject_of(result: ScanResult) -> str:
    """What a scan describes, stable across scans: the host name; the image name:tag (the
    digest changes when the tag moves); else the reference."""
    t = result.target
    if t.kind == "host":
        return t.name or t.reference
    if t.name:
        return f"{t.name}:{t.tags[0]}" if t.tags and ":" not in t.name.rsplit("/", 1)[-1] \
            else t.name
    ref = t.reference
    for prefix in ("registry:", "docker:", "sbom:"):
        ref = ref.removeprefix(prefix)
    return ref


def utc_iso(ts: str | None) -> str:
    """A sortable UTC ISO 8601 string (``2026-01-01T00:00:00.000000Z``); now when unknown."""
    if ts:
        try:
            d = _dt.datetime.fromisoformat(ts.strip().replace("Z", "+00:00"))
            if d.tzinfo is None:
                d = d.replace(tzinfo=_dt.timezone.utc)
            return d.astimezone(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        except ValueError:
            pass
    return now_iso()


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def compress(data: bytes) -> bytes:
    return zlib.compress(data, 6)


def decompress(data: bytes) -> bytes:
    return zlib.decompress(data)


def _location(props: dict[str, str], evidence_paths: list[str]) -> str | None:
    return props.get("location") or (evidence_paths[0] if evidence_paths else None)


def rows(result: ScanResult, sid: str, *, advisory_db: str | None = None,
         ingested_at: str | None = None) -> dict[str, list[dict[str, Any]]]:
    """Rows for every table, keyed by table name."""
    t = result.target
    kind = scan_kind(result)
    if advisory_db is None:
        adb = getattr(result, "advisory_db", None)  # what the scan matched against
        if isinstance(adb, dict) and adb.get("source"):
            advisory_db = f"{adb['source']}@{adb.get('built') or '?'}"[:255]
    scan_row = {
        "id": sid,
        "kind": kind,
        "subject": subject_of(result)[:512],
        "reference": t.reference,
        "name": t.name,
        "digest": t.manifest_digest or t.image_id,
        "hostname": t.name if kind == "host" else None,
        "platform": t.platform,
        "labels": dict(sorted(t.labels.items())),
        "ts": utc_iso(result.timestamp),
        "ingested_at": ingested_at or now_iso(),
        "tool_name": result.tool.name,
        "tool_version": result.tool.version,
        "advisory_db": advisory_db,
        "components": len(result.components),
        "stack_text": result.stack_text() or None,
    }
    comp_rows: list[dict[str, Any]] = []
    prod_rows: list[dict[str, Any]] = []
    dev_rows: list[dict[str, Any]] = []
    # kernel module name -> version, for the devices' driver column
    modules = {
        (c.properties.get("kernel-module") or c.name).replace("-", "_"): c.version
        for c in result.components if c.type == ComponentType.DEVICE_DRIVER
    }
    for i, c in enumerate(result.components):
        # the rows keep the property view of the product (stack, product, ...) as SBOMs do
        p = {**c.properties, **product_properties(c)}
        methods = sorted({e.method for e in c.evidence})
        paths = [e.path for e in c.evidence if e.path]
        targets = "; ".join(f"{k}={p[k]}" for k in GPU_TARGET_KEYS if p.get(k))
        comp_rows.append({
            "scan_id": sid,
            "idx": i,
            "ref": c.bom_ref or None,
            "name": c.name[:512],
            "name_key": name_key(c.name)[:512],
            "version": c.version,
            "type": c.type.value,
            "ecosystem": c.ecosystem,
            "purl": c.purl,
            "stack": p.get("stack"),
            "product": p.get("product"),
            "product_version": p.get("product-version"),
            "release": p.get("release"),
            "location": _location(p, paths),
            "gpu_targets": targets or None,
            "evidence_methods": ",".join(methods)[:255] or None,
            "properties": dict(p),
        })
        idents: list[tuple[str, str, str | None]] = [
            (pr.stack, pr.name, pr.version or p.get("product-version") or c.version)
            for pr in c.products
        ]
        for n, (stack, product, version) in enumerate(dict.fromkeys(idents)):
            prod_rows.append({"scan_id": sid, "comp_idx": i, "n": n, "stack": stack,
                              "product": product, "version": version})
        if c.type == ComponentType.DEVICE:
            kdrv = p.get("driver")
            dev_rows.append({
                "scan_id": sid,
                "idx": len(dev_rows),
                "ref": c.bom_ref or None,
                "model": c.name,
                "vendor": p.get("vendor"),
                "pci_address": p.get("pci:address"),
                "compute_capability": p.get("cuda:compute-capability") or p.get("amd:gfx-target")
                or p.get("hip:arch") or p.get("intel:architecture"),
                "kernel_driver": kdrv,
                "driver_version": modules.get((kdrv or "").replace("-", "_")),
                "uuid": p.get("nvidia:uuid") or p.get("uuid"),
                "properties": dict(p),
            })
    pci_by_ref = {d["ref"]: d["pci_address"] for d in dev_rows if d["ref"]}
    probe_rows = [{
        "scan_id": sid,
        "idx": i,
        "backend": pr.backend,
        "device_id": pr.device_id,
        "device": pr.device,
        "device_ref": pr.device_ref,
        "pci_address": pr.facts.get("pci-bus-id") or pci_by_ref.get(pr.device_ref or ""),
        "outcome": pr.outcome,
        "reason": pr.reason,
        "error_name": pr.error_name,
        "max_abs_error": pr.max_abs_error,
        "seconds": pr.seconds,
    } for i, pr in enumerate(result.probes)]
    finding_rows = [{
        "scan_id": sid,
        "idx": i,
        "rule_id": f.id[:128],
        "kind": f.kind,
        "severity": f.severity,
        "title": f.title,
        "status": f.advisory.status if f.advisory else None,
        "advisory": f.advisory.advisory if f.advisory else None,
        "component_ref": f.components[0] if f.components else None,
        "installed_version": f.advisory.installed_version if f.advisory else None,
        "fixed_version": f.advisory.fixed_version if f.advisory else None,
    } for i, f in enumerate(result.findings)]
    # per-scan counts read by the overview and /metrics (a scan never changes: stored once)
    severities: dict[str, int] = {}
    for fd in result.findings:
        severities[fd.severity] = severities.get(fd.severity, 0) + 1
    count_rows = [{"scan_id": sid, "severity": k, "n": n} for k, n in
                  sorted(severities.items(), key=lambda kv: str(kv[0]))]
    affected_rows = [{"scan_id": sid, "advisory": a} for a in sorted(
        {fd.advisory.advisory for fd in result.findings
         if fd.advisory and fd.advisory.status == "affected"
         and fd.advisory.advisory is not None})]
    return {"scans": [scan_row], "components": comp_rows, "products": prod_rows,
            "devices": dev_rows, "probes": probe_rows, "findings": finding_rows,
            "finding_counts": count_rows, "affected_advisories": affected_rows}
