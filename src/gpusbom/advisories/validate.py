"""The validation of one advisory record (the format is in ``advisories.db``).

The checks go beyond the JSON Schema (``advisories/schema.json`` in the repository, which
the tests check the records against): versions parse in their scheme, targets exist, every
record cites a source; each error names the record and vulnerability it is in.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from ..errors import AdvisoryError
from .records import SCORE_TYPES, STATUSES, Advisory, Affected, Score, Vulnerability
from .targets import known_target
from .versions import SCHEMES, InvalidVersion, parse


def _req(d: dict[str, Any], key: str, where: str, kind: type | tuple[type, ...] = str) -> Any:
    if key not in d:
        raise AdvisoryError(f"{where}: missing {key!r}")
    if not isinstance(d[key], kind):
        raise AdvisoryError(f"{where}: {key!r} has the wrong type")
    return d[key]


def validate_record(rec: dict[str, Any]) -> Advisory:
    """Check a record beyond the JSON Schema (versions parse in their scheme, targets exist,
    every record cites a source) and build the ``Advisory``; raises ``AdvisoryError``."""
    if not isinstance(rec, dict):
        raise AdvisoryError("record is not an object")
    rid = _req(rec, "id", "record")
    where = f"advisory {rid}"
    vendor = _req(rec, "vendor", where)
    title = _req(rec, "title", where)
    published = _req(rec, "published", where)
    try:
        date.fromisoformat(published[:10])
    except ValueError:
        raise AdvisoryError(f"{where}: published is not a date: {published!r}") from None
    sources = _req(rec, "sources", where, list)
    if not sources or not all(isinstance(s, str) and s.startswith("https://") for s in sources):
        raise AdvisoryError(f"{where}: needs at least one https source URL")
    ver = rec.get("verification") or {}
    if ver and ver.get("status") not in STATUSES:
        raise AdvisoryError(f"{where}: verification.status must be one of {STATUSES}")
    vulns: list[Vulnerability] = []
    for v in _req(rec, "vulnerabilities", where, list):
        vid = _req(v, "id", where)
        vw = f"{where} / {vid}"
        scores: list[Score] = []
        for s in v.get("severity", []):
            t = _req(s, "type", vw)
            if t not in SCORE_TYPES:
                raise AdvisoryError(f"{vw}: unknown score type {t!r}")
            sc = s.get("score")
            if sc is not None and not (isinstance(sc, (int, float)) and 0 <= sc <= 10):
                raise AdvisoryError(f"{vw}: score out of range: {sc!r}")
            scores.append(Score(t, s.get("vector"), float(sc) if sc is not None else None))
        affected: list[Affected] = []
        for a in _req(v, "affected", vw, list):
            target = _req(a, "target", vw)
            if not known_target(target):
                raise AdvisoryError(f"{vw}: unknown target {target!r}")
            scheme = a.get("scheme")
            ranges = tuple(a.get("ranges") or ())
            versions = tuple(a.get("versions") or ())
            fixed = tuple(a.get("fixed") or ())
            if (ranges or versions) and scheme is None:
                raise AdvisoryError(f"{vw}: {target}: ranges need a scheme")
            if scheme is not None and scheme not in SCHEMES:
                raise AdvisoryError(f"{vw}: {target}: unknown scheme {scheme!r}")
            if not (ranges or versions) and not a.get("no_range"):
                raise AdvisoryError(
                    f"{vw}: {target}: give ranges/versions or say why not (no_range)"
                )
            for r in ranges:
                if not set(r) <= {"introduced", "fixed", "last_affected"} or not r:
                    raise AdvisoryError(f"{vw}: {target}: bad range {r!r}")
                if "fixed" in r and "last_affected" in r:
                    raise AdvisoryError(f"{vw}: {target}: fixed and last_affected in one range")
            assert scheme is not None or not (ranges or versions)  # noqa: S101 - type narrowing of an invariant
            for value in [x for r in ranges for x in r.values() if x != "0"] + [
                *versions,
                *fixed,
            ]:
                if scheme is None:
                    continue
                try:
                    parse(scheme, value)
                except InvalidVersion as exc:
                    raise AdvisoryError(f"{vw}: {target}: {exc}") from None
            branch = a.get("branch")
            if branch is not None and scheme != "nvidia-driver":
                raise AdvisoryError(f"{vw}: {target}: branch needs scheme nvidia-driver")
            affected.append(
                Affected(
                    target=target,
                    scheme=scheme,
                    ranges=ranges,
                    versions=versions,
                    fixed=fixed,
                    platform=a.get("platform"),
                    branch=branch,
                    variant=a.get("variant"),
                    vendor_product=a.get("vendor_product"),
                    no_range=a.get("no_range"),
                    note=a.get("note"),
                    version_of=a.get("version_of"),
                    distro=a.get("distro"),
                )
            )
        vulns.append(
            Vulnerability(
                id=vid,
                title=v.get("title"),
                scores=tuple(scores),
                affected=tuple(affected),
                aliases=tuple(v.get("aliases", [])),
                cwe=tuple(v.get("cwe") or ()),
                layer=v.get("layer"),
                parts=tuple(v.get("parts") or ()),
                state=v.get("state"),
            )
        )
    return Advisory(
        id=rid,
        vendor=vendor,
        title=title,
        published=published,
        sources=list(sources),
        vulnerabilities=vulns,
        aliases=list(rec.get("aliases", [])),
        modified=rec.get("modified"),
        verification=dict(ver),
        raw=rec,
    )
