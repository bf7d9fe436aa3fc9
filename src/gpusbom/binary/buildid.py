"""The GNU build-id of an ELF file, from its first bytes (the program headers' ``PT_NOTE``).

The linker writes ``NT_GNU_BUILD_ID`` (a 20-byte SHA-1 by default) into ``.note.gnu.build-id``
and maps it with a ``PT_NOTE`` program header near the start of the file; ``strip`` and
``objcopy --strip-all`` keep it (it is an allocated section), and auditwheel's renaming
(patchelf) does not touch it. Some of NVIDIA's libraries were post-processed after linking
(``libnvrtc.so.12``, ``libcufft``, ``libcupti``, cuDNN's): their ``PT_NOTE`` points at stale
bytes and the real note section sits near the end of the file, found through the section
header table (which ``readelf -n`` warns about but reads). :class:`BuildIdReader` reads
both as a file streams by: the program headers' notes from the first
:data:`MAX_NOTE_PREFIX` bytes, else the section headers' notes from the last
:data:`MAX_NOTE_SUFFIX` bytes (bounded memory either way). The stream scanner
(``binary.scanloop``) and ``scripts/build_fingerprints.py`` both use it, so the database
and a scan read the same build-id; the fingerprint database (``gpusbom.fingerprints``) maps
it to a product and exact version.

Nothing here raises for bad data: a malformed header or note gives None.
"""

from __future__ import annotations

from typing import Literal

from gpusbom.binary.elf import ELF_MAGIC

__all__ = ["MAX_NOTE_PREFIX", "MAX_NOTE_SUFFIX", "NEED_MORE", "BuildIdReader",
           "build_id_from_head", "build_id_from_tail"]

#: Most leading bytes of an ELF file looked at for the build-id note (it normally sits in the
#: first page, right after the program header table).
MAX_NOTE_PREFIX = 64 << 10
_PT_NOTE = 4
_NT_GNU_BUILD_ID = 3
#: the longest build-id reported (SHA-1: 20 bytes, MD5/UUID: 16, ``--build-id=0x..``: any)
_MAX_ID = 64

#: Most trailing bytes of an ELF file kept for the section headers' note sections.
MAX_NOTE_SUFFIX = 256 << 10
_SHT_NOTE = 7

#: :func:`build_id_from_head` needs more of the file to decide
NEED_MORE = "need-more"


def _notes(head: bytes | bytearray, off: int, end: int, order: Literal["little", "big"],
           align: int = 4) -> str | None:
    """The build-id in the notes ``head[off:end]`` (``align``: 4, or 8 for 8-aligned note
    sections)."""
    a = 7 if align == 8 else 3
    while off + 12 <= end:
        namesz = int.from_bytes(head[off:off + 4], order)
        descsz = int.from_bytes(head[off + 4:off + 8], order)
        ntype = int.from_bytes(head[off + 8:off + 12], order)
        name_at = off + 12
        desc_at = name_at + ((namesz + a) & ~a)
        nxt = desc_at + ((descsz + a) & ~a)
        if nxt > end or namesz > 256:
            return None
        if (ntype == _NT_GNU_BUILD_ID and head[name_at:name_at + namesz] == b"GNU\0"
                and 0 < descsz <= _MAX_ID and desc_at + descsz <= end):
            return bytes(head[desc_at:desc_at + descsz]).hex()
        off = nxt
    return None


def _section_notes(buf: bytes | bytearray, off: int, end: int,
                   order: Literal["little", "big"], align: int) -> str | None:
    """The build-id in a note section: 4-byte padded notes first, then (for a section
    aligned to 8) 8-byte padded ones. NVIDIA's post-processed libraries (``libnvrtc.so.12``
    12.6.77) have an 8-aligned ``.note.gnu.build-id`` whose note is 4-byte padded, which
    ``readelf -n`` warns about."""
    found = _notes(buf, off, end, order, 4)
    if found is None and align == 8:
        found = _notes(buf, off, end, order, 8)
    return found


def build_id_from_head(head: bytes | bytearray) -> str | None:
    """The lowercase hex build-id of the ELF file whose first bytes are ``head``; None when
    it has none (or its notes lie past :data:`MAX_NOTE_PREFIX`, or the headers are
    malformed); :data:`NEED_MORE` when ``head`` is too short to tell yet."""
    if len(head) < 64:
        return NEED_MORE if head[:len(ELF_MAGIC)] == ELF_MAGIC[:len(head)] else None
    if head[:4] != ELF_MAGIC:
        return None
    cls, enc = head[4], head[5]
    if cls not in (1, 2) or enc not in (1, 2):
        return None
    order: Literal["little", "big"] = "little" if enc == 1 else "big"

    def u(at: int, n: int) -> int:
        return int.from_bytes(head[at:at + n], order)

    if cls == 2:
        phoff, phentsize, phnum, entsize = u(32, 8), u(54, 2), u(56, 2), 56
    else:
        phoff, phentsize, phnum, entsize = u(28, 4), u(42, 2), u(44, 2), 32
    table_end = phoff + phentsize * phnum
    if phnum == 0 or phnum > 4096 or phentsize < entsize or table_end > MAX_NOTE_PREFIX:
        return None
    if len(head) < table_end:
        return NEED_MORE
    for k in range(phnum):
        at = phoff + k * phentsize
        if u(at, 4) != _PT_NOTE:
            continue
        if cls == 2:
            offset, filesz = u(at + 8, 8), u(at + 32, 8)
        else:
            offset, filesz = u(at + 4, 4), u(at + 16, 4)
        end = offset + filesz
        if end > MAX_NOTE_PREFIX:
            continue
        if len(head) < end:
            return NEED_MORE
        found = _notes(head, offset, end, order)
        if found is not None:
            return found
    return None


def build_id_from_tail(head: bytes | bytearray, tail: bytes | bytearray, size: int
                       ) -> str | None:
    """The build-id from the section headers' note sections, when the section header
    table and the note lie in ``tail`` (the last bytes of a file of ``size`` bytes; ``head``:
    its first 64 bytes or more, for the ELF header). None otherwise."""
    if len(head) < 64 or head[:4] != ELF_MAGIC or head[4] not in (1, 2) or head[5] not in (1, 2):
        return None
    cls = head[4]
    order: Literal["little", "big"] = "little" if head[5] == 1 else "big"

    def u(buf: bytes | bytearray, at: int, n: int) -> int:
        return int.from_bytes(buf[at:at + n], order)

    if cls == 2:
        shoff, shentsize, shnum, entsize = u(head, 40, 8), u(head, 58, 2), u(head, 60, 2), 64
    else:
        shoff, shentsize, shnum, entsize = u(head, 32, 4), u(head, 46, 2), u(head, 48, 2), 40
    base = size - len(tail)  # file offset of tail[0]
    if shoff == 0 or shnum == 0 or shnum > 4096 or shentsize < entsize:
        return None
    if shoff < base or shoff + shnum * shentsize > size:
        return None
    for k in range(shnum):
        at = shoff - base + k * shentsize
        if u(tail, at + 4, 4) != _SHT_NOTE:
            continue
        if cls == 2:
            off, sz, align = u(tail, at + 24, 8), u(tail, at + 32, 8), u(tail, at + 48, 8)
        else:
            off, sz, align = u(tail, at + 16, 4), u(tail, at + 20, 4), u(tail, at + 32, 4)
        if off < base or off + sz > size or sz > MAX_NOTE_SUFFIX:
            continue
        found = _section_notes(tail, off - base, off - base + sz, order, align)
        if found is not None:
            return found
    return None


def _shdr_notes(head: bytes | bytearray, table: bytes | bytearray) -> list[tuple[int, int, int]]:
    """(offset, size, alignment) of the note sections of a section header table."""
    cls = head[4]
    order: Literal["little", "big"] = "little" if head[5] == 1 else "big"
    ent = int.from_bytes(head[58:60] if cls == 2 else head[46:48], order)
    out: list[tuple[int, int, int]] = []
    for at in range(0, len(table) - ent + 1, ent):
        if int.from_bytes(table[at + 4:at + 8], order) != _SHT_NOTE:
            continue

        def u(o: int, n: int, at: int = at) -> int:
            return int.from_bytes(table[at + o:at + o + n], order)

        off, sz, align = (u(24, 8), u(32, 8), u(48, 8)) if cls == 2 else (u(16, 4), u(20, 4),
                                                                          u(32, 4))
        if 0 < sz <= _MAX_NOTE_SECTION and len(out) < 16:
            out.append((off, sz, align))
    return out


#: the largest note section read through the section headers
_MAX_NOTE_SECTION = 64 << 10


class BuildIdReader:
    """The build-id of an ELF file fed in order, in pieces, with bounded memory:

    1. the program headers' notes in its first :data:`MAX_NOTE_PREFIX` bytes;
    2. else the section headers' note sections: the section header table (located by the
       ELF header) is kept as it streams by, then the note sections it names that are still
       ahead (or were in the first bytes);
    3. else the section headers and notes in the last :data:`MAX_NOTE_SUFFIX` bytes.
    """

    __slots__ = ("_head", "_found", "_tail", "_tail_len", "_size", "_ranges", "_notes")

    def __init__(self) -> None:
        self._head = bytearray()
        self._found: str | None = NEED_MORE
        self._tail: list[bytes] = []
        self._tail_len = 0
        self._size = 0
        # ranges kept as they stream by: [start, end, bytes so far, alignment (0: the
        # section header table)]
        self._ranges: list[tuple[int, int, bytearray, int]] = []
        self._notes: list[tuple[int, int, bytearray, int]] = []

    def feed(self, chunk: bytes) -> None:
        if self._found not in (NEED_MORE, None):
            return
        start = self._size
        self._size += len(chunk)
        if self._found == NEED_MORE:
            head = self._head
            had = len(head)
            head += chunk[: MAX_NOTE_PREFIX - len(head)]
            if had < 64 <= len(head):
                self._want_shdrs()
            found = build_id_from_head(head)
            if found == NEED_MORE and len(head) < MAX_NOTE_PREFIX:
                self._capture(start, chunk)
                return  # the head holds every byte fed so far
            self._found = None if found == NEED_MORE else found
            if self._found is not None:
                self._ranges, self._notes = [], []
                return
            self._push(bytes(head))
            beyond = self._size - len(head)
            if beyond > 0:
                self._push(bytes(chunk[len(chunk) - beyond:]))
            self._capture(start, chunk)
            return
        self._capture(start, chunk)
        self._push(bytes(chunk[-MAX_NOTE_SUFFIX:]))

    def _want_shdrs(self) -> None:
        head = self._head
        if head[:4] != ELF_MAGIC or head[4] not in (1, 2) or head[5] not in (1, 2):
            return
        order: Literal["little", "big"] = "little" if head[5] == 1 else "big"
        if head[4] == 2:
            shoff, ent, num, need = (int.from_bytes(head[40:48], order),
                                     int.from_bytes(head[58:60], order),
                                     int.from_bytes(head[60:62], order), 64)
        else:
            shoff, ent, num, need = (int.from_bytes(head[32:36], order),
                                     int.from_bytes(head[46:48], order),
                                     int.from_bytes(head[48:50], order), 40)
        if shoff and 0 < num <= 4096 and need <= ent <= 256:
            self._ranges.append((shoff, shoff + ent * num, bytearray(), 0))

    def _capture(self, start: int, chunk: bytes) -> None:
        """Keep the bytes of the wanted ranges in ``chunk`` (file offset ``start``)."""
        end = start + len(chunk)
        i = 0
        while i < len(self._ranges):
            a, b, buf, align = self._ranges[i]
            lo = max(a + len(buf), start)
            if lo < min(b, end):
                buf += chunk[lo - start:min(b, end) - start]
            if a + len(buf) < b:
                i += 1
                continue
            self._ranges.pop(i)
            if align:
                self._notes.append((a, b, buf, align))
                continue
            for off, sz, al in _shdr_notes(self._head, buf):  # the section header table
                note = bytearray()
                if off + sz <= len(self._head):
                    note += self._head[off:off + sz]
                    self._notes.append((off, off + sz, note, al or 4))
                elif off >= start:  # ahead, or in this chunk: captured by this loop
                    self._ranges.append((off, off + sz, note, al or 4))

    def _push(self, piece: bytes) -> None:
        piece = piece[-MAX_NOTE_SUFFIX:]
        self._tail.append(piece)
        self._tail_len += len(piece)
        while self._tail_len - len(self._tail[0]) >= MAX_NOTE_SUFFIX:
            self._tail_len -= len(self._tail.pop(0))

    def close(self) -> str | None:
        """The build-id (lowercase hex), or None."""
        if self._found == NEED_MORE:  # a file shorter than the head
            found = build_id_from_head(self._head)
            self._found = None if found == NEED_MORE else found
            if self._found is None:
                self._tail, self._tail_len = [bytes(self._head)], len(self._head)
        if self._found is not None:
            return self._found
        order: Literal["little", "big"] = "little" if self._head[5:6] == b"\x01" else "big"
        for _a, _b, buf, align in self._notes:
            found = _section_notes(buf, 0, len(buf), order, align)
            if found is not None:
                return found
        tail = b"".join(self._tail)[-MAX_NOTE_SUFFIX:]
        self._tail = []
        return build_id_from_tail(self._head, tail, self._size)
