"""The fingerprint database's format, its validated loading and its lookup.

One JSON document (UTF-8, never pickle: a database file is input like any other)::

    {"format": "gpusbom-fingerprints", "format_version": 2,
     "built": "2026-12-07T02:40:00Z",          # when the builder ran (UTC)
     "builder": "scripts/build_fingerprints.py",
     "columns": ["product", "version", "file", "soname", "build_id", "sha256", "size",
                 "source"],
     "rows": [["cudart", "12.4.127", "libcudart.so.12", "libcudart.so.12",
               "<hex>", "<64 hex>", 707904, "pypi:nvidia-cuda-runtime-cu12==12.4.127"], ...],
     "releases": {"columns": ["product", "version", "source"],
                  "rows": [["cublas", "10.2.2.89", "nvidia-dockerfile:dist/10.2/..."], ...]},
     "complete_from": {"cublas": "12.0.1.189", ...}}

``columns`` must be exactly :data:`COLUMNS` (a reader of this format knows no other);
``product`` is a gpusbom product id (``cudart``, ``cublaslt``: the ``cuda`` collector's),
``version`` the exact release the artifact's own metadata names, ``file`` the file's name in
the artifact, ``soname`` its ``DT_SONAME`` (or null), ``build_id`` its GNU build-id (lowercase
hex, or null), ``size`` its length in bytes, ``source`` the artifact
(``pypi:<distribution>==<version>``; from format version 3, also the URL of an NVIDIA
redistrib manifest with the component as fragment: :data:`URL_SOURCE_RX`).

Format version 2 adds two optional sections (a version 1 document has neither):

- ``releases``: the vendor's release lists, one row per (product, release) with where the
  release is listed (an index listing, a metapackage's pins, a vendor Dockerfile, a distro
  package); a row may be a short release line (``10.2``: "CUPTI shipped a 10.2 line");
- ``complete_from``: per product, the release from which ``releases`` lists *every*
  release (NVIDIA's ``cuda-toolkit`` metapackage pins each component of every CUDA release
  since 12.0.0); a version at or above it that is not listed is not a release.

Format version 3 is version 2 whose ``source`` may also be a redistrib manifest's URL
(``gpusbom.fingerprints.redistrib``); a database without such a row is written as version 2,
so that a gpusbom reading 1 and 2 still reads it.

``built`` is the build's UTC time, ``YYYY-MM-DDTHH:MM:SSZ`` (a user copy is used when it is
not older than the bundled snapshot: the comparison needs that form).

Loading is bounded (:data:`MAX_DB_BYTES`, :data:`MAX_ROWS`) and strict: the top-level keys,
each section's columns and every row are validated; a file that is too large, not JSON, of
another format or version, has an unknown key or holds a bad row raises
:class:`FingerprintError` naming the file (and the row). A key (build-id or SHA-256) whose
rows name different products or versions identifies nothing (never a guess).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..safetext import loads_json

__all__ = [
    "COLUMNS",
    "FORMAT",
    "FORMAT_VERSION",
    "MAX_DB_BYTES",
    "MAX_ROWS",
    "RELEASE_COLUMNS",
    "URL_SOURCE_RX",
    "URL_SOURCE_VERSION",
    "FingerprintDB",
    "FingerprintError",
    "Match",
    "Record",
    "Release",
    "load_bytes",
    "load_path",
]

FORMAT = "gpusbom-fingerprints"
#: the version this gpusbom writes for a database whose sources are all PyPI wheels; it
#: reads this one, the ones before it and :data:`URL_SOURCE_VERSION`
FORMAT_VERSION = 2
#: the version written when a record's source is a redistrib manifest's URL (a gpusbom that
#: reads only 1 and 2 says "a newer gpusbom wrote it" instead of "bad source")
URL_SOURCE_VERSION = 3
READ_VERSIONS = (1, 2, 3)
COLUMNS = ("product", "version", "file", "soname", "build_id", "sha256", "size", "source")
RELEASE_COLUMNS = ("product", "version", "source")
#: the largest database file read (the bundled one is a few hundred KiB)
MAX_DB_BYTES = 64 << 20
#: the most rows a database may hold (in all its sections together)
MAX_ROWS = 1_000_000
_KEYS = {"format", "format_version", "built", "builder", "columns", "rows"}
_V2_KEYS = {"releases", "complete_from"}

_PRODUCT_RX = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
_VERSION_RX = re.compile(r"[0-9]+(?:\.[0-9]+){0,5}(?:(?:a|b|rc)[0-9]+)?(?:\.post[0-9]+)?(?:\.dev[0-9]+)?")
_HEX_RX = re.compile(r"(?:[0-9a-f]{2}){1,64}")
_SHA256_RX = re.compile(r"[0-9a-f]{64}")
_SOURCE_RX = re.compile(r"[a-z0-9]+:[A-Za-z0-9._+-]{1,200}==[A-Za-z0-9._+!-]{1,64}")
#: format version 3: the URL of an NVIDIA redistrib manifest, ``#`` the component (and CUDA
#: variant) whose archive held the file: ``https://developer.download.nvidia.com/compute/
#: cuda/redist/redistrib_12.4.1.json#cuda_cudart``, ``file:///.../redistrib_9.1.0.json#cudnn.
#: cuda12``; no user, query or ``..``
URL_SOURCE_RX = re.compile(
    r"(?:https?://[A-Za-z0-9.-]{1,253}(?::[0-9]{1,5})?|file://)"
    r"(?!.*/\.\.?(?:/|#))/[A-Za-z0-9._~%+/-]{1,400}\.json#[A-Za-z0-9_.-]{1,64}")
#: where a release is listed: ``pypi-index:nvidia-cublas-cu12``, ``pypi:cuda-toolkit==12.4.1``,
#: ``nvidia-dockerfile:dist/10.2/ubuntu18.04/runtime/Dockerfile``, ``ubuntu:focal/libcublas10``
_RELEASE_SOURCE_RX = re.compile(r"[a-z0-9][a-z0-9-]{0,31}:[A-Za-z0-9._+=/~-]{1,200}")
_BUILT_RX = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")
_NAME_MAX = 255


class FingerprintError(InputError, ValueError):
    """A fingerprint database file that cannot be used (too large, malformed, a bad row);
    the message names the file."""


@dataclass(frozen=True)
class Record:
    """One file of one release of an NVIDIA product."""

    product: str
    version: str
    file: str
    soname: str | None
    build_id: str | None
    sha256: str
    size: int
    source: str


@dataclass(frozen=True)
class Release:
    """One release of a product as a vendor list names it (``version`` may be a short
    release line such as ``10.2``), and where it is listed."""

    product: str
    version: str
    source: str


@dataclass(frozen=True)
class Match:
    """What the database says of a file: its product and exact version, the method that
    decided (``sha256``: the bytes are a release's; ``build-id``: the ELF build-id is a
    release's, the bytes may have been stripped or patched) and the record matched."""

    product: str
    version: str
    method: str
    record: Record

    @property
    def confidence(self) -> str:
        return "exact"


def _bad(where: str, msg: str) -> FingerprintError:
    return FingerprintError(f"fingerprint database {where}: {msg}")


def _check_product(product: Any, where: str) -> str:
    if not isinstance(product, str) or not _PRODUCT_RX.fullmatch(product):
        raise _bad(where, f"bad product {product!r}")
    return product


def _check_version(version: Any, where: str) -> str:
    if not isinstance(version, str) or not _VERSION_RX.fullmatch(version):
        raise _bad(where, f"bad version {version!r}")
    return version


def _row(raw: Any, where: str, fmt_version: int = FORMAT_VERSION) -> Record:
    if not isinstance(raw, list) or len(raw) != len(COLUMNS):
        raise _bad(where, f"a row of {len(COLUMNS)} values expected")
    product, version, file, soname, build_id, sha256, size, source = raw
    _check_product(product, where)
    _check_version(version, where)
    for col, val, nullable in (("file", file, False), ("soname", soname, True)):
        if val is None and nullable:
            continue
        if (not isinstance(val, str) or not val or len(val) > _NAME_MAX or "/" in val
                or not val.isprintable()):
            raise _bad(where, f"bad {col} {val!r}")
    if build_id is not None and (not isinstance(build_id, str) or not _HEX_RX.fullmatch(build_id)):
        raise _bad(where, f"bad build_id {build_id!r}")
    if not isinstance(sha256, str) or not _SHA256_RX.fullmatch(sha256):
        raise _bad(where, f"bad sha256 {sha256!r}")
    if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size < 1 << 40:
        raise _bad(where, f"bad size {size!r}")
    if not isinstance(source, str) or not (
            _SOURCE_RX.fullmatch(source)
            or (fmt_version >= URL_SOURCE_VERSION and URL_SOURCE_RX.fullmatch(source))):
        raise _bad(where, f"bad source {source!r}")
    return Record(product, version, file, soname, build_id, sha256, size, source)


def _release_row(raw: Any, where: str) -> Release:
    if not isinstance(raw, list) or len(raw) != len(RELEASE_COLUMNS):
        raise _bad(where, f"a release row of {len(RELEASE_COLUMNS)} values expected")
    product, version, source = raw
    _check_product(product, where)
    _check_version(version, where)
    if not isinstance(source, str) or not _RELEASE_SOURCE_RX.fullmatch(source):
        raise _bad(where, f"bad release source {source!r}")
    return Release(product, version, source)


class FingerprintDB:
    """The validated records and the vendor release lists, with their indexes (by build-id
    and SHA-256)."""

    def __init__(self, records: Iterable[Record], *, built: str | None = None,
                 source: str = "bundled", releases: Iterable[Release] = (),
                 complete_from: Mapping[str, str] | None = None) -> None:
        self.records: tuple[Record, ...] = tuple(records)
        self.releases: tuple[Release, ...] = tuple(releases)
        self.complete_from: dict[str, str] = dict(complete_from or {})
        self.built = built
        self.source = source
        self._by_sha: dict[str, list[Record]] = {}
        self._by_bid: dict[str, list[Record]] = {}
        for r in self.records:
            self._by_sha.setdefault(r.sha256, []).append(r)
            if r.build_id:
                self._by_bid.setdefault(r.build_id, []).append(r)
        self._release_index: Any = None

    def __len__(self) -> int:
        return len(self.records)

    @staticmethod
    def _one(rows: list[Record] | None) -> Record | None:
        """The record when every row of a key names the same product and version."""
        if not rows:
            return None
        first = rows[0]
        if any((r.product, r.version) != (first.product, first.version) for r in rows[1:]):
            return None  # the same bytes in two releases: not exact
        return first

    def lookup(self, *, sha256: str | None = None, build_id: str | None = None
               ) -> Match | None:
        """The exact identification of a file by its SHA-256 (first) or build-id; None when
        neither is known or a key is ambiguous (its rows name different releases)."""
        if sha256:
            rec = self._one(self._by_sha.get(sha256.lower()))
            if rec is not None:
                return Match(rec.product, rec.version, "sha256", rec)
        if build_id:
            rec = self._one(self._by_bid.get(build_id.lower()))
            if rec is not None:
                return Match(rec.product, rec.version, "build-id", rec)
        return None

    def release_index(self) -> Any:
        """The vendor release lists as a :class:`gpusbom.fingerprints.releases.ReleaseIndex`
        (built once)."""
        if self._release_index is None:
            from .releases import ReleaseIndex

            self._release_index = ReleaseIndex(self.releases, self.complete_from,
                                               exact=self.records)
        return self._release_index

    def counts(self) -> dict[str, dict[str, int]]:
        """Product -> version -> number of files, sorted."""
        out: dict[str, dict[str, int]] = {}
        for r in self.records:
            per = out.setdefault(r.product, {})
            per[r.version] = per.get(r.version, 0) + 1
        return {p: dict(sorted(v.items())) for p, v in sorted(out.items())}

    def release_counts(self) -> dict[str, int]:
        """Product -> number of distinct releases the vendor lists name, sorted."""
        out: dict[str, set[str]] = {}
        for r in self.releases:
            out.setdefault(r.product, set()).add(r.version)
        return {p: len(v) for p, v in sorted(out.items())}

    def to_document(self) -> dict[str, Any]:
        """The JSON document of this database (the builder writes it)."""

        def key(x: list[Any]) -> tuple[str, ...]:
            return tuple("" if v is None else str(v) for v in x)

        rows = sorted(
            ([r.product, r.version, r.file, r.soname, r.build_id, r.sha256, r.size, r.source]
             for r in self.records), key=key)
        version = (URL_SOURCE_VERSION if any(URL_SOURCE_RX.fullmatch(r.source)
                                             for r in self.records) else FORMAT_VERSION)
        doc: dict[str, Any] = {
            "format": FORMAT, "format_version": version, "built": self.built,
            "builder": "scripts/build_fingerprints.py", "columns": list(COLUMNS),
            "rows": rows,
            "releases": {"columns": list(RELEASE_COLUMNS), "rows": sorted(
                {(r.product, r.version, r.source) for r in self.releases})},
            "complete_from": dict(sorted(self.complete_from.items())),
        }
        doc["releases"]["rows"] = [list(r) for r in doc["releases"]["rows"]]
        return doc


def dumps(doc: Mapping[str, Any]) -> str:
    """The document as the builder writes it: one row per line (diffable), sorted keys."""
    import json

    def table(rows: list[Any]) -> str:
        return ",\n".join(json.dumps(r, separators=(",", ":")) for r in rows)

    head = {k: v for k, v in doc.items() if k not in ("rows", "releases")}
    out = [json.dumps(head, sort_keys=True)[:-1] + ', "rows": [', table(doc.get("rows", [])),
           "]"]
    for name in ("releases",):
        sec = doc.get(name)
        if sec is None:
            continue
        out.append(f', "{name}": {{"columns": {json.dumps(sec["columns"])}, "rows": [')
        out.append(table(sec["rows"]))
        out.append("]}")
    out.append("}")
    return "\n".join(out) + "\n"


def _section(doc: dict[str, Any], name: str, columns: tuple[str, ...], where: str
             ) -> list[Any]:
    sec = doc.get(name)
    if sec is None:
        return []
    if not isinstance(sec, dict) or set(sec) != {"columns", "rows"}:
        raise _bad(where, f"{name} must be an object of columns and rows")
    if sec["columns"] != list(columns):
        raise _bad(where, f"{name} columns must be {list(columns)}")
    rows = sec["rows"]
    if not isinstance(rows, list):
        raise _bad(where, f"{name} rows is not a list")
    return rows


def _parse(doc: Any, name: str) -> tuple[list[Record], list[Release], dict[str, str]]:
    if not isinstance(doc, dict):
        raise _bad(name, "not a JSON object")
    if doc.get("format") != FORMAT:
        raise _bad(name, f"format is {doc.get('format')!r}, not {FORMAT!r}")
    version = doc.get("format_version")
    if version not in READ_VERSIONS or isinstance(version, bool):
        raise _bad(name, f"format_version {version!r} is not one of {list(READ_VERSIONS)} "
                         "(a newer gpusbom wrote it?)")
    allowed = _KEYS | (_V2_KEYS if version >= 2 else set())
    extra = sorted(set(doc) - allowed)
    if extra:
        raise _bad(name, f"unknown key(s) {', '.join(map(repr, extra))} for format_version "
                         f"{version}")
    if doc.get("columns") != list(COLUMNS):
        raise _bad(name, f"columns must be {list(COLUMNS)}")
    rows = doc.get("rows")
    if not isinstance(rows, list):
        raise _bad(name, "rows is not a list")
    rel_rows = _section(doc, "releases", RELEASE_COLUMNS, name)
    total = len(rows) + len(rel_rows)
    if total > MAX_ROWS:
        raise _bad(name, f"{total} rows (more than {MAX_ROWS})")
    records = [_row(raw, f"{name} row {i}", version) for i, raw in enumerate(rows)]
    releases = [_release_row(raw, f"{name} release row {i}") for i, raw in enumerate(rel_rows)]
    cf = doc.get("complete_from", {})
    if not isinstance(cf, dict):
        raise _bad(name, "complete_from is not an object")
    for k, v in cf.items():
        _check_product(k, f"{name} complete_from")
        _check_version(v, f"{name} complete_from {k}")
    builder = doc.get("builder")
    if builder is not None and (not isinstance(builder, str) or len(builder) > 200
                                or not builder.isprintable()):
        raise _bad(name, "builder is not a short printable string")
    built = doc.get("built")
    if built is not None and (not isinstance(built, str) or not _BUILT_RX.fullmatch(built)):
        raise _bad(name, f"built {built!r} is not a UTC time YYYY-MM-DDTHH:MM:SSZ")
    return records, releases, dict(cf)


def _records(doc: Any, name: str) -> Iterator[Record]:
    yield from _parse(doc, name)[0]


def load_bytes(data: bytes, *, name: str, source: str | None = None) -> FingerprintDB:
    """A database from a file's bytes (``name`` is what errors call it); raises
    :class:`FingerprintError`."""
    if len(data) > MAX_DB_BYTES:
        raise _bad(name, f"{len(data)} bytes (more than {MAX_DB_BYTES})")
    try:
        doc = loads_json(data, max_bytes=MAX_DB_BYTES, max_depth=8)
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError
        raise _bad(name, f"not valid JSON: {e}") from None
    records, releases, complete_from = _parse(doc, name)
    return FingerprintDB(records, built=doc.get("built"), source=source or name,
                         releases=releases, complete_from=complete_from)


def load_path(path: str | Path) -> FingerprintDB:
    """A database file (read at most :data:`MAX_DB_BYTES` + 1 bytes); raises
    :class:`FingerprintError` naming it when it is missing, too large or invalid."""
    p = Path(path)
    try:
        with open(p, "rb") as f:
            data = f.read(MAX_DB_BYTES + 1)
    except OSError as e:
        raise _bad(str(p), f"cannot read: {e.strerror or e}") from None
    return load_bytes(data, name=str(p), source=str(p))
