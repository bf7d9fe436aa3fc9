"""From a ``ScanResult`` to inventory rows: the scan's identity (content hash), its
subject (which host or image it describes) and the rows of every table."""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import re
import zlib
from typing import Any

from ..model import ComponentType, ScanResult, product_properties

GPU_TARGET_KEYS = ("cuda:sass", "cuda:ptx", "cuda:lto", "hip:targets", "built-for")


def canonical_json(result: ScanResult) -> bytes:
    """The scan's canonical JSON; a scan holding text no database stores the same (a lone
    surrogate: not UTF-8) is an ``InputError`` (see ``check_text`` for NUL)."""
    from ..errors import InputError

    try:
        return json.dumps(result.to_document(), sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(f"scan of {result.target.reference[:200]!r}: holds text that is "
                         f"not UTF-8 (position {exc.start} of a string): the inventory "
                         "does not store it") from None


# a JSON \u0000 escape, not an escaped backslash followed by "u0000"
_NUL_RX = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000")


def check_text(data: bytes, reference: str) -> None:
    """Refuse a scan holding a NUL character (PostgreSQL stores none in text; SQLite
    would): one line, the same on both databases (``InputError``: exit 3)."""
    from ..errors import InputError

    if b"\\u0000" in data and _NUL_RX.search(data):
        raise InputError(f"scan of {reference[:200]!r}: holds a NUL character (\\u0000) in "
                         "a name, version or property: the inventory does not store it "
                         "(PostgreSQL cannot)")


def scan_id(result: ScanResult) -> str:
    """sha256 of the scan's canonical JSON: the same scan always gets the same id."""
    return scan_id_of_bytes(canonical_json(result))


def scan_id_of_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def name_key(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(".", "-")


#: every value of ``scans.kind`` / ``latest.kind`` (a subject's scans are read through the
#: ``(kind, subject, ts)`` index: a question by subject alone names every kind)
SCAN_KINDS = ("host", "image", "sbom")


def scan_kind(result: ScanResult) -> str:
    t = result.target
    if t.kind == "host":
        return "host"
    if t.kind in ("image", "directory") and t.source != "sbom":
        return "image"
    return "sbom"


def subject_of(result: ScanResult) -> str:
    """What a scan describes, stable across scans: the host name; the image
    ``registry/repo:tag`` (naming.py: never a local path, never the name twice; the digest
    changes when the tag moves, so it is not part of the subject)."""
    from .naming import subject_of_target

    t = result.target
    if t.kind == "host":
        return t.name or t.reference
    return subject_of_target(t)


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
    from ..clock import wall_now

    return wall_now().strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def compress(data: bytes) -> bytes:
    return zlib.compress(data, 6)


def decompress(data: bytes) -> bytes:
    return zlib.decompress(data)


def _location(props: dict[str, str], evidence_paths: list[str]) -> str | None:
    return props.get("location") or (evidence_paths[0] if evidence_paths else None)


_USERLAND = {"nvidia-driver": ("nvidia", "libcuda"), "amdgpu": ("amdgpu", None)}


def _userland_driver(result: ScanResult) -> dict[str, tuple[str, str]]:
    """vendor -> (driver name, version) from the user-space driver libraries."""
    out: dict[str, tuple[str, str]] = {}
    for c in result.components:
        for pr in c.products:
            want = _USERLAND.get(pr.stack)
            ver = pr.version or c.version
            if want and ver and (want[1] is None or pr.name == want[1]):
                out.setdefault(want[0], (want[0], ver))
    return out


#: the top-level keys of a scan document that make its component set (its body: 90% of it)
SET_KEYS = ("components", "relationships", "stacks", "unknowns")


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(
        "utf-8")


# a number token with a fraction or an exponent, where compact JSON writes one (after
# ":", "," or "[", before ",", "]" or "}"); a string may hold such text too (then the
# piece is written by ``json`` after all: slower, the same bytes)
_FLOAT_RX = re.compile(rb"[:,\[]-?[0-9]+(?:\.[0-9]+(?:[eE][-+]?[0-9]+)?|[eE][-+]?[0-9]+)[,\]}]")


def _dumps_fast(obj: Any) -> bytes:
    """``_dumps``'s bytes, written by orjson (~10x faster: a host scan's 550 components in
    ~0.6 ms instead of ~6 ms). The two write the same bytes for JSON without floats
    (strings, escapes, key order by code point, integers: tests/inventory
    test_inventory_store compares them); floats they write differently (``1e-05``
    against ``0.00001``), so a piece holding one, an integer orjson refuses (past 64 bits)
    or text that is not UTF-8 is written by ``json``."""
    try:
        import orjson
    except ImportError:  # an install without the extra's newest member: the same bytes
        return _dumps(obj)
    try:
        out = orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)
    except (orjson.JSONEncodeError, TypeError):
        return _dumps(obj)
    if _FLOAT_RX.search(out):
        return _dumps(obj)
    return out


def _obj(pieces: dict[str, bytes], keys: Any) -> bytes:
    """The canonical JSON of a dict from the canonical JSON of its values (``json.dumps``
    with sorted keys writes exactly this)."""
    return b"{" + b",".join(_dumps(k) + b":" + pieces[k] for k in sorted(keys)) + b"}"


class Split:
    """A scan document split into its envelope and its content-addressed bodies; each
    top-level value is serialised once and the canonical JSON of the whole scan
    (``data``, whose sha256 is the scan id) assembled from the same pieces."""

    def __init__(self, doc: dict[str, Any]) -> None:
        # the component set (90% of the bytes: no float in its model) by orjson, the
        # rest (findings' scores, probes' timings) by json
        pieces = {k: _dumps_fast(v) if k in SET_KEYS else _dumps(v)
                  for k, v in doc.items()}
        self.data = _obj(pieces, pieces)
        self.component_body = _obj(pieces, [k for k in SET_KEYS if k in pieces])
        self.finding_body = pieces.get("findings", b"[]")
        self.cset = scan_id_of_bytes(self.component_body)
        self.fset = scan_id_of_bytes(self.finding_body)
        rest = {k: v for k, v in doc.items()
                if k not in SET_KEYS and k not in ("findings", "timestamp")}
        self.envelope = _dumps({"doc": rest, "cset": self.cset, "fset": self.fset,
                                "findings": "findings" in doc})
        self.env = scan_id_of_bytes(self.envelope)
        self.stamp = pieces["timestamp"].decode("utf-8") if "timestamp" in pieces else None


def split(result: ScanResult) -> Split:
    """The scan's parts; a scan holding text no database stores the same (a lone
    surrogate: not UTF-8) is an ``InputError`` (see ``check_text`` for NUL)."""
    from ..errors import InputError

    try:
        return Split(result.to_document())
    except UnicodeEncodeError as exc:
        raise InputError(f"scan of {result.target.reference[:200]!r}: holds text that is "
                         f"not UTF-8 (position {exc.start} of a string): the inventory "
                         "does not store it") from None


def loads(data: bytes | str) -> Any:
    """``json.loads`` through orjson where it parses the text (about 3x faster on a set's
    body; the same values: what orjson refuses, an integer past 64 bits or ``NaN``, is
    parsed by ``json``)."""
    try:
        import orjson
    except ImportError:  # an install without the extra's newest member
        return json.loads(data)
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def join_dict(envelope: bytes, component_body: bytes, finding_body: bytes,
              stamp: str | None) -> dict[str, Any]:
    """The scan document again from its parts, as parsed JSON (``join``'s value)."""
    env = loads(envelope)
    doc = dict(env["doc"])
    if stamp is not None:
        doc["timestamp"] = loads(stamp)
    doc.update(loads(component_body))
    if env.get("findings"):
        doc["findings"] = loads(finding_body)
    return doc


def join(envelope: bytes, component_body: bytes, finding_body: bytes,
         stamp: str | None) -> bytes:
    """The canonical scan JSON again from its parts (its sha256 is the scan id)."""
    return _dumps(join_dict(envelope, component_body, finding_body, stamp))


def set_id_of_probes(rows: list[dict[str, Any]]) -> str:
    """The probe set's id: prefixed, so that no probes (``[]``) is not the id of no
    findings (``[]``, the finding body's hash)."""
    return scan_id_of_bytes(b"probes\n" + _dumps([{k: v for k, v in r.items()
                                                   if k != "set_id"} for r in rows]))


def month_of(ts: str) -> int:
    """``2026-01-31T...Z`` -> 202601 (the partition of a scan)."""
    return int(ts[0:4]) * 100 + int(ts[5:7])


def rows(result: ScanResult, sid: str, *, advisory_db: str | None = None,
         ingested_at: str | None = None, parts: Split | None = None,
         component_rows: bool = True) -> dict[str, list[dict[str, Any]]]:
    """Rows for every table, keyed by table name: the scan row (``scans``, referencing
    its sets by id) and the rows of each set (``components``... keyed by ``set_id``;
    ``component_rows=False``: not those of the component set, stored already)."""
    parts = parts or split(result)
    t = result.target
    kind = scan_kind(result)
    if advisory_db is None:
        adb = getattr(result, "advisory_db", None)  # what the scan matched against
        if isinstance(adb, dict) and adb.get("source"):
            advisory_db = f"{adb['source']}@{adb.get('built') or '?'}"[:255]
    ts = utc_iso(result.timestamp)
    cset, fset = parts.cset, parts.fset
    scan_row = {
        "id": sid,
        "month": month_of(ts),
        "kind": kind,
        "subject": subject_of(result)[:512],
        "reference": t.reference,
        "name": t.name,
        "digest": t.manifest_digest or t.image_id,
        "hostname": t.name if kind == "host" else None,
        "platform": t.platform,
        "labels": dict(sorted(t.labels.items())),
        "ts": ts,
        "ingested_at": ingested_at or now_iso(),
        "tool_name": result.tool.name,
        "tool_version": result.tool.version,
        "advisory_db": advisory_db,
        "components": len(result.components),
        "stack_text": result.stack_text() or None,
        "cset": cset,
        "fset": fset,
        "ifset": None,
        "pset": "",
        "env": parts.env,
        "stamp": parts.stamp,
    }
    comp_rows: list[dict[str, Any]] = []
    prod_rows: list[dict[str, Any]] = []
    dev_rows: list[dict[str, Any]] = []
    # kernel module name -> version, for the devices' driver column
    modules = {
        (c.properties.get("kernel-module") or c.name).replace("-", "_"): c.version
        for c in result.components if c.type == ComponentType.DEVICE_DRIVER
    }
    # the user-space driver (libcuda, the amdgpu stack) where a device names no kernel
    # module with a version: the host's page shows it, so the overview's driver panel must
    userland = _userland_driver(result)
    for i, c in enumerate(result.components if component_rows else ()):
        # the rows keep the property view of the product (stack, product, ...) as SBOMs do
        p = {**c.properties, **product_properties(c)}
        methods = sorted({e.method for e in c.evidence})
        paths = [e.path for e in c.evidence if e.path]
        targets = "; ".join(f"{k}={p[k]}" for k in GPU_TARGET_KEYS if p.get(k))
        comp_rows.append({
            "set_id": cset,
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
            prod_rows.append({"set_id": cset, "comp_idx": i, "n": n, "stack": stack,
                              "product": product, "version": version})
        if c.type == ComponentType.DEVICE:
            kdrv = p.get("driver")
            dver = modules.get((kdrv or "").replace("-", "_"))
            if dver is None:
                # the vendor's kernel module, else its user-space driver (libcuda)
                vendor = str(p.get("vendor") or "").lower()
                vendor = {"amd": "amdgpu"}.get(vendor, vendor)
                if kdrv is None and modules.get(vendor):
                    kdrv, dver = vendor, modules[vendor]
                elif vendor in userland:
                    kdrv, dver = kdrv or userland[vendor][0], userland[vendor][1]
            dev_rows.append({
                "set_id": cset,
                "idx": len(dev_rows),
                "ref": c.bom_ref or None,
                "model": c.name,
                "vendor": p.get("vendor"),
                "pci_address": p.get("pci:address"),
                "compute_capability": p.get("cuda:compute-capability") or p.get("amd:gfx-target")
                or p.get("hip:arch") or p.get("intel:architecture"),
                "kernel_driver": kdrv,
                "driver_version": dver,
                "uuid": p.get("nvidia:uuid") or p.get("uuid"),
                "properties": dict(p),
            })
    pci_by_ref = {d["ref"]: d["pci_address"] for d in dev_rows if d["ref"]}
    probe_rows = [{
        "idx": i,
        "backend": pr.backend,
        "device_id": pr.device_id,
        "device": pr.device,
        "device_ref": pr.device_ref,
        "pci_address": pr.facts.get("pci-bus-id") or pci_by_ref.get(pr.device_ref or ""),
        "outcome": pr.outcome,
        "reason": pr.reason,
        "error_name": pr.error_name,
    } for i, pr in enumerate(result.probes)]
    pset = set_id_of_probes(probe_rows)
    for r in probe_rows:
        r["set_id"] = pset
    scan_row["pset"] = pset
    out = {"scans": [scan_row], "components": comp_rows, "products": prod_rows,
           "devices": dev_rows, "probes": probe_rows,
           "envelopes": [{"id": parts.env, "data": compress(parts.envelope)}]}
    out.update(finding_set_rows(result.findings, fset))
    return out


def finding_set_rows(found: list[Any], fset: str) -> dict[str, list[dict[str, Any]]]:
    """The rows of a finding set: findings, counts per severity, affected advisories."""
    finding_rows = [{
        "set_id": fset,
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
    } for i, f in enumerate(found)]
    # per-set counts read by the overview and /metrics (a set never changes: stored once)
    severities: dict[str, int] = {}
    for fd in found:
        severities[fd.severity] = severities.get(fd.severity, 0) + 1
    count_rows = [{"set_id": fset, "severity": k, "n": n} for k, n in
                  sorted(severities.items(), key=lambda kv: str(kv[0]))]
    affected_rows = [{"set_id": fset, "advisory": a} for a in sorted(
        {fd.advisory.advisory for fd in found
         if fd.advisory and fd.advisory.status == "affected"
         and fd.advisory.advisory is not None})]
    return {"findings": finding_rows, "finding_counts": count_rows,
            "affected_advisories": affected_rows}
