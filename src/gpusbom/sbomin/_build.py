"""Shared assembly of a ScanResult from the components an SBOM reader found."""

from __future__ import annotations

from dataclasses import dataclass, field

from packageurl import PackageURL

from .. import __version__
from ..clock import parse_iso
from ..model import (
    Component,
    ComponentType,
    Evidence,
    EvidenceMethod,
    Finding,
    ProbeResult,
    Relationship,
    ScanResult,
    Target,
    ToolInfo,
    Unknown,
)
from ..stack import summarize
from ._classify import ECOSYSTEMS, classify
from ._hints import ecosystem_hint

#: at most this many file paths per component become evidence (an SPDX document may
#: list thousands of files for one package)
MAX_PATHS = 64

_TYPES = {t.value: t for t in ComponentType}


def component_type(value: object) -> ComponentType:
    return _TYPES.get(str(value or "").lower(), ComponentType.LIBRARY)


def purl_parts(purl: str | None) -> PackageURL | None:
    if not purl:
        return None
    try:
        return PackageURL.from_string(purl)
    except ValueError:
        return None


def is_package_purl(purl: str | None) -> bool:
    """A purl naming a package (not an image: ``pkg:oci``, ``pkg:docker``, ``pkg:container``)."""
    p = purl_parts(purl)
    return p is not None and p.type not in IMAGE_PURL_TYPES


#: purl types that name a container image: an SBOM subject of these is the scan target
IMAGE_PURL_TYPES = ("oci", "docker", "container")


def foreign_component(
    *,
    sbom: str,
    collector: str,
    name: str,
    version: str | None,
    ctype: ComponentType,
    purl: str | None,
    cpe: str | None,
    supplier: str | None,
    description: str | None,
    licenses: list[str],
    properties: dict[str, str],
    paths: list[str],
    ref: str | None,
) -> Component:
    """A component another tool declared: ecosystem from its purl, GPU properties from the
    package name (``_classify``), one ``sbom-declared`` evidence per path it names."""
    p = purl_parts(purl)
    ecosystem = ECOSYSTEMS.get(p.type) if p is not None else ecosystem_hint(properties)
    props = dict(properties)
    if p is not None and ecosystem in ("deb", "rpm", "apk"):
        up = (p.qualifiers or {}).get("upstream")  # Syft: upstream=glibc or glibc@2.36-9
        if isinstance(up, str) and up and "source-package" not in props:
            src, _, sver = up.partition("@")
            props["source-package"] = src
            if sver:
                props["source-version"] = sver
    ident_name = name
    if ecosystem == "golang" and p is not None and p.namespace and "/" not in name:
        ident_name = f"{p.namespace}/{p.name}"
    for k, v in classify(ecosystem, ident_name, version).items():
        props.setdefault(k, v)
    detail = f"declared in {sbom}"
    uniq = sorted(dict.fromkeys(x for x in paths if x))[:MAX_PATHS]
    evidence = [Evidence(collector, EvidenceMethod.SBOM.value, path, None, detail) for path in uniq]
    if not evidence:
        evidence = [Evidence(collector, EvidenceMethod.SBOM.value, None, None, detail)]
    c = Component(
        name=ident_name,
        version=version,
        type=ctype,
        purl=purl,
        cpe=cpe,
        supplier=supplier,
        description=description,
        licenses=licenses,
        properties=props,
        evidence=evidence,
        bom_ref=ref or "",
        ecosystem=ecosystem,
    )
    return c


def _sort_key(c: Component) -> tuple[str, ...]:
    path = c.evidence[0].path if c.evidence and c.evidence[0].path else ""
    return (c.type.value, c.ecosystem or "", c.name, c.version or "", path, c.bom_ref)


@dataclass
class Parts:
    """What a reader found, before the ScanResult is put together."""

    target: Target
    components: list[Component] = field(default_factory=list)
    relationships: list[tuple[str, str, str]] = field(default_factory=list)
    unknowns: list[Unknown] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    probes: list[ProbeResult] = field(default_factory=list)
    collectors: dict[str, str] = field(default_factory=dict)
    timestamp: str | None = None
    # SBOM ids -> our bom-refs, where they differ (duplicates renamed)
    renamed: dict[str, str] = field(default_factory=dict)


def finish(parts: Parts) -> ScanResult:
    """Unique, stable bom-refs (the SBOM's where usable), sorted components, relationships
    between known components, the stack summary."""
    from ..safetext import sanitize_result

    # lone surrogates ("\udce9") and NUL are legal in JSON text, not in our outputs
    sanitize_result((parts.components, parts.unknowns, parts.target))
    taken: set[str] = set()
    for c in sorted(parts.components, key=_sort_key):
        ref = c.bom_ref
        if not ref or ref in taken:
            old = ref
            if ref:
                n = 2
                while f"{ref}-{n}" in taken:
                    n += 1
                c.bom_ref = f"{ref}-{n}"
                taken.add(c.bom_ref)
            else:
                c.assign_ref(taken)
            if old:
                parts.renamed.setdefault(old, c.bom_ref)
        else:
            taken.add(ref)
    parts.components.sort(key=_sort_key)
    if parts.timestamp is not None and parse_iso(parts.timestamp) is None:
        # said, not silently replaced: outputs are stamped with the time of this reading
        parts.unknowns.append(Unknown(
            collector="sbom",
            reason=f"document timestamp {parts.timestamp!r} is not ISO 8601; not kept"))
        parts.timestamp = None
    rels = {
        (parts.renamed.get(s, s), t, parts.renamed.get(d, d))
        for s, t, d in parts.relationships
    }
    return ScanResult(
        target=parts.target,
        components=parts.components,
        relationships=[Relationship(s, t, d) for s, t, d in sorted(rels) if s != d],
        unknowns=parts.unknowns,
        tool=ToolInfo(name="gpusbom", version=__version__, collectors=dict(parts.collectors)),
        timestamp=parts.timestamp,
        stacks=summarize(parts.components),
        findings=parts.findings,
        probes=sorted(parts.probes, key=lambda p: (p.device_ref or "", p.backend,
                                                  p.device_id or "", p.device or "")),
    )


def sbom_target(path: str) -> Target:
    return Target(kind="sbom", reference=f"sbom:{path}", source="sbom")
