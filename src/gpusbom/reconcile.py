"""``gpusbom reconcile``: a declared SBOM against what the image's bytes show.

    reconcile(declared, observed, declared_source=...) -> Reconciliation

The declared SBOM is one attached to the image in its registry (an OCI referrer, see
``sources.registry.referrers``) or a file; the observed one is gpusbom's scan of the same
image. Both are compared on the components a package manager installed, the ones both
sides can name the same way: purl types ``deb``, ``rpm``, ``apk``, ``pypi``, ``npm``,
``conda``, ``gem``, ``golang``, ``cargo``, ``maven``, ``nuget``, ... (``PACKAGE_TYPES``).
gpusbom's own product identities (``pkg:generic/...``: a CUDA toolkit known from the
environment, a driver library known from its soname) and a tool's file or OS entries
name nothing the other side names, and are left out of both.

A component's key is its purl type and its name (PyPI names PEP 503-normalised, others
lower-cased; the purl namespace, ``debian`` or ``ubuntu``, is not compared). Three kinds
of difference, each with the versions and where gpusbom saw the package:

* ``declared-absent``: the SBOM names a package no file of the image holds;
* ``undeclared``: the image holds a package the SBOM does not name;
* ``version-mismatch``: both name it, with different versions (PyPI versions by PEP 440
  equality, ``6.0`` is ``6.0.0``; others as written).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .model import Component, ScanResult

__all__ = ["PACKAGE_TYPES", "Difference", "Reconciliation", "reconcile", "render_table"]

SCHEMA = "gpusbom/reconcile/1"
PACKAGE_TYPES = frozenset({
    "alpm", "apk", "cargo", "cocoapods", "composer", "conan", "conda", "deb", "gem",
    "golang", "hackage", "hex", "maven", "npm", "nuget", "pub", "pypi", "rpm", "swift",
})
KINDS = ("declared-absent", "undeclared", "version-mismatch")


@dataclass(frozen=True)
class Difference:
    kind: str  # one of KINDS
    ecosystem: str  # the purl type
    name: str
    declared: tuple[str, ...] = ()  # versions the SBOM names
    observed: tuple[str, ...] = ()  # versions the image holds
    paths: tuple[str, ...] = ()  # where gpusbom saw it (its evidence)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "ecosystem": self.ecosystem, "name": self.name,
                "declared": list(self.declared), "observed": list(self.observed),
                "paths": list(self.paths)}


@dataclass
class Reconciliation:
    target: str
    declared_source: str  # a path, or "registry attachment sha256:... in HOST"
    declared_count: int  # package components compared, each side
    observed_count: int
    matched: int
    differences: list[Difference] = field(default_factory=list)
    other_declared: list[str] = field(default_factory=list)  # more SBOM attachments, unused

    @property
    def agrees(self) -> bool:
        return not self.differences

    def count(self, kind: str) -> int:
        return sum(1 for d in self.differences if d.kind == kind)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA, "target": self.target,
            "declared": {"source": self.declared_source, "components": self.declared_count,
                         "other_attached_sboms": list(self.other_declared)},
            "observed": {"components": self.observed_count},
            "summary": {"matched": self.matched, **{k: self.count(k) for k in KINDS}},
            "differences": [d.to_dict() for d in self.differences],
        }


_PEP503 = re.compile(r"[-_.]+")


def _type_of(c: Component) -> str | None:
    if c.purl and c.purl.startswith("pkg:"):
        t = c.purl[4:].split("/", 1)[0].lower()
        return t if t in PACKAGE_TYPES else None
    eco = (c.ecosystem or "").lower()
    return eco if eco in PACKAGE_TYPES else None


def _name(ptype: str, c: Component) -> str:
    name = c.name.strip()
    if ptype == "pypi":
        return _PEP503.sub("-", name).lower()
    return name.lower()


def _same(ptype: str, a: set[str], b: set[str]) -> bool:
    """Do two version sets agree (PyPI: PEP 440 equality, ``6.0`` is ``6.0.0``)?"""
    if ptype != "pypi":
        return a == b
    from packaging.utils import canonicalize_version

    return {canonicalize_version(v) for v in a} == {canonicalize_version(v) for v in b}


@dataclass
class _Side:
    versions: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    names: dict[tuple[str, str], str] = field(default_factory=dict)
    paths: dict[tuple[str, str], set[str]] = field(default_factory=dict)


def _index(components: Iterable[Component]) -> _Side:
    side = _Side()
    for c in components:
        ptype = _type_of(c)
        if ptype is None or not c.name:
            continue
        key = (ptype, _name(ptype, c))
        side.versions.setdefault(key, set()).add((c.version or "").strip())
        side.names.setdefault(key, c.name)
        side.paths.setdefault(key, set()).update(e.path for e in c.evidence if e.path)
    return side


def reconcile(declared: ScanResult, observed: ScanResult, *, declared_source: str,
              target: str = "", other_declared: Iterable[str] = ()) -> Reconciliation:
    """The differences between ``declared`` (an SBOM read back) and ``observed`` (a scan)."""
    d, o = _index(declared.components), _index(observed.components)
    diffs: list[Difference] = []
    matched = 0
    for key in sorted(set(d.versions) | set(o.versions)):
        dv, ov = d.versions.get(key), o.versions.get(key)
        name = o.names.get(key) or d.names[key]
        paths = tuple(sorted(o.paths.get(key, ())))[:8]
        if ov is None:
            diffs.append(Difference("declared-absent", key[0], name, tuple(sorted(dv or ()))))
        elif dv is None:
            diffs.append(Difference("undeclared", key[0], name, (), tuple(sorted(ov)), paths))
        elif dv is not None and not _same(key[0], dv, ov):
            diffs.append(Difference("version-mismatch", key[0], name, tuple(sorted(dv)),
                                    tuple(sorted(ov)), paths))
        else:
            matched += 1
    diffs.sort(key=lambda x: (KINDS.index(x.kind), x.ecosystem, x.name.lower()))
    return Reconciliation(
        target=target or observed.target.reference, declared_source=declared_source,
        declared_count=len(d.versions), observed_count=len(o.versions), matched=matched,
        differences=diffs, other_declared=list(other_declared),
    )


def render_table(r: Reconciliation) -> str:
    """The plain-text report: a summary line, then one row per difference."""
    lines = [
        f"target:   {r.target}",
        f"declared: {r.declared_source} ({r.declared_count} packages)",
        f"observed: {r.observed_count} packages; {r.matched} agree",
    ]
    if not r.differences:
        lines.append("the declared SBOM agrees with the image")
        return "\n".join(lines) + "\n"
    lines.append(", ".join(f"{r.count(k)} {k}" for k in KINDS))
    rows = [("KIND", "ECOSYSTEM", "NAME", "DECLARED", "OBSERVED", "WHERE")]
    for x in r.differences:
        rows.append((x.kind, x.ecosystem, x.name, ", ".join(x.declared) or "-",
                     ", ".join(x.observed) or "-", x.paths[0] if x.paths else "-"))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines.append("")
    for row in rows:
        lines.append("  ".join(v.ljust(widths[i]) for i, v in enumerate(row[:5])) + "  " + row[5])
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- the command


@dataclass(frozen=True)
class ReconcileRequest:
    """``gpusbom reconcile TARGET [--declared PATH]``."""

    reference: str
    declared: str | None = None  # a file; None: the SBOM attached to the image
    platform: str | None = None
    source: str | None = None
    registry: Any = None  # sources.registry.RegistryOptions


def run_reconcile(req: ReconcileRequest) -> Reconciliation:
    """Scan ``req.reference`` (no advisories), read the declared SBOM, compare.

    ``InputError`` when there is no declared SBOM (not a registry image, or none attached:
    give ``--declared``) or it cannot be read."""
    from .errors import InputError
    from .pipeline import ScanRequest, scan_open
    from .sbomin import load_sbom, parse_sbom

    sreq = ScanRequest(reference=req.reference, platform=req.platform, source=req.source,
                       registry=req.registry, advisories=False)
    with scan_open(sreq) as scanned:
        observed, attached = scanned.result, scanned.view.attachments
    if req.declared is not None:
        return reconcile(load_sbom(req.declared), observed, declared_source=req.declared,
                         target=req.reference)
    sboms = attached.of_kind("sbom") if attached is not None else []
    if not sboms:
        why = ("it has no SBOM attached (no OCI referrer holds CycloneDX or SPDX)"
               if attached is not None else "only a registry image has attachments")
        raise InputError(f"{req.reference}: no declared SBOM to compare: {why}; "
                         "pass --declared PATH")
    first = sboms[0]
    origin = first.origin(attached.registry)
    declared = parse_sbom(first.document, f"attachment {first.digest}")
    return reconcile(declared, observed, declared_source=origin, target=req.reference,
                     other_declared=[a.digest for a in sboms[1:]])
