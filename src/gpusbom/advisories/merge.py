"""The records of several advisory feeds merged into one set (``merge_records``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def _entry_key(a: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(a.get(k) for k in ("target", "platform", "branch", "vendor_product", "variant",
                                    "distro"))


def merge_records(groups: Iterable[list[dict[str, Any]]]) -> tuple[list[dict[str, Any]], list[str]]:
    """Records of several feeds as one set, losing nothing; (records, what was merged).

    ``groups`` come in priority order. A record id given by an earlier group wins whole
    (fresh vendor data before the shipped copy; a curated record with ``override`` before
    both). A CVE that several records carry (a bulletin that re-lists an older CVE, an OSV
    entry of a vendor CVE) is kept once, in the record of the earliest group, and within
    a group in the newest record; its affected entries are the union, the owner's entry
    winning for the same product, platform, branch and line. Records left without a
    vulnerability are dropped (named in the second list)."""
    chosen: dict[str, tuple[int, dict[str, Any]]] = {}
    for prio, recs in enumerate(groups):
        for rec in recs:
            chosen.setdefault(str(rec["id"]).upper(), (prio, rec))

    def names(v: dict[str, Any]) -> set[str]:
        return {str(x).upper() for x in (v.get("id"), *v.get("aliases", [])) if x}

    # CVE name -> (rank, record id) of its owner: lower rank wins
    owner: dict[str, tuple[tuple[int, str, str], str]] = {}
    for rid, (prio, rec) in chosen.items():
        stamp = str(rec.get("modified") or rec.get("published") or "")
        # newest first within a priority: invert the date's characters for ascending sort
        rank = (prio, "".join(chr(0x10FFFF - ord(c)) for c in stamp), rid)
        for v in rec.get("vulnerabilities", []):
            for n in names(v):
                if n not in owner or rank < owner[n][0]:
                    owner[n] = (rank, rid)
    extra: dict[str, list[dict[str, Any]]] = {}  # owner's vuln key -> entries of others
    notes: list[str] = []
    for rid, (_p, rec) in chosen.items():
        for v in rec.get("vulnerabilities", []):
            owners = {owner[n][1] for n in names(v)}
            if rid not in owners or len(owners) > 1:
                for o in owners - {rid}:
                    extra.setdefault(f"{o}|{v['id'].upper()}", []).extend(v.get("affected", []))
                    notes.append(f"{v['id']} of {rec['id']} merged into {o}")
    out: list[dict[str, Any]] = []
    for rid, (_p, rec) in sorted(chosen.items()):
        vulns = []
        for v in rec.get("vulnerabilities", []):
            if {owner[n][1] for n in names(v)} != {rid}:
                continue
            more = [e for k in (f"{rid}|{n}" for n in names(v)) for e in extra.get(k, [])]
            if more:
                have = {_entry_key(a) for a in v.get("affected", [])}
                add = []
                for e in more:
                    if _entry_key(e) not in have:
                        have.add(_entry_key(e))
                        add.append(e)
                v = {**v, "affected": [*v.get("affected", []), *add]}
            vulns.append(v)
        if not vulns:
            notes.append(f"{rec['id']}: every CVE is carried by another record")
            continue
        if len(vulns) != len(rec.get("vulnerabilities", [])) or vulns != rec.get("vulnerabilities"):
            rec = {**rec, "vulnerabilities": vulns}
        out.append(rec)
    return out, notes
