"""What ``advisories update`` adds to the user's database beside the records: CISA's Known
Exploited Vulnerabilities catalog (KEV) and per-CVE descriptions.

Both live only in the updated database in the user cache (the bundle's ``kev`` and
``descriptions`` keys). The snapshot shipped with gpusbom holds facts only: no vendor
prose, no KEV copy. Findings carry the KEV ``dateAdded`` and the description when the
active database has them (``AdvisoryMatch.kev`` / ``.description``).

KEV format (CISA's ``known_exploited_vulnerabilities_schema.json``, github.com/cisagov/
kev-data): ``{"catalogVersion", "dateReleased", "count", "vulnerabilities": [{"cveID",
"dateAdded", "dueDate", "knownRansomwareCampaignUse", ...}]}``. Only the ids, dates and
the ransomware flag are kept (CISA's short descriptions are not).
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import AdvisoryError

__all__ = ["KEV_URL", "KevError", "check_descriptions", "check_kev", "clean_text",
           "csaf_descriptions", "osv_description", "parse_kev"]

KEV_URL = ("https://www.cisa.gov/sites/default/files/feeds/"
           "known_exploited_vulnerabilities.json")
_CVE = re.compile(r"^CVE-[0-9]{4}-[0-9]{4,19}$")
_DATE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
_MAX_DESCRIPTION = 4000  # characters kept of one description
# C0/C1 controls (terminal escape sequences among them) and bidi overrides: never shown
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]+")


class KevError(AdvisoryError):
    """The KEV document is not CISA's format (or arrived cut short), or a stored copy of it
    or of the descriptions is malformed."""


def parse_kev(doc: Any) -> dict[str, Any]:
    """CISA's KEV JSON -> ``{"catalogVersion", "dateReleased", "entries": {CVE: {...}}}``.

    ``count`` must equal the number of entries (a catalog cut short is refused whole), and
    every entry needs a CVE id and a ``dateAdded`` date."""
    if not isinstance(doc, dict) or not isinstance(doc.get("vulnerabilities"), list):
        raise KevError("not a KEV catalog (no 'vulnerabilities' list)")
    vulns = doc["vulnerabilities"]
    count = doc.get("count")
    if not isinstance(count, int) or count != len(vulns):
        raise KevError(f"'count' is {count!r} but the catalog lists {len(vulns)} entries")
    entries: dict[str, dict[str, str]] = {}
    for i, v in enumerate(vulns):
        cve = v.get("cveID") if isinstance(v, dict) else None
        added = v.get("dateAdded") if isinstance(v, dict) else None
        if not isinstance(cve, str) or not _CVE.match(cve):
            raise KevError(f"entry {i}: 'cveID' is not a CVE id: {cve!r}")
        if not isinstance(added, str) or not _DATE.match(added):
            raise KevError(f"entry {i} ({cve}): 'dateAdded' is not a date: {added!r}")
        e = {"dateAdded": added}
        due = v.get("dueDate")
        if isinstance(due, str) and _DATE.match(due):
            e["dueDate"] = due
        ransom = v.get("knownRansomwareCampaignUse")
        if ransom in ("Known", "Unknown"):
            e["knownRansomwareCampaignUse"] = ransom
        entries[cve] = e
    return {"catalogVersion": str(doc.get("catalogVersion") or ""),
            "dateReleased": str(doc.get("dateReleased") or ""),
            "entries": dict(sorted(entries.items()))}


def check_kev(value: Any) -> dict[str, dict[str, str]]:
    """The ``kev`` key of a stored bundle -> CVE -> entry; ``KevError`` when malformed."""
    if value is None:
        return {}
    if not isinstance(value, dict) or not isinstance(value.get("entries"), dict):
        raise KevError("'kev' is not a KEV copy")
    out: dict[str, dict[str, str]] = {}
    for cve, e in value["entries"].items():
        if (not isinstance(cve, str) or not _CVE.match(cve) or not isinstance(e, dict)
                or not isinstance(e.get("dateAdded"), str) or not _DATE.match(e["dateAdded"])):
            raise KevError(f"'kev' entry {cve!r} is malformed")
        out[cve] = {k: str(x) for k, x in e.items() if isinstance(x, str)}
    return out


def check_descriptions(value: Any) -> dict[str, str]:
    """The ``descriptions`` key of a stored bundle -> id -> text; ``KevError`` when not."""
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(x, str) for k, x in value.items()):
        raise KevError("'descriptions' is not an object of strings")
    return {k: clean_text(x) for k, x in value.items()}


def clean_text(text: str) -> str:
    """One line of plain text: controls (escape sequences) and runs of white space become
    one space; bounded length."""
    s = " ".join(_CONTROLS.sub(" ", text).split())
    return s if len(s) <= _MAX_DESCRIPTION else s[: _MAX_DESCRIPTION - 3] + "..."


def csaf_descriptions(doc: dict[str, Any]) -> dict[str, str]:
    """Per-CVE text of a CSAF document: each vulnerability's ``description`` notes (else its
    ``summary`` notes), keyed as the CSAF importer keys the vulnerability (its ``cve``)."""
    out: dict[str, str] = {}
    for v in doc.get("vulnerabilities") or []:
        if not isinstance(v, dict) or not isinstance(v.get("cve"), str):
            continue
        notes = [n for n in v.get("notes") or [] if isinstance(n, dict)]
        for category in ("description", "summary"):
            text = " ".join(str(n.get("text") or "") for n in notes
                            if n.get("category") == category).strip()
            if text:
                out[v["cve"]] = clean_text(text)
                break
    return out


def osv_description(doc: dict[str, Any]) -> str | None:
    """An OSV entry's ``details`` (else its ``summary``)."""
    for key in ("details", "summary"):
        text = doc.get(key)
        if isinstance(text, str) and text.strip():
            return clean_text(text)
    return None



def cve5_description(doc: dict[str, Any]) -> str | None:
    """A CVE JSON 5 record's description: the CNA container's English ``descriptions``
    (the vendor's text, as Intel and AMD write it)."""
    cna = (doc.get("containers") or {}).get("cna") if isinstance(doc, dict) else None
    for d in (cna or {}).get("descriptions") or [] if isinstance(cna, dict) else []:
        if isinstance(d, dict) and str(d.get("lang", "")).lower().startswith("en") \
                and isinstance(d.get("value"), str) and d["value"].strip():
            return clean_text(d["value"])
    return None
