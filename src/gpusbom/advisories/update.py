"""``gpusbom advisories update``: fetch feeds, build a new database, swap it in atomically.

Feeds (each URL configurable, so a mirror or a test server can stand in):

- ``nvidia-csaf``: NVIDIA PSIRT's repository (raw files of NVIDIA/product-security):
  ``<base>/<year>/CVE_index.csv`` lists each year's bulletins (a missing year is
  skipped); each bulletin's ``<base>/<year>/<id>/<id>.json`` is checked against the
  ``<id>.json.sha256`` NVIDIA publishes beside it, then imported with the CSAF importer;
- ``osv``: OSV ecosystem archives ``<base>/<ECOSYSTEM>/all.zip`` (PyPI, Debian,
  Ubuntu by default), checked against the MD5 in Google Cloud Storage's ``x-goog-hash``
  header when the server sends one, filtered to GPU-stack packages
  (``importers.osv.gpu_relevant``) and imported with the OSV importer;
- ``curated``: the project's curated bundle (the format of ``gpusbom/data/advisories.json``)
  with its ``.sha256`` beside it. Without a URL the curated records shipped with this
  gpusbom are used;
- ``cve5``: Intel's and AMD's CVE JSON 5 records (CVEProject/cvelistV5's layout), one per
  CVE of an Intel or AMD record, for their descriptions (``update_cve5.py``);
- ``kev``: CISA's Known Exploited Vulnerabilities catalog (JSON; CISA publishes no
  checksum: the length and the catalog's own ``count`` are checked). Findings of a CVE in
  it carry its ``dateAdded``.

Per-CVE descriptions (the CSAF notes, OSV details, Intel's and AMD's CVE records) are kept in the new database's
``descriptions``, in the user cache only (``enrich.py``): the shipped snapshot holds no
vendor prose.

Every download is over HTTPS (plain ``http://`` only for a loopback test server), with
``requests``, and must arrive whole: a short body (the server closed early or sent a
wrong ``Content-Length``), an HTTP error, a checksum mismatch, a connection failure or
data that is not what the feed promises raises ``UpdateError`` (an ``InputError``: exit 3)
and leaves the current database untouched. Only when every feed was fetched, every record
validated and the new bundle re-read and validated is it moved over the old one with
``os.replace`` (atomic on one file system). Individual entries that the importers cannot
turn into valid records are skipped and counted in the summary, never half-kept.
"""

from __future__ import annotations

import csv
import datetime as _dt
import hashlib
import io
import json
import os
import tempfile
import zipfile
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..errors import InputError
from .db import (
    AdvisoryDB,
    AdvisoryError,
    bundle,
    cache_dir,
    load_bundle_text,
    load_bundled,
    merge_records,
    user_db_path,
    validate_record,
)
from .enrich import KEV_URL, KevError, csaf_descriptions, osv_description, parse_kev
from .fetch import (
    UpdateError,
    _Fetcher,
    _json,
    _short,
    _TransportError,
    _verified,
    _verified_bulletin,
)

__all__ = ["DEFAULT_SOURCES", "UpdateError", "UpdateReport", "update"]

DEFAULT_SOURCES: dict[str, str | None] = {
    "nvidia-csaf": "https://raw.githubusercontent.com/NVIDIA/product-security/main",
    "osv": "https://osv-vulnerabilities.storage.googleapis.com",
    "curated": None,  # the records shipped with gpusbom
    "kev": KEV_URL,
    "cve5": "https://raw.githubusercontent.com/CVEProject/cvelistV5/main/cves",
}
ENV_VARS = {"nvidia-csaf": "GPUSBOM_NVIDIA_CSAF_URL", "osv": "GPUSBOM_OSV_URL",
            "curated": "GPUSBOM_CURATED_URL", "kev": "GPUSBOM_KEV_URL",
            "cve5": "GPUSBOM_CVE5_URL"}
DEFAULT_ECOSYSTEMS = ("PyPI", "Debian", "Ubuntu")
FIRST_CSAF_YEAR = 2022
_MAX_KEV = 64 << 20  # CISA's catalog (about 1.5 MB in 2025)


@dataclass
class UpdateReport:
    path: Path
    advisories: int
    built: str
    feeds: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # entries not turned into records
    merged: list[str] = field(default_factory=list)  # CVEs carried by several records
    descriptions: int = 0  # per-CVE descriptions kept (user cache only)

    def summary(self) -> str:
        parts = [f"kev: {f['records']} known exploited CVEs (catalog {f['catalogVersion']})"
                 if f["name"] == "kev" else f"{f['name']}: {f['records']} records"
                 for f in self.feeds]
        text = (f"{self.path}: {self.advisories} advisories (built {self.built}; "
                + "; ".join(parts) + f"; {self.descriptions} descriptions"
                + f"; {len(self.skipped)} entries skipped"
                + (f"; {len(self.merged)} re-listed CVEs merged" if self.merged else "") + ")")
        return "\n".join([text, *(f"  skipped: {s}" for s in self.skipped)])


def resolve_sources(overrides: Iterable[str] = ()) -> dict[str, str | None]:
    """Feed URLs: defaults, then the ``GPUSBOM_*_URL`` variables, then ``NAME=URL`` options
    (``NAME=off`` disables a feed)."""
    out = dict(DEFAULT_SOURCES)
    for name, var in ENV_VARS.items():
        if os.environ.get(var):
            val = os.environ[var].strip()
            out[name] = (None if val.lower() in ("off", "none") else val.rstrip("/"))
    for item in overrides:
        name, sep, url = item.partition("=")
        name = name.strip()
        if not sep or name not in out:
            raise InputError(f"--source {item!r}: expected NAME=URL with NAME one of "
                             + ", ".join(out))
        out[name] = None if url.strip() in ("", "off", "none") else url.strip().rstrip("/")
        if name == "curated" and out[name] is None:
            out[name] = ""  # explicitly off: not even the shipped records
    for name, value in out.items():
        if value:
            _check_url(name, value)
    return out


def _check_url(name: str, url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme == "https":
        return
    if parts.scheme == "http" and parts.hostname in ("127.0.0.1", "localhost", "::1"):
        return  # a loopback test server
    raise InputError(f"feed {name}: {url} is not an https:// URL")


# --------------------------------------------------------------------------- feeds


def _csaf_feed(fetch: _Fetcher, base: str, skipped: list[str], workers: int,
               descriptions: dict[str, str]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from .importers import MalformedDocumentError
    from .importers.csaf import import_csaf

    year_now = _dt.datetime.now(_dt.timezone.utc).year
    docs: list[tuple[str, str]] = []
    for year in range(FIRST_CSAF_YEAR, year_now + 1):
        url = f"{base}/{year}/CVE_index.csv"
        data = fetch.get(url, missing_ok=True)
        if data is None:
            continue
        try:
            rows = list(csv.DictReader(io.StringIO(data.decode("utf-8-sig")), delimiter=";"))
        except (UnicodeDecodeError, csv.Error) as exc:
            raise UpdateError(f"{url}: invalid data: {_short(exc)}") from None
        if rows and "Bulletin" not in rows[0]:
            raise UpdateError(f"{url}: invalid data: no 'Bulletin' column")
        ids = sorted({r["Bulletin"].strip() for r in rows if (r.get("Bulletin") or "").strip()})
        docs.extend((str(year), i) for i in ids if i.isdigit())
    if not docs:
        raise UpdateError(f"{base}: no CSAF index found (CVE_index.csv of {FIRST_CSAF_YEAR}-"
                          f"{year_now})")

    def one(item: tuple[str, str]) -> tuple[str, bytes | None]:
        year, bid = item
        url = f"{base}/{year}/{bid}/{bid}.json"
        try:
            return url, _verified_bulletin(fetch, url)
        except UpdateError as exc:
            if isinstance(exc, _TransportError):
                raise  # the feed itself failed: keep the old database
            skipped.append(f"{url}: {exc.args[0].split(': ', 1)[-1]}")
            return url, None

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        got = list(pool.map(one, docs))
    records = []
    phrases = parsed = 0
    for url, data in got:
        if data is None:
            continue
        try:
            doc = _json(data, url)
        except UpdateError as exc:
            skipped.append(f"{url}: {exc.args[0].split(': ', 1)[-1]}")
            continue
        if not isinstance(doc, dict) or "document" not in doc:
            skipped.append(f"{url}: invalid data: not a CSAF document")
            continue
        try:
            imp = import_csaf(doc, source_url=url)
        except MalformedDocumentError as exc:
            skipped.append(f"{url}: {exc}")
            continue
        phrases += imp.phrases
        parsed += imp.parsed
        rec = imp.record
        rec["vulnerabilities"] = [v for v in rec["vulnerabilities"] if v["affected"]]
        if not rec["vulnerabilities"]:
            continue  # no product gpusbom identifies
        rec["aliases"] = sorted({v["id"] for v in rec["vulnerabilities"]} - {rec["id"]})
        try:
            validate_record(rec)
        except AdvisoryError as exc:
            skipped.append(f"{url}: {exc}")
            continue
        records.append(rec)
        texts = csaf_descriptions(doc)
        descriptions.update((v["id"], texts[v["id"]]) for v in rec["vulnerabilities"]
                            if v["id"] in texts)
    info = {"name": "nvidia-csaf", "url": base, "documents": len(docs), "phrases": phrases,
            "phrases_parsed": parsed, "checked": "sha256 files published beside each document"}
    return records, info


def _osv_feed(fetch: _Fetcher, base: str, ecosystems: Iterable[str], tmp: Path,
              skipped: list[str], descriptions: dict[str, str]
              ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from .importers import MalformedDocumentError
    from .importers.osv import gpu_relevant, import_osv

    records = []
    archives = []
    for eco in ecosystems:
        url = f"{base}/{eco}/all.zip"
        dest = tmp / f"osv-{eco}.zip"
        sums = fetch.get_to_file(url, dest)
        archives.append({"ecosystem": eco, **sums})
        try:
            zf = zipfile.ZipFile(dest)
        except zipfile.BadZipFile as exc:
            raise UpdateError(f"{url}: invalid data: {_short(exc)}") from None
        with zf:
            for name in sorted(zf.namelist()):
                if not name.endswith(".json"):
                    continue
                try:
                    raw = zf.read(name)
                except (zipfile.BadZipFile, OSError, ValueError) as exc:
                    raise UpdateError(f"{url}: invalid data in {name}: {_short(exc)}") from None
                if not _mentions_gpu_package(raw):
                    continue
                doc = _json(raw, f"{url}!{name}")
                if not isinstance(doc, dict):
                    raise UpdateError(f"{url}!{name}: invalid data: not an OSV entry")
                try:
                    imp = import_osv(doc, keep=gpu_relevant)
                except MalformedDocumentError as exc:
                    skipped.append(f"{url}!{name}: {exc}")
                    continue
                if imp.record is None:
                    continue
                try:
                    validate_record(imp.record)
                except AdvisoryError as exc:
                    skipped.append(f"{url}!{name}: {exc}")
                    continue
                records.append(imp.record)
                text = osv_description(doc)
                if text:
                    for v in imp.record["vulnerabilities"]:
                        descriptions.setdefault(v["id"], text)
    return records, {"name": "osv", "url": base, "archives": archives}


def _mentions_gpu_package(raw: bytes) -> bool:
    """A cheap prefilter before JSON parsing (archives hold tens of thousands of entries):
    the ``"name"`` of a GPU-stack package must appear somewhere."""
    from .importers.osv import GPU_DEB_PREFIXES, GPU_PYPI, GPU_PYPI_PREFIXES

    low = raw.lower()
    words = (*GPU_PYPI, *GPU_PYPI_PREFIXES, *GPU_DEB_PREFIXES, "github.com/nvidia/")
    return any(f'"{w}'.encode() in low for w in words)


def _curated_feed(fetch: _Fetcher, url: str | None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    if url == "":
        return [], {"name": "curated", "url": None, "records": 0}
    if url is None:
        db = load_bundled()
        recs = [a.raw for a in db]
        return recs, {"name": "curated", "url": "bundled", "built": db.built}
    data = _verified(fetch, url)
    try:
        db = load_bundle_text(data.decode("utf-8"), source=url)
    except (AdvisoryError, UnicodeDecodeError) as exc:
        raise UpdateError(f"{url}: invalid data: {_short(exc)}") from None
    return [a.raw for a in db], {"name": "curated", "url": url, "built": db.built,
                                 "sha256": hashlib.sha256(data).hexdigest()}


def _kev_feed(fetch: _Fetcher, url: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """CISA's KEV catalog, whole or not at all (``UpdateError``: the old database stays)."""
    data = fetch.get(url, limit=_MAX_KEV) or b""
    try:
        kev = parse_kev(_json(data, url))
    except KevError as exc:
        raise UpdateError(f"{url}: invalid data: {exc}") from None
    return kev, {"name": "kev", "url": url, "records": len(kev["entries"]),
                 "catalogVersion": kev["catalogVersion"], "dateReleased": kev["dateReleased"],
                 "sha256": hashlib.sha256(data).hexdigest(),
                 "checked": "length and the catalog's count (CISA publishes no checksum)"}


def _merge(groups: Iterable[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Every feed's records as one set (``db.merge_records``): nothing is dropped whole."""
    return merge_records(groups)[0]


def update(
    *,
    sources: dict[str, str | None] | None = None,
    ecosystems: Iterable[str] = DEFAULT_ECOSYSTEMS,
    workers: int = 8,
    progress: Callable[[str], None] | None = None,
) -> UpdateReport:
    """Fetch every feed, build and validate a new database, then swap it in atomically."""
    sources = sources if sources is not None else resolve_sources()
    say = progress or (lambda _msg: None)
    dest = user_db_path()
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UpdateError(f"{dest.parent}: cannot create the cache directory: {exc}") from None
    fetch = _Fetcher()
    skipped: list[str] = []
    feeds: list[dict[str, Any]] = []
    groups: list[list[dict[str, Any]]] = []
    descriptions: dict[str, str] = {}
    kev: dict[str, Any] | None = None
    with tempfile.TemporaryDirectory(prefix=".update-", dir=dest.parent) as tmpd:
        tmp = Path(tmpd)
        say("curated records")
        recs, info = _curated_feed(fetch, sources.get("curated"))
        # a curated record that cites why (``override``) beats fresh vendor data; the rest
        # of the curated copy comes last: fresh vendor data supersedes it
        groups.append([r for r in recs if r.get("override")])
        curated_rest = [r for r in recs if not r.get("override")]
        feeds.append({**info, "records": len(recs)})
        if sources.get("nvidia-csaf"):
            say("NVIDIA CSAF bulletins")
            recs, info = _csaf_feed(fetch, str(sources["nvidia-csaf"]), skipped, workers,
                                    descriptions)
            groups.append(recs)
            feeds.append({**info, "records": len(recs)})
        if sources.get("osv"):
            say("OSV archives")
            recs, info = _osv_feed(fetch, str(sources["osv"]), ecosystems, tmp, skipped,
                                   descriptions)
            groups.append(recs)
            feeds.append({**info, "records": len(recs)})
        if sources.get("kev"):
            say("CISA KEV catalog")
            kev, info = _kev_feed(fetch, str(sources["kev"]))
            feeds.append(info)
        records, merged = merge_records([*groups, curated_rest])
        if sources.get("cve5"):
            from .update_cve5 import cve5_feed

            say("Intel and AMD CVE records (descriptions)")
            feeds.append(cve5_feed(fetch, str(sources["cve5"]), records, skipped, workers,
                                   descriptions))
        built = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()
        built = built.replace("+00:00", "Z")
        kept = {v["id"] for r in records for v in r["vulnerabilities"]}
        text = json.dumps(bundle(records, built, feeds=feeds, kev=kev, descriptions={
            k: t for k, t in descriptions.items() if k in kept}), indent=1, sort_keys=True,
            ensure_ascii=False) + "\n"
        staged = tmp / "advisories.json"
        staged.write_text(text, encoding="utf-8")
        try:  # what scans will read must load: re-read the staged file, as they will
            db: AdvisoryDB = load_bundle_text(staged.read_text(encoding="utf-8"),
                                              source=str(dest))
        except AdvisoryError as exc:
            raise UpdateError(f"new database is invalid, kept the old one: {exc}") from None
        with open(staged, "rb") as f:
            os.fsync(f.fileno())
        os.replace(staged, dest)
    _fsync_dir(dest.parent)
    return UpdateReport(path=dest, advisories=len(db), built=built, feeds=feeds,
                        skipped=skipped, merged=merged, descriptions=len(db.descriptions))


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def reset() -> Path | None:
    """Drop the updated database (scans then use the bundled snapshot); its path or None."""
    p = user_db_path()
    try:
        p.unlink()
    except FileNotFoundError:
        return None
    return p


__all__ += ["cache_dir", "reset", "resolve_sources"]
