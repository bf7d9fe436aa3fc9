"""``gpusbom advisories update``: fetch feeds, build a new database, swap it in atomically.

The feeds are the modules of ``advisories/feeds/`` (``nvidia-csaf``, ``osv``, ``curated``,
``kev``, ``cve5``; each module's docstring says what it fetches and checks), run in their
registry's order; each URL is configurable (a setting, ``GPUSBOM_<FEED>_URL``, ``--source
NAME=URL``), so a mirror or a test server can stand in.

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

import json
import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .. import settings
from ..errors import InputError
from .db import (
    AdvisoryDB,
    AdvisoryError,
    bundle,
    cache_dir,
    load_bundle_text,
    merge_records,
    user_db_path,
)
from .feeds import Output, Run, all_feeds
from .feeds.osv import DEFAULT_ECOSYSTEMS
from .fetch import UpdateError, _Fetcher

__all__ = ["DEFAULT_ECOSYSTEMS", "UpdateError", "UpdateReport", "default_sources", "update"]


def default_sources() -> dict[str, str | None]:
    """Every feed's default URL (None: the feed's own default, or off), in feed order."""
    return {f.name: f.default_url for f in all_feeds()}


def feed_settings() -> dict[str, str]:
    """Feed -> the setting of its URL (``gpusbom.settings``; ``GPUSBOM_<SETTING>``)."""
    return {f.name: f.setting for f in all_feeds() if f.setting}


def env_vars() -> dict[str, str]:
    """Feed -> the environment variable of its URL."""
    return {feed: settings.env_name(name) for feed, name in feed_settings().items()}


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
    out = default_sources()
    for name, setting in feed_settings().items():
        val = settings.raw(setting).strip()
        if val:
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


def _merge_outputs(outputs: list[Output]) -> tuple[list[dict[str, Any]], list[str]]:
    """Every feed's records as one set (``db.merge_records``): nothing is dropped whole.
    Each feed's ``first`` records, then every feed's ``records`` in feed order, then each
    feed's ``last``."""
    return merge_records([*(o.first for o in outputs), *(o.records for o in outputs),
                          *(o.last for o in outputs)])


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
        os.makedirs(dest.parent, mode=0o700, exist_ok=True)
    except OSError as exc:
        raise UpdateError(f"{dest.parent}: cannot create the cache directory: {exc}") from None
    run = Run(fetch=_Fetcher(), tmp=Path(), workers=workers, ecosystems=tuple(ecosystems))
    outputs: list[Output] = []
    with tempfile.TemporaryDirectory(prefix=".update-", dir=dest.parent) as tmpd:
        run.tmp = Path(tmpd)
        records: list[dict[str, Any]] = []
        merged: list[str] = []
        done_merge = False
        for feed in all_feeds():
            if feed.after_merge and not done_merge:
                records, merged = _merge_outputs(outputs)
                run.records, done_merge = records, True
            url = sources.get(feed.name)
            if not url and not feed.runs_without_url:
                continue  # off
            say(feed.progress)
            outputs.append(feed()(run, url))
        if not done_merge:
            records, merged = _merge_outputs(outputs)
        feeds = [o.info for o in outputs]
        kev = next((o.kev for o in outputs if o.kev is not None), None)
        skipped, descriptions = run.skipped, run.descriptions
        from ..clock import scan_timestamp

        built = scan_timestamp()
        kept = {v["id"] for r in records for v in r["vulnerabilities"]}
        text = json.dumps(bundle(records, built, feeds=feeds, kev=kev, descriptions={
            k: t for k, t in descriptions.items() if k in kept}), indent=1, sort_keys=True,
            ensure_ascii=False) + "\n"
        staged = run.tmp / "advisories.json"
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


__all__ += ["cache_dir", "env_vars", "feed_settings", "reset", "resolve_sources"]
