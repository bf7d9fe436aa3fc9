"""VEX documents of a scan's advisory findings: OpenVEX 0.2.0 and CycloneDX VEX (1.6 JSON).

Every advisory finding becomes a statement about its component (by purl, else bom-ref):

- ``not-affected`` (gpusbom's own analysis, auto-VEX, or a VEX statement fed to the scan):
  OpenVEX ``not_affected`` with its justification and an impact statement naming the
  evidence; CycloneDX ``analysis.state: not_affected`` with the mapped justification;
- ``affected``: OpenVEX ``affected`` with an action statement (the fix); in CycloneDX no
  analysis (a version match is not an analysis), the component's status ``affected``;
- ``review`` / ``unsupported-branch``: OpenVEX ``under_investigation``; CycloneDX
  ``in_triage``.

Fed back with ``gpusbom scan --vex FILE`` (or Trivy ``--vex``, grype ``--vex``,
Dependency-Track), exactly the ``not_affected`` statements suppress findings.
"""

from __future__ import annotations

import json
from typing import Any, TextIO

from .. import __version__
from ..model import Component, Finding, ScanResult
from ._common import document_uuid, parse_timestamp

_OPENVEX = ("component_not_present", "vulnerable_code_not_present",
            "vulnerable_code_not_in_execute_path",
            "vulnerable_code_cannot_be_controlled_by_adversary",
            "inline_mitigations_already_exist")
_STATUS = {"not-affected": "not_affected", "affected": "affected",
           "review": "under_investigation", "unsupported-branch": "under_investigation"}
_CDX_TYPES = {"application", "framework", "library", "container", "platform",
              "operating-system", "device", "device-driver", "firmware", "file"}


def _findings(result: ScanResult) -> list[tuple[Finding, Component]]:
    comps = {c.bom_ref: c for c in result.components}
    out = []
    for f in result.findings:
        if f.kind != "advisory" or f.advisory is None:
            continue
        for r in f.components:
            if r in comps:
                out.append((f, comps[r]))
    return out


def _token(justification: str | None) -> tuple[str | None, str]:
    """``TOKEN: detail`` -> (OpenVEX justification or None, the whole text)."""
    text = justification or ""
    token = text.partition(": ")[0].split(" (VEX ", 1)[0].strip()
    return (token if token in _OPENVEX else None), text


def _stamp(result: ScanResult) -> str:
    return parse_timestamp(result.timestamp).isoformat().replace("+00:00", "Z")


def openvex(result: ScanResult) -> dict[str, Any]:
    statements: list[dict[str, Any]] = []
    seen: set[str] = set()
    for f, c in _findings(result):
        a = f.advisory
        assert a is not None  # noqa: S101 - _findings yields advisory findings only
        product: dict[str, Any] = {"@id": c.purl or c.bom_ref}
        if c.purl:
            product["identifiers"] = {"purl": c.purl}
        st: dict[str, Any] = {
            # aliases: the CVE's other ids only (never the advisory id: a statement naming
            # NVIDIA-5747 would speak for every CVE of that bulletin)
            "vulnerability": {"name": a.vulnerability,
                              **({"aliases": sorted(set(a.aliases) - {a.vulnerability})}
                                 if set(a.aliases) - {a.vulnerability} else {})},
            "products": [product],
            "status": _STATUS.get(a.status, "under_investigation"),
        }
        if a.status == "not-affected":
            token, text = _token(a.justification)
            if token:
                st["justification"] = token
            st["impact_statement"] = text or a.reason or "not affected"
        elif a.status == "affected":
            st["action_statement"] = (f"upgrade {a.product} to {a.fixed_version}"
                                      if a.fixed_version else
                                      f"no fixed version of {a.product} for this line; see "
                                      + (a.urls[0] if a.urls else a.advisory))
        else:
            st["status_notes"] = a.reason or a.status
        key = json.dumps(st, sort_keys=True)
        if key not in seen:
            seen.add(key)
            statements.append(st)
    return {
        "@context": "https://openvex.dev/ns/v0.2.0",
        "@id": f"urn:uuid:{document_uuid(result, 'openvex')}",
        "author": "gpusbom",
        "role": "automated analysis",
        "timestamp": _stamp(result),
        "version": 1,
        "tooling": f"gpusbom {__version__}",
        "statements": statements,
    }


def cyclonedx_vex(result: ScanResult) -> dict[str, Any]:
    from ..advisories.vex import cyclonedx_justification

    groups: dict[tuple[str, str], list[tuple[Finding, Component]]] = {}
    for f, c in _findings(result):
        assert f.advisory is not None  # noqa: S101 - _findings yields advisory findings only
        groups.setdefault((f.advisory.vulnerability, f.advisory.status), []).append((f, c))
    vulns = []
    used: dict[str, Component] = {}
    for (vid, status), pairs in sorted(groups.items()):
        lead = pairs[0][0].advisory
        assert lead is not None  # noqa: S101 - _findings yields advisory findings only
        v: dict[str, Any] = {"bom-ref": f"vex:{vid}:{status}", "id": vid,
                             "source": {"name": lead.advisory,
                                        **({"url": lead.urls[0]} if lead.urls else {})}}
        if status == "not-affected":
            code, detail = cyclonedx_justification(lead.justification or "")
            v["analysis"] = {"state": "not_affected", "detail": detail or lead.reason or ""}
            if code:
                v["analysis"]["justification"] = code
        elif status != "affected":
            v["analysis"] = {"state": "in_triage", "detail": lead.reason or status}
        cstat = {"not-affected": "unaffected", "affected": "affected"}.get(status, "unknown")
        affects = []
        for f, c in sorted(pairs, key=lambda p: p[1].bom_ref):
            used[c.bom_ref] = c
            ver = f.advisory.installed_version if f.advisory else None
            aff: dict[str, Any] = {"ref": c.bom_ref}
            if ver:
                aff["versions"] = [{"version": ver, "status": cstat}]
            if aff not in affects:
                affects.append(aff)
        v["affects"] = affects
        vulns.append(v)
    components = []
    for ref, c in sorted(used.items()):
        comp: dict[str, Any] = {"type": c.type.value if c.type.value in _CDX_TYPES else "library",
                                "bom-ref": ref, "name": c.name}
        if c.version:
            comp["version"] = c.version
        if c.purl:
            comp["purl"] = c.purl
        components.append(comp)
    return {
        "bomFormat": "CycloneDX",
        "specVersion": "1.6",
        "serialNumber": f"urn:uuid:{document_uuid(result, 'cyclonedx-vex')}",
        "version": 1,
        "metadata": {"timestamp": _stamp(result),
                     "tools": {"components": [{"type": "application", "name": "gpusbom",
                                               "version": __version__}]}},
        "components": components,
        "vulnerabilities": vulns,
    }


def write(result: ScanResult, out: TextIO, kind: str) -> None:
    doc = openvex(result) if kind == "openvex" else cyclonedx_vex(result)
    out.write(json.dumps(doc, indent=2, sort_keys=True))
    out.write("\n")
