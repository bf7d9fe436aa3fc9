"""The advisory database: curated records, one per advisory, validated on load.

A record (JSON; the JSON Schema is ``advisories/schema.json`` in the repository)::

    {"id": "NVIDIA-5582", "vendor": "NVIDIA", "aliases": ["CVE-2024-0132", ...],
     "title": ..., "published": "2024-09-26", "modified": ..., "sources": [URL, ...],
     "verification": {"status": "verified" | "partial" | "unverified", "notes": ...},
     "vulnerabilities": [
        {"id": "CVE-2024-0132", "severity": [{"type": "CVSS_V3_1", "vector": ..., "score": 9.0}],
         "affected": [
            {"target": "nvidia-container-toolkit", "vendor_product": "NVIDIA Container Toolkit",
             "scheme": "semver", "ranges": [{"last_affected": "1.16.1"}], "fixed": ["1.16.2"]},
            {"target": "nvidia-driver", "platform": "linux", "branch": "580",
             "scheme": "nvidia-driver", "ranges": [{"fixed": "580.126.09"}], "fixed": ["580.126.09"]},
            {"target": "level-zero", "no_range": "vendor gives no versions (see references)"}]}]}

``target`` names an entry of ``TARGETS``: the component identities collectors emit for
that product. An affected entry with ``no_range`` (or without ``ranges``/``versions``)
makes the matcher report ``review`` for every component of the target.

One module over 500 lines because it is one reader of one format: the record schema, its
validation with precise error paths, and the loaded database's lookups share the record
types (``Advisory``, ``Vulnerability``, ``Affected``).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._resources import read_bytes
from .._userdir import user_cache_dir
from ..errors import AdvisoryError
from ..safetext import loads_json
from .versions import SCHEMES, InvalidVersion, parse

if TYPE_CHECKING:
    from ._dbcache import Indexed

__all__ = [
    "TARGETS",
    "Advisory",
    "AdvisoryDB",
    "AdvisoryError",
    "load_active",
    "load_bundled",
    "load_directory",
    "selectors",
    "validate_record",
]

#: CUDA components judged as the toolkit release they ship with (``cuda_releases``)
_CUDA_RELEASE_COMPONENTS = ("cublas", "cudart", "cufft", "cupti", "curand", "cusolver",
                            "cusparse", "nvcc", "nvjitlink", "nvrtc")


def _targets() -> dict[str, list[dict[str, str]]]:
    """target id -> selectors, one target per row of the product-identity catalog
    (``gpusbom.catalog``). A selector matches a component by package (``ecosystem`` +
    ``name``), by GPU product (``stack`` [+ ``product``]) or by any name the catalog row
    lists (``catalog``: deb/rpm/wheel/conda/generic purl/CPE)."""
    from .. import catalog

    out: dict[str, list[dict[str, str]]] = {}
    for row in catalog.products():
        sels: list[dict[str, str]] = []
        for c in row.collector:
            stack, _, product = c.rpartition("/")
            stack = stack or row.stack
            sels.append({"stack": stack} if product == "*" else {"stack": stack, "product": product})
        if row.id == "cuda-toolkit":
            # the toolkit's components, translated to the release by cuda_releases.release_of
            # when no toolkit root was found beside them
            sels += [{"stack": "cuda", "product": p, "via": "cuda-release"}
                     for p in _CUDA_RELEASE_COMPONENTS]
        sels.append({"catalog": row.id})
        out[row.id] = sels
    return out


TARGETS: dict[str, list[dict[str, str]]] = _targets()

#: package ecosystems a ``pkg:<type>/...`` target may name (purl types, as ``Component.ecosystem``)
PACKAGE_TYPES = ("pypi", "deb", "rpm", "apk", "golang", "npm", "cargo", "conda", "maven", "gem")


def selectors(target: str) -> list[dict[str, str]]:
    """How a target is recognised on components.

    A product target (``nvidia-driver``, ``torch``...) maps through ``TARGETS``. A package
    target is a purl without version, as importers of OSV / CVE records write it:
    ``pkg:pypi/vllm`` (the package ``vllm`` of ecosystem ``pypi``) or
    ``pkg:deb/debian/nvidia-graphics-drivers`` (a Debian *source* package: binary packages
    are matched through their ``source-package`` property).
    """
    if target in TARGETS:
        return TARGETS[target]
    if target.startswith("pkg:"):
        parts = target[4:].split("/")
        if len(parts) >= 2 and parts[0] in PACKAGE_TYPES and parts[-1]:
            if parts[0] in ("deb", "rpm", "apk"):
                return [{"ecosystem": parts[0], "source": parts[-1]}]
            return [{"ecosystem": parts[0], "name": "/".join(parts[1:])}]
    raise KeyError(target)


def known_target(target: str) -> bool:
    try:
        selectors(target)
    except KeyError:
        return False
    return True


STATUSES = ("verified", "partial", "unverified")
SCORE_TYPES = ("CVSS_V3_0", "CVSS_V3_1", "CVSS_V4_0")


@dataclass(frozen=True)
class Score:
    """A severity score of a vulnerability (CVSS type, vector, base score)."""

    type: str
    vector: str | None
    score: float | None


@dataclass(frozen=True)
class Affected:
    """A target a vulnerability affects, with its version ranges, versions and fixes."""

    target: str
    scheme: str | None = None
    ranges: tuple[dict[str, str], ...] = ()
    versions: tuple[str, ...] = ()
    fixed: tuple[str, ...] = ()
    platform: str | None = None
    branch: str | None = None
    variant: str | None = None
    vendor_product: str | None = None
    no_range: str | None = None
    note: str | None = None
    # compare this component property instead of the version (Triton: "container-release")
    version_of: str | None = None
    # only for components of this distribution release (purl ``distro``: debian-12, ubuntu-22.04)
    distro: str | None = None

    @property
    def machine_readable(self) -> bool:
        return self.no_range is None and bool(self.ranges or self.versions)


@dataclass(frozen=True)
class Vulnerability:
    """One vulnerability of an advisory: its scores and the targets it affects."""

    id: str
    title: str | None
    scores: tuple[Score, ...]
    affected: tuple[Affected, ...]
    aliases: tuple[str, ...] = ()
    cwe: tuple[str, ...] = ()
    layer: str | None = None  # "kernel": the vendor names only the kernel-mode driver
    parts: tuple[str, ...] = ()  # tools/libraries named (cuobjdump, nvJPEG)
    state: str | None = None  # disputed | rejected


@dataclass
class Advisory:
    """One vendor bulletin (a validated record of the database)."""

    id: str
    vendor: str
    title: str
    published: str
    sources: list[str]
    vulnerabilities: list[Vulnerability]
    aliases: list[str] = field(default_factory=list)
    modified: str | None = None
    verification: dict[str, str] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict, repr=False)


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
    if not isinstance(built, str) or _parse_stamp(built) is None:
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


@functools.lru_cache(maxsize=1)
def load_bundled() -> AdvisoryDB:
    """The snapshot shipped with gpusbom (``gpusbom/data/advisories.json``)."""
    return _load_file(read_bytes("gpusbom", "data/advisories.json"), source="bundled",
                      trusted=True)


def _load_file(data: bytes, *, source: str, trusted: bool) -> AdvisoryDB:
    """A database file's bytes, validated whole on their first load, then read from their
    index in the user cache (``_dbcache``)."""
    from . import _dbcache

    path, ix = _dbcache.lookup(data, trusted=trusted, targets=TARGETS, build=validate_record)
    if ix is not None:
        return AdvisoryDB.from_index(ix, source=source)
    db = load_bundle_text(_dbcache.decode(data), source=source, trusted=trusted)
    _dbcache.store(path, db)
    return db


def _parse_stamp(stamp: str) -> datetime | None:
    try:
        t = datetime.fromisoformat(stamp.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo is not None else t.replace(tzinfo=timezone.utc)


def age_days(db: AdvisoryDB, now: datetime | str | None = None) -> float | None:
    """Days between the database's build date (or newest record) and ``now``."""
    stamp = db.built or db.newest
    built = _parse_stamp(stamp) if stamp else None
    if built is None:
        return None
    if isinstance(now, str):
        now = _parse_stamp(now)
    now = now or datetime.now(timezone.utc)
    return max(0.0, (now - built).total_seconds() / 86400)


def describe(db: AdvisoryDB, now: datetime | str | None = None) -> dict[str, Any]:
    """What a report says about the database it matched against (``ScanResult.advisory_db``):
    source (``bundled`` or the user's updated file), build date, age in whole days (relative
    to ``now``: the scan's timestamp, so a report stays reproducible), record count."""
    age = age_days(db, now)
    return {
        "source": db.source,
        "built": db.built or db.newest,
        "age_days": None if age is None else int(age),
        "advisories": len(db),
    }


def cache_dir() -> Path:
    """Where ``gpusbom advisories update`` keeps the database:
    ``$GPUSBOM_CACHE_DIR/advisories``, else ``$XDG_CACHE_HOME/gpusbom/advisories``, else
    ``~/.cache/gpusbom/advisories``."""
    return user_cache_dir() / "advisories"


#: the user's updated database inside ``cache_dir()`` (one file, swapped with os.replace)
USER_DB_NAME = "advisories.json"


def user_db_path() -> Path:
    return cache_dir() / USER_DB_NAME


def load_user() -> AdvisoryDB | None:
    """The updated database in the user cache; None when absent or not valid (a broken
    file never hides the bundled snapshot)."""
    p = user_db_path()
    try:
        data = p.read_bytes()
    except OSError:
        return None
    try:
        return _load_file(data, source=str(p), trusted=False)
    except AdvisoryError:
        return None


def load_active(*, max_age_days: float | None = None, offline: bool = False) -> AdvisoryDB:
    """The database a scan matches against: the user's updated copy when present and valid
    (and not older than the bundled snapshot), else the bundled snapshot.

    ``offline``: only the bundled snapshot. ``max_age_days``: raise ``InputError`` when the
    data is older than that many days.
    """
    db = load_bundled()
    if not offline:
        user = load_user()
        if user is not None:
            ub, bb = _parse_stamp(user.built or ""), _parse_stamp(db.built or db.newest or "")
            if ub is not None and (bb is None or ub >= bb):
                db = user
    if max_age_days is not None:
        from ..errors import InputError

        age = age_days(db)
        if age is None:
            raise InputError("advisory database: no build date; cannot honour --max-db-age")
        if age > max_age_days:
            raise InputError(f"advisory database ({db.source}) is {age:.0f} days old, older than "
                             f"--max-db-age {max_age_days:g}; run gpusbom advisories update")
    return db


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
