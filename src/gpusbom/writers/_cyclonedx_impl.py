"""CycloneDX 1.6 (default) / 1.5 / 1.7, JSON and XML, built with cyclonedx-python-lib."""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import TextIO

from cyclonedx.model import HashAlgorithm, HashType, Property
from cyclonedx.model.bom import Bom, BomMetaData
from cyclonedx.model.bom_ref import BomRef
from cyclonedx.model.component import Component as CdxComponent
from cyclonedx.model.component import ComponentType as CdxComponentType
from cyclonedx.model.component_evidence import (
    AnalysisTechnique,
    ComponentEvidence,
    Identity,
    IdentityField,
    Method,
    Occurrence,
)
from cyclonedx.model.contact import OrganizationalContact, OrganizationalEntity
from cyclonedx.model.dependency import Dependency
from cyclonedx.model.license import DisjunctiveLicense, License, LicenseExpression
from cyclonedx.model.tool import ToolRepository
from cyclonedx.output import make_outputter
from cyclonedx.schema import OutputFormat, SchemaVersion
from packageurl import PackageURL

try:  # cyclonedx-python-lib >= 11
    from cyclonedx.contrib.license.factories import LicenseFactory
except ImportError:  # pragma: no cover - older releases
    from cyclonedx.factory.license import LicenseFactory  # type: ignore[no-redef,unused-ignore]

from ..errors import UsageError
from ..identification import CONFIDENCE_SCORE
from ..licenses import declared_expression
from ..model import (
    Component,
    ComponentType,
    Evidence,
    ScanResult,
    product_properties,
)
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
    target_key,
    target_purl,
    target_version,
    unknown_text,
)
from ._cyclonedx_vulns import vulnerabilities
from ._devicecode import file_pairs, nested_files, summary_pairs
from ._jsonfast import dumps_indented
from ._probes import component_probe_pairs, document_probe_pairs
from .base import WriterOptions

SCHEMA_VERSIONS = {"1.5": SchemaVersion.V1_5, "1.6": SchemaVersion.V1_6,
                   "1.7": SchemaVersion.V1_7}

#: our evidence method -> (CycloneDX analysis technique, confidence of that technique)
TECHNIQUES: dict[str, tuple[AnalysisTechnique, Decimal]] = {
    "package-db": (AnalysisTechnique.MANIFEST_ANALYSIS, Decimal(1)),
    "package-metadata": (AnalysisTechnique.MANIFEST_ANALYSIS, Decimal("0.9")),
    "version-file": (AnalysisTechnique.MANIFEST_ANALYSIS, Decimal("0.8")),
    "header": (AnalysisTechnique.SOURCE_CODE_ANALYSIS, Decimal("0.7")),
    "elf": (AnalysisTechnique.BINARY_ANALYSIS, Decimal("0.7")),
    "elf-symbol": (AnalysisTechnique.BINARY_ANALYSIS, Decimal("0.8")),
    "elf-rodata": (AnalysisTechnique.BINARY_ANALYSIS, Decimal("0.7")),
    # the fingerprint database: the file's bytes, or its ELF build-id, are a known release's
    "fingerprint-sha256": (AnalysisTechnique.HASH_COMPARISON, Decimal(1)),
    "fingerprint-build-id": (AnalysisTechnique.BINARY_ANALYSIS, Decimal(1)),
    "soname": (AnalysisTechnique.FILENAME, Decimal("0.6")),
    "filename": (AnalysisTechnique.FILENAME, Decimal("0.4")),
    "env": (AnalysisTechnique.OTHER, Decimal("0.5")),
    "label": (AnalysisTechnique.OTHER, Decimal("0.5")),
    "device": (AnalysisTechnique.DYNAMIC_ANALYSIS, Decimal("0.9")),
    "probe": (AnalysisTechnique.DYNAMIC_ANALYSIS, Decimal(1)),
}
_DEFAULT_TECHNIQUE = (AnalysisTechnique.OTHER, Decimal("0.3"))
#: identification-method -> the evidence method that carries it (the fingerprint database's
#: ``sha256`` / ``build-id``); the others are evidence methods already
_DECIDED_EVIDENCE = {"sha256": "fingerprint-sha256", "build-id": "fingerprint-build-id"}

_TARGET_TYPES = {
    "image": CdxComponentType.CONTAINER,
    "host": CdxComponentType.OPERATING_SYSTEM,
    "directory": CdxComponentType.FILE,
}

_license_factory = LicenseFactory()


def _cdx_type(t: ComponentType) -> CdxComponentType:
    return CdxComponentType(t.value)


def _licenses(values: list[str]) -> list[License]:
    """Declared strings -> one CycloneDX licence: an SPDX id when the declaration is one
    licence, else one SPDX expression (``licenses.declared_expression``: Debian/RPM/wheel
    names mapped to SPDX ids, the rest as ``LicenseRef-``, several declarations ANDed).
    CycloneDX allows ids/names or one expression, never both."""
    expr = declared_expression(values)
    if expr is None:
        return []
    if _SPDX_ID.fullmatch(expr) and not expr.startswith("LicenseRef-"):
        made = _license_factory.make_from_string(expr)
        if isinstance(made, DisjunctiveLicense) and made.id:
            return [made]
    return [LicenseExpression(expr)]


_SPDX_ID = re.compile(r"[A-Za-z0-9.\-+]+")


def _supplier(value: str | None) -> OrganizationalEntity | None:
    if not value:
        return None
    name, email = split_name_email(value)
    contacts = [OrganizationalContact(email=email)] if email else None
    return OrganizationalEntity(name=name, contacts=contacts)


def _evidence_context(ev: Evidence) -> str:
    parts = [f"collector={ev.collector}", f"method={ev.method}"]
    if ev.layer:
        parts.append(f"layer={ev.layer}")
    if ev.sha256:  # before detail: a detail may hold "; " and is read to the end
        parts.append(f"sha256={ev.sha256}")
    if ev.declared_digest:  # what the package's manifest (md5sums, RECORD) declares
        parts.append(f"declared={ev.declared_digest}")
    if ev.detail:
        parts.append(f"detail={ev.detail}")
    return "; ".join(parts)


@dataclass
class _EvidenceParts:
    """A component's evidence as plain values: its methods (technique, confidence, value),
    the identities' confidence, the identities (field, concluded value) and the occurrences
    (bom-ref, location, additional context)."""

    methods: list[tuple[AnalysisTechnique, Decimal, str]]
    best: Decimal
    fields: list[tuple[IdentityField, str]]
    occurrences: list[tuple[str, str, str | None]]


def _evidence_parts(c: Component, spec: SchemaVersion, purl: str | None) -> _EvidenceParts | None:
    if not c.evidence:
        return None
    # the method that decided comes first; the identity's confidence is that method's level
    # (gpusbom.identification: exact 1, high 0.8, medium 0.5, low 0.2), the others are its
    # evidence (each with its technique's own confidence)
    decided = _DECIDED_EVIDENCE.get(c.properties.get("identification-method", ""),
                                    c.properties.get("identification-method", ""))
    methods: list[tuple[AnalysisTechnique, Decimal, str]] = []
    for ev in sorted(c.evidence, key=lambda e: e.method != decided):
        technique, confidence = TECHNIQUES.get(ev.method, _DEFAULT_TECHNIQUE)
        methods.append((technique, confidence, ev.path or ev.detail or ev.collector))
    level = c.properties.get("identification-confidence", "")
    best = (Decimal(CONFIDENCE_SCORE[level]) if level in CONFIDENCE_SCORE
            else max(m[1] for m in methods))
    fields: list[tuple[IdentityField, str]] = []
    if purl is not None:
        fields.append((IdentityField.PURL, purl))
    fields.append((IdentityField.NAME, c.name))
    if c.version:
        fields.append((IdentityField.VERSION, c.version))
    if spec is SchemaVersion.V1_5:
        fields = fields[:1]  # 1.5 has a single identity object
    # (location, additionalContext) pairs, deduplicated and sorted
    found: set[tuple[str, str | None]] = set()
    for ev in c.evidence:
        if not ev.path:
            continue
        # 1.5 has no additionalContext: keep one occurrence per location there
        found.add((ev.path, None if spec is SchemaVersion.V1_5 else _evidence_context(ev)))
    # cyclonedx-python-lib orders occurrences by their BomRef object first, and BomRef(None)
    # is neither equal to nor less than another BomRef(None): without explicit refs the
    # order follows id()-based hashes and changes from run to run. Number them instead.
    occurrences = [
        (f"{c.bom_ref}/occurrence/{i:04d}", loc, ctx)
        for i, (loc, ctx) in enumerate(sorted(found, key=lambda x: (x[0], x[1] or "")), 1)
    ]
    return _EvidenceParts(methods, best, fields, occurrences)


def _evidence(c: Component, spec: SchemaVersion, purl: PackageURL | None) -> ComponentEvidence | None:
    parts = _evidence_parts(c, spec, None if purl is None else purl.to_string())
    if parts is None:
        return None
    methods = [Method(technique=t, confidence=conf, value=v) for t, conf, v in parts.methods]
    identities = [
        Identity(field=f, confidence=parts.best, concluded_value=v, methods=methods)
        for f, v in parts.fields
    ]
    occurrences = [Occurrence(bom_ref=ref, location=loc, additional_context=ctx)
                   for ref, loc, ctx in parts.occurrences]
    return ComponentEvidence(identity=identities, occurrences=occurrences)


def _component_property_pairs(c: Component, contained_by: list[str]) -> list[tuple[str, str]]:
    props: list[tuple[str, str]] = []
    if c.ecosystem:
        props.append((prop("ecosystem"), c.ecosystem))
    for ev in c.evidence:
        props.append((prop("collector"), ev.collector))
        props.append((prop("evidence:method"), ev.method))
        if ev.layer:
            props.append((prop("layer"), ev.layer))
        if ev.path:
            props.append((prop("path"), ev.path))
        if ev.detail:
            props.append((prop("evidence:detail"), ev.detail))
        if ev.sha256:
            props.append((prop("sha256"), f"{ev.path}={ev.sha256}"))
        if ev.declared_digest:
            props.append((prop("declared-digest"), f"{ev.path}={ev.declared_digest}"))
    for k, v in sorted({**c.properties, **product_properties(c)}.items()):
        props.append((prop(k), v))
    for k, v in summary_pairs(c):
        props.append((prop(k), v))
    for parent in contained_by:
        props.append((prop("contained-by"), parent))
    return props


def _identifiers(c: Component, props: list[tuple[str, str]]) -> tuple[PackageURL | None, str | None]:
    """The component's purl (parsed) and CPE, each dropped for a property when invalid."""
    purl: PackageURL | None = None
    if c.purl:
        try:
            purl = PackageURL.from_string(c.purl)
        except ValueError:
            props.append((prop("purl:unparsable"), c.purl))
    cpe = c.cpe
    if cpe and cpe_kind(cpe) is None:
        props.append((prop("cpe:invalid"), cpe))
        cpe = None
    return purl, cpe


def _to_cdx_component(c: Component, spec: SchemaVersion, contained_by: list[str]) -> CdxComponent:
    pairs = _component_property_pairs(c, contained_by)
    own = own_file_sha256(c)
    purl, cpe = _identifiers(c, pairs)
    return CdxComponent(
        name=one_line(c.name),
        version=one_line(c.version) if c.version else None,
        type=_cdx_type(c.type),
        bom_ref=c.bom_ref,
        purl=purl,
        cpe=cpe,
        supplier=_supplier(c.supplier),
        description=c.description,
        licenses=_licenses(c.licenses),
        properties=[Property(name=n, value=v) for n, v in pairs],
        evidence=_evidence(c, spec, purl),
        hashes=[HashType(alg=HashAlgorithm.SHA_256, content=own[1])] if own else None,
        components=_file_components(c),
    )


def _file_components(c: Component) -> list[CdxComponent]:
    """One nested ``file`` component per file of ``c`` with device code: its own targets."""
    out = []
    for i, d in enumerate(nested_files(c), 1):
        out.append(CdxComponent(
            name=one_line(d.path), type=CdxComponentType.FILE,
            bom_ref=f"{c.bom_ref}/file/{i:04d}",
            properties=[Property(name=prop(k), value=v) for k, v in file_pairs(d)],
            hashes=[HashType(alg=HashAlgorithm.SHA_256, content=d.sha256)] if d.sha256 else None,
        ))
    return out


def _target_component(result: ScanResult) -> CdxComponent:
    t = result.target
    props: list[Property] = [
        Property(name=prop("target:kind"), value=t.kind),
        Property(name=prop("target:reference"), value=t.reference),
    ]
    if t.source:
        props.append(Property(name=prop("target:source"), value=t.source))
    if t.manifest_digest:
        props.append(Property(name=prop("image:digest"), value=t.manifest_digest))
    if t.image_id:
        props.append(Property(name=prop("image:id"), value=t.image_id))
    if t.platform:
        props.append(Property(name=prop("image:platform"), value=t.platform))
    if t.created:
        props.append(Property(name=prop("image:created"), value=t.created))
    for tag in t.tags:
        props.append(Property(name=prop("image:tag"), value=tag))
    for name, value in target_identity_pairs(result):
        props.append(Property(name=name, value=value))
    for layer in t.layers:
        if layer.diff_id:
            props.append(Property(name=prop(f"image:layer:{layer.index}"), value=layer.diff_id))
    for k, v in sorted(t.labels.items()):
        props.append(Property(name=prop(f"image:label:{k}"), value=v))
    for k, v in sorted(t.env.items()):
        props.append(Property(name=prop(f"image:env:{k}"), value=v))
    for k, v in sorted(t.os_release.items()):
        props.append(Property(name=prop(f"os:{k}"), value=v))
    return CdxComponent(
        name=target_display_name(result),
        version=target_version(result),
        type=_TARGET_TYPES.get(t.kind, CdxComponentType.APPLICATION),
        bom_ref=target_key(result),
        purl=target_purl(result),
        properties=props,
    )


@dataclass
class _Graph:
    """What the document's parts are derived from besides each component: the metadata's
    properties, each component's dependencies, the parents that contain it, the root's
    direct dependencies (``build_bom``; the fast JSON path, ``_cyclonedx_fast``)."""

    root_ref: str
    refs: set[str]
    meta_props: list[Property]
    deps: dict[str, set[str]]
    contained_by: dict[str, list[str]]
    top: set[str]


def _graph(result: ScanResult) -> _Graph:
    root_ref = target_key(result)
    refs = {c.bom_ref for c in result.components}
    meta_props: list[Property] = [
        Property(name=prop("complete"), value="true" if result.complete else "false"),
    ]
    deps: dict[str, set[str]] = {c.bom_ref: set() for c in result.components}
    contained_by: dict[str, list[str]] = {}
    dangling = 0
    for rel in result.relationships:
        known_src = rel.source in refs or rel.source == root_ref
        if not known_src or rel.target not in refs:
            dangling += 1
            meta_props.append(Property(
                name=prop(f"dangling-relationship:{dangling}"),
                value=f"{rel.source} {rel.type} {rel.target}"))
            continue
        if rel.type == "depends-on":
            if rel.source != root_ref:
                deps[rel.source].add(rel.target)
        elif rel.type == "contains":
            if rel.source != root_ref:
                contained_by.setdefault(rel.target, []).append(rel.source)
        else:
            meta_props.append(Property(name=prop("relationship"),
                                       value=f"{rel.source} {rel.type} {rel.target}"))
    # the root depends on every component nothing else depends on, plus whatever that
    # leaves unreachable (dependency cycles), so every component hangs off the root
    depended = {d for ds in deps.values() for d in ds}
    top = {r for r in deps if r not in depended}
    reach: set[str] = set()
    stack = sorted(top)
    while stack:
        r = stack.pop()
        if r in reach:
            continue
        reach.add(r)
        stack.extend(sorted(deps[r] - reach))
    for r in sorted(deps):
        if r not in reach:
            top.add(r)
            stack = [r]
            while stack:
                x = stack.pop()
                if x in reach:
                    continue
                reach.add(x)
                stack.extend(sorted(deps[x] - reach))

    for name, value in stack_properties(result):
        meta_props.append(Property(name=name, value=value))
    for i, unk in enumerate(sorted_unknowns(result), 1):
        meta_props.append(Property(name=prop(f"unknown:{i}"),
                                   value=unknown_text(unk.collector, unk.reason, unk.path)))
    # advisory findings are CycloneDX vulnerabilities (below), not metadata properties
    for i, fnd in enumerate((f for f in result.findings if f.kind != "advisory"), 1):
        meta_props.append(Property(name=prop(f"finding:{i}"), value=finding_text(fnd)))
    for cid, cver in sorted(result.tool.collectors.items()):
        meta_props.append(Property(name=prop(f"collector:{cid}:version"), value=cver))
    for name, value in advisory_db_pairs(result):
        meta_props.append(Property(name=name, value=value))

    for name, value in document_probe_pairs(result):
        meta_props.append(Property(name=name, value=value))
    return _Graph(root_ref, refs, meta_props, deps, contained_by, top)


def _tool_component(result: ScanResult) -> CdxComponent:
    return CdxComponent(
        type=CdxComponentType.APPLICATION,
        name=result.tool.name or "gpusbom",
        version=result.tool.version or None,
        bom_ref=tool_ref(result),
    )


def tool_ref(result: ScanResult) -> str:
    return f"tool:{result.tool.name or 'gpusbom'}@{result.tool.version or 'unknown'}"


def build_bom(result: ScanResult, spec: SchemaVersion, *, skeleton: bool = False) -> Bom:
    """The scan result as a cyclonedx-python-lib ``Bom`` (deterministic for the same result).
    ``skeleton``: without its components and dependencies (the metadata, the serial number
    and the vulnerabilities only: the fast JSON path writes the rest itself)."""
    g = _graph(result)
    root_ref, refs, meta_props, deps, contained_by, top = (
        g.root_ref, g.refs, g.meta_props, g.deps, g.contained_by, g.top)
    tool = _tool_component(result)
    components = [] if skeleton else [
        _to_cdx_component(c, spec, sorted(contained_by.get(c.bom_ref, [])))
        for c in sorted(result.components, key=lambda c: c.bom_ref)
    ]
    if result.probes:  # probe evidence as gpusbom:probe:* properties on the device component
        for cc in components:
            pairs = component_probe_pairs(result, str(cc.bom_ref.value))
            cc.properties.update(Property(name=n, value=v) for n, v in pairs)
    dependencies = [] if skeleton else [
        Dependency(ref=BomRef(root_ref), dependencies=[Dependency(ref=BomRef(r)) for r in sorted(top)])
    ] + [
        Dependency(ref=BomRef(r), dependencies=[Dependency(ref=BomRef(d)) for d in sorted(ds)])
        for r, ds in sorted(deps.items())
    ]
    metadata = BomMetaData(
        tools=ToolRepository(components=[tool]),
        component=_target_component(result),
        properties=meta_props,
        timestamp=parse_timestamp(result.timestamp),
    )
    return Bom(
        serial_number=document_uuid(result, f"cyclonedx-{spec.to_version()}"),
        metadata=metadata,
        components=components,
        dependencies=dependencies,
        vulnerabilities=vulnerabilities(result, refs),
    )


def _schema(options: WriterOptions) -> SchemaVersion:
    v = options.cyclonedx_version or "1.6"
    if v not in SCHEMA_VERSIONS:
        raise UsageError(f"unsupported CycloneDX version {v!r}; choose one of: "
                         + ", ".join(SCHEMA_VERSIONS))
    return SCHEMA_VERSIONS[v]


def _single_identity(text: str) -> str:
    """``--cyclonedx-compat``: each ``evidence.identity`` array -> its first object.

    CycloneDX 1.6 allows the single object (deprecated) besides the array; Syft 1.18.1
    and other cyclonedx-go readers decode only the object
    (https://github.com/CycloneDX/cyclonedx-go/issues/192). The first identity is the
    purl (else the name), with every method; the name and version identities dropped
    repeat the component's own name and version fields."""
    import json

    doc = json.loads(text)
    for c in doc.get("components") or []:
        ev = c.get("evidence") if isinstance(c, dict) else None
        ids = ev.get("identity") if isinstance(ev, dict) else None
        if isinstance(ev, dict) and isinstance(ids, list) and ids:
            rank = {"purl": 0, "name": 1}
            ev["identity"] = min(ids, key=lambda i: rank.get(str(i.get("field")), 2))
    return dumps_indented(doc, indent=2)


def _explicit_depends_on(text: str) -> str:
    """``"dependsOn": []`` on every dependency entry without one.

    The library leaves the key out for a leaf; the spec allows that, but a leaf written
    without it reads as "dependencies unknown" to some consumers, and cdxgen's validator
    (12.8.4) crashes on it. An empty list says "depends on nothing" explicitly."""
    import json

    doc = json.loads(text)
    for dep in doc.get("dependencies") or []:
        if isinstance(dep, dict):
            dep.setdefault("dependsOn", [])
    return dumps_indented(doc, indent=2)


def render(result: ScanResult, output_format: OutputFormat, spec: SchemaVersion, *,
           fast: Callable[[ScanResult, SchemaVersion], str | None] | None = None) -> str:
    """The document; ``fast``: what writes JSON first, the library where it returns None
    (the writer passes ``_cyclonedx_fast.render_json``: the same bytes)."""
    if fast is not None and output_format is OutputFormat.JSON:
        text = fast(result, spec)
        if text is not None:
            return text
    bom = build_bom(result, spec)
    with warnings.catch_warnings():
        # the library warns about things we decide on purpose (e.g. 1.5 feature drops)
        warnings.simplefilter("ignore")
        if output_format is OutputFormat.JSON:
            # written compact (the C encoder), then indented once by _explicit_depends_on:
            # the same document as the library's own indent=2, without encoding it twice
            text = _explicit_depends_on(
                make_outputter(bom, output_format, spec).output_as_string())
        else:
            text = make_outputter(bom, output_format, spec).output_as_string(indent=2)
    return text if text.endswith("\n") else text + "\n"


def write(result: ScanResult, out: TextIO, options: WriterOptions, xml: bool,
          fast: Callable[[ScanResult, SchemaVersion], str | None] | None = None) -> None:
    fmt = OutputFormat.XML if xml else OutputFormat.JSON
    text = render(result, fmt, _schema(options), fast=fast)
    if options.cyclonedx_compat and not xml:
        text = _single_identity(text) + "\n"
    out.write(text)
