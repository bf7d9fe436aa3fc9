"""Read the rpm header blobs out of a Berkeley DB hash database (``/var/lib/rpm/Packages``).

RHEL/CentOS 7 and 8, UBI 8, Rocky/Alma 8 (and so NVIDIA's ``*-ubi8`` and ``*-rockylinux8``
CUDA images) keep their rpmdb in Berkeley DB. No maintained Python package reads it
without linking libdb (``berkeleydb``/``bsddb3`` need the C library and its headers, and
open the file read-write through an environment); Syft and Trivy read it with a small
pure-Go reader (knqyf263/go-rpmdb). This is the same approach, bounded for hostile input:

* page 0 is the hash metadata page: magic ``0x061561`` (its byte order tells the file's),
  page size (512..65536, a power of two), last page number, encryption (refused);
* every page of type ``P_HASH`` (13) or ``P_HASH_UNSORTED`` (2) holds key/data pairs
  through an array of 16-bit item offsets after the 26-byte page header;
* a data item is either on the page (``H_KEYDATA``) or, as rpm headers almost always are,
  an ``H_OFFPAGE`` reference (first page number, total length) to a chain of
  ``P_OVERFLOW`` (7) pages linked by ``next_pgno``, each holding ``hf_offset`` bytes.

Bounds: page numbers must lie inside the file, a chain visits each page at most once and
stops at its declared length, and the total of all headers is capped. A damaged page or
chain becomes a problem string naming the page (the caller turns it into an unknown); the
other headers are still read. The key (rpm's header instance number) is not needed;
rpm's bookkeeping record (instance 0, a 4-byte counter) is skipped as too short to be a
header.
"""

from __future__ import annotations

import struct
from typing import BinaryIO

from ..errors import CollectorError

__all__ = ["BdbError", "read_bdb_headers"]

HASH_MAGIC = 0x061561
P_HASH_UNSORTED = 2
P_OVERFLOW = 7
P_HASH = 13
P_HASHMETA = 8
H_KEYDATA = 1
H_DUPLICATE = 2
H_OFFPAGE = 3
PAGE_HEADER = 26
MAX_TOTAL = 1 << 30  # all header bytes of one database together
MIN_HEADER = 16  # il, dl and one index entry


class BdbError(CollectorError, ValueError):
    """The file is not a Berkeley DB hash database this reader can read."""


class _Db:
    def __init__(self, f: BinaryIO, size: int) -> None:
        self.f = f
        self.size = size
        meta = self._read_at(0, 72)
        if len(meta) < 72:
            raise BdbError("too short for a Berkeley DB file")
        magic_le = struct.unpack_from("<I", meta, 12)[0]
        magic_be = struct.unpack_from(">I", meta, 12)[0]
        if magic_le == HASH_MAGIC:
            self.e = "<"
        elif magic_be == HASH_MAGIC:
            self.e = ">"
        else:
            raise BdbError("not a Berkeley DB hash database (bad magic)")
        self.pagesize = self._u32(meta, 20)
        if self.pagesize < 512 or self.pagesize > 65536 or self.pagesize & (self.pagesize - 1):
            raise BdbError(f"bad page size {self.pagesize}")
        if meta[24] != 0:
            raise BdbError("the database is encrypted")
        if meta[25] != P_HASHMETA:
            raise BdbError(f"page 0 is not a hash metadata page (type {meta[25]})")
        self.last_pgno = self._u32(meta, 32)
        self.npages = size // self.pagesize
        if self.last_pgno >= self.npages:
            raise BdbError(
                f"the metadata names page {self.last_pgno} but the file holds {self.npages} pages"
            )

    def _u32(self, b: bytes, off: int) -> int:
        return int(struct.unpack_from(self.e + "I", b, off)[0])

    def _u16(self, b: bytes, off: int) -> int:
        return int(struct.unpack_from(self.e + "H", b, off)[0])

    def _read_at(self, off: int, n: int) -> bytes:
        self.f.seek(off)
        return self.f.read(n)

    def page(self, pgno: int) -> bytes:
        if not 0 < pgno <= self.last_pgno:
            raise BdbError(f"page number {pgno} outside the file (last page {self.last_pgno})")
        data = self._read_at(pgno * self.pagesize, self.pagesize)
        if len(data) != self.pagesize:
            raise BdbError(f"page {pgno} is truncated")
        return data

    def overflow(self, first: int, total: int, budget: int) -> bytes:
        """The ``total`` bytes of an overflow chain starting at page ``first``."""
        if total > budget:
            raise BdbError(f"overflow item of {total} bytes exceeds what is left of the cap")
        out = bytearray()
        seen: set[int] = set()
        pgno = first
        room = self.pagesize - PAGE_HEADER
        while pgno != 0 and len(out) < total:
            if pgno in seen:
                raise BdbError(f"overflow chain from page {first} loops at page {pgno}")
            seen.add(pgno)
            try:
                pg = self.page(pgno)
            except BdbError as e:
                raise BdbError(f"overflow chain from page {first}: {e}") from None
            if pg[25] != P_OVERFLOW:
                raise BdbError(
                    f"overflow chain from page {first}: page {pgno} has type {pg[25]}, "
                    f"not an overflow page"
                )
            used = self._u16(pg, 22)
            if used > room:
                raise BdbError(f"overflow page {pgno} claims {used} bytes on a {room}-byte page")
            out += pg[PAGE_HEADER : PAGE_HEADER + used]
            pgno = self._u32(pg, 16)
        if len(out) != total:
            raise BdbError(
                f"overflow chain from page {first} holds {len(out)} bytes, expected {total}"
            )
        return bytes(out)


def read_bdb_headers(f: BinaryIO, size: int) -> tuple[list[bytes], list[str]]:
    """The data items (rpm header blobs) of the hash database in ``f`` (``size`` bytes).

    Returns (blobs, problems). Raises ``BdbError`` when the file as a whole cannot be
    read (not a hash database, encrypted, bad metadata)."""
    db = _Db(f, size)
    blobs: list[bytes] = []
    problems: list[str] = []
    budget = MAX_TOTAL
    ps = db.pagesize
    for pgno in range(1, db.last_pgno + 1):
        try:
            pg = db.page(pgno)
        except BdbError as e:
            problems.append(str(e))
            break
        ptype = pg[25]
        if ptype not in (P_HASH, P_HASH_UNSORTED):
            continue
        n = db._u16(pg, 20)
        if PAGE_HEADER + 2 * n > ps:
            problems.append(f"hash page {pgno} claims {n} items")
            continue
        offs = [db._u16(pg, PAGE_HEADER + 2 * i) for i in range(n)]
        for i in range(1, n, 2):  # items alternate key, data
            off = offs[i]
            end = offs[i - 1]  # items are packed from the page's end down
            if not PAGE_HEADER + 2 * n <= off < end <= ps:
                problems.append(f"hash page {pgno}: item {i} has a bad offset {off}")
                continue
            kind = pg[off]
            try:
                if kind == H_OFFPAGE:
                    if off + 12 > end:
                        raise BdbError(f"hash page {pgno}: item {i} is truncated")
                    first = db._u32(pg, off + 4)
                    total = db._u32(pg, off + 8)
                    blob = db.overflow(first, total, budget)
                elif kind == H_KEYDATA:
                    blob = pg[off + 1 : end]
                elif kind == H_DUPLICATE:
                    raise BdbError(f"hash page {pgno}: item {i} is a duplicate set (not rpm's)")
                else:
                    raise BdbError(f"hash page {pgno}: item {i} has unknown type {kind}")
            except BdbError as e:
                problems.append(str(e))
                continue
            if len(blob) < MIN_HEADER:
                continue  # rpm's instance counter (key 0), not a header
            budget -= len(blob)
            blobs.append(blob)
    return blobs, problems
