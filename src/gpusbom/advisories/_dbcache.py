"""The advisory database as a scan reads it: validated whole once per content, then indexed.

Loading a database file (``db.load_bundled``, ``db.load_user``) parsed its JSON (0.7 MB
shipped) and validated and built every record (190 advisories, ~1,900 affected entries) on
every run: 25-35 ms and ~1,600 page faults of a small image's scan on a 2-core VM, where the
image's components name a handful of those advisories. Now the first load of a file's bytes
does exactly that, and then keeps in the user cache (``tables/advisories-<key>.json``,
beside the catalog's parsed tables, mode 0600):

- each record, as the JSON parser returned it (its JSON text, one string per record);
- the matcher's index: which targets each record's vulnerabilities name, in the order the
  matcher walks them (``matcher._build_index``);
- what the database says of itself: its build date, newest record date, record count, feeds,
  KEV copy and descriptions (validated, as loaded).

A later load of the same bytes reads that file; a record is built (``validate_record``, as
before) only when the matcher looks up an identity it names, or when a command walks the
whole database (``AdvisoryDB.advisories``). Nothing unvalidated is ever served: the key is the
SHA-256 of the file's bytes, gpusbom's version and code fingerprint (``_codeid``), the targets
table (the catalog, ``$GPUSBOM_CATALOG`` included) and the parse mode, so another database,
another gpusbom or another catalog is loaded and validated afresh. The file starts with the
SHA-256 of the rest: a cache file that cannot be read, does not match its digest (a torn
write, a bad disk) or does not have the expected shape counts as absent; one that cannot be
written is skipped (the database loads as before, every time). The file is JSON (never
marshal or pickle: nothing in it can name code) and at most ``MAX_BYTES``; a larger one is
not read, and a file that fails any check is removed.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._userdir import read_bounded, write_private

if TYPE_CHECKING:
    from .db import Advisory, AdvisoryDB

__all__ = ["Indexed", "decode", "lookup", "store"]

FORMAT = 3
#: the largest index file read back (the shipped database's is ~1 MB)
MAX_BYTES = 512 << 20
#: cache files kept (a bundled snapshot and an updated database, with room for a change)
KEEP = 4


def decode(data: bytes) -> str:
    """``data`` as ``open(path, encoding="utf-8").read()`` returns the file's text (UTF-8,
    universal newlines, the same error on bad bytes)."""
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8").read()


class Indexed:
    """A validated database's records and index, read back from the cache; records are built
    on first use (``validate_record``), each once."""

    def __init__(self, got: Any, build: Callable[[dict[str, Any]], Advisory]) -> None:
        if not isinstance(got, dict) or got.get("format") != FORMAT:
            raise ValueError("not an advisory index")
        records, triples = got["records"], got["triples"]
        if not (isinstance(records, list) and all(isinstance(r, str) for r in records)):
            raise ValueError("bad records")
        if not (isinstance(triples, list) and all(
                isinstance(t, list) and len(t) == 3 and isinstance(t[0], int)
                and isinstance(t[1], int) and isinstance(t[2], str) and 0 <= t[0] < len(records)
                for t in triples)):
            raise ValueError("bad index")
        built, newest = got["built"], got["newest"]
        if not (isinstance(built, (str, type(None))) and isinstance(newest, (str, type(None)))):
            raise ValueError("bad dates")
        feeds, kev, descriptions = got["feeds"], got["kev"], got["descriptions"]
        if not (isinstance(feeds, list) and isinstance(kev, dict)
                and isinstance(descriptions, dict)):
            raise ValueError("bad metadata")
        if not (all(isinstance(f, dict) for f in feeds)
                and all(isinstance(k, str) and isinstance(v, dict) for k, v in kev.items())
                and all(isinstance(v, str) for v in descriptions.values())):
            raise ValueError("bad metadata")
        self.records: list[str] = records
        self.triples: list[tuple[int, int, str]] = [(t[0], t[1], t[2]) for t in triples]
        self.built: str | None = built
        self.newest: str | None = newest
        self.feeds: list[dict[str, Any]] = feeds
        self.kev: dict[str, dict[str, str]] = kev
        self.descriptions: dict[str, str] = descriptions
        self._build = build
        self._built: dict[int, Advisory] = {}

    def __len__(self) -> int:
        return len(self.records)

    def at(self, i: int) -> Advisory:
        """Record ``i`` (in the database's order: by id), built on first use."""
        adv = self._built.get(i)
        if adv is None:
            raw = json.loads(self.records[i])
            if not isinstance(raw, dict):
                raise ValueError("advisory index: a record is not an object")
            adv = self._built[i] = self._build(raw)
        return adv

    def all(self) -> list[Advisory]:
        return [self.at(i) for i in range(len(self.records))]


def _key(data: bytes, trusted: bool, targets: dict[str, Any]) -> str:
    from .. import __version__
    from .._codeid import code_fingerprint

    h = hashlib.sha256(f"{FORMAT}\0{__version__}\0{code_fingerprint()}\0{int(trusted)}\0"
                       .encode())
    h.update(json.dumps(targets, sort_keys=True).encode())
    h.update(b"\0")
    h.update(data)
    return h.hexdigest()


def _dir() -> Path:
    from .._tables import tables_dir

    return tables_dir()


def lookup(data: bytes, *, trusted: bool, targets: dict[str, Any],
           build: Callable[[dict[str, Any]], Advisory]) -> tuple[Path, Indexed | None]:
    """Where the index of ``data`` (a database file's bytes) lives, and the index when these
    bytes were validated before by this code with these ``targets`` (``db.TARGETS``);
    ``build`` makes an advisory of a record (``db.validate_record``)."""
    path = _dir() / f"advisories-{_key(data, trusted, targets)[:40]}.json"
    got = read_bounded(path, MAX_BYTES)
    if got is None:
        return path, None
    try:
        # the file's SHA-256 first: a damaged file (a torn write, a bad disk) is a miss, never
        # a record that fails to load halfway through a scan
        if len(got) < 32 or hashlib.sha256(got[32:]).digest() != got[:32]:
            raise ValueError("advisory index: digest mismatch")
        return path, Indexed(json.loads(got[32:]), build)
    except (ValueError, TypeError, KeyError, RecursionError):
        with contextlib.suppress(OSError):
            path.unlink()  # damaged, foreign or planted: validated afresh
        return path, None


def store(path: Path, db: AdvisoryDB) -> None:
    """Keep ``db`` (loaded whole and validated from the bytes ``path`` was named for)."""
    triples: list[tuple[int, int, str]] = []
    for ai, adv in enumerate(db.advisories):
        for vi, vuln in enumerate(adv.vulnerabilities):
            triples.extend((ai, vi, t) for t in dict.fromkeys(a.target for a in vuln.affected))
    try:
        blob = json.dumps({
            "format": FORMAT,
            "records": [json.dumps(a.raw, separators=(",", ":")) for a in db.advisories],
            "triples": triples, "built": db.built, "newest": db.newest, "feeds": db.feeds,
            "kev": db.kev, "descriptions": db.descriptions,
        }, separators=(",", ":")).encode()
    except (TypeError, ValueError):  # not plain data (cannot come from JSON): not cached
        return
    try:
        write_private(path, hashlib.sha256(blob).digest() + blob, ".advisories-")
        _prune(path)
    except OSError:  # a read-only cache: validated on every load
        pass


def _prune(keep: Path) -> None:
    """The ``KEEP`` most recently written index files stay; older ones go."""
    old = []
    for p in keep.parent.glob("advisories-*.*"):
        try:
            old.append((p.stat().st_mtime_ns, p))
        except OSError:
            continue
    old.sort(reverse=True)
    for _t, p in old[KEEP:]:
        if p != keep:
            with contextlib.suppress(OSError):
                p.unlink()
