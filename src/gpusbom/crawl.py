"""``gpusbom crawl REGISTRY[/PREFIX] --push DB``: scan a registry's images into the inventory.

The walk: the catalog (``GET /v2/_catalog``, paginated by ``Link``), repositories under the
prefix and matching ``--include``/``--exclude`` globs, their tags (``/v2/<repo>/tags/list``,
paginated), each tag's manifest; an image index contributes each of its image manifests
(attestations and ``unknown/unknown`` entries are skipped), or only ``--platform``'s.

Sharding: work item ``repo:tag`` belongs to shard ``int(sha256(repo:tag)[:16], 16) % N``, so
``--shard I/N`` with ``I`` = ``JOB_COMPLETION_INDEX`` of an Indexed Job of ``N`` completions
splits the registry deterministically, whatever the pods' order or timing.

Stored once: an image (manifest digest) already in the inventory is skipped before it is
read; after the scan, the inventory is asked again and the scan stored under a lock keyed
by the digest (``pg_advisory_lock`` on PostgreSQL; an ``fcntl`` lock beside an SQLite
file), so crawlers on overlapping shards, or two tags of one image in two shards, store each
image exactly once. ``--since`` skips images whose config says they were created earlier.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from . import settings
from .errors import GpusbomError, InputError, UsageError

_LINK = re.compile(r'<([^>]+)>\s*;\s*rel="?next"?')
PAGE = 1000


@dataclass
class CrawlStats:
    repositories: int = 0
    tags: int = 0
    in_shard: int = 0
    images: int = 0  # image manifests considered (after index expansion)
    stored: int = 0
    already: int = 0  # skipped: the digest was in the inventory
    too_old: int = 0
    failed: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def per_minute(self) -> float:
        return self.stored * 60.0 / self.seconds if self.seconds > 0 else 0.0

    def summary(self, shard: tuple[int, int]) -> str:
        return (
            f"crawl shard {shard[0]}/{shard[1]}: {self.repositories} repositories, "
            f"{self.tags} tags ({self.in_shard} in this shard), {self.images} images: "
            f"{self.stored} stored, {self.already} already stored, {self.too_old} older than "
            f"--since, {len(self.failed)} failed; {self.seconds:.1f} s "
            f"({self.per_minute:.0f} images/min)"
        )


def parse_shard(text: str | None) -> tuple[int, int]:
    """``I/N`` (0 <= I < N); ``None``: ``$JOB_COMPLETION_INDEX/$GPUSBOM_SHARDS`` or 0/1."""
    if text is None:
        idx = os.environ.get("JOB_COMPLETION_INDEX")
        total = (settings.raw("shards") or None)
        if idx is None:
            return 0, 1
        text = f"{idx}/{total or 1}"
    m = re.fullmatch(r"(\d+)/(\d+)", text.strip())
    if not m or int(m.group(2)) < 1 or int(m.group(1)) >= int(m.group(2)):
        raise UsageError(f"--shard {text!r}: expected I/N with 0 <= I < N")
    return int(m.group(1)), int(m.group(2))


def parse_since(text: str | None, now: datetime | None = None) -> datetime | None:
    """An ISO 8601 date/time, or a duration back from now: ``30d``, ``12h``, ``90m``."""
    if text is None:
        return None
    if now is None:
        from .clock import now as _clock_now

        now = _clock_now()
    m = re.fullmatch(r"(\d+)([dhm])", text.strip())
    if m:
        n = int(m.group(1))
        unit = {"d": "days", "h": "hours", "m": "minutes"}[m.group(2)]
        return now - timedelta(**{unit: n})
    try:
        dt = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"--since {text!r}: expected an ISO 8601 time or Nd/Nh/Nm") from None
    return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)


def shard_of(key: str, total: int) -> int:
    return int(hashlib.sha256(key.encode()).hexdigest()[:16], 16) % total


def _created(text: Any) -> datetime | None:
    if not isinstance(text, str):
        return None
    s = re.sub(r"(\.\d{6})\d+", r"\1", text.strip()).replace("Z", "+00:00")
    try:
        dt = datetime.fromisoformat(s)
    except ValueError:
        return None
    return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)


class _Locks:
    """Per-digest mutual exclusion between crawlers sharing one inventory."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.pg = store.engine.dialect.name == "postgresql"
        self.conn = store.engine.connect() if self.pg else None
        self.path = None
        if not self.pg:
            db = store.engine.url.database
            self.path = (db or "gpusbom-inventory") + ".crawl.lock"

    @contextmanager
    def hold(self, digest: str) -> Iterator[None]:
        if self.conn is not None:
            from sqlalchemy import text

            key = int(hashlib.sha256(digest.encode()).hexdigest()[:15], 16)
            self.conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": key})
            self.conn.commit()
            try:
                yield
            finally:
                self.conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
                self.conn.commit()
        else:
            import fcntl

            assert self.path is not None  # noqa: S101 - type narrowing of an invariant
            with open(self.path, "a") as f:
                fcntl.flock(f, fcntl.LOCK_EX)
                try:
                    yield
                finally:
                    fcntl.flock(f, fcntl.LOCK_UN)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


def stored_digest(store: Any, digest: str) -> bool:
    from sqlalchemy import select

    from .inventory.schema import scans

    with store.engine.connect() as c:
        stmt = select(scans.c.id).where(scans.c.kind == "image", scans.c.digest == digest)
        return c.execute(stmt.limit(1)).first() is not None


class Crawler:
    def __init__(
        self,
        target: str,
        db_url: str,
        *,
        shard: tuple[int, int] = (0, 1),
        since: datetime | None = None,
        include: list[str] | None = None,
        exclude: list[str] | None = None,
        platform: str | None = None,
        registry_opts: Any = None,
        quiet: bool = True,
    ) -> None:
        from .sources.registry import RegistryOptions, normalize_host

        host, _, prefix = target.strip().strip("/").partition("/")
        if not host:
            raise UsageError("crawl: give REGISTRY[/REPO-PREFIX], e.g. registry.example:5000/ml")
        self.host = normalize_host(host)
        self.prefix = prefix.strip("/")
        self.db_url = db_url
        self.shard = shard
        self.since = since
        self.include = include or []
        self.exclude = exclude or []
        self.platform = platform
        self.opts = registry_opts or RegistryOptions()
        self.quiet = quiet
        self.stats = CrawlStats()

    # ------------------------------------------------------------------ registry walk

    def _client(self, repo: str) -> Any:
        from .sources.registry import ImageRef, RegistryClient

        return RegistryClient(ImageRef.parse(f"{self.host}/{repo}:latest"), self.opts)

    def _paged(self, client: Any, path: str, key: str, what: str) -> Iterator[str]:
        seen = 0
        while path:
            resp = client.request("GET", path, what=what)
            try:
                doc = json.loads(client.read_capped(resp, what))
            except ValueError:
                raise InputError(f"{client.label}: {what} is not JSON") from None
            items = doc.get(key) if isinstance(doc, dict) else None
            for item in items or []:
                if isinstance(item, str):
                    seen += 1
                    yield item
            link = resp.headers.get("Link", "")
            m = _LINK.search(link)
            path = m.group(1) if m else ""
            if path.startswith("http"):
                path = "/" + path.split("/", 3)[3]
            if seen > 10_000_000:
                raise InputError(f"{client.label}: {what} lists more than 10 million entries")

    def repositories(self) -> list[str]:
        client = self._client("gpusbom-catalog")
        try:
            repos = list(self._paged(client, f"/v2/_catalog?n={PAGE}", "repositories", "catalog"))
        finally:
            client.close()
        out = []
        for r in repos:
            if self.prefix and not (r == self.prefix or r.startswith(self.prefix + "/")):
                continue
            if self.include and not any(fnmatch.fnmatchcase(r, p) for p in self.include):
                continue
            if any(fnmatch.fnmatchcase(r, p) for p in self.exclude):
                continue
            out.append(r)
        return sorted(set(out))

    def _wanted_tag(self, repo: str, tag: str) -> bool:
        key = f"{repo}:{tag}"
        if self.include and not any(fnmatch.fnmatchcase(key, p) or fnmatch.fnmatchcase(repo, p)
                                    for p in self.include):
            return False
        return not any(fnmatch.fnmatchcase(key, p) for p in self.exclude)

    def _images_of(self, client: Any, repo: str, tag: str) -> list[tuple[str, str | None]]:
        """(manifest digest, platform) of the images ``repo:tag`` names."""
        from .sources.image import INDEX_TYPES, OciPlatform, sha256_digest

        data, media_type, digest = client.get_manifest(tag)
        doc = json.loads(data)
        mt = media_type or (doc.get("mediaType") if isinstance(doc, dict) else None)
        if mt in INDEX_TYPES or (isinstance(doc, dict) and "manifests" in doc and "layers" not in doc):
            want = OciPlatform.parse(self.platform) if self.platform else None
            out = []
            for d in doc.get("manifests") or []:
                if not isinstance(d, dict) or not isinstance(d.get("digest"), str):
                    continue
                ann = d.get("annotations") or {}
                if isinstance(ann, dict) and ann.get("vnd.docker.reference.type"):
                    continue  # attestations
                p = OciPlatform.from_descriptor(d.get("platform"))
                if p is not None and p.os == "unknown":
                    continue
                if want is not None and (p is None or not p.matches(want, exact_variant=False)):
                    continue
                out.append((d["digest"], str(p) if p else None))
            return out
        return [(digest or sha256_digest(data), None)]

    # ------------------------------------------------------------------ run

    def _say(self, text: str) -> None:
        if not self.quiet:
            print(text, file=sys.stderr)

    def run(self) -> CrawlStats:
        from .inventory.store import Store
        from .scan import scan

        t0 = time.monotonic()
        st = self.stats
        idx, total = self.shard
        with Store(self.db_url) as store:
            locks = _Locks(store)
            try:
                repos = self.repositories()
                st.repositories = len(repos)
                for repo in repos:
                    client = self._client(repo)
                    try:
                        tags = sorted(set(self._paged(
                            client, f"/v2/{repo}/tags/list?n={PAGE}", "tags", f"tags of {repo}"
                        )))
                        for tag in tags:
                            st.tags += 1
                            if not self._wanted_tag(repo, tag):
                                continue
                            if shard_of(f"{repo}:{tag}", total) != idx:
                                continue
                            st.in_shard += 1
                            try:
                                images = self._images_of(client, repo, tag)
                            except GpusbomError as e:
                                st.failed.append(f"{repo}:{tag}: {e}")
                                continue
                            for digest, plat in images:
                                self._one(store, locks, scan, client, repo, tag, digest, plat)
                    finally:
                        client.close()
            finally:
                locks.close()
        st.seconds = time.monotonic() - t0
        return st

    def _created_of(self, client: Any, digest: str) -> datetime | None:
        """The image's creation time from its config (two small reads, before any layer)."""
        data, _mt, _d = client.get_manifest(digest)
        doc = json.loads(data)
        cfg = doc.get("config") if isinstance(doc, dict) else None
        cdigest = cfg.get("digest") if isinstance(cfg, dict) else None
        if not isinstance(cdigest, str):
            return None
        config = json.loads(client.get_blob_small(cdigest, "config"))
        return _created(config.get("created") if isinstance(config, dict) else None)

    def _one(self, store: Any, locks: _Locks, scan: Any, client: Any, repo: str, tag: str,
             digest: str, plat: str | None) -> None:
        st = self.stats
        st.images += 1
        ref = f"registry:{self.host}/{repo}@{digest}"
        if stored_digest(store, digest):
            st.already += 1
            return
        try:
            if self.since is not None:
                created = self._created_of(client, digest)
                if created is not None and created < self.since:
                    st.too_old += 1
                    return
            result = scan(ref, registry=self.opts, platform=plat)
        except (GpusbomError, ValueError) as e:
            st.failed.append(f"{repo}:{tag} ({digest}): {e}")
            self._say(f"crawl: {repo}:{tag}: {e}")
            return
        result.target.tags = sorted(set(result.target.tags) | {f"{self.host}/{repo}:{tag}"})
        with locks.hold(digest):
            if stored_digest(store, digest):
                st.already += 1
                return
            store.ingest(result, labels={"gpusbom.crawl/tag": f"{self.host}/{repo}:{tag}"})
        st.stored += 1
        self._say(f"crawl: stored {repo}:{tag} {digest}")
