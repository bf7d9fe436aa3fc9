"""Triage: analyses people record in the dashboard (Dependency-Track style), kept in the
inventory's ``analyses`` table and exported as VEX that ``gpusbom scan --vex`` applies.

An analysis is about a component and a vulnerability, not about one image: it applies to
every stored host and image whose finding names that vulnerability (its id or an alias) on
that component (:func:`component_key`: the purl without qualifiers or subpath, else
``name@version``). States:

- ``not_affected`` (with an OpenVEX justification) and ``false_positive``: the finding is
  suppressed (shown collapsed; VEX ``not_affected`` / CycloneDX ``false_positive``);
- ``accepted``: the risk is accepted (still affected; OpenVEX ``affected`` with the
  acceptance as action statement, CycloneDX ``exploitable`` with response ``will_not_fix``):
  shown as accepted, never suppressed by ``scan --vex``;
- ``in_triage``: being looked at (OpenVEX ``under_investigation``).

An analysis past its expiry is shown as expired and neither applied nor exported.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from typing import Any

from .. import __version__, clock
from ..errors import UsageError
from ..model import Component, Finding
from .schema import analyses
from .writer import bump

__all__ = ["JUSTIFICATIONS", "STATES", "Analysis", "active", "all_analyses", "component_key",
           "cyclonedx_vex", "delete", "lookup", "openvex", "record"]

STATES = ("not_affected", "false_positive", "accepted", "in_triage")
SUPPRESSING = ("not_affected", "false_positive")
JUSTIFICATIONS = ("component_not_present", "vulnerable_code_not_present",
                  "vulnerable_code_not_in_execute_path",
                  "vulnerable_code_cannot_be_controlled_by_adversary",
                  "inline_mitigations_already_exist")
_TO_CDX = {"component_not_present": "code_not_present",
           "vulnerable_code_not_present": "code_not_present",
           "vulnerable_code_not_in_execute_path": "code_not_reachable",
           "vulnerable_code_cannot_be_controlled_by_adversary": "requires_environment",
           "inline_mitigations_already_exist": "protected_by_mitigating_control"}
MAX_COMMENT = 4000


@dataclass(frozen=True)
class Analysis:
    component: str
    vulnerability: str
    state: str
    justification: str | None
    comment: str
    author: str
    expires: str | None
    created: str
    updated: str

    @property
    def expired(self) -> bool:
        if not self.expires:
            return False
        when = clock.parse_iso(self.expires)
        return when is not None and when <= clock.wall_now()

    @property
    def suppresses(self) -> bool:
        return self.state in SUPPRESSING and not self.expired

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "expired": self.expired}


def component_key(c: Component) -> str | None:
    """The identity an analysis is recorded under (``pkg:type/ns/name@version``)."""
    if c.purl:
        from packageurl import PackageURL

        try:
            p = PackageURL.from_string(c.purl)
        except ValueError:
            p = None
        if p is not None:
            return str(PackageURL(type=p.type, namespace=p.namespace, name=p.name,
                                  version=p.version).to_string())
    if c.name and c.version:
        return f"{c.name}@{c.version}"
    return None


def finding_names(f: Finding) -> list[str]:
    """The vulnerability ids a finding answers to (upper case), its own id first."""
    a = f.advisory
    names = [a.vulnerability, *a.aliases] if a is not None else []
    return [x.upper() for x in dict.fromkeys([*names, f.id]) if x]


def _row(r: Any) -> Analysis:
    return Analysis(component=r.component, vulnerability=r.vulnerability, state=r.state,
                    justification=r.justification, comment=r.comment, author=r.author,
                    expires=r.expires, created=r.created, updated=r.updated)


def all_analyses(store: Any) -> list[Analysis]:
    from sqlalchemy import select

    with store.engine.connect() as conn:
        return [_row(r) for r in conn.execute(select(analyses).order_by(
            analyses.c.vulnerability, analyses.c.component))]


def active(store: Any) -> dict[tuple[str, str], Analysis]:
    """(component, vulnerability) -> analysis, expired ones left out."""
    return {(a.component, a.vulnerability): a for a in all_analyses(store) if not a.expired}


def lookup(table: dict[tuple[str, str], Analysis], key: str | None,
           names: list[str]) -> Analysis | None:
    if key is None:
        return None
    return next((table[(key, n)] for n in names if (key, n) in table), None)


def _clean(text: str, limit: int, what: str) -> str:
    out = "".join(ch for ch in text if ch in "\n\t" or ch.isprintable()).strip()
    if len(out) > limit:
        raise UsageError(f"{what}: at most {limit} characters")
    return out


def validate(fields: dict[str, str]) -> dict[str, Any]:
    """The form's fields checked; raises ``UsageError`` naming the field."""
    component = _clean(fields.get("component", ""), 1024, "component")
    vuln = _clean(fields.get("vulnerability", ""), 128, "vulnerability").upper()
    state = fields.get("state", "").strip()
    just = fields.get("justification", "").strip() or None
    comment = _clean(fields.get("comment", ""), MAX_COMMENT, "comment")
    author = _clean(fields.get("author", ""), 255, "author")
    expires_in = fields.get("expires", "").strip()
    if not component or not vuln:
        raise UsageError("component and vulnerability: both are needed")
    if state not in STATES:
        raise UsageError(f"state {state!r}: use one of {', '.join(STATES)}")
    if just is not None and just not in JUSTIFICATIONS:
        raise UsageError(f"justification {just!r}: use one of {', '.join(JUSTIFICATIONS)}")
    if state == "not_affected" and just is None:
        raise UsageError("not_affected needs a justification (VEX requires one)")
    if not author:
        raise UsageError("author: say who records this analysis")
    if not comment:
        raise UsageError("comment: say why (it is the VEX impact statement)")
    expires = None
    if expires_in:
        when = clock.parse_iso(expires_in if "T" in expires_in else expires_in + "T00:00:00Z")
        if when is None:
            raise UsageError(f"expires {expires_in!r}: give a date (YYYY-MM-DD)")
        expires = clock.iso(when)
    return {"component": component, "vulnerability": vuln, "state": state,
            "justification": just if state == "not_affected" else None, "comment": comment,
            "author": author, "expires": expires}


def record(store: Any, fields: dict[str, str]) -> Analysis:
    """Insert or replace the analysis of (component, vulnerability)."""
    from sqlalchemy.dialects import postgresql, sqlite

    row = validate(fields)
    now = clock.iso(clock.wall_now())
    insert: Any = postgresql.insert if store.dialect == "postgresql" else sqlite.insert
    stmt = insert(analyses).values(**row, created=now, updated=now)
    stmt = stmt.on_conflict_do_update(
        index_elements=[analyses.c.component, analyses.c.vulnerability],
        set_={k: stmt.excluded[k] for k in ("state", "justification", "comment", "author",
                                             "expires", "updated")})
    with store.engine.connect().execution_options(gpusbom_write=True) as conn, conn.begin():
        conn.execute(stmt)
        bump(conn, store.dialect)
    return next(a for a in all_analyses(store)
                if (a.component, a.vulnerability) == (row["component"], row["vulnerability"]))


def delete(store: Any, component: str, vulnerability: str) -> bool:
    with store.engine.connect().execution_options(gpusbom_write=True) as conn, conn.begin():
        n = conn.execute(analyses.delete().where(
            analyses.c.component == component,
            analyses.c.vulnerability == vulnerability.upper())).rowcount
        bump(conn, store.dialect)
    return bool(n)


# ------------------------------------------------------------------ VEX export


def _stamp(rows: list[Analysis]) -> str:
    return max((a.updated for a in rows), default=clock.iso(clock.now()))


def _doc_id(rows: list[Analysis], kind: str) -> str:
    h = hashlib.sha256(kind.encode())
    for a in rows:
        h.update(repr(sorted(asdict(a).items())).encode())
    d = h.hexdigest()
    return f"{d[:8]}-{d[8:12]}-5{d[13:16]}-a{d[17:20]}-{d[20:32]}"


def _note(a: Analysis) -> str:
    until = f" until {a.expires}" if a.expires else ""
    return f"{a.state} by {a.author}{until}: {a.comment}"


def openvex(store: Any) -> dict[str, Any]:
    """The active analyses as an OpenVEX 0.2.0 document."""
    rows = [a for a in all_analyses(store) if not a.expired]
    statements = []
    for a in rows:
        product: dict[str, Any] = {"@id": a.component}
        if a.component.startswith("pkg:"):
            product["identifiers"] = {"purl": a.component}
        st: dict[str, Any] = {"vulnerability": {"name": a.vulnerability},
                              "products": [product], "timestamp": a.updated}
        if a.state in SUPPRESSING:
            st["status"] = "not_affected"
            st["justification"] = a.justification or "vulnerable_code_not_present"
            st["impact_statement"] = _note(a)
        elif a.state == "accepted":
            st["status"] = "affected"
            st["action_statement"] = "risk accepted: " + _note(a)
        else:
            st["status"] = "under_investigation"
            st["status_notes"] = _note(a)
        statements.append(st)
    return {"@context": "https://openvex.dev/ns/v0.2.0",
            "@id": f"urn:uuid:{_doc_id(rows, 'openvex')}", "author": "gpusbom inventory",
            "role": "triage", "timestamp": _stamp(rows), "version": 1,
            "tooling": f"gpusbom {__version__}", "statements": statements}


def cyclonedx_vex(store: Any) -> dict[str, Any]:
    """The active analyses as a CycloneDX 1.6 VEX document (affects by purl)."""
    rows = [a for a in all_analyses(store) if not a.expired]
    vulns = []
    for a in rows:
        analysis: dict[str, Any] = {"detail": _note(a)}
        if a.state == "not_affected":
            analysis["state"] = "not_affected"
            analysis["justification"] = _TO_CDX.get(a.justification or "", "code_not_present")
        elif a.state == "false_positive":
            analysis["state"] = "false_positive"
        elif a.state == "accepted":
            analysis["state"] = "exploitable"
            analysis["response"] = ["will_not_fix"]
        else:
            analysis["state"] = "in_triage"
        vulns.append({"bom-ref": f"triage:{a.vulnerability}:{a.component}",
                      "id": a.vulnerability, "analysis": analysis,
                      "affects": [{"ref": a.component}]})
    return {"bomFormat": "CycloneDX", "specVersion": "1.6",
            "serialNumber": f"urn:uuid:{_doc_id(rows, 'cyclonedx')}", "version": 1,
            "metadata": {"timestamp": _stamp(rows), "tools": {"components": [
                {"type": "application", "name": "gpusbom", "version": __version__}]}},
            "vulnerabilities": vulns}
