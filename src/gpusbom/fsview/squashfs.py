"""A bounded squashfs 4.0 reader that yields the filesystem as layer members.

Why our own: PySquashfsImage (0.9, 2023, the one maintained pure-Python reader; judged from
its source, not adopted) decompresses and keeps every fragment block in memory when the image
is opened, builds the whole directory tree at open by recursion without loop detection, and
returns a file's data as one bytes object built by repeated concatenation; a hostile or
simply large image can hang it or exhaust memory. The format is small
(Documentation/filesystems/squashfs.rst in Linux, squashfs-tools' squashfs_fs.h); this reader
follows it with bounds:

* the superblock is checked (magic, version 4.0, block size 4 KiB..1 MiB and its log,
  table offsets inside the partition, ordered);
* the inode and directory tables are read once, front to back, as a run of metadata
  blocks (each at most 8 KiB uncompressed), decompressed with output caps, into memory
  up to ``MAX_METADATA`` bytes;
* the tree is walked iteratively from the root inode; a directory reached twice (a loop,
  or a directory hard-linked into two places) is refused, names must be plain components,
  and ``Limits`` bound the entry count and path length;
* file data is read only for files the caller reads (matched files), block by block,
  each block capped at the block size; fragments are read from the fragment table.

Compression: gzip (zlib), xz, lzma and zstd. lzo and lz4 give one clear error.
"""

from __future__ import annotations

import lzma
import struct
import zlib
from collections.abc import Iterator
from typing import BinaryIO

from ..errors import LayerError, UnsafeArchiveError
from .types import EntryKind, Limits

__all__ = ["SquashfsError", "SquashfsImage", "SquashfsMember"]

MAGIC = 0x73717368
SUPERBLOCK = struct.Struct("<IIIIIHHHHHHQQQQQQQQ")
META_MAX = 8192
MAX_METADATA = 1 << 30  # decompressed inode + directory tables together
NO_FRAGMENT = 0xFFFFFFFF
COMPRESSORS = {1: "gzip", 2: "lzma", 3: "lzo", 4: "xz", 5: "lz4", 6: "zstd"}
FLAG_COMP_OPTS = 0x0400

_FILE = EntryKind.FILE
_DIR = EntryKind.DIR
_SYMLINK = EntryKind.SYMLINK
_HARDLINK = EntryKind.HARDLINK
_OTHER = EntryKind.OTHER


class SquashfsError(LayerError):
    """The squashfs image is damaged or uses something this reader does not support."""


class _Window:
    """Reads of ``[start, start + size)`` of a file, never outside it."""

    def __init__(self, f: BinaryIO, start: int, size: int, name: str) -> None:
        self.f = f
        self.start = start
        self.size = size
        self.name = name

    def read_at(self, off: int, n: int, what: str) -> bytes:
        if off < 0 or n < 0 or off + n > self.size:
            raise SquashfsError(
                f"{self.name}: {what} at offset {off} (+{n}) lies outside the image "
                f"({self.size} bytes)"
            )
        self.f.seek(self.start + off)
        data = self.f.read(n)
        if len(data) != n:
            raise SquashfsError(f"{self.name}: {what} at offset {off} is truncated")
        return data


class SquashfsMember:
    """One file, directory or link, as ``fsview.layer.index_members`` reads members."""

    __slots__ = (
        "_blocks",
        "_buf",
        "_img",
        "_ino",
        "_left",
        "gid",
        "kind",
        "linkname",
        "mode",
        "mtime",
        "name",
        "size",
        "sparse",
        "uid",
    )

    def __init__(
        self,
        img: SquashfsImage,
        name: str,
        kind: EntryKind,
        size: int,
        mode: int,
        uid: int,
        gid: int,
        mtime: int,
        linkname: str = "",
        ino: tuple[int, int, int, list[int], int, int] | None = None,
    ) -> None:
        self._img = img
        self.name = name
        self.kind = kind
        self.size = size
        self.mode = mode
        self.uid = uid
        self.gid = gid
        self.mtime = mtime
        self.linkname = linkname
        self.sparse = False
        self._ino = ino  # (blocks_start, frag_index, frag_offset, block sizes, size, _)
        self._left = size
        self._buf = b""
        self._blocks: Iterator[bytes] | None = None

    def read(self, n: int = -1) -> bytes:
        if self._ino is None:
            return b""
        if n < 0:
            n = self._left
        n = min(n, self._left + len(self._buf))
        if self._blocks is None:
            self._blocks = self._img._file_blocks(self._ino, self.name)
        parts = []
        have = 0
        buf = self._buf
        while have + len(buf) < n:
            parts.append(buf)
            have += len(buf)
            try:
                buf = next(self._blocks)
            except StopIteration:
                buf = b""
                break
            self._left -= len(buf)
        take = n - have
        parts.append(buf[:take])
        self._buf = buf[take:]
        return b"".join(parts)


class SquashfsImage:
    """A squashfs filesystem at ``[start, start + size)`` of ``f``; ``name`` is for messages."""

    def __init__(
        self, f: BinaryIO, start: int, size: int, name: str, limits: Limits | None = None
    ) -> None:
        self.name = name
        self.limits = limits or Limits()
        self.w = _Window(f, start, size, name)
        if size < SUPERBLOCK.size:
            raise SquashfsError(f"{name}: too small for a squashfs superblock")
        sb = SUPERBLOCK.unpack(self.w.read_at(0, SUPERBLOCK.size, "superblock"))
        (magic, self.inode_count, _mtime, self.block_size, self.frag_count, comp, block_log,
         self.flags, id_count, vmaj, vmin, self.root_ref, bytes_used, id_start, _xattr_start,
         inode_start, dir_start, frag_start, export_start) = sb
        if magic != MAGIC:
            raise SquashfsError(f"{name}: not a squashfs filesystem (bad magic)")
        if (vmaj, vmin) != (4, 0):
            raise SquashfsError(f"{name}: squashfs version {vmaj}.{vmin} is not supported")
        if not 4096 <= self.block_size <= 1 << 20 or 1 << block_log != self.block_size:
            raise SquashfsError(f"{name}: bad block size {self.block_size}")
        self.comp = COMPRESSORS.get(comp, f"id {comp}")
        if self.comp not in ("gzip", "xz", "lzma", "zstd"):
            raise SquashfsError(
                f"{name}: squashfs compression {self.comp} is not supported "
                "(gzip, xz, lzma and zstd are)"
            )
        if bytes_used > size:
            raise SquashfsError(f"{name}: superblock says {bytes_used} bytes, partition has {size}")
        if not SUPERBLOCK.size <= inode_start <= dir_start <= bytes_used:
            raise SquashfsError(f"{name}: inode/directory table offsets are out of order")
        self.size = bytes_used
        ends = [bytes_used]
        for table in (frag_start, id_start, export_start, _xattr_start):
            if dir_start < table < bytes_used:
                ends.append(table)
                if table + 8 <= bytes_used:  # a table's index points at its first block
                    (first,) = struct.unpack("<Q", self.w.read_at(table, 8, "table index"))
                    if dir_start < first < table:
                        ends.append(first)
        dir_end = min(ends)
        self._inodes, self._inode_blocks = self._read_table(inode_start, dir_start, "inode table")
        self._dirs, self._dir_blocks = self._read_table(dir_start, dir_end, "directory table")
        self._ids = self._read_ids(id_start, id_count)
        self._frag_start = frag_start
        self._frags: list[tuple[int, int]] | None = None

    # -- decompression ------------------------------------------------------------------------

    def _inflate(self, data: bytes, limit: int, what: str) -> bytes:
        try:
            if self.comp == "gzip":
                d = zlib.decompressobj()
                out = d.decompress(data, limit)
                if d.unconsumed_tail:
                    raise SquashfsError(f"{self.name}: {what} inflates past {limit} bytes")
            elif self.comp in ("xz", "lzma"):
                fmt = lzma.FORMAT_XZ if self.comp == "xz" else lzma.FORMAT_ALONE
                ld = lzma.LZMADecompressor(format=fmt)
                out = ld.decompress(data, limit)
                if not ld.eof and not ld.needs_input:
                    raise SquashfsError(f"{self.name}: {what} inflates past {limit} bytes")
            else:
                import io

                import zstandard

                # a stream reader caps the output: a small frame can claim gigabytes
                with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)) as zr:
                    out = zr.read(limit + 1)
                if len(out) > limit:
                    raise SquashfsError(f"{self.name}: {what} inflates past {limit} bytes")
        except (zlib.error, lzma.LZMAError, ValueError) as e:
            raise SquashfsError(f"{self.name}: {what}: corrupt {self.comp} data: {e}") from None
        except Exception as e:  # noqa: BLE001 - the lz4/zstd bindings' own error types: corrupt data
            if isinstance(e, SquashfsError):
                raise
            raise SquashfsError(f"{self.name}: {what}: corrupt {self.comp} data: {e}") from None
        return out

    def _read_table(self, start: int, end: int, what: str) -> tuple[bytes, dict[int, int]]:
        """Metadata blocks from ``start`` to ``end``: (their data, block offset -> data offset)."""
        out = bytearray()
        where: dict[int, int] = {}
        pos = start
        while pos < end:
            (hdr,) = struct.unpack("<H", self.w.read_at(pos, 2, what))
            n = hdr & 0x7FFF
            if n == 0 or n > META_MAX or pos + 2 + n > end:
                raise SquashfsError(f"{self.name}: {what}: bad metadata block at offset {pos}")
            raw = self.w.read_at(pos + 2, n, what)
            block = raw if hdr & 0x8000 else self._inflate(raw, META_MAX, what)
            where[pos - start] = len(out)
            out += block
            if len(out) > MAX_METADATA:
                raise UnsafeArchiveError(
                    f"{self.name}: squashfs metadata larger than {MAX_METADATA} bytes"
                )
            pos += 2 + n
        return bytes(out), where

    def _meta_block(self, table: int, start: int, n: int) -> bytes:
        """``n`` bytes of a metadata table (fragment or id) starting at a block at ``start``."""
        out = bytearray()
        pos = start
        while len(out) < n:
            (hdr,) = struct.unpack("<H", self.w.read_at(pos, 2, "metadata block"))
            size = hdr & 0x7FFF
            if size == 0 or size > META_MAX:
                raise SquashfsError(f"{self.name}: bad metadata block at offset {pos}")
            raw = self.w.read_at(pos + 2, size, "metadata block")
            out += raw if hdr & 0x8000 else self._inflate(raw, META_MAX, "metadata block")
            pos += 2 + size
        return bytes(out[:n])

    def _read_ids(self, start: int, count: int) -> list[int]:
        if count == 0:
            return []
        nblocks = (count * 4 + META_MAX - 1) // META_MAX
        ptrs = struct.unpack(f"<{nblocks}Q", self.w.read_at(start, 8 * nblocks, "id table"))
        data = b"".join(
            self._meta_block(0, p, min(META_MAX, count * 4 - i * META_MAX))
            for i, p in enumerate(ptrs)
        )
        return list(struct.unpack(f"<{count}I", data))

    def _fragment(self, index: int) -> tuple[int, int]:
        if self._frags is None:
            n = self.frag_count
            if n > self.size // 16 + 1:
                raise SquashfsError(f"{self.name}: fragment count {n} is impossible")
            nblocks = (n * 16 + META_MAX - 1) // META_MAX
            ptrs = struct.unpack(
                f"<{nblocks}Q", self.w.read_at(self._frag_start, 8 * nblocks, "fragment index")
            )
            data = b"".join(
                self._meta_block(0, p, min(META_MAX, n * 16 - i * META_MAX))
                for i, p in enumerate(ptrs)
            )
            self._frags = [
                (start, size) for start, size, _ in struct.iter_unpack("<QII", data)
            ]
        if index >= len(self._frags):
            raise SquashfsError(f"{self.name}: fragment {index} does not exist")
        return self._frags[index]

    # -- inodes -------------------------------------------------------------------------------

    def _inode_pos(self, ref: int) -> int:
        block, off = ref >> 16, ref & 0xFFFF
        base = self._inode_blocks.get(block)
        if base is None or off >= META_MAX or base + off + 16 > len(self._inodes):
            raise SquashfsError(f"{self.name}: inode reference {ref:#x} points nowhere")
        return base + off

    def _u(self, fmt: str, pos: int) -> tuple[int, ...]:
        try:
            return struct.unpack_from(fmt, self._inodes, pos)
        except struct.error:
            raise SquashfsError(f"{self.name}: inode at {pos} is truncated") from None

    def _id(self, i: int) -> int:
        return self._ids[i] if i < len(self._ids) else 0

    def _file_blocks(
        self, ino: tuple[int, int, int, list[int], int, int], name: str
    ) -> Iterator[bytes]:
        start, frag, frag_off, sizes, size, _ = ino
        bs = self.block_size
        pos = start
        left = size
        for s in sizes:
            n = s & 0xFFFFFF
            want = min(bs, left)
            if n == 0:
                block = b"\0" * want  # a sparse block
            else:
                raw = self.w.read_at(pos, n, f"data of {name}")
                block = raw if s & 0x1000000 else self._inflate(raw, bs, f"data of {name}")
                pos += n
            if len(block) < want:
                raise SquashfsError(f"{self.name}: data block of {name} is short")
            left -= want
            yield block[:want]
        if left > 0:
            if frag == NO_FRAGMENT:
                raise SquashfsError(f"{self.name}: {name} is missing {left} bytes of data")
            fstart, fsize = self._fragment(frag)
            n = fsize & 0xFFFFFF
            raw = self.w.read_at(fstart, n, f"fragment of {name}")
            block = raw if fsize & 0x1000000 else self._inflate(raw, bs, f"fragment of {name}")
            if frag_off + left > len(block):
                raise SquashfsError(f"{self.name}: fragment of {name} is short")
            yield block[frag_off : frag_off + left]

    def _member(self, path: str, ref: int) -> tuple[SquashfsMember, tuple[int, int, int] | None]:
        """The member for the inode at ``ref``; for a directory also (block, offset, size)."""
        pos = self._inode_pos(ref)
        itype, perm, uid_i, gid_i, mtime, inode_no = self._u("<HHHHII", pos)
        uid, gid = self._id(uid_i), self._id(gid_i)
        p = pos + 16
        mode = perm & 0o7777
        if itype in (1, 8):
            if itype == 1:
                block, _links, fsize, off, _parent = self._u("<IIHHI", p)
            else:
                _links, fsize, block, _parent, _ic, off, _x = self._u("<IIIIHHI", p)
            m = SquashfsMember(self, path, _DIR, 0, mode, uid, gid, mtime)
            return m, (block, off, max(0, fsize - 3))
        if itype in (2, 9):
            if itype == 2:
                start, frag, frag_off, size = self._u("<IIII", p)
                p += 16
            else:
                start, size, _sparse, _links, frag, frag_off, _x = self._u("<QQQIIII", p)
                p += 40
            bs = self.block_size
            nblocks = size // bs if frag != NO_FRAGMENT else (size + bs - 1) // bs
            if size > self.limits.max_layer_uncompressed or nblocks * 4 > len(self._inodes) - p:
                raise SquashfsError(f"{self.name}: {path}: impossible file size {size}")
            sizes = list(self._u(f"<{nblocks}I", p)) if nblocks else []
            m = SquashfsMember(
                self, path, _FILE, size, mode, uid, gid, mtime,
                ino=(start, frag, frag_off, sizes, size, inode_no),
            )
            return m, None
        if itype in (3, 10):
            _links, tsize = self._u("<II", p)
            if tsize > self.limits.max_path_length:
                raise SquashfsError(f"{self.name}: {path}: symlink target of {tsize} bytes")
            raw = self._inodes[p + 8 : p + 8 + tsize]
            if len(raw) != tsize:
                raise SquashfsError(f"{self.name}: {path}: symlink target is truncated")
            target = raw.decode("utf-8", "surrogateescape")
            return SquashfsMember(self, path, _SYMLINK, 0, mode, uid, gid, mtime, target), None
        if 4 <= itype <= 7 or 11 <= itype <= 14:
            return SquashfsMember(self, path, _OTHER, 0, mode, uid, gid, mtime), None
        raise SquashfsError(f"{self.name}: {path}: unknown inode type {itype}")

    def _listing(self, block: int, off: int, size: int, path: str) -> list[tuple[str, int, int]]:
        """(name, inode ref, inode number) of a directory's entries."""
        base = self._dir_blocks.get(block)
        if base is None and size > 0:
            raise SquashfsError(f"{self.name}: directory {path or '/'} points nowhere")
        pos = (base or 0) + off
        end = pos + size
        if end > len(self._dirs):
            raise SquashfsError(f"{self.name}: directory {path or '/'} runs past its table")
        out: list[tuple[str, int, int]] = []
        d = self._dirs
        while pos + 12 <= end:
            count, start, inode_base = struct.unpack_from("<III", d, pos)
            pos += 12
            if count >= 256:
                raise SquashfsError(f"{self.name}: directory {path or '/'}: bad header")
            for _ in range(count + 1):
                if pos + 8 > end:
                    raise SquashfsError(f"{self.name}: directory {path or '/'} is truncated")
                eoff, delta, _type, nsize = struct.unpack_from("<HhHH", d, pos)
                pos += 8
                nb = d[pos : pos + nsize + 1]
                pos += nsize + 1
                if len(nb) != nsize + 1 or pos > end:
                    raise SquashfsError(f"{self.name}: directory {path or '/'} is truncated")
                name = nb.decode("utf-8", "surrogateescape")
                if name in (".", "..") or "/" in name or "\0" in name:
                    raise UnsafeArchiveError(
                        f"{self.name}: directory {path or '/'} has an invalid name {name!r}"
                    )
                out.append((name, (start << 16) | eoff, inode_base + delta))
        return out

    def members(self) -> Iterator[SquashfsMember]:
        """Every path, parents before children, each once (``name`` relative, no leading /)."""
        limits = self.limits
        root, listing = self._member("", self.root_ref)
        if listing is None:
            raise SquashfsError(f"{self.name}: the root inode is not a directory")
        yield root
        seen_dirs = {self.root_ref}
        files: dict[int, str] = {}  # inode number -> first path (hard links)
        stack: list[tuple[str, tuple[int, int, int]]] = [("", listing)]
        count = 1
        while stack:
            path, (block, off, size) = stack.pop()
            children = []
            for name, ref, inode_no in self._listing(block, off, size, path):
                child = f"{path}/{name}" if path else name
                if len(child) + 1 > limits.max_path_length:
                    raise UnsafeArchiveError(f"{self.name}: path longer than the limit: {child!r}")
                count += 1
                if count > limits.max_entries_per_layer:
                    raise UnsafeArchiveError(
                        f"{self.name}: more than {limits.max_entries_per_layer} entries"
                    )
                m, sub = self._member(child, ref)
                if sub is not None:
                    if ref in seen_dirs:
                        raise UnsafeArchiveError(
                            f"{self.name}: directory loop: /{child} is a directory already seen"
                        )
                    seen_dirs.add(ref)
                    children.append((child, sub))
                elif m.kind is _FILE:
                    first = files.get(inode_no)
                    if first is not None:
                        m = SquashfsMember(
                            self, child, _HARDLINK, 0, m.mode, m.uid, m.gid, m.mtime, first
                        )
                    else:
                        files[inode_no] = child
                yield m
            stack.extend(reversed(children))
