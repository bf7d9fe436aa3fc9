"""SPDX 2.3, JSON and tag-value, built with spdx-tools' model and writers."""

from __future__ import annotations

import re
from typing import Any, TextIO

from spdx_tools.common.spdx_licensing import spdx_licensing  # type: ignore[import-untyped,unused-ignore]
from spdx_tools.spdx.model.actor import Actor, ActorType
from spdx_tools.spdx.model.annotation import Annotation, AnnotationType
from spdx_tools.spdx.model.checksum import Checksum, ChecksumAlgorithm
from spdx_tools.spdx.model.document import CreationInfo, Document
from spdx_tools.spdx.model.extracted_licensing_info import ExtractedLicensingInfo
from spdx_tools.spdx.model.package import (
    ExternalPackageRef,
    ExternalPackageRefCategory,
    Package,
    PackagePurpose,
)
from spdx_tools.spdx.model.relationship import Relationship, RelationshipType
from spdx_tools.spdx.model.spdx_no_assertion import SpdxNoAssertion
from spdx_tools.spdx.validation.external_package_ref_validator import (
    validate_external_package_ref,
)
from spdx_tools.spdx.writer.tagvalue import tagvalue_writer

from ..errors import GpusbomError
from ..identity import target_identity
from ..licenses import declared_expression
from ..model import Component, ComponentType, Finding, ScanResult, product_properties
from ._common import (
    advisory_db_pairs,
    cpe_kind,
    document_uuid,
    finding_text,
    one_line,
    own_file_sha256,
    parse_timestamp,
    prop,
    sorted_unknowns,
    split_name_email,
    stack_properties,
    target_display_name,
    target_identity_pairs,
    target_purl,
    target_version,
    unknown_text,
)
from ._devicecode import file_pairs, nested_files, summary_pairs
from ._probes import document_probe_pairs, keyed, probe_pairs

SPDX_VERSION = "SPDX-2.3"
DOCUMENT_ID = "SPDXRef-DOCUMENT"
NAMESPACE_BASE = "https://gpusbom.dev/spdx/"

PURPOSES: dict[ComponentType, PackagePurpose] = {
    ComponentType.APPLICATION: PackagePurpose.APPLICATION,
    ComponentType.LIBRARY: PackagePurpose.LIBRARY,
    ComponentType.FRAMEWORK: PackagePurpose.FRAMEWORK,
    ComponentType.OPERATING_SYSTEM: PackagePurpose.OPERATING_SYSTEM,
    ComponentType.DEVICE: PackagePurpose.DEVICE,
    ComponentType.DEVICE_DRIVER: PackagePurpose.LIBRARY,  # SPDX 2.3 has no driver purpose
    ComponentType.FIRMWARE: PackagePurpose.FIRMWARE,
    ComponentType.PLATFORM: PackagePurpose.FRAMEWORK,
    ComponentType.FILE: PackagePurpose.FILE,
    ComponentType.CONTAINER: PackagePurpose.CONTAINER,
}
_TARGET_PURPOSES = {
    "image": PackagePurpose.CONTAINER,
    "host": PackagePurpose.OPERATING_SYSTEM,
    "directory": PackagePurpose.FILE,
}
_ID_UNSAFE = re.compile(r"[^A-Za-z0-9.]+")
_LICENSE_REF = re.compile(r"LicenseRef-[A-Za-z0-9.\-]+")


def _sanitise(value: str, *, max_len: int = 120) -> str:
    s = _ID_UNSAFE.sub("-", value).strip("-.")
    return (s[:max_len].rstrip("-.")) or "x"


class _Ids:
    """bom-ref -> unique, deterministic SPDXID."""

    def __init__(self) -> None:
        self._by_ref: dict[str, str] = {}
        self._taken: set[str] = {DOCUMENT_ID}

    def get(self, ref: str) -> str:
        if ref in self._by_ref:
            return self._by_ref[ref]
        base = "SPDXRef-" + _sanitise(ref)
        sid, n = base, 1
        while sid in self._taken:
            n += 1
            sid = f"{base}-{n}"
        self._taken.add(sid)
        self._by_ref[ref] = sid
        return sid


def _parse_license(values: list[str]) -> tuple[object, list[str]]:
    """Declared licenses -> (SPDX expression or NOASSERTION, LicenseRef ids used).

    ``licenses.declared_expression`` maps every declared name to an SPDX id or a
    ``LicenseRef-`` id (listed in the document's extracted licensing info), so the
    declaration is never dropped for one unknown name.
    """
    text = declared_expression(values)
    if text is None:
        return SpdxNoAssertion(), []
    try:
        # license_expression raises more than ExpressionError on odd input (its own
        # validate() even dies with AttributeError), so catch broadly here
        expr = spdx_licensing.parse(text, strict=True)
        keys = [str(s.key) for s in spdx_licensing.license_symbols(expr, unique=True,
                                                                    decompose=True)]
    except Exception:  # noqa: BLE001 - see above: NOASSERTION, as for no licence at all
        return SpdxNoAssertion(), []
    if expr is None:
        return SpdxNoAssertion(), []
    refs: list[str] = []
    for k in keys:
        if _LICENSE_REF.fullmatch(k):
            refs.append(k)
        elif not _is_known(k):
            return SpdxNoAssertion(), []
    return expr, sorted(set(refs))


def warm() -> None:
    """What the first package's licence costs otherwise (spdx-tools' licensing builds its
    tokenizer on its first parse, ~0.03 CPU-s; ``licenses.warm``): see ``Writer.imports``."""
    from ..licenses import warm as warm_licenses

    warm_licenses()
    _parse_license(["MIT", "LicenseRef-x"])


def _is_known(key: str) -> bool:
    return key in spdx_licensing.known_symbols


def _actor(value: str | None) -> Actor | SpdxNoAssertion:
    if not value:
        return SpdxNoAssertion()
    name, email = split_name_email(one_line(value))
    # tag-value puts the email in parentheses after the name: keep them out of the name
    name = name.replace("(", "[").replace(")", "]")
    return Actor(ActorType.ORGANIZATION, name, email)


def _external_refs(c: Component, sid: str, notes: list[str]) -> list[ExternalPackageRef]:
    refs: list[ExternalPackageRef] = []
    candidates: list[ExternalPackageRef] = []
    if c.purl:
        candidates.append(ExternalPackageRef(ExternalPackageRefCategory.PACKAGE_MANAGER, "purl", c.purl))
    if c.cpe:
        kind = "cpe22Type" if cpe_kind(c.cpe) == "cpe22" else "cpe23Type"
        candidates.append(ExternalPackageRef(ExternalPackageRefCategory.SECURITY, kind, c.cpe))
    for ref in candidates:
        if validate_external_package_ref(ref, sid, SPDX_VERSION):
            notes.append(f"{prop('invalid-' + ref.reference_type)}={ref.locator}")
        else:
            refs.append(ref)
    return refs


def _component_comment(c: Component, notes: list[str]) -> str | None:
    lines: list[str] = [f"{prop('bom-ref')}={c.bom_ref}", f"{prop('type')}={c.type.value}"]
    if c.ecosystem:
        lines.append(f"{prop('ecosystem')}={c.ecosystem}")
    for ev in c.evidence:
        bits = [f"collector={ev.collector}", f"method={ev.method}"]
        if ev.path:
            bits.append(f"path={ev.path}")
        if ev.layer:
            bits.append(f"layer={ev.layer}")
        if ev.sha256:  # before detail (see the CycloneDX writer)
            bits.append(f"sha256={ev.sha256}")
        if ev.declared_digest:  # a file's digest as its package declared it (not computed)
            bits.append(f"declared={ev.declared_digest}")
        if ev.detail:
            bits.append(f"detail={ev.detail}")
        lines.append(f"{prop('evidence')}: " + "; ".join(bits))
    for k, v in sorted({**c.properties, **product_properties(c)}.items()):
        lines.append(f"{prop(k)}={v}")
    lines.extend(f"{prop(k)}={v}" for k, v in summary_pairs(c))
    lines.extend(notes)
    return "\n".join(lines) if lines else None


def _package(c: Component, sid: str, licref_names: dict[str, str]) -> Package:
    notes: list[str] = []
    refs = _external_refs(c, sid, notes)
    declared, used_refs = _parse_license(c.licenses)
    for r in used_refs:
        licref_names.setdefault(r, r)
    license_comment = None
    if c.licenses:
        license_comment = "declared: " + " | ".join(c.licenses)
    # SPDX 2.3 7.10: a package checksum is of the package file; only a component that is
    # one file gets one, with that file as packageFileName (see own_file_sha256)
    own = own_file_sha256(c)
    return Package(
        spdx_id=sid,
        name=one_line(c.name),
        download_location=SpdxNoAssertion(),
        version=one_line(c.version) if c.version else None,
        supplier=_actor(c.supplier),
        files_analyzed=False,
        license_concluded=SpdxNoAssertion(),
        license_declared=declared,
        license_comment=license_comment,
        copyright_text=SpdxNoAssertion(),
        description=c.description or None,
        comment=_component_comment(c, notes),
        external_references=refs,
        primary_package_purpose=PURPOSES.get(c.type, PackagePurpose.OTHER),
        file_name=own[0] if own else None,
        checksums=[Checksum(ChecksumAlgorithm.SHA256, own[1])] if own else [],
    )


def _root_package(result: ScanResult, sid: str) -> Package:
    t = result.target
    lines = [f"{prop('target:kind')}={t.kind}", f"{prop('target:reference')}={t.reference}"]
    if t.source:
        lines.append(f"{prop('target:source')}={t.source}")
    if t.manifest_digest:
        lines.append(f"{prop('image:digest')}={t.manifest_digest}")
    if t.image_id:
        lines.append(f"{prop('image:id')}={t.image_id}")
    if t.platform:
        lines.append(f"{prop('image:platform')}={t.platform}")
    if t.created:
        lines.append(f"{prop('image:created')}={t.created}")
    for tag in t.tags:
        lines.append(f"{prop('image:tag')}={tag}")
    for key, value in target_identity_pairs(result):
        lines.append(f"{key}={value}")
    for layer in t.layers:
        if layer.diff_id:
            lines.append(f"{prop(f'image:layer:{layer.index}')}={layer.diff_id}")
    for k, v in sorted(t.labels.items()):
        lines.append(f"{prop(f'image:label:{k}')}={v}")
    for k, v in sorted(t.env.items()):
        lines.append(f"{prop(f'image:env:{k}')}={v}")
    for k, v in sorted(t.os_release.items()):
        lines.append(f"{prop(f'os:{k}')}={v}")
    refs: list[ExternalPackageRef] = []
    # the same oci purl the CycloneDX writer puts on the metadata component
    purl = target_purl(result)
    if purl is not None:
        ref = ExternalPackageRef(ExternalPackageRefCategory.PACKAGE_MANAGER, "purl", purl.to_string())
        if not validate_external_package_ref(ref, sid, SPDX_VERSION):
            refs.append(ref)
    return Package(
        spdx_id=sid,
        name=target_display_name(result),
        download_location=SpdxNoAssertion(),
        version=target_version(result),
        supplier=SpdxNoAssertion(),
        files_analyzed=False,
        license_concluded=SpdxNoAssertion(),
        license_declared=SpdxNoAssertion(),
        copyright_text=SpdxNoAssertion(),
        comment="\n".join(lines),
        external_references=refs,
        primary_package_purpose=_TARGET_PURPOSES.get(t.kind, PackagePurpose.OTHER),
    )


def _add_advisories(result: ScanResult, packages: list[Package], comps: list[Component]) -> None:
    """Each advisory finding: a SECURITY/advisory external reference (the advisory URL) and
    a comment line on the affected package."""
    by_ref: dict[str, list[Finding]] = {}
    for f in result.findings:
        if f.kind == "advisory" and f.advisory is not None:
            for r in f.components:
                by_ref.setdefault(r, []).append(f)
    for pkg, c in zip(packages, comps, strict=False):
        lines: list[str] = []
        for f in by_ref.get(c.bom_ref, []):
            a = f.advisory
            assert a is not None  # noqa: S101 - type narrowing of an invariant
            lines.append(
                f"{prop('advisory')}={a.vulnerability} ({a.advisory}) {a.status}; "
                f"severity {f.severity}; fixed {a.fixed_version or '-'}"
                + (f"; justification {a.justification}" if a.justification else "")
            )
            for u in a.urls[:1]:
                ref = ExternalPackageRef(ExternalPackageRefCategory.SECURITY, "advisory", u)
                if ref not in pkg.external_references and not validate_external_package_ref(
                    ref, pkg.spdx_id, SPDX_VERSION
                ):
                    pkg.external_references.append(ref)
        if lines:
            pkg.comment = "\n".join([pkg.comment or "", *lines]).strip("\n")


def _file_packages(comps: list[Component], ids: _Ids,
                   packages: list[Package]) -> set[tuple[str, RelationshipType, str]]:
    """Each file with device code under its owner: SPDX 2.3 makes a File carry a SHA-1, which
    gpusbom does not compute, so the file is a package of purpose FILE (its path the
    packageFileName, its SHA-256, its own targets in the comment), CONTAINed by its owner."""
    rels: set[tuple[str, RelationshipType, str]] = set()
    for c in comps:
        for i, d in enumerate(nested_files(c), 1):
            sid = ids.get(f"{c.bom_ref}/file/{i:04d}")
            packages.append(Package(
                spdx_id=sid, name=one_line(d.path), download_location=SpdxNoAssertion(),
                files_analyzed=False, license_concluded=SpdxNoAssertion(),
                license_declared=SpdxNoAssertion(), copyright_text=SpdxNoAssertion(),
                comment="\n".join(f"{prop(k)}={v}" for k, v in file_pairs(d)),
                primary_package_purpose=PackagePurpose.FILE, file_name=d.path,
                checksums=[Checksum(ChecksumAlgorithm.SHA256, d.sha256)] if d.sha256 else [],
            ))
            rels.add((ids.get(c.bom_ref), RelationshipType.CONTAINS, sid))
    return rels


def build_document(result: ScanResult) -> Document:
    """The scan result as an spdx-tools ``Document`` (deterministic for the same result)."""
    ids = _Ids()
    root_ref = target_identity(result.target).root_ref
    root_id = ids.get(root_ref)
    comps = sorted(result.components, key=lambda c: c.bom_ref)
    for c in comps:
        ids.get(c.bom_ref)
    refs = {c.bom_ref for c in comps} | {root_ref}

    licref_names: dict[str, str] = {}
    packages = [_root_package(result, root_id)] + [
        _package(c, ids.get(c.bom_ref), licref_names) for c in comps
    ]
    _add_advisories(result, packages[1:], comps)
    file_rels = _file_packages(comps, ids, packages)

    rels: set[tuple[str, RelationshipType, str]] = {(DOCUMENT_ID, RelationshipType.DESCRIBES, root_id)}
    for c in comps:
        rels.add((root_id, RelationshipType.CONTAINS, ids.get(c.bom_ref)))
    rels |= file_rels
    doc_notes: list[str] = [f"{prop('complete')}={'true' if result.complete else 'false'}"]
    for cid, cver in sorted(result.tool.collectors.items()):
        doc_notes.append(f"{prop(f'collector:{cid}:version')}={cver}")
    for name, value in stack_properties(result):
        doc_notes.append(f"{name}={value}")
    for i, unk in enumerate(sorted_unknowns(result), 1):
        doc_notes.append(f"{prop(f'unknown:{i}')}={unknown_text(unk.collector, unk.reason, unk.path)}")
    for name, value in advisory_db_pairs(result):
        doc_notes.append(f"{name}={value}")
    # advisory findings are written as gpusbom:advisory:N (below)
    for i, fnd in enumerate((f for f in result.findings if f.kind != "advisory"), 1):
        doc_notes.append(f"{prop(f'finding:{i}')}={finding_text(fnd)}")
    for i, f in enumerate(
        (f for f in result.findings if f.kind == "advisory" and f.advisory is not None), 1
    ):
        a = f.advisory
        assert a is not None  # noqa: S101 - type narrowing of an invariant
        doc_notes.append(
            f"{prop(f'advisory:{i}')}={a.vulnerability} {a.advisory} {a.status} "
            f"severity={f.severity} component={','.join(f.components)} "
            f"version={a.installed_version or '-'} fixed={a.fixed_version or '-'}"
            + (f" justification={a.justification}" if a.justification else "")
        )
    for rel in result.relationships:
        kind = {"depends-on": RelationshipType.DEPENDS_ON, "contains": RelationshipType.CONTAINS}.get(rel.type)
        if kind is None or rel.source not in refs or rel.target not in refs:
            doc_notes.append(f"{prop('unmapped-relationship')}={rel.source} {rel.type} {rel.target}")
            continue
        rels.add((ids.get(rel.source), kind, ids.get(rel.target)))
    relationships = [Relationship(a, k, b) for a, k, b in sorted(rels, key=lambda r: (r[0], r[1].name, r[2]))]

    extracted = [
        ExtractedLicensingInfo(
            license_id=r,
            extracted_text=f"{r}: license text not captured by gpusbom; declared by package metadata",
            license_name=name,
        )
        for r, name in sorted(licref_names.items())
    ]

    # built from the same identity as the root package (identity.py): NAME@DIGEST, and a
    # namespace under the target's kind and name, unique per document
    ident = target_identity(result.target)
    doc_name = ident.document_name
    namespace = (f"{NAMESPACE_BASE}{_sanitise(result.target.kind, max_len=20)}/"
                 f"{_sanitise(ident.name, max_len=80)}-{document_uuid(result, 'spdx')}")
    tool = f"{result.tool.name or 'gpusbom'}-{result.tool.version or 'unknown'}"
    creation = CreationInfo(
        spdx_version=SPDX_VERSION,
        spdx_id=DOCUMENT_ID,
        name=doc_name,
        document_namespace=namespace,
        creators=[Actor(ActorType.TOOL, tool)],
        created=parse_timestamp(result.timestamp),
        document_comment="\n".join(doc_notes),
    )
    return Document(
        creation_info=creation,
        packages=packages,
        relationships=relationships,
        extracted_licensing_info=extracted,
        annotations=_probe_annotations(result, ids, tool),
    )


def _probe_annotations(result: ScanResult, ids: _Ids, tool: str) -> list[Annotation]:
    """Probe results as SPDX annotations: on the device's package, or on the document."""
    if not result.probes:
        return []
    when = parse_timestamp(result.timestamp)
    refs = {c.bom_ref for c in result.components}
    out: list[Annotation] = []
    for ref in sorted({p.device_ref for p in result.probes if p.device_ref in refs}):
        for key, p in keyed(result.probes_for(ref)):
            text = "\n".join(f"{n}={v}" for n, v in probe_pairs(p, key))
            out.append(Annotation(ids.get(ref), AnnotationType.OTHER, Actor(ActorType.TOOL, tool),
                                  when, text))
    doc_pairs = document_probe_pairs(result)
    if doc_pairs:
        out.append(Annotation(DOCUMENT_ID, AnnotationType.OTHER, Actor(ActorType.TOOL, tool), when,
                              "\n".join(f"{n}={v}" for n, v in doc_pairs)))
    return out


_TEXT_END = "</text>"


def _tv_text(value: str | None) -> str | None:
    """Tag-value ends a ``<text>`` block at the first ``</text>``: keep it out of values."""
    return value.replace(_TEXT_END, "<\\/text>") if value and _TEXT_END in value else value


def _for_tag_value(doc: Document) -> Document:
    ci = doc.creation_info
    ci.document_comment = _tv_text(ci.document_comment)
    for a in doc.annotations:
        a.annotation_comment = _tv_text(a.annotation_comment) or a.annotation_comment
    for p in doc.packages:
        p.description = _tv_text(p.description)
        p.comment = _tv_text(p.comment)
        p.license_comment = _tv_text(p.license_comment)
    return doc


def _validated(result: ScanResult, *, tag_value: bool = False) -> Document:
    doc = build_document(result)
    if tag_value:
        doc = _for_tag_value(doc)
    from ._spdx_validate import validate_document

    messages = validate_document(doc)
    if messages:
        first = messages[0]
        raise GpusbomError(
            f"internal error: SPDX document for {result.target.reference} is invalid "
            f"({len(messages)} problems; first: {first.validation_message})"
        )
    return doc


def _json_categories(doc: dict[str, Any]) -> None:
    """``PACKAGE-MANAGER`` / ``PERSISTENT-ID`` in JSON, as the SPDX 2.3 JSON schema wants.

    spdx-tools 0.8 writes the Python enum names (``PACKAGE_MANAGER``), which its own
    validator accepts and the official schema rejects; tag-value it writes right."""
    for pkg in doc.get("packages") or []:
        for ref in pkg.get("externalRefs") or []:
            cat = ref.get("referenceCategory")
            if isinstance(cat, str):
                ref["referenceCategory"] = cat.replace("_", "-")


def _drop_duplicates(doc: Document) -> Document:
    """spdx-tools' ``create_document_without_duplicates`` on the document itself: it copied
    the whole document first (``deepcopy``: 0.7 of 3.8 CPU-s of writing 800 packages under a
    profiler); this one was just built for the writer and is not used again."""
    for elements in ([doc.creation_info], doc.files, doc.packages, doc.snippets,
                     doc.extracted_licensing_info):
        for element in elements:
            for key, value in list(element.__dict__.items()):
                if isinstance(value, list) and len(value) > 1:
                    kept: list[Any] = []
                    for v in value:
                        if v not in kept:
                            kept.append(v)
                    if len(kept) != len(value):
                        setattr(element, key, kept)
    return doc


def render_json(result: ScanResult, out: TextIO) -> None:
    from ._jsonfast import dumps_indented
    from ._spdx_convert import convert_document

    # what json_writer.write_document_to_stream(indent=4) writes, its categories fixed, in
    # one pass (it was written, parsed again and written again); the library's converter's
    # dict, its packages and relationships through a table (_spdx_convert)
    doc = convert_document(_drop_duplicates(_validated(result)))
    _json_categories(doc)
    out.write(dumps_indented(doc, indent=4))
    out.write("\n")


def render_tag_value(result: ScanResult, out: TextIO) -> None:
    tagvalue_writer.write_document_to_stream(
        _drop_duplicates(_validated(result, tag_value=True)), out, validate=False,
        drop_duplicates=False)
