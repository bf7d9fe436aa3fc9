"""CycloneDX (JSON, or XML turned into the JSON shape by ``_cdxxml``) -> ScanResult."""

from __future__ import annotations

import dataclasses
from typing import Any

from ..devicecode import VENDOR_OF_PREFIX, DeviceCode
from ..errors import InputError
from ..model import Component, Evidence, EvidenceMethod, Finding, ScanResult, Unknown
from ._build import (
    IMAGE_PURL_TYPES,
    Parts,
    component_type,
    finish,
    foreign_component,
    is_package_purl,
    purl_parts,
    sbom_target,
)
from ._own import (
    apply_document_pair,
    apply_target_pairs,
    parse_evidence,
    probes_from,
    unprefixed,
)
from ._read import display_name

_MAX_DEPTH = 64
#: per-evidence properties the CycloneDX writer adds (evidence goes back into Evidence)
_EVIDENCE_KEYS = {"collector", "evidence:method", "layer", "path", "evidence:detail", "sha256",
                  "declared-digest"}
#: methods whose evidence usually has no path (image config, NVML)
_PATHLESS = ("env", "label", "device")
_RESERVED = _EVIDENCE_KEYS | {"ecosystem", "contained-by", "purl:unparsable", "cpe:invalid",
                              "device-code:union-of-files"}  # the writer derives it


class _Bad(Exception):
    """Wrong types in the document: becomes one InputError line."""


def _str(v: Any, where: str, *, optional: bool = True) -> str | None:
    if v is None and optional:
        return None
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return str(v)
    if not isinstance(v, str):
        raise _Bad(f"{where} is a {type(v).__name__}, not a string")
    return v


def _list(v: Any, where: str) -> list[Any]:
    if v is None:
        return []
    if not isinstance(v, list):
        raise _Bad(f"{where} is a {type(v).__name__}, not a list")
    return v


def _dict(v: Any, where: str) -> dict[str, Any]:
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise _Bad(f"{where} is a {type(v).__name__}, not an object")
    return v


def _props(c: dict[str, Any], where: str) -> list[tuple[str, str]]:
    out = []
    for i, p in enumerate(_list(c.get("properties"), f"{where}.properties")):
        p = _dict(p, f"{where}.properties[{i}]")
        name = _str(p.get("name"), f"{where}.properties[{i}].name")
        if name is None:
            continue
        out.append((name, _str(p.get("value"), f"{where}.properties[{i}].value") or ""))
    return out


def _supplier(c: dict[str, Any], where: str) -> str | None:
    sup = c.get("supplier")
    if sup is None:
        for k in ("publisher", "author"):
            if isinstance(c.get(k), str) and c[k]:
                return str(c[k])
        return None
    sup = _dict(sup, f"{where}.supplier")
    name = _str(sup.get("name"), f"{where}.supplier.name")
    emails = [x.get("email") for x in _list(sup.get("contact"), f"{where}.supplier.contact")
              if isinstance(x, dict) and isinstance(x.get("email"), str)]
    if name and emails:
        return f"{name} <{emails[0]}>"
    return name


def _licenses(c: dict[str, Any], where: str) -> list[str]:
    out = []
    for i, x in enumerate(_list(c.get("licenses"), f"{where}.licenses")):
        x = _dict(x, f"{where}.licenses[{i}]")
        if isinstance(x.get("expression"), str):
            out.append(x["expression"])
            continue
        lic = _dict(x.get("license"), f"{where}.licenses[{i}].license")
        v = lic.get("id") or lic.get("name")
        if isinstance(v, str) and v:
            out.append(v)
    return out


def _occurrences(c: dict[str, Any], where: str) -> list[tuple[str, str | None]]:
    ev = _dict(c.get("evidence"), f"{where}.evidence")
    out = []
    for i, o in enumerate(_list(ev.get("occurrences"), f"{where}.evidence.occurrences")):
        o = _dict(o, f"{where}.evidence.occurrences[{i}]")
        loc = _str(o.get("location"), f"{where}.evidence.occurrences[{i}].location")
        if loc:
            out.append((loc, _str(o.get("additionalContext"), f"{where}.occurrence context")))
    return out


def _own_evidence(props: list[tuple[str, str]], occ: list[tuple[str, str | None]]) -> list[Evidence]:
    """gpusbom's evidence back from occurrences (location + ``collector=..; method=..``
    context, CycloneDX 1.6) and the per-evidence properties (for evidence without a path,
    and for 1.5 occurrences, which carry no context)."""
    vals: dict[str, list[str]] = {}
    for name, value in props:
        key = unprefixed(name)
        if key in _EVIDENCE_KEYS:
            vals.setdefault(key, []).append(value)
    collectors = vals.get("collector", [])
    methods = vals.get("evidence:method", [])
    layers = vals.get("layer", [])
    out: list[Evidence] = []
    for loc, ctx in occ:
        ev = parse_evidence(ctx, loc) if ctx else None
        if ev is None:
            ev = Evidence(
                collector=collectors[0] if collectors else "sbom",
                method=_pick([m for m in methods if m not in ("env", "label", "device")] or methods),
                path=loc,
                layer=layers[0] if len(layers) == 1 else None,
            )
        out.append(ev)
    used_details = {e.detail for e in out if e.detail}
    used_methods = {e.method for e in out}
    if not occ:  # no occurrences at all: paths only in properties
        for p in sorted(set(vals.get("path", []))):
            out.append(Evidence(collectors[0] if collectors else "sbom", _pick(methods), p,
                                layers[0] if len(layers) == 1 else None))
        used_methods = {e.method for e in out}
    rest_details = [d for d in vals.get("evidence:detail", []) if d not in used_details]
    rest_methods = [m for m in methods if m not in used_methods]
    if not rest_methods:  # pathless evidence of a method that also has a path
        rest_methods = [m for m in methods if m in _PATHLESS] or methods
    collector = collectors[0] if len(collectors) == 1 else _pick(
        [c for c in collectors if c not in {e.collector for e in out}] or collectors)
    for d in rest_details:
        out.append(Evidence(collector, _pick(rest_methods), None, None, d))
    if not out and methods:
        out.extend(Evidence(collector, m, None) for m in rest_methods)
    # gpusbom:sha256 = PATH=HEX (the digest of a GPU binary; 1.5 occurrences carry no context)
    digests = dict(v.rsplit("=", 1) for v in vals.get("sha256", []) if "=" in v)
    if digests:
        out = [dataclasses.replace(e, sha256=digests[e.path])
               if e.sha256 is None and e.path in digests and e.collector == "gpu-binaries" else e
               for e in out]
    # gpusbom:declared-digest = PATH=ALG:HEX (a package manifest's digest of that file)
    declared = dict(v.rsplit("=", 1) for v in vals.get("declared-digest", []) if "=" in v)
    if declared:
        out = [dataclasses.replace(e, declared_digest=declared[e.path])
               if e.declared_digest is None and e.path in declared else e for e in out]
    return out


def _pick(values: list[str]) -> str:
    return min(values) if values else EvidenceMethod.SBOM.value


def _component(c: dict[str, Any], where: str, sbom: str, parts: Parts) -> Component:
    name = _str(c.get("name"), f"{where}.name", optional=False) or ""
    version = _str(c.get("version"), f"{where}.version")
    group = _str(c.get("group"), f"{where}.group")
    purl = _str(c.get("purl"), f"{where}.purl")
    cpe = _str(c.get("cpe"), f"{where}.cpe")
    ref = _str(c.get("bom-ref"), f"{where}.bom-ref")
    props = _props(c, where)
    occ = _occurrences(c, where)
    ctype = component_type(c.get("type"))
    own = any(unprefixed(n) == "collector" for n, _ in props)
    if own:
        gp: dict[str, str] = {}
        ecosystem = None
        probe_pairs: list[tuple[str, str]] = []
        for n, v in props:
            key = unprefixed(n)
            if key is None:
                gp[f"sbom:{n}"] = v
            elif key == "ecosystem":
                ecosystem = v
            elif key == "purl:unparsable":
                purl = v
            elif key == "cpe:invalid":
                cpe = v
            elif key == "contained-by":
                parts.relationships.append((v, "contains", ref or ""))
            elif key.startswith("probe:"):
                probe_pairs.append((key, v))
            elif key not in _RESERVED:
                gp[key] = v
        comp = Component(
            name=name, version=version, type=ctype, purl=purl, cpe=cpe,
            supplier=_supplier(c, where), description=_str(c.get("description"), where),
            licenses=_licenses(c, where), properties=gp,
            evidence=_own_evidence(props, occ), bom_ref=ref or "", ecosystem=ecosystem,
        )
        parts.probes.extend(probes_from(probe_pairs, ref))
        return comp
    fprops = {f"sbom:{n}": v for n, v in props}
    paths = [loc for loc, _ in occ]
    for n, v in props:  # Syft: syft:location:0:path; Trivy: aquasecurity:trivy:FilePath
        if (n.startswith("syft:location:") and n.endswith(":path")) or n in (
                "aquasecurity:trivy:FilePath", "SrcFile"):  # SrcFile: cdxgen
            paths.append(v)
        if n == "aquasecurity:trivy:SrcName":
            fprops.setdefault("source-package", v)
        if n == "aquasecurity:trivy:SrcVersion":
            fprops.setdefault("source-version", v)
    p = purl_parts(purl)
    full = name if not group or (p is not None and p.type != "golang") else f"{group}/{name}"
    return foreign_component(
        sbom=sbom, collector="sbom-cyclonedx", name=full, version=version, ctype=ctype,
        purl=purl, cpe=cpe, supplier=_supplier(c, where),
        description=_str(c.get("description"), where), licenses=_licenses(c, where),
        properties=fprops, paths=[x for x in paths if x.startswith("/")], ref=ref,
    )


def _device_code(c: dict[str, Any], where: str) -> DeviceCode | None:
    """A nested file component gpusbom wrote for one file's device code (writers/
    _devicecode.py: ``gpusbom:device-code:kind``), back into a ``DeviceCode``; else None."""
    props = {unprefixed(n): v for n, v in _props(c, where)}
    kind = props.get("device-code:kind")
    if not kind or c.get("type") != "file":
        return None
    sha = next((_str(h.get("content"), f"{where}.hashes") for h in _list(c.get("hashes"), where)
                if isinstance(h, dict) and h.get("alg") == "SHA-256"), None)
    return DeviceCode(
        path=props.get("path") or _str(c.get("name"), where) or "", kind=kind,
        format=props.get("device-code:format"), layer=props.get("layer"), sha256=sha,
        collector=props.get("collector") or "gpu-binaries", detail=props.get("evidence:detail"),
        targets={k: v for k, v in props.items() if k and k.split(":", 1)[0] in VENDOR_OF_PREFIX
                 and ":" in k})


def _walk(items: list[Any], where: str, sbom: str, parts: Parts, parent: str | None,
          depth: int) -> None:
    if depth > _MAX_DEPTH:
        raise _Bad(f"{where}: components nested more than {_MAX_DEPTH} levels deep")
    owner = parts.components[-1] if parent and parts.components else None
    for i, raw in enumerate(items):
        w = f"{where}[{i}]"
        c = _dict(raw, w)
        code = _device_code(c, w) if owner is not None else None
        if code is not None and owner is not None:
            # gpusbom's nested file component: the owner's per-file device code
            owner.device_code.append(code)
            continue
        comp = _component(c, w, sbom, parts)
        parts.components.append(comp)
        if parent and comp.bom_ref:
            parts.relationships.append((parent, "contains", comp.bom_ref))
        nested = _list(c.get("components"), f"{w}.components")
        if nested:
            if not comp.bom_ref:
                comp.assign_ref(set())
            _walk(nested, f"{w}.components", sbom, parts, comp.bom_ref, depth + 1)


def _tools(meta: dict[str, Any]) -> list[str]:
    tools = meta.get("tools")
    items: list[Any] = []
    if isinstance(tools, list):
        items = tools
    elif isinstance(tools, dict):
        items = list(tools.get("components") or []) + list(tools.get("services") or [])
    return [str(t["name"]) for t in items if isinstance(t, dict) and isinstance(t.get("name"), str)]


def from_cyclonedx(doc: dict[str, Any], path: str, spec: str) -> ScanResult:
    name = display_name(path)
    try:
        return _convert(doc, path, name)
    except _Bad as exc:
        raise InputError(f"{name}: malformed CycloneDX {spec}: {exc}") from None


def _convert(doc: dict[str, Any], path: str, name: str) -> ScanResult:
    meta = _dict(doc.get("metadata"), "metadata")
    target = sbom_target(path)
    parts = Parts(target=target)
    ts = meta.get("timestamp")
    parts.timestamp = ts if isinstance(ts, str) else None
    root_ref: str | None = None
    subject = meta.get("component")
    if subject is not None:
        subject = _dict(subject, "metadata.component")
        root_ref = _str(subject.get("bom-ref"), "metadata.component.bom-ref")
        sprops = [(unprefixed(n), v) for n, v in _props(subject, "metadata.component")]
        own_target = apply_target_pairs(target, [(k, v) for k, v in sprops if k])
        target.name = _str(subject.get("name"), "metadata.component.name")
        version = _str(subject.get("version"), "metadata.component.version")
        if not own_target:
            if str(subject.get("type")) == "container":
                target.kind = "image"
            if version and version.startswith("sha256:"):
                target.image_id = version
            elif version:
                target.tags.append(version)
            for h in _list(subject.get("hashes"), "metadata.component.hashes"):
                if isinstance(h, dict) and h.get("alg") == "SHA-256" and not target.image_id:
                    target.image_id = f"sha256:{h.get('content')}"
            spurl = _str(subject.get("purl"), "metadata.component.purl")
            sp = purl_parts(spurl)
            if sp is not None and sp.type in IMAGE_PURL_TYPES:
                # an image subject (cdxgen's pkg:container root): the target, not a component
                target.kind = "image"
                target.subject_purl = spurl
            if is_package_purl(spurl):
                # the SBOM describes a package (a Python project, a library): it is also one
                # of the components the advisories apply to
                _walk([subject], "metadata.component", name, parts, None, 0)
                root_ref = None
    gpusbom_made = "gpusbom" in _tools(meta)
    for n, v in _props(meta, "metadata"):
        key = unprefixed(n)
        if key is None or not gpusbom_made:
            continue
        if apply_document_pair(parts, key, v):
            continue
        if key == "relationship" or key.startswith("dangling-relationship:"):
            bits = v.split(" ")
            if len(bits) == 3:
                parts.relationships.append((bits[0], bits[1], bits[2]))
    if gpusbom_made:
        doc_probe_pairs = [(unprefixed(n) or "", v) for n, v in _props(meta, "metadata")]
        parts.probes.extend(probes_from(doc_probe_pairs, None))
    _walk(_list(doc.get("components"), "components"), "components", name, parts, None, 0)
    refs = {c.bom_ref for c in parts.components if c.bom_ref}
    for i, d in enumerate(_list(doc.get("dependencies"), "dependencies")):
        d = _dict(d, f"dependencies[{i}]")
        src = _str(d.get("ref"), f"dependencies[{i}].ref")
        if not src or src == root_ref or src not in refs:
            continue
        for j, t in enumerate(_list(d.get("dependsOn"), f"dependencies[{i}].dependsOn")):
            tgt = _str(t, f"dependencies[{i}].dependsOn[{j}]")
            if tgt and tgt in refs:
                parts.relationships.append((src, "depends-on", tgt))
    parts.relationships = [r for r in parts.relationships if r[2]]
    _check_findings(parts.findings, parts.unknowns)
    return finish(parts)


def _check_findings(findings: list[Finding], unknowns: list[Unknown]) -> None:
    findings.sort(key=lambda f: (f.id, f.components))
    unknowns.sort(key=lambda u: (u.collector, u.path or "", u.reason))
