"""SPDX 2.2 / 2.3 (JSON, tag-value; parsed by spdx-tools) -> ScanResult."""

from __future__ import annotations

import re
from typing import Any

from ..devicecode import VENDOR_OF_PREFIX, DeviceCode
from ..errors import InputError
from ..model import Component, ComponentType, Evidence, ScanResult
from ._build import (
    IMAGE_PURL_TYPES,
    Parts,
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

DOCUMENT_ID = "SPDXRef-DOCUMENT"
_PURPOSES = {
    "APPLICATION": ComponentType.APPLICATION,
    "FRAMEWORK": ComponentType.FRAMEWORK,
    "LIBRARY": ComponentType.LIBRARY,
    "CONTAINER": ComponentType.CONTAINER,
    "OPERATING_SYSTEM": ComponentType.OPERATING_SYSTEM,
    "DEVICE": ComponentType.DEVICE,
    "FIRMWARE": ComponentType.FIRMWARE,
    "FILE": ComponentType.FILE,
}
_ABS_PATH = re.compile(r"(?<![\w.])(/[^\s,;:()\"']+)")


def _parse_error(name: str, exc: Exception) -> InputError:
    msgs = getattr(exc, "get_messages", None)
    text = "; ".join(msgs()) if callable(msgs) else str(exc)
    text = " ".join(text.split())
    if len(text) > 300:
        text = text[:297] + "..."
    return InputError(f"{name}: malformed SPDX: {text}")


_TV_LICENSE_LIST = re.compile(r"^(\s*LicenseListVersion:\s*)(\d+\.\d+)\.\d+\s*$", re.MULTILINE)
_LICENSE_LIST = re.compile(r"^(\d+\.\d+)\.\d+$")


def from_json_dict(doc: dict[str, Any], path: str) -> ScanResult:
    from spdx_tools.spdx.parser.error import SPDXParsingError
    from spdx_tools.spdx.parser.jsonlikedict.json_like_dict_parser import JsonLikeDictParser

    name = display_name(path)
    ci = doc.get("creationInfo")
    if isinstance(ci, dict) and isinstance(ci.get("licenseListVersion"), str):
        # "3.28.0" (sbom4python) where spdx-tools wants "3.28": the field is not used here
        ci["licenseListVersion"] = _LICENSE_LIST.sub(r"\1", ci["licenseListVersion"])
    try:
        document = JsonLikeDictParser().parse(doc)  # type: ignore[no-untyped-call]
    except SPDXParsingError as exc:
        raise _parse_error(name, exc) from None
    except (TypeError, ValueError, AttributeError, KeyError) as exc:
        raise InputError(f"{name}: malformed SPDX JSON: {type(exc).__name__}: {exc}") from None
    return _convert(document, path)


def from_tag_value(text: str, path: str) -> ScanResult:
    from ply.yacc import NullLogger  # type: ignore[import-untyped]
    from spdx_tools.spdx.parser.error import SPDXParsingError
    from spdx_tools.spdx.parser.tagvalue.parser import Parser

    name = display_name(path)
    text = _TV_LICENSE_LIST.sub(r"\1\2", text)  # 3.28.0 -> 3.28, as for JSON
    try:
        # ply builds its LALR tables on first use: quietly (its log goes to stderr, where one
        # error line is all a user must see), and without writing parsetab.py or parser.out
        # into the installed package
        parser = Parser(debug=False, write_tables=False, errorlog=NullLogger())  # type: ignore[no-untyped-call]
        document = parser.parse(text)  # type: ignore[no-untyped-call]
    except SPDXParsingError as exc:
        raise _parse_error(name, exc) from None
    except (TypeError, ValueError, AttributeError, KeyError, IndexError) as exc:
        raise InputError(f"{name}: malformed SPDX tag-value: {type(exc).__name__}: {exc}") from None
    return _convert(document, path)


def _lines(comment: str | None) -> list[tuple[str, str]]:
    """``gpusbom:key=value`` lines of a comment, as (key, value) without the prefix."""
    out = []
    for line in (comment or "").splitlines():
        key = unprefixed(line)
        if key is None:
            continue
        if key.startswith("evidence: "):
            out.append(("evidence", key[len("evidence: "):]))
            continue
        k, sep, v = key.partition("=")
        if sep:
            out.append((k, v))
    return out


def _actor(a: Any) -> str | None:
    nm = getattr(a, "name", None)
    if not isinstance(nm, str):
        return None
    email = getattr(a, "email", None)
    return f"{nm} <{email}>" if email else nm


def _licenses(pkg: Any) -> list[str]:
    v = getattr(pkg, "license_declared", None)
    text = str(v) if v is not None else ""
    if not text or text in ("NOASSERTION", "NONE"):
        return []
    return [text]


def _refs(pkg: Any) -> tuple[str | None, str | None]:
    purl = cpe = None
    for r in getattr(pkg, "external_references", []) or []:
        rtype = str(getattr(r, "reference_type", "")).lower()
        if rtype == "purl" and purl is None:
            purl = r.locator
        elif rtype in ("cpe23type", "cpe22type") and cpe is None:
            cpe = r.locator
    return purl, cpe


def _convert(document: Any, path: str) -> ScanResult:
    name = display_name(path)
    target = sbom_target(path)
    parts = Parts(target=target)
    ci = document.creation_info
    parts.timestamp = ci.created.isoformat().replace("+00:00", "Z") if ci.created else None
    if parts.timestamp and ci.created.tzinfo is None:
        parts.timestamp += "Z"
    creators = [str(getattr(c, "name", "")) for c in ci.creators]
    gpusbom_made = any(c.startswith("gpusbom-") or c == "gpusbom" for c in creators)

    described = [r.related_spdx_element_id for r in document.relationships
                 if r.spdx_element_id == DOCUMENT_ID and r.relationship_type.name == "DESCRIBES"]
    described += [r.spdx_element_id for r in document.relationships
                  if r.related_spdx_element_id == DOCUMENT_ID
                  and r.relationship_type.name == "DESCRIBED_BY"]
    pkg_ids = {p.spdx_id for p in document.packages}
    described_pkgs = [d for d in dict.fromkeys(described) if d in pkg_ids]
    root_id = described_pkgs[0] if len(described_pkgs) == 1 else None

    files = {f.spdx_id: f.name for f in document.files}
    pkg_files: dict[str, list[str]] = {}
    for r in document.relationships:
        t = r.relationship_type.name
        if t == "CONTAINS" and r.related_spdx_element_id in files:
            pkg_files.setdefault(r.spdx_element_id, []).append(files[r.related_spdx_element_id])
        elif t == "CONTAINED_BY" and r.spdx_element_id in files:
            pkg_files.setdefault(str(r.related_spdx_element_id), []).append(files[r.spdx_element_id])

    id_to_ref: dict[str, str] = {}
    owner_of = {str(r.related_spdx_element_id): r.spdx_element_id
                for r in document.relationships if r.relationship_type.name == "CONTAINS"}
    owner_of.update({r.spdx_element_id: str(r.related_spdx_element_id)
                     for r in document.relationships
                     if r.relationship_type.name == "CONTAINED_BY"})
    pending_code: list[tuple[str, DeviceCode]] = []
    for pkg in document.packages:
        code = _device_code(pkg) if pkg.spdx_id in owner_of else None
        if code is not None:  # gpusbom's per-file device code: goes back to its owner
            pending_code.append((owner_of[pkg.spdx_id], code))
            continue
        if pkg.spdx_id == root_id:
            lines = _lines(pkg.comment)
            own_target = apply_target_pairs(target, lines)
            target.name = pkg.name
            version = pkg.version
            if not own_target:
                purpose = getattr(pkg.primary_package_purpose, "name", "")
                if purpose == "CONTAINER":
                    target.kind = "image"
                if version and version.startswith("sha256:"):
                    target.image_id = version
                elif version:
                    target.tags.append(version)
            purl, _ = _refs(pkg)
            sp = purl_parts(purl)
            if not own_target and sp is not None and sp.type in IMAGE_PURL_TYPES:
                target.kind = "image"
                target.subject_purl = purl
            if own_target or not is_package_purl(purl):
                continue  # the subject (an image, a host) is the target, not a component
        comp = _package(pkg, name, pkg_files.get(pkg.spdx_id, []))
        id_to_ref[pkg.spdx_id] = comp.bom_ref
        parts.components.append(comp)

    by_ref = {c.bom_ref: c for c in parts.components}
    for owner_id, code in pending_code:
        owner = by_ref.get(id_to_ref.get(owner_id, ""))
        if owner is not None:
            owner.device_code.append(code)
    if gpusbom_made:
        for k, v in _lines(ci.document_comment):
            if apply_document_pair(parts, k, v):
                continue
            if k == "unmapped-relationship":
                bits = v.split(" ")
                if len(bits) == 3:
                    parts.relationships.append((bits[0], bits[1], bits[2]))
    for a in document.annotations:
        pairs = [(k, v) for k, v in _lines(a.annotation_comment)]
        if not any(k.startswith("probe:") for k, _ in pairs):
            continue
        ref = id_to_ref.get(a.spdx_id)
        parts.probes.extend(probes_from(pairs, ref))

    for r in document.relationships:
        t = r.relationship_type.name
        a, b = r.spdx_element_id, str(r.related_spdx_element_id)
        if t == "DEPENDENCY_OF":
            a, b, t = b, a, "DEPENDS_ON"
        elif t == "CONTAINED_BY":
            a, b, t = b, a, "CONTAINS"
        kind = {"DEPENDS_ON": "depends-on", "CONTAINS": "contains"}.get(t)
        if kind and a in id_to_ref and b in id_to_ref:
            parts.relationships.append((id_to_ref[a], kind, id_to_ref[b]))
    parts.findings.sort(key=lambda f: (f.id, f.components))
    parts.unknowns.sort(key=lambda u: (u.collector, u.path or "", u.reason))
    return finish(parts)


def _device_code(pkg: Any) -> DeviceCode | None:
    """A package of purpose FILE that gpusbom wrote for one file's device code (writers/
    _spdx_impl.py ``_file_packages``), back into a ``DeviceCode``; else None."""
    if getattr(pkg.primary_package_purpose, "name", "") != "FILE":
        return None
    props = dict(_lines(pkg.comment))
    kind = props.get("device-code:kind")
    if not kind:
        return None
    sha = next((c.value for c in pkg.checksums
                if getattr(c.algorithm, "name", "") == "SHA256"), None)
    return DeviceCode(
        path=props.get("path") or pkg.file_name or pkg.name or "", kind=kind,
        format=props.get("device-code:format"), layer=props.get("layer"), sha256=sha,
        collector=props.get("collector") or "gpu-binaries", detail=props.get("evidence:detail"),
        targets={k: v for k, v in props.items() if ":" in k
                 and k.split(":", 1)[0] in VENDOR_OF_PREFIX})


def _package(pkg: Any, sbom: str, files: list[str]) -> Component:
    purl, cpe = _refs(pkg)
    lines = _lines(pkg.comment)
    supplier = _actor(pkg.supplier)
    version = pkg.version
    if any(k == "bom-ref" for k, _ in lines):
        props: dict[str, str] = {}
        evidence: list[Evidence] = []
        ref = ""
        ctype = _PURPOSES.get(getattr(pkg.primary_package_purpose, "name", ""),
                              ComponentType.LIBRARY)
        ecosystem = None
        for k, v in lines:
            if k == "bom-ref":
                ref = v
            elif k == "type":
                ctype = ComponentType(v) if v in {t.value for t in ComponentType} else ctype
            elif k == "ecosystem":
                ecosystem = v
            elif k == "evidence":
                ev = parse_evidence(v)
                if ev is not None:
                    evidence.append(ev)
            elif k in ("invalid-purl",):
                purl = v
            elif k in ("invalid-cpe23Type", "invalid-cpe22Type"):
                cpe = v
            elif k in ("advisory", "device-code:union-of-files"):
                continue  # findings are matched again; the writer derives the union count
            else:
                props[k] = v
        comp = Component(
            name=pkg.name, version=version, type=ctype, purl=purl, cpe=cpe, supplier=supplier,
            description=pkg.description, licenses=_licenses(pkg), properties=props,
            evidence=evidence, bom_ref=ref, ecosystem=ecosystem,
        )
        return comp
    paths = list(files)
    if pkg.source_info:  # Syft: "acquired package info from DPKG DB: /var/lib/dpkg/status, ..."
        paths += _ABS_PATH.findall(pkg.source_info)
    ctype = _PURPOSES.get(getattr(pkg.primary_package_purpose, "name", ""), ComponentType.LIBRARY)
    return foreign_component(
        sbom=sbom, collector="sbom-spdx", name=pkg.name, version=version, ctype=ctype,
        purl=purl, cpe=cpe, supplier=supplier, description=pkg.description,
        licenses=_licenses(pkg), properties={}, paths=paths, ref=pkg.spdx_id,
    )
