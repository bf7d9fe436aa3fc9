"""SPDX 3.0.1 JSON-LD, built with spdx-python-model (bindings generated from the 3.0.1 model).

The content is the SPDX 2.3 writer's (``_spdx_impl``), element for element: the same
document name, namespace, package ids, names, versions, suppliers, purls and CPEs
(``externalIdentifier``), declared licences (``hasDeclaredLicense`` to a
``simplelicensing_LicenseExpression``, ``LicenseRef-`` ids mapped to their
``simplelicensing_SimpleLicensingText``), a one-file component's SHA-256
(``verifiedUsing``), relationships, advisory references, probe annotations and the same
``gpusbom:`` comment lines. Where 2.3 and 3.0 differ:

- ``DESCRIBES`` is the ``rootElement`` of the document and of its ``software_Sbom``;
- one ``Relationship`` per (from, type) lists every ``to`` (3.0 allows several);
- the NOASSERTION fields of 2.3 (download location, concluded licence, copyright) are
  left out: in 3.0 an absent property means the same;
- a device driver gets the ``deviceDriver`` purpose 2.3 lacks.

spdx-tools' ``spdx3`` module was not used: version 0.8 writes a pre-3.0 draft (its
``@context`` names ``https://spdx.org/rdf/Core/`` and it nests ``@graph`` under it), which
the official 3.0.1 JSON schema rejects, and it drops declared licences.
"""

from __future__ import annotations

import io
import json
from collections import defaultdict
from typing import Any, TextIO

from spdx_python_model import v3_0_1 as s3  # type: ignore[attr-defined,unused-ignore]
from spdx_tools.spdx.model.spdx_no_assertion import SpdxNoAssertion  # type: ignore[import-untyped,unused-ignore]

from ..identity import target_identity
from ..model import Component, ComponentType, Finding, ScanResult
from ._common import (
    advisory_db_pairs,
    document_uuid,
    finding_text,
    one_line,
    own_file_sha256,
    parse_timestamp,
    prop,
    sorted_unknowns,
    split_name_email,
    stack_properties,
    target_purl,
    unknown_text,
)
from ._devicecode import file_pairs, nested_files
from ._probes import document_probe_pairs, keyed, probe_pairs
from ._spdx_impl import (
    NAMESPACE_BASE,
    _component_comment,
    _external_refs,
    _Ids,
    _parse_license,
    _root_package,
    _sanitise,
)

SPEC_VERSION = "3.0.1"
DATA_LICENSE = "CC0-1.0"

_P = s3.software_SoftwarePurpose
PURPOSES: dict[ComponentType, str] = {
    ComponentType.APPLICATION: _P.application,
    ComponentType.LIBRARY: _P.library,
    ComponentType.FRAMEWORK: _P.framework,
    ComponentType.OPERATING_SYSTEM: _P.operatingSystem,
    ComponentType.DEVICE: _P.device,
    ComponentType.DEVICE_DRIVER: _P.deviceDriver,
    ComponentType.FIRMWARE: _P.firmware,
    ComponentType.PLATFORM: _P.framework,
    ComponentType.FILE: _P.file,
    ComponentType.CONTAINER: _P.container,
}
_TARGET_PURPOSES = {"image": _P.container, "host": _P.operatingSystem, "directory": _P.file}
_REL = s3.RelationshipType


class _Doc:
    """The elements of one document, with ids under the document's namespace."""

    def __init__(self, namespace: str, creation: Any) -> None:
        self.namespace = namespace
        self.creation = creation
        self.elements: list[Any] = []
        self._agents: dict[str, Any] = {}
        self._licenses: dict[str, Any] = {}

    def iri(self, local: str) -> str:
        return f"{self.namespace}#{local}"

    def add(self, element: Any) -> Any:
        self.elements.append(element)
        return element

    def organization(self, value: str) -> Any:
        """One ``Organization`` per distinct supplier (the 2.3 writer's ``Organization:``)."""
        name, email = split_name_email(one_line(value))
        key = f"{name}\0{email or ''}"
        if key not in self._agents:
            org = s3.Organization(
                spdxId=self.iri(f"SPDXRef-Organization-{_sanitise(name, max_len=80)}-{len(self._agents) + 1}"),
                creationInfo=self.creation, name=name)
            if email:
                org.externalIdentifier.append(s3.ExternalIdentifier(
                    externalIdentifierType=s3.ExternalIdentifierType.email, identifier=email))
            self._agents[key] = self.add(org)
        return self._agents[key]

    def license(self, expression: str, custom: dict[str, str]) -> Any:
        """One ``simplelicensing_LicenseExpression`` per distinct expression."""
        if expression not in self._licenses:
            lic = s3.simplelicensing_LicenseExpression(
                spdxId=self.iri(f"SPDXRef-License-{len(self._licenses) + 1}"),
                creationInfo=self.creation, simplelicensing_licenseExpression=expression)
            for ref, uri in sorted(custom.items()):
                if ref in expression:
                    lic.simplelicensing_customIdToUri.append(s3.DictionaryEntry(key=ref, value=uri))
            self._licenses[expression] = self.add(lic)
        return self._licenses[expression]


def _identifiers(c: Component, sid: str, notes: list[str]) -> list[Any]:
    """purl and CPE as external identifiers: the ones the 2.3 writer keeps (it checks them
    with spdx-tools and notes a malformed one as ``gpusbom:invalid-...``)."""
    types = {"purl": s3.ExternalIdentifierType.packageUrl,
             "cpe23Type": s3.ExternalIdentifierType.cpe23,
             "cpe22Type": s3.ExternalIdentifierType.cpe22}
    return [s3.ExternalIdentifier(externalIdentifierType=types[r.reference_type],
                                  identifier=r.locator)
            for r in _external_refs(c, sid, notes)]


def _package(doc: _Doc, c: Component, sid: str) -> Any:
    notes: list[str] = []
    identifiers = _identifiers(c, sid, notes)
    comment = _component_comment(c, notes)
    if c.licenses and isinstance(_parse_license(c.licenses)[0], SpdxNoAssertion):
        # 2.3's licence comment; one with an expression is on the hasDeclaredLicense
        # relationship instead
        comment = (comment + "\n" if comment else "") + _license_comment(c)
    pkg = s3.software_Package(
        spdxId=doc.iri(sid), creationInfo=doc.creation, name=one_line(c.name),
        software_primaryPurpose=PURPOSES.get(c.type, _P.other))
    if c.version:
        pkg.software_packageVersion = one_line(c.version)
    purls = [i.identifier for i in identifiers
             if i.externalIdentifierType == s3.ExternalIdentifierType.packageUrl]
    if purls:
        pkg.software_packageUrl = purls[0]
    if c.supplier:
        pkg.suppliedBy = doc.organization(c.supplier)
    if c.description:
        pkg.description = c.description
    if comment:
        pkg.comment = comment
    pkg.externalIdentifier.extend(identifiers)
    own = own_file_sha256(c)
    if own:  # the component is this one file (see own_file_sha256)
        pkg.verifiedUsing.append(s3.Hash(algorithm=s3.HashAlgorithm.sha256, hashValue=own[1],
                                         comment=f"SHA-256 of {own[0]}"))
    return pkg


def _license_comment(c: Component) -> str:
    """The declared names as found (the 2.3 writer's licence comment)."""
    return "declared: " + " | ".join(c.licenses)


def _root(doc: _Doc, result: ScanResult, sid: str) -> Any:
    # the 2.3 root package's comment lines (target, identity, layers, labels, env, os)
    comment = _root_package(result, "SPDXRef-x").comment
    ident = target_identity(result.target)
    pkg = s3.software_Package(
        spdxId=doc.iri(sid), creationInfo=doc.creation, name=ident.name,
        software_primaryPurpose=_TARGET_PURPOSES.get(result.target.kind, _P.other))
    if ident.version:
        pkg.software_packageVersion = ident.version
    if comment:
        pkg.comment = comment
    purl = target_purl(result)
    if purl is not None:
        pkg.software_packageUrl = purl.to_string()
        pkg.externalIdentifier.append(s3.ExternalIdentifier(
            externalIdentifierType=s3.ExternalIdentifierType.packageUrl, identifier=purl.to_string()))
    return pkg


def _advisories(result: ScanResult, packages: dict[str, Any]) -> None:
    """As in 2.3: the advisory URL as a ``securityAdvisory`` reference, a comment line."""
    by_ref: dict[str, list[Finding]] = defaultdict(list)
    for f in result.findings:
        if f.kind == "advisory" and f.advisory is not None:
            for r in f.components:
                by_ref[r].append(f)
    for ref, pkg in packages.items():
        lines: list[str] = []
        seen: set[str] = set()
        for f in by_ref.get(ref, []):
            a = f.advisory
            assert a is not None  # noqa: S101 - type narrowing of an invariant
            lines.append(
                f"{prop('advisory')}={a.vulnerability} ({a.advisory}) {a.status}; "
                f"severity {f.severity}; fixed {a.fixed_version or '-'}"
                + (f"; justification {a.justification}" if a.justification else ""))
            for u in a.urls[:1]:
                if u not in seen:
                    seen.add(u)
                    pkg.externalRef.append(s3.ExternalRef(
                        externalRefType=s3.ExternalRefType.securityAdvisory, locator=[u]))
        if lines:
            pkg.comment = "\n".join([pkg.comment or "", *lines]).strip("\n")


def _document_comment(result: ScanResult) -> str:
    """The 2.3 writer's document comment, line for line."""
    notes = [f"{prop('complete')}={'true' if result.complete else 'false'}"]
    notes += [f"{prop(f'collector:{cid}:version')}={v}" for cid, v in sorted(result.tool.collectors.items())]
    notes += [f"{n}={v}" for n, v in stack_properties(result)]
    notes += [f"{prop(f'unknown:{i}')}={unknown_text(u.collector, u.reason, u.path)}"
              for i, u in enumerate(sorted_unknowns(result), 1)]
    notes += [f"{n}={v}" for n, v in advisory_db_pairs(result)]
    notes += [f"{prop(f'finding:{i}')}={finding_text(f)}"
              for i, f in enumerate((f for f in result.findings if f.kind != "advisory"), 1)]
    for i, f in enumerate((f for f in result.findings if f.kind == "advisory" and f.advisory), 1):
        a = f.advisory
        assert a is not None  # noqa: S101 - type narrowing of an invariant
        notes.append(
            f"{prop(f'advisory:{i}')}={a.vulnerability} {a.advisory} {a.status} "
            f"severity={f.severity} component={','.join(f.components)} "
            f"version={a.installed_version or '-'} fixed={a.fixed_version or '-'}"
            + (f" justification={a.justification}" if a.justification else ""))
    return "\n".join(notes)


def _files(doc: _Doc, comps: list[Component], ids: _Ids,
           edges: dict[tuple[str, str], set[str]]) -> dict[str, Any]:
    """One ``software_File`` per file with device code, contained by its owner; its own
    targets in its comment (``gpusbom:cuda:sass=...``), its SHA-256 in ``verifiedUsing``."""
    out: dict[str, Any] = {}
    for c in comps:
        for i, d in enumerate(nested_files(c), 1):
            ref = f"{c.bom_ref}/file/{i:04d}"
            f = s3.software_File(spdxId=doc.iri(ids.get(ref)), creationInfo=doc.creation,
                                 name=one_line(d.path),
                                 software_primaryPurpose=s3.software_SoftwarePurpose.file,
                                 comment="\n".join(f"{prop(k)}={v}" for k, v in file_pairs(d)))
            if d.sha256:
                f.verifiedUsing.append(s3.Hash(algorithm=s3.HashAlgorithm.sha256,
                                               hashValue=d.sha256))
            out[ref] = doc.add(f)
            edges[(c.bom_ref, _REL.contains)].add(ref)
    return out


def build_objects(result: ScanResult) -> Any:
    """The scan result as a ``SHACLObjectSet`` (deterministic for the same result)."""
    ident = target_identity(result.target)
    namespace = (f"{NAMESPACE_BASE}{_sanitise(result.target.kind, max_len=20)}/"
                 f"{_sanitise(ident.name, max_len=80)}-{document_uuid(result, 'spdx3')}")
    tool_name = f"{result.tool.name or 'gpusbom'}-{result.tool.version or 'unknown'}"
    creation = s3.CreationInfo(specVersion=SPEC_VERSION, created=parse_timestamp(result.timestamp))
    doc = _Doc(namespace, creation)
    # every element names its creator: the agent and the tool are elements themselves, and
    # use the same creation info (the spec's own examples do the same)
    agent = doc.add(s3.SoftwareAgent(spdxId=doc.iri("SPDXRef-Agent-gpusbom"), creationInfo=creation,
                                     name=result.tool.name or "gpusbom"))
    tool = doc.add(s3.Tool(spdxId=doc.iri("SPDXRef-Tool-gpusbom"), creationInfo=creation, name=tool_name))
    creation.createdBy.append(agent)
    creation.createdUsing.append(tool)

    ids = _Ids()
    root_ref = ident.root_ref
    comps = sorted(result.components, key=lambda c: c.bom_ref)
    root = doc.add(_root(doc, result, ids.get(root_ref)))
    packages: dict[str, Any] = {}
    declared: dict[str, tuple[str, list[str], str]] = {}
    for c in comps:
        packages[c.bom_ref] = doc.add(_package(doc, c, ids.get(c.bom_ref)))
        expr, refs = _parse_license(c.licenses)
        if not isinstance(expr, SpdxNoAssertion):
            declared[c.bom_ref] = (str(expr), refs, _license_comment(c))
    _advisories(result, packages)

    # LicenseRef- ids: the 2.3 writer's extracted licensing info, as licence texts
    custom: dict[str, str] = {}
    for r in sorted({r for _, refs, _ in declared.values() for r in refs}):
        text = doc.add(s3.simplelicensing_SimpleLicensingText(
            spdxId=doc.iri(f"SPDXRef-{r}"), creationInfo=creation, name=r,
            simplelicensing_licenseText=(f"{r}: license text not captured by gpusbom; "
                                         "declared by package metadata")))
        custom[r] = text.spdxId

    edges: dict[tuple[str, str], set[str]] = defaultdict(set)
    refs_known = set(packages) | {root_ref}
    for c in comps:
        edges[(root_ref, _REL.contains)].add(c.bom_ref)
    files = _files(doc, comps, ids, edges)
    extra: list[str] = []
    for rel in result.relationships:
        kind = {"depends-on": _REL.dependsOn, "contains": _REL.contains}.get(rel.type)
        if kind is None or rel.source not in refs_known or rel.target not in refs_known:
            extra.append(f"{prop('unmapped-relationship')}={rel.source} {rel.type} {rel.target}")
            continue
        edges[(rel.source, kind)].add(rel.target)
    by_ref = {**packages, **files, root_ref: root}
    for n, ((src, kind), targets) in enumerate(
            sorted(edges.items(), key=lambda e: (ids.get(e[0][0]), e[0][1])), 1):
        doc.add(s3.Relationship(
            spdxId=doc.iri(f"SPDXRef-Relationship-{n}"), creationInfo=creation,
            from_=by_ref[src], relationshipType=kind,
            to=[by_ref[t] for t in sorted(targets, key=ids.get)]))
    for n, (ref, (expr, _, note)) in enumerate(sorted(declared.items(), key=lambda d: ids.get(d[0])), 1):
        doc.add(s3.Relationship(
            spdxId=doc.iri(f"SPDXRef-DeclaredLicense-{n}"), creationInfo=creation,
            from_=packages[ref], relationshipType=_REL.hasDeclaredLicense,
            to=[doc.license(expr, custom)], comment=note))

    _annotations(doc, result, ids, packages)

    sbom = s3.software_Sbom(
        spdxId=doc.iri("SPDXRef-Sbom"), creationInfo=creation, name=ident.document_name,
        software_sbomType=[s3.software_SbomType.analyzed], rootElement=[root])
    sbom.element.extend(doc.elements)
    document = s3.SpdxDocument(
        spdxId=doc.iri("SPDXRef-DOCUMENT"), creationInfo=creation, name=ident.document_name,
        comment="\n".join([_document_comment(result), *extra]),
        dataLicense=doc.license(DATA_LICENSE, {}),
        profileConformance=[s3.ProfileIdentifierType.core, s3.ProfileIdentifierType.software,
                            s3.ProfileIdentifierType.simpleLicensing],
        rootElement=[sbom])
    document.element.extend([*doc.elements, sbom])
    objects = s3.SHACLObjectSet()
    for e in [*doc.elements, sbom, document]:
        objects.add(e)
    return objects


def _annotations(doc: _Doc, result: ScanResult, ids: _Ids, packages: dict[str, Any]) -> None:
    """Probe results as annotations: on the device's package, or on the document (as 2.3)."""
    if not result.probes:
        return
    n = 0
    for ref in sorted({p.device_ref for p in result.probes if p.device_ref in packages}):
        for key, p in keyed(result.probes_for(ref)):
            n += 1
            doc.add(s3.Annotation(
                spdxId=doc.iri(f"SPDXRef-Annotation-{n}"), creationInfo=doc.creation,
                annotationType=s3.AnnotationType.other, subject=packages[ref],
                statement="\n".join(f"{k}={v}" for k, v in probe_pairs(p, key))))
    pairs = document_probe_pairs(result)
    if pairs:
        doc.add(s3.Annotation(
            spdxId=doc.iri(f"SPDXRef-Annotation-{n + 1}"), creationInfo=doc.creation,
            annotationType=s3.AnnotationType.other, subject=doc.iri("SPDXRef-DOCUMENT"),
            statement="\n".join(f"{k}={v}" for k, v in pairs)))


def render_json(result: ScanResult, out: TextIO) -> None:
    data = s3.JSONLDSerializer().serialize_data(build_objects(result))
    buf = io.StringIO()
    json.dump(data, buf, indent=2)
    out.write(buf.getvalue())
    out.write("\n")
