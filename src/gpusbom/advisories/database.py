"""``AdvisoryDB``: validated advisories with where they came from, and the bundle format.

A bundle (``{"schema": "gpusbom/advisories/1", "built": ..., "advisories": [records]}``) is
the shipped snapshot and the user's updated database alike; ``load_bundle_text`` validates
one whole, ``AdvisoryDB.from_index`` reads one back from its cached index (``_dbcache``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import AdvisoryError
from ..safetext import loads_json
from .records import Advisory
from .validate import validate_record

if TYPE_CHECKING:
    from ._dbcache import Indexed

class AdvisoryDB:
    """Validated advisories plus where they came from and how old they are."""

    def __init__(self, advisories: Iterable[Advisory], *, source: str, built: str | None = None):
        self._advisories: list[Advisory] | None = sorted(advisories, key=lambda a: a.id)
        self._index: Indexed | None = None
        self.source = source
        self.built = built
        self.feeds: list[dict[str, Any]] = []  # where an updated database came from
        # fetched by ``advisories update`` only (never in the shipped snapshot):
        self.kev: dict[str, dict[str, str]] = {}  # CISA KEV: CVE -> {"dateAdded", ...}
        self.descriptions: dict[str, str] = {}  # vulnerability id -> the vendor's text
        seen: set[str] = set()
        dup: set[str] = set()
        for a in self._advisories:
            (dup if a.id in seen else seen).add(a.id)
        if dup:
            raise AdvisoryError(f"duplicate advisory ids: {', '.join(sorted(dup))}")

    @classmethod
    def from_index(cls, ix: Indexed, *, source: str) -> AdvisoryDB:
        """A database validated before, read back from its index (``_dbcache``): records are
        built when first used."""
        db = cls.__new__(cls)
        db._advisories = None
        db._index = ix
        db.source = source
        db.built = ix.built
        db.feeds = ix.feeds
        db.kev = ix.kev
        db.descriptions = ix.descriptions
        return db

    @property
    def advisories(self) -> list[Advisory]:
        """Every advisory, by id."""
        if self._advisories is None:
            assert self._index is not None  # noqa: S101 - one of the two is always set
            self._advisories = self._index.all()
        return self._advisories

    @property
    def index(self) -> Indexed | None:
        """The cached index this database was read from (None when loaded whole): the
        matcher builds only the advisories an identity it looks up names."""
        return self._index

    def __len__(self) -> int:
        if self._advisories is None and self._index is not None:
            return len(self._index)
        return len(self.advisories)

    def __iter__(self) -> Iterator[Advisory]:
        return iter(self.advisories)

    def get(self, ident: str) -> Advisory | None:
        """By advisory id or by any alias (CVE) it carries, case-insensitive."""
        key = ident.strip().upper()
        for a in self.advisories:
            if a.id.upper() == key:
                return a
        for a in self.advisories:
            if key in (x.upper() for x in a.aliases) or any(
                v.id.upper() == key for v in a.vulnerabilities
            ):
                return a
        return None

    @property
    def newest(self) -> str | None:
        """The newest published/modified date in the data (a floor for the data's age)."""
        if self._advisories is None and self._index is not None:
            return self._index.newest
        dates = [(a.modified or a.published)[:10] for a in self.advisories]
        return max(dates) if dates else None


def load_records(records: Iterable[dict[str, Any]], *, source: str, built: str | None = None) -> AdvisoryDB:
    return AdvisoryDB((validate_record(r) for r in records), source=source, built=built)


def load_directory(path: str | Path) -> AdvisoryDB:
    """Every ``*.json`` record in a directory (``schema.json`` excepted)."""
    p = Path(path)
    recs = []
    for f in sorted(p.glob("*.json")):
        if f.name == "schema.json":
            continue
        try:
            recs.append(loads_json(f.read_text(encoding="utf-8")))
        except json.JSONDecodeError as exc:
            raise AdvisoryError(f"{f}: {exc}") from None
    return load_records(recs, source=str(p))


def bundle(
    records: list[dict[str, Any]], built: str, *, feeds: list[dict[str, Any]] | None = None,
    kev: dict[str, Any] | None = None, descriptions: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The bundle format (the shipped snapshot and the user's updated database). ``kev``
    (``enrich.parse_kev``) and ``descriptions`` only ever go into the user's database."""
    out: dict[str, Any] = {"schema": BUNDLE_SCHEMA, "built": built, "advisories": records}
    if feeds is not None:
        out["feeds"] = feeds
    if kev is not None:
        out["kev"] = kev
    if descriptions:
        out["descriptions"] = dict(sorted(descriptions.items()))
    return out


BUNDLE_SCHEMA = "gpusbom/advisories/1"


def load_bundle_text(text: str, *, source: str, trusted: bool = False) -> AdvisoryDB:
    """A bundle (JSON text) -> validated database; ``AdvisoryError`` when it is not one.
    ``trusted``: gpusbom's own package data, parsed without the nesting bound that input
    from elsewhere gets (``safetext.loads_json``: 10 of the 15 ms its 0.7 MB take)."""
    try:
        data = json.loads(text) if trusted else loads_json(text)
    except json.JSONDecodeError as exc:
        raise AdvisoryError(f"{source}: not JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("schema") != BUNDLE_SCHEMA:
        raise AdvisoryError(f"{source}: not a gpusbom advisory bundle ({BUNDLE_SCHEMA})")
    recs = data.get("advisories")
    if not isinstance(recs, list):
        raise AdvisoryError(f"{source}: 'advisories' is not a list")
    built = data.get("built")
    if not isinstance(built, str) or parse_stamp(built) is None:
        raise AdvisoryError(f"{source}: 'built' is not a date: {built!r}")
    db = load_records(recs, source=source, built=built)
    db.feeds = [f for f in data.get("feeds") or [] if isinstance(f, dict)]
    from .enrich import KevError, check_descriptions, check_kev

    try:
        db.kev = check_kev(data.get("kev"))
        db.descriptions = check_descriptions(data.get("descriptions"))
    except KevError as exc:
        raise AdvisoryError(f"{source}: {exc}") from None
    return db


def parse_stamp(stamp: str) -> datetime | None:
    try:
        t = datetime.fromisoformat(stamp.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo is not None else t.replace(tzinfo=timezone.utc)
