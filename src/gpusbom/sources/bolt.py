"""A read-only, bounded reader of bbolt databases (containerd's ``meta.db``).

Why our own: the only Python package (``boltdb`` 0.0.2, 2020) is an unmaintained port that
writes as well as reads; containerd's metadata needs a few nested buckets read once. The
format (go.etcd.io/bbolt: page.go, node.go, db.go), little-endian:

* pages of ``page_size`` bytes; a page header is ``id u64, flags u16, count u16,
  overflow u32`` (a page with overflow spans ``overflow + 1`` pages);
* pages 0 and 1 are meta pages: magic ``0xED0CDAED``, version 2, page size, flags, the root
  bucket (root page id u64, sequence u64), freelist page, high-water page id, txid and a
  FNV-1a checksum; the valid meta with the larger txid is the current one;
* branch pages hold ``(pos u32, ksize u32, pgid u64)`` elements, leaf pages
  ``(flags u32, pos u32, ksize u32, vsize u32)``, ``pos`` counted from the element itself;
  a leaf element with flag 1 is a nested bucket whose value is ``(root u64, sequence u64)``
  followed, when root is 0, by the bucket's own inline page.

Bounds: page ids below the high-water mark and inside the file, each page visited at most
once per bucket walk, nesting depth and element counts capped; damage raises ``BoltError``.
The file is opened read-only and never locked (containerd may be running).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import BinaryIO

from ..errors import SourceError

__all__ = ["Bolt", "BoltError", "Bucket"]

MAGIC = 0xED0CDAED
BRANCH = 0x01
LEAF = 0x02
META = 0x04
BUCKET_LEAF = 0x01
PAGE_HEADER = struct.Struct("<QHHI")
MAX_DEPTH = 64  # B+tree depth within one bucket
MAX_NESTING = 16  # buckets within buckets


class BoltError(SourceError, ValueError):
    """The file is not a bbolt database this reader can read, or it is damaged."""


def _fnv1a64(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


class Bolt:
    """An open bbolt file; ``root()`` is its top-level bucket."""

    def __init__(self, f: BinaryIO, size: int, name: str) -> None:
        self.f = f
        self.size = size
        self.name = name
        f.seek(0)
        first = f.read(80)
        if len(first) < 80:
            raise BoltError(f"{name}: too short for a bolt database")
        # page 1 (the other meta) lies one page further; the page size is in page 0's meta
        # (when page 0 is damaged, the OS page size bolt uses by default)
        ps0 = struct.unpack_from("<I", first, 24)[0]
        offsets = {0, 4096} | ({ps0} if 512 <= ps0 <= 1 << 20 else set())
        metas = []
        for off in sorted(offsets):
            f.seek(off)
            raw = f.read(80)
            if len(raw) < 80:
                continue
            _pid, flags, _c, _o = PAGE_HEADER.unpack_from(raw, 0)
            magic, version, psize, _fl, root, _seq, _free, pgid, txid, csum = struct.unpack_from(
                "<IIIIQQQQQQ", raw, 16
            )
            if flags != META or magic != MAGIC or version != 2:
                continue
            if _fnv1a64(raw[16 : 16 + 56]) != csum:
                continue
            metas.append((txid, psize, root, pgid))
        if not metas:
            raise BoltError(f"{name}: not a bolt database (no valid meta page)")
        _txid, self.page_size, root, self.high = max(metas)
        if self.page_size < 512 or self.page_size > 1 << 20 or self.page_size & (self.page_size - 1):
            raise BoltError(f"{name}: bad page size {self.page_size}")
        if self.high * self.page_size > size:
            raise BoltError(
                f"{name}: the meta page names {self.high} pages but the file holds "
                f"{size // self.page_size}"
            )
        self._root = root

    def page(self, pgid: int) -> bytes:
        if not 2 <= pgid < self.high:
            raise BoltError(f"{self.name}: page id {pgid} outside the database")
        self.f.seek(pgid * self.page_size)
        head = self.f.read(PAGE_HEADER.size)
        if len(head) != PAGE_HEADER.size:
            raise BoltError(f"{self.name}: page {pgid} is truncated")
        pid, _flags, _count, overflow = PAGE_HEADER.unpack(head)
        if pid != pgid:
            raise BoltError(f"{self.name}: page {pgid} claims to be page {pid}")
        if pgid + overflow >= self.high:
            raise BoltError(f"{self.name}: page {pgid} overflows past the database")
        rest = self.f.read((overflow + 1) * self.page_size - PAGE_HEADER.size)
        return head + rest

    def root(self) -> Bucket:
        return Bucket(self, self._root, None, 0)


class Bucket:
    """A bucket: its keys map to values or to nested buckets."""

    def __init__(self, db: Bolt, root: int, inline: bytes | None, nesting: int) -> None:
        if nesting > MAX_NESTING:
            raise BoltError(f"{db.name}: buckets nested more than {MAX_NESTING} deep")
        self.db = db
        self._root = root
        self._inline = inline
        self._nesting = nesting

    def items(self) -> Iterator[tuple[bytes, bytes | None, Bucket | None]]:
        """(key, value, None) for values and (key, None, bucket) for nested buckets."""
        seen: set[int] = set()
        if self._inline is not None:
            yield from self._leaf(self._inline, "inline bucket")
            return
        yield from self._walk(self._root, seen, 0)

    def _walk(self, pgid: int, seen: set[int], depth: int) -> Iterator[
        tuple[bytes, bytes | None, Bucket | None]
    ]:
        db = self.db
        if depth > MAX_DEPTH or pgid in seen:
            raise BoltError(f"{db.name}: page {pgid} is reached twice (a loop)")
        seen.add(pgid)
        page = db.page(pgid)
        _pid, flags, count, _o = PAGE_HEADER.unpack_from(page, 0)
        if flags & LEAF:
            yield from self._leaf(page, f"page {pgid}")
        elif flags & BRANCH:
            if PAGE_HEADER.size + 16 * count > len(page):
                raise BoltError(f"{db.name}: branch page {pgid} claims {count} elements")
            for i in range(count):
                el = PAGE_HEADER.size + 16 * i
                _pos, _ks, child = struct.unpack_from("<IIQ", page, el)
                yield from self._walk(child, seen, depth + 1)
        else:
            raise BoltError(f"{db.name}: page {pgid} is not a branch or leaf page (flags {flags})")

    def _leaf(self, page: bytes, where: str) -> Iterator[tuple[bytes, bytes | None, Bucket | None]]:
        db = self.db
        if len(page) < PAGE_HEADER.size:
            raise BoltError(f"{db.name}: {where} is truncated")
        _pid, flags, count, _o = PAGE_HEADER.unpack_from(page, 0)
        if not flags & LEAF:
            raise BoltError(f"{db.name}: {where} is not a leaf page")
        if PAGE_HEADER.size + 16 * count > len(page):
            raise BoltError(f"{db.name}: {where} claims {count} elements")
        for i in range(count):
            el = PAGE_HEADER.size + 16 * i
            eflags, pos, ksize, vsize = struct.unpack_from("<IIII", page, el)
            start = el + pos
            if start + ksize + vsize > len(page):
                raise BoltError(f"{db.name}: {where}: element {i} runs past the page")
            key = page[start : start + ksize]
            value = page[start + ksize : start + ksize + vsize]
            if eflags & BUCKET_LEAF:
                if len(value) < 16:
                    raise BoltError(f"{db.name}: {where}: bucket {key!r} has a short header")
                root, _seq = struct.unpack_from("<QQ", value, 0)
                inline = value[16:] if root == 0 else None
                yield key, None, Bucket(db, root, inline, self._nesting + 1)
            else:
                yield key, value, None

    def get(self, key: bytes) -> bytes | Bucket | None:
        for k, v, b in self.items():
            if k == key:
                return b if b is not None else v
        return None

    def bucket(self, *path: bytes) -> Bucket | None:
        cur: Bucket | None = self
        for key in path:
            if cur is None:
                return None
            nxt = cur.get(key)
            cur = nxt if isinstance(nxt, Bucket) else None
        return cur
