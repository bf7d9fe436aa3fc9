"""What became of every vendor version phrase of a database: a range (or exact version),
a ``review`` (the entry says ``no_range``), or neither, which is a bug: the bundle build
(``scripts/build_advisory_bundle.py``) fails on it, listing each phrase class, and
``gpusbom advisories status`` prints the three counts.

A phrase is an affected entry's ``vendor_phrases`` item (NVIDIA's CSAF
``product_version`` names, read again with the CSAF phrase parser: a phrase it does not
understand in full, or whose versions the entry's scheme does not parse, in an entry with
ranges is "neither"). An entry with no phrases (Intel/AMD CVE JSON 5 records,
curated and OSV records) counts once: a range when it gives ranges or versions, a review
when it says ``no_range``.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .importers.phrases import parse_phrase, phrase_class
from .versions import InvalidVersion, parse

__all__ = ["PhraseCounts", "count_phrases"]


@dataclass
class PhraseCounts:
    ranges: int = 0
    review: int = 0
    neither: collections.Counter[str] = field(default_factory=collections.Counter)

    @property
    def neither_total(self) -> int:
        return sum(self.neither.values())


def _understood(text: str, scheme: str | None) -> bool:
    ph = parse_phrase(text)
    if ph is None:
        return False
    vals = [v for v in (ph.version, ph.fixed, ph.last_affected, ph.introduced) if v]
    for v in vals:
        v = v[1:] if v[:1] in "vV" and v[1:2].isdigit() else v
        if v in ("0", "0.0"):
            continue
        if "-" in v and scheme not in ("deb", "rpm"):
            return False
        try:
            parse(scheme or "semver", v)
        except InvalidVersion:
            return False
    return bool(vals)


def count_phrases(records: Iterable[dict[str, Any]]) -> PhraseCounts:
    """The three counts over raw records (``Advisory.raw`` or the bundle's JSON)."""
    out = PhraseCounts()
    for rec in records:
        # NVIDIA's phrases are CSAF product_version names, read again here by the CSAF
        # phrase parser; other vendors' were read by their importer (CVE JSON 5)
        csaf = "CSAF" in str((rec.get("verification") or {}).get("notes", ""))
        for v in rec.get("vulnerabilities") or ():
            for a in v.get("affected") or ():
                phrases = a.get("vendor_phrases") or []
                ranged = bool(a.get("ranges") or a.get("versions"))
                if a.get("no_range"):
                    out.review += max(len(phrases), 1)
                    continue
                if not phrases:
                    if ranged:
                        out.ranges += 1
                    else:
                        out.neither["(entry with neither ranges nor no_range)"] += 1
                    continue
                for p in phrases:
                    if ranged and (not csaf or _understood(p, a.get("scheme"))):
                        out.ranges += 1
                    else:
                        out.neither[phrase_class(p)] += 1
    return out
