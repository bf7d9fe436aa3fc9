"""A layer-result cache: what a scan kept of a layer, keyed by the layer's content address.

Each layer's ``LayerIndex`` (the directories, links and matched files the collectors asked
for, with captured content) is stored in a SQLite file in the user's cache directory
(``$GPUSBOM_CACHE_DIR``, else ``$XDG_CACHE_HOME/gpusbom``, else ``~/.cache/gpusbom``),
keyed by the layer's blob digest and diff_id together with everything that decides what
is kept: gpusbom's version, a fingerprint of its code, the collectors and their versions,
and the limits. An image that shares base layers with an earlier scan reads only its new
layers; the result is the same as a full read (tested byte for byte on every fixture).

Trust: a hit is not read, so its blob is not hashed again. The digest names the content
(as in Trivy's cache and the containerd content store); ``--no-cache`` reads and verifies
everything. Only layers that were read to the end and verified are stored; a layer that
fails (corrupt, hostile, digest mismatch) raises before anything is stored, so nothing bad
is ever cached as good. Entries are plain data (``fsview.layercodec``: a JSON header and raw
bytes, nothing that can name code), checked field by field on load: a damaged, foreign or
planted entry is a miss and is dropped, never trusted, and one over ``MAX_ENTRY_BYTES`` is
not even read.

``shadow_hashes`` (paths of unmatched files that may replace lower-layer files) are
normally ``hash()`` values, salted per process; with the cache on they are keyed 64-bit
BLAKE2b values under a random key kept in the cache file, so they stay valid across runs.

Eviction: least recently used entries go once the file holds more than ``max_size`` bytes
(``--cache-max-size``).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from .. import settings
from .._codeid import code_fingerprint
from .._userdir import user_cache_dir
from ..clock import wall
from . import layercodec
from .types import ContentRef, Entry, LayerIndex, Limits, with_layer_index

FORMAT = 2
DEFAULT_MAX_SIZE = 2 << 30
# layers whose captured content spilled to temp files beyond this are not stored
MAX_SPOOLED_PER_LAYER = 256 << 20
_NOT_KEYED = ("max_memory", "inflate_threads", "inflate_chunk_kib", "shadow_key")
# keys per query (SQLite allows 999 parameters in a statement in older builds)
_BATCH = 500


def default_dir() -> Path:
    return user_cache_dir()


def disabled_by_env() -> bool:
    return bool(settings.get("no_cache"))


def keyed_shadow_salt(key: bytes) -> int:
    """The ``LayerIndex.shadow_salt`` that marks hashes made with ``key``."""
    d = hashlib.blake2b(b"gpusbom-shadow-salt", digest_size=8, key=key).digest()
    return int.from_bytes(d, "little", signed=True)


def keyed_shadow_hash(key: bytes) -> Callable[[str], int]:
    """``path -> signed 64-bit`` keyed hash (stable across processes, unguessable)."""
    b2 = hashlib.blake2b

    def h(path: str) -> int:
        d = b2(path.encode("utf-8", "surrogateescape"), digest_size=8, key=key).digest()
        return int.from_bytes(d, "little", signed=True)

    return h


class LayerCache:
    """One scan's view of the cache file (see the module docstring)."""

    def __init__(
        self,
        path: Path,
        *,
        collectors: dict[str, str],
        limits: Limits,
        max_size: int = DEFAULT_MAX_SIZE,
    ) -> None:
        from .. import __version__
        from .._userdir import check_owned

        os.makedirs(path.parent, mode=0o700, exist_ok=True)
        # a file created now is 0600: the connection is opened on a descriptor's path
        # only after the refusal check of an existing one (another user's, or writable by
        # others: whoever may write it decides what a scan reads)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
        try:
            check_owned(f"cache file {path}", os.fstat(fd))
        finally:
            os.close(fd)
        self.path = path
        self.max_size = max_size
        self.hits = 0
        self.misses = 0
        self._db = sqlite3.connect(str(path), timeout=60, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v BLOB NOT NULL)")
        # an entry's size and use time apart from its data: SQLite rewrites a whole row on
        # UPDATE and reads a column behind a large blob through its overflow pages, so with
        # one table every scan rewrote each hit's data (tens of ms per MB) and the size sum
        # walked every entry's pages; the former one-table layout is dropped
        self._db.execute("DROP TABLE IF EXISTS layers")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS layer_use (key TEXT PRIMARY KEY, size INTEGER NOT NULL, "
            "used REAL NOT NULL)"
        )
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS layer_data (key TEXT PRIMARY KEY, data BLOB NOT NULL)"
        )
        self._db.execute(
            "INSERT OR IGNORE INTO meta VALUES ('shadow_key', ?)", (os.urandom(32),)  # secrets.token_bytes
        )
        row = self._db.execute("SELECT v FROM meta WHERE k = 'shadow_key'").fetchone()
        self.shadow_key = bytes(row[0])
        self.shadow_salt = keyed_shadow_salt(self.shadow_key)
        kept = {f.name: getattr(limits, f.name) for f in fields(limits) if f.name not in _NOT_KEYED}
        self._base = json.dumps(
            {
                "format": FORMAT,
                "gpusbom": __version__,
                "code": code_fingerprint(),
                "collectors": dict(sorted(collectors.items())),
                "limits": kept,
            },
            sort_keys=True,
        )

    @classmethod
    def open(
        cls,
        *,
        collectors: dict[str, str],
        limits: Limits,
        max_size: int = DEFAULT_MAX_SIZE,
        directory: Path | None = None,
    ) -> LayerCache | None:
        """The user's cache, or None when it cannot be opened (a read-only home, say):
        a scan then simply reads every layer."""
        try:
            return cls(
                (directory or default_dir()) / "layers.sqlite",
                collectors=collectors,
                limits=limits,
                max_size=max_size,
            )
        except (OSError, sqlite3.Error):
            return None

    def close(self) -> None:
        self._db.close()

    # keys ---------------------------------------------------------------------------------

    def key(self, digest: str | None, diff_id: str | None, media_type: str | None) -> str | None:
        if not digest and not diff_id:
            return None
        doc = json.dumps([self._base, digest, diff_id, media_type])
        return hashlib.sha256(doc.encode()).hexdigest()

    # store / load -------------------------------------------------------------------------

    def get(self, key: str, spool: Any, limits: Limits) -> LayerIndex | None:
        row = self._db.execute(
            "SELECT data FROM layer_data WHERE key = ? AND length(data) <= ?",
            (key, layercodec.MAX_ENTRY_BYTES)).fetchone()
        if row is None:
            self._drop_oversized([key])
            return None
        li = self._load(key, row[0], spool, limits)
        if li is not None:
            self._touch([key])
        return li

    def _load(self, key: str, data: bytes, spool: Any, limits: Limits) -> LayerIndex | None:
        try:
            li = layercodec.decode(data, max_entries=limits.max_entries_per_layer)
        except (layercodec.CacheFormatError, ValueError, TypeError, OverflowError):
            self._drop([(key,)])  # damaged, foreign or planted: a miss, and dropped
            return None
        _respool(li, spool, limits)
        return li

    def _rows(self, keys: Sequence[str]) -> dict[str, bytes]:
        """The stored entries of ``keys``, in one query per ``_BATCH`` keys."""
        out: dict[str, bytes] = {}
        for n in range(0, len(keys), _BATCH):
            part = tuple(keys[n:n + _BATCH])
            out.update(self._db.execute(
                f"SELECT key, data FROM layer_data WHERE key IN ({','.join('?' * len(part))}) "  # noqa: S608 - placeholders only
                "AND length(data) <= ?", (*part, layercodec.MAX_ENTRY_BYTES)).fetchall())
        self._drop_oversized([k for k in keys if k not in out])
        return out

    def _drop_oversized(self, keys: Sequence[str]) -> None:
        """Entries of ``keys`` over ``MAX_ENTRY_BYTES`` (never written so: planted) go unread."""
        for n in range(0, len(keys), _BATCH):
            part = tuple(keys[n:n + _BATCH])
            self._db.execute(
                f"DELETE FROM layer_data WHERE key IN ({','.join('?' * len(part))}) "  # noqa: S608 - placeholders only
                "AND length(data) > ?", (*part, layercodec.MAX_ENTRY_BYTES))
            self._db.execute(
                f"DELETE FROM layer_use WHERE key IN ({','.join('?' * len(part))}) "  # noqa: S608 - placeholders only
                "AND key NOT IN (SELECT key FROM layer_data)", part)

    def _touch(self, keys: Sequence[str]) -> None:
        """Mark ``keys`` used now (least recently used go first)."""
        now = wall()
        for n in range(0, len(keys), _BATCH):
            part = tuple(keys[n:n + _BATCH])
            self._db.execute(
                f"UPDATE layer_use SET used = ? WHERE key IN ({','.join('?' * len(part))})",  # noqa: S608 - placeholders only
                (now, *part))

    def put(self, key: str, li: LayerIndex) -> bool:
        if len(li.shadow_hashes) and li.shadow_salt != self.shadow_salt:
            return False  # hashed with this process's salt: useless to another run
        data = _dumps(li)
        if data is None:
            return False
        own = not self._db.in_transaction  # the entry's two rows together
        if own:
            self._db.execute("BEGIN")
        try:
            self._db.execute("INSERT OR REPLACE INTO layer_data VALUES (?, ?)", (key, data))
            self._db.execute("INSERT OR REPLACE INTO layer_use VALUES (?, ?, ?)",
                             (key, len(data), wall()))
        except BaseException:
            if own:
                self._db.execute("ROLLBACK")
            raise
        if own:
            self._db.execute("COMMIT")
        return True

    def _drop(self, keys: list[tuple[str]]) -> None:
        self._db.executemany("DELETE FROM layer_use WHERE key = ?", keys)
        self._db.executemany("DELETE FROM layer_data WHERE key = ?", keys)

    def evict(self) -> None:
        total = self._db.execute("SELECT COALESCE(SUM(size), 0) FROM layer_use").fetchone()[0]
        if total <= self.max_size:
            return
        target = self.max_size * 9 // 10
        rows = self._db.execute("SELECT key, size FROM layer_use ORDER BY used").fetchall()
        drop = []
        for key, size in rows:
            if total <= target:
                break
            drop.append((key,))
            total -= size
        self._drop(drop)

    # the hook used by sources.image.read_layers ------------------------------------------

    def read_layers(
        self, plan: Any, ctx: Any, read: Callable[[Any, Any], list[LayerIndex]],
        finish: Callable[[LayerIndex, Any, str], LayerIndex],
    ) -> list[LayerIndex]:
        """Layers of ``plan`` from the cache where present; ``read(plan, ctx)`` for the rest
        (with the keyed shadow hash), which are then stored. ``finish(li, layer_plan, where)``
        checks a cached layer against the plan (``sources.image.finish_layer``: passed in,
        as fsview does not depend on sources)."""

        layers: Sequence[Any] = plan.layers
        keys = [self.key(la.digest, la.diff_id, la.media_type) for la in layers]
        # every layer's entry in one query, and one write for the hits' use time
        rows = self._rows(list(dict.fromkeys(k for k in keys if k is not None)))
        got: dict[int, LayerIndex] = {}
        used: list[str] = []
        for i, (la, key) in enumerate(zip(layers, keys, strict=False)):
            data = rows.get(key) if key is not None else None
            li = self._load(key, data, ctx.spool, ctx.limits) if key and data else None
            if li is not None:
                # the plan's LayerRef (index, media type, history) is the one to report
                got[i] = finish(_at_index(li, la.index), la, "layer cache")
                used.append(key)  # type: ignore[arg-type]
        self.hits += len(got)
        todo = [i for i in range(len(layers)) if i not in got]
        self.misses += len(todo)
        if not todo:
            self._touch(list(dict.fromkeys(used)))
        else:
            sub_ctx = replace(
                ctx, layer_cache=None, limits=replace(ctx.limits, shadow_key=self.shadow_key)
            )
            fresh = read(replace(plan, layers=[layers[i] for i in todo]), sub_ctx)
            # the hits' use time, the new entries and the eviction: one commit
            self._db.execute("BEGIN")
            try:
                self._touch(list(dict.fromkeys(used)))
                for i, li in zip(todo, fresh, strict=False):
                    got[i] = li
                    key = keys[i]
                    if key is not None:
                        self.put(key, li)
                self.evict()
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
        return [got[i] for i in range(len(layers))]


def _at_index(li: LayerIndex, index: int) -> LayerIndex:
    if li.ref.index == index:
        return li
    return with_layer_index(li, index)


def _dumps(li: LayerIndex) -> bytes | None:
    """``li`` as a cache entry (``layercodec``) with spooled content inlined; None when too
    much was spooled or it cannot be stored exactly."""
    spooled = 0
    swapped: list[tuple[Entry, ContentRef]] = []
    inlined: dict[int, ContentRef] = {}  # hard links share one ContentRef: keep it shared
    try:
        for e in _all_entries(li):
            c = e.content
            if c is not None and c.spooled_path is not None:
                new = inlined.get(id(c))
                if new is None:
                    spooled += c.size
                    if spooled > MAX_SPOOLED_PER_LAYER:
                        return None
                    new = inlined[id(c)] = ContentRef(data=c.read())
                swapped.append((e, c))
                e.content = new
        return layercodec.encode(li)
    finally:
        for e, c in swapped:
            e.content = c


def _all_entries(li: LayerIndex) -> list[Entry]:
    return list(li.entries.values())


def _respool(li: LayerIndex, spool: Any, limits: Limits) -> None:
    """Content that a fresh read would have put in a temp file goes there again (within
    the spool budget, as a fresh read would; beyond it the content is dropped likewise)."""
    done: dict[int, ContentRef | None] = {}
    for e in _all_entries(li):
        c = e.content
        if c is None or c.size <= limits.max_memory_content:
            continue
        if id(c) in done:  # hard links share one ContentRef
            e.content = done[id(c)]
            continue
        new: ContentRef | None = None
        if spool.bytes + c.size <= limits.max_spool_bytes:
            path = spool.new_path()
            fd = os.open(
                path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600
            )
            with os.fdopen(fd, "wb") as out:
                out.write(c.read())
            spool.bytes += c.size
            new = ContentRef(path=path, size=c.size)
        done[id(c)] = new
        e.content = new
