"""VEX: statements that a vulnerability does not affect a component (``gpusbom scan --vex``).

Two formats are read (JSON):

- **CycloneDX VEX**: ``vulnerabilities[]`` with ``id``, ``references[].id`` (aliases),
  ``analysis.state`` / ``justification`` / ``detail`` and ``affects[].ref`` (a bom-ref of
  the VEX document's own components, a BOM-Link ``urn:cdx:...#ref``, or a purl);
- **OpenVEX** (0.0.x and 0.2.x): ``statements[]`` with ``vulnerability`` (a name or an
  object with ``name`` / ``@id`` / ``aliases``), ``products[]`` (purl strings, or objects
  with ``@id``, ``identifiers.purl`` and ``subcomponents``), ``status``,
  ``justification``, ``impact_statement``.

A statement applies to a finding when one of its vulnerability names equals the
finding's vulnerability, advisory id or an alias, and one of its products names the
finding's component: by purl (type, namespace and name equal; the version and the
qualifiers given must equal), by bom-ref, or as ``name@version`` / ``name``. An OpenVEX
product that names the scanned image itself, without subcomponents, covers every
component of the image.

Only ``not_affected`` / ``fixed`` (CycloneDX: ``not_affected``, ``false_positive``,
``resolved``, ``resolved_with_pedigree``) change a finding: its status becomes
``not-affected`` and ``AdvisoryMatch.justification`` keeps ``TOKEN: text (file)``. Where
several statements match one finding, the last one read decides (files in the order
given, statements in document order). Suppressed findings stay in the result: JSON and
CycloneDX carry them with their analysis, SPDX with the justification, and the table
lists them below the main advisory table with their justification.

A file that is not JSON, not one of the two formats, or whose statements are malformed
raises ``InputError`` naming the file: a half-read VEX never suppresses anything.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..identity import target_identity
from ..model import Component, Finding, ScanResult
from ..safetext import loads_json

__all__ = ["VexStatement", "apply_vex", "cyclonedx_justification", "parse_vex", "read_vex"]

OPENVEX_STATUSES = ("not_affected", "affected", "fixed", "under_investigation")
OPENVEX_JUSTIFICATIONS = (
    "component_not_present",
    "vulnerable_code_not_present",
    "vulnerable_code_not_in_execute_path",
    "vulnerable_code_cannot_be_controlled_by_adversary",
    "inline_mitigations_already_exist",
)
CDX_STATES = ("resolved", "resolved_with_pedigree", "exploitable", "in_triage",
              "false_positive", "not_affected")
CDX_JUSTIFICATIONS = (
    "code_not_present", "code_not_reachable", "requires_configuration", "requires_dependency",
    "requires_environment", "protected_by_compiler", "protected_at_runtime",
    "protected_at_perimeter", "protected_by_mitigating_control",
)
# OpenVEX justification -> the closest CycloneDX one (the OpenVEX term stays in the detail)
_OPENVEX_TO_CDX = {
    "component_not_present": "code_not_present",
    "vulnerable_code_not_present": "code_not_present",
    "vulnerable_code_not_in_execute_path": "code_not_reachable",
    "vulnerable_code_cannot_be_controlled_by_adversary": "requires_environment",
    "inline_mitigations_already_exist": "protected_by_mitigating_control",
}
_SUPPRESS = {"not_affected", "fixed", "false_positive", "resolved", "resolved_with_pedigree"}


@dataclass(frozen=True)
class VexStatement:
    vulnerabilities: frozenset[str]  # upper-case ids and aliases
    products: tuple[str, ...]  # purls, bom-refs, name@version; "*" = every component
    status: str  # OpenVEX terms; CycloneDX states are kept as they are
    justification: str | None
    detail: str | None
    source: str  # the file
    #: where a statement not read from a ``--vex`` file came from (the vendor's registry
    #: attachment: ``vendor VEX: registry attachment sha256:...``); None: ``source``
    origin: str | None = None

    @property
    def suppresses(self) -> bool:
        return self.status in _SUPPRESS

    def text(self) -> str:
        """What ``AdvisoryMatch.justification`` keeps: ``TOKEN: detail (file)``."""
        token = self.justification or (self.status if self.status != "not_affected" else None)
        body = ": ".join(x for x in (token, self.detail) if x) or "not affected"
        if self.origin:
            return f"{body} ({self.origin})"
        return f"{body} (VEX {Path(self.source).name})"


def cyclonedx_justification(text: str) -> tuple[str | None, str]:
    """``AdvisoryMatch.justification`` -> (CycloneDX justification or None, detail)."""
    token = text.partition(": ")[0]
    token = token.split(" (VEX ", 1)[0].split(" (vendor VEX", 1)[0].strip()
    if token in CDX_JUSTIFICATIONS:
        return token, text
    if token in _OPENVEX_TO_CDX:
        return _OPENVEX_TO_CDX[token], text
    return None, text


# --------------------------------------------------------------------------- reading


def _bad(path: str, what: str) -> InputError:
    return InputError(f"{path}: not a valid VEX document: {what}")


def _str(x: Any) -> str | None:
    return x.strip() if isinstance(x, str) and x.strip() else None


def read_vex(path: str) -> list[VexStatement]:
    """The statements of one CycloneDX VEX or OpenVEX JSON file; ``InputError`` if bad."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: VEX file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read VEX file: {exc}") from None
    return parse_vex(text, path)


def parse_vex(text: str | bytes, path: str, origin: str | None = None) -> list[VexStatement]:
    """The statements of one CycloneDX VEX or OpenVEX JSON document named ``path`` (in
    messages); ``origin`` is kept on every statement (see ``VexStatement.origin``)."""
    try:
        doc = loads_json(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: VEX file is not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise _bad(path, "the top level is not an object")
    context = doc.get("@context")
    if (isinstance(context, str) and "openvex" in context) or "statements" in doc:
        out = _openvex(doc, path)
    elif doc.get("bomFormat") == "CycloneDX" or "vulnerabilities" in doc:
        out = _cyclonedx(doc, path)
    else:
        raise _bad(path, "neither CycloneDX (bomFormat/vulnerabilities) nor OpenVEX (statements)")
    if origin:
        out = [dataclasses.replace(st, origin=origin) for st in out]
    return out


def _cyclonedx(doc: dict[str, Any], path: str) -> list[VexStatement]:
    vulns = doc.get("vulnerabilities", [])
    if not isinstance(vulns, list):
        raise _bad(path, "'vulnerabilities' is not a list")
    # affects[].ref points at the document's own components: take their identities too
    own: dict[str, list[str]] = {}
    for c in _walk_components(doc, path):
        ref = _str(c.get("bom-ref"))
        if ref:
            ids = [x for x in (_str(c.get("purl")), _name_at(c)) if x]
            own[ref] = ids
    out = []
    for i, v in enumerate(vulns):
        where = f"vulnerabilities[{i}]"
        if not isinstance(v, dict):
            raise _bad(path, f"{where} is not an object")
        vid = _str(v.get("id"))
        if vid is None:
            raise _bad(path, f"{where} has no id")
        names = {vid.upper()}
        for r in v.get("references") or []:
            if isinstance(r, dict) and _str(r.get("id")):
                names.add(str(r["id"]).strip().upper())
        analysis = v.get("analysis")
        if analysis is None:
            continue  # a vulnerability without analysis states nothing
        if not isinstance(analysis, dict):
            raise _bad(path, f"{where}.analysis is not an object")
        state = analysis.get("state")
        if state is None:
            continue
        if state not in CDX_STATES:
            raise _bad(path, f"{where}.analysis.state {state!r} is not one of {CDX_STATES}")
        just = analysis.get("justification")
        if just is not None and just not in CDX_JUSTIFICATIONS:
            raise _bad(path, f"{where}.analysis.justification {just!r} is not a CycloneDX one")
        affects = v.get("affects")
        if not isinstance(affects, list) or not affects:
            raise _bad(path, f"{where}.affects must list the components it applies to")
        products: list[str] = []
        for j, a in enumerate(affects):
            ref = _str(a.get("ref")) if isinstance(a, dict) else None
            if ref is None:
                raise _bad(path, f"{where}.affects[{j}] has no ref")
            if ref.startswith("urn:cdx:") and "#" in ref:
                ref = ref.split("#", 1)[1]  # BOM-Link to a component of another BOM
            products.append(ref)
            products.extend(own.get(ref, []))
        out.append(VexStatement(
            vulnerabilities=frozenset(names), products=tuple(products), status=str(state),
            justification=just, detail=_str(analysis.get("detail")), source=path,
        ))
    return out


def _walk_components(doc: dict[str, Any], path: str) -> Iterable[dict[str, Any]]:
    stack = list(doc.get("components") or [])
    meta = doc.get("metadata")
    if isinstance(meta, dict) and isinstance(meta.get("component"), dict):
        stack.append(meta["component"])
    while stack:
        c = stack.pop()
        if not isinstance(c, dict):
            raise _bad(path, "a component is not an object")
        yield c
        stack.extend(c.get("components") or [])


def _name_at(c: dict[str, Any]) -> str | None:
    name = _str(c.get("name"))
    if name is None:
        return None
    ver = _str(c.get("version"))
    return f"{name}@{ver}" if ver else name


def _openvex(doc: dict[str, Any], path: str) -> list[VexStatement]:
    stmts = doc.get("statements")
    if not isinstance(stmts, list):
        raise _bad(path, "'statements' is not a list")
    out = []
    for i, s in enumerate(stmts):
        where = f"statements[{i}]"
        if not isinstance(s, dict):
            raise _bad(path, f"{where} is not an object")
        status = s.get("status")
        if status not in OPENVEX_STATUSES:
            raise _bad(path, f"{where}.status {status!r} is not one of {OPENVEX_STATUSES}")
        v = s.get("vulnerability")
        names: set[str] = set()
        if isinstance(v, str) and v.strip():
            names.add(v.strip().upper())
        elif isinstance(v, dict):
            for key in ("name", "@id"):
                if _str(v.get(key)):
                    names.add(str(v[key]).strip().upper())
            names.update(str(a).strip().upper() for a in v.get("aliases") or [] if _str(a))
        if not names:
            raise _bad(path, f"{where} names no vulnerability")
        just = s.get("justification")
        if just is not None and just not in OPENVEX_JUSTIFICATIONS:
            raise _bad(path, f"{where}.justification {just!r} is not an OpenVEX one")
        products = s.get("products")
        if not isinstance(products, list) or not products:
            raise _bad(path, f"{where}.products must list the products it applies to")
        ids: list[str] = []
        for j, p in enumerate(products):
            ids.extend(_openvex_product(p, path, f"{where}.products[{j}]"))
        detail = _str(s.get("impact_statement")) or _str(s.get("status_notes")) or _str(
            s.get("action_statement"))
        out.append(VexStatement(
            vulnerabilities=frozenset(names), products=tuple(ids), status=status,
            justification=just, detail=detail, source=path,
        ))
    return out


def _openvex_product(p: Any, path: str, where: str) -> list[str]:
    if isinstance(p, str) and p.strip():
        return [p.strip()]
    if not isinstance(p, dict):
        raise _bad(path, f"{where} is neither an identifier nor an object")
    own = [x for x in (_str(p.get("@id")),) if x]
    idents = p.get("identifiers")
    if isinstance(idents, dict):
        own.extend(str(x).strip() for x in idents.values() if _str(x))
    subs = p.get("subcomponents") or []
    if not isinstance(subs, list):
        raise _bad(path, f"{where}.subcomponents is not a list")
    sub_ids: list[str] = []
    for k, sc in enumerate(subs):
        sub_ids.extend(_openvex_product(sc, path, f"{where}.subcomponents[{k}]"))
    if not own and not sub_ids:
        raise _bad(path, f"{where} has no @id, identifiers or subcomponents")
    if sub_ids:
        # the product (an image) contains the subcomponents: match those, in that product
        return [f"{x}\t{o}" for x in sub_ids for o in (own or ["*"])]
    return own


# --------------------------------------------------------------------------- matching


def _purl(s: str) -> Any:
    from packageurl import PackageURL

    try:
        return PackageURL.from_string(s)
    except ValueError:
        return None


def _pname(ptype: str, name: str) -> str:
    n = name.lower()
    return n.replace("_", "-").replace(".", "-") if ptype == "pypi" else n


def _purl_matches(want: Any, have: Any) -> bool:
    if want.type != have.type or _pname(want.type, want.name) != _pname(have.type, have.name):
        return False
    if (want.namespace or "").lower() != (have.namespace or "").lower():
        return False
    if want.version and want.version != have.version:
        return False
    hq = have.qualifiers or {}
    return all(hq.get(k) == v for k, v in (want.qualifiers or {}).items())


def _component_matches(ident: str, c: Component) -> bool:
    if ident == c.bom_ref:
        return True
    if ident.startswith("pkg:"):
        want = _purl(ident)
        have = _purl(c.purl) if c.purl else None
        return want is not None and have is not None and _purl_matches(want, have)
    name, _, version = ident.partition("@")
    return name == c.name and (not version or version == c.version)


def _target_ids(result: ScanResult) -> set[str]:
    t = result.target
    out = {x for x in (t.reference, t.manifest_digest, t.image_id, target_identity(t).root_ref) if x}
    for d in (t.manifest_digest, t.image_id):
        if d:
            out.add(d.split(":", 1)[-1])
    return out


def _covers(stmt: VexStatement, c: Component, target_ids: set[str]) -> bool:
    for ident in stmt.products:
        if "\t" in ident:
            # "subcomponent<TAB>product": the subcomponent is what the statement is about
            # (the product is usually the image; a product we cannot identify still scopes
            # nothing more precisely than the subcomponent does)
            if _component_matches(ident.split("\t", 1)[0], c):
                return True
        elif _names_target(ident, target_ids) or _component_matches(ident, c):
            return True
    return False


def _names_target(ident: str, target_ids: set[str]) -> bool:
    if ident in target_ids:
        return True
    if ident.startswith(("pkg:oci/", "pkg:docker/")):
        p = _purl(ident)
        if p is not None and p.version:
            return p.version in target_ids or p.version.split(":", 1)[-1] in target_ids
    return False


def _finding_names(f: Finding) -> set[str]:
    a = f.advisory
    assert a is not None  # noqa: S101 - type narrowing of an invariant
    return {x.upper() for x in (f.id, a.vulnerability, a.advisory, *a.aliases)}


def apply_vex(result: ScanResult, paths: Sequence[str],
              vendor: Sequence[VexStatement] = (), also_target: Iterable[str] = ()) -> None:
    """Mark advisory findings that a VEX statement says do not affect their component as
    ``not-affected`` (in place), keeping the statement's justification. ``vendor``: statements
    read from the image's registry attachments; they are read first, so a ``--vex`` file's
    statement about the same finding decides over the vendor's. ``also_target``: more
    digests that name the scanned image (its multi-platform index)."""
    statements: list[VexStatement] = list(vendor)
    for p in paths:
        statements.extend(read_vex(p))  # every file is read before anything changes
    if not statements:
        return
    comps = {c.bom_ref: c for c in result.components}
    target_ids = _target_ids(result)
    for d in also_target:
        target_ids.update((d, d.split(":", 1)[-1]))
    out: list[Finding] = []
    for f in result.findings:
        if f.kind != "advisory" or f.advisory is None:
            out.append(f)
            continue
        names = _finding_names(f)
        decided: VexStatement | None = None
        for s in statements:
            if not (s.vulnerabilities & names):
                continue
            fc = [comps[r] for r in f.components if r in comps]
            if any(_covers(s, c, target_ids) for c in fc):
                decided = s
        if decided is not None and decided.suppresses:
            adv = dataclasses.replace(
                f.advisory, status="not-affected", justification=decided.text()
            )
            f = dataclasses.replace(f, advisory=adv)
        out.append(f)
    result.findings = out
