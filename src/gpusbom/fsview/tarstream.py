"""Our own bounded, streaming tar parser.

The stdlib ``tarfile`` trusts header sizes and reads whole pax headers into
memory; this parser reads one 512-byte header at a time, bounds every
variable-length payload (pax records, GNU long names) by ``Limits`` *before*
reading it, verifies header checksums and never seeks backwards.

Supported: v7, ustar (with prefix), GNU (``L`` long name, ``K`` long link,
base-256 numeric fields, ``S`` sparse members reported as files with
``sparse=True``) and pax (``x`` per-entry and ``g`` global headers: ``path``,
``linkpath``, ``size``, ``uid``, ``gid``, ``mtime``; GNU sparse keys mark the
member sparse).

Member data that the caller does not read is skipped when the iterator
advances: with ``f.skip(n)`` when the stream has it (our decompressed
streams), with ``seek`` when seekable, else by reading 1 MiB chunks.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any, BinaryIO
from zlib import adler32

from ..errors import LayerError, UnsafeArchiveError
from .types import EntryKind, Limits

BLOCK = 512
SKIP_CHUNK = 1 << 20
MAX_META_CHAIN = 64  # consecutive pax / GNU long-name headers before one member

_ZERO_BLOCK = bytes(BLOCK)

# typeflag byte -> (kind, has_data)
_KINDS: dict[int, tuple[EntryKind, bool]] = {
    ord("0"): (EntryKind.FILE, True),
    0: (EntryKind.FILE, True),
    ord("7"): (EntryKind.FILE, True),  # contiguous file
    ord("1"): (EntryKind.HARDLINK, False),
    ord("2"): (EntryKind.SYMLINK, False),
    ord("3"): (EntryKind.OTHER, False),  # char device
    ord("4"): (EntryKind.OTHER, False),  # block device
    ord("5"): (EntryKind.DIR, False),
    ord("6"): (EntryKind.OTHER, False),  # fifo
    ord("D"): (EntryKind.DIR, True),  # GNU dumpdir: a directory with a listing as data
    ord("S"): (EntryKind.FILE, True),  # GNU sparse (old format): reported as sparse file
}
_META = frozenset(b"xgLKXN")  # pax, pax global, GNU long name/link, Solaris pax, old GNU
_SKIPPED = frozenset(b"VM")  # GNU volume label, multi-volume continuation: not members


def _decode(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


class TarMember:
    """One archive member. ``read`` returns member data; the rest is skipped later.

    ``mode``, ``uid``, ``gid`` and ``mtime`` are parsed from the header on first
    access (most members of a layer are never looked at that closely).
    """

    __slots__ = (
        "_hdr",
        "_parser",
        "_pax",
        "_remaining",
        "data_offset",
        "kind",
        "linkname",
        "name",
        "size",
        "sparse",
        "typeflag",
    )

    def __init__(
        self,
        name: str,
        kind: EntryKind,
        size: int,
        linkname: str,
        data_offset: int | None,
        sparse: bool,
        typeflag: str,
        parser: _Parser,
        hdr: bytes,
        pax: dict[str, str] | None,
    ) -> None:
        self.name = name
        self.kind = kind
        self.size = size
        self.linkname = linkname
        self.data_offset = data_offset
        self.sparse = sparse
        self.typeflag = typeflag
        self._parser = parser
        self._remaining = size
        self._hdr = hdr
        self._pax = pax

    def _field(self, key: str, start: int, end: int) -> int:
        pax = self._pax
        if pax is not None:
            v = self._parser._pax_int(pax, key, self.name)
            if v is not None:
                return v
        return self._parser._number(self._hdr, start, end, key, self.name)

    @property
    def mode(self) -> int:
        return self._parser._number(self._hdr, 100, 108, "mode", self.name) & 0o7777

    @property
    def uid(self) -> int:
        return self._field("uid", 108, 116)

    @property
    def gid(self) -> int:
        return self._field("gid", 116, 124)

    @property
    def mtime(self) -> int:
        return self._field("mtime", 136, 148)

    def read(self, n: int = -1) -> bytes:
        """Read up to ``n`` bytes of member data (all that is left when ``n < 0``)."""
        rem = self._remaining
        if rem <= 0:
            return b""
        if n < 0 or n > rem:
            n = rem
        data = self._parser.read_exact(n, self.name)
        self._remaining = rem - n
        return data

    def read_some(self, n: int) -> bytes:
        """Up to ``n`` bytes of member data, possibly fewer, without joining buffers
        (for consumers that take data piecewise, like stream analyzers)."""
        rem = self._remaining
        if rem <= 0:
            return b""
        data = self._parser.read_some(min(n, rem), self.name)
        self._remaining = rem - len(data)
        return data

    def __repr__(self) -> str:
        return f"TarMember({self.name!r}, {self.kind.value}, size={self.size})"


class _Parser:
    def __init__(self, f: BinaryIO, limits: Limits, name: str) -> None:
        self.f = f
        self.limits = limits
        self.name = name
        self.pos = 0  # bytes consumed from f since we started
        self._read = f.read
        skip = getattr(f, "skip", None)
        self._skip_fn = skip if callable(skip) else None
        self._base: int | None = None
        self._end: int | None = None
        if self._skip_fn is None:
            try:
                if f.seekable():
                    self._base = f.tell()
                    self._end = f.seek(0, io.SEEK_END)
                    f.seek(self._base)
            except (OSError, ValueError, AttributeError):
                self._base = self._end = None

    # -- low level ---------------------------------------------------------------------------

    def _truncated(self, entry: str) -> LayerError:
        return LayerError(f"{self.name}: truncated tar (entry {entry})")

    def read_some(self, n: int, entry: str) -> bytes:
        read1 = getattr(self.f, "read1", None)
        data = read1(n) if callable(read1) else self._read(n)
        if not data:
            raise self._truncated(entry)
        self.pos += len(data)
        return data

    def read_exact(self, n: int, entry: str) -> bytes:
        data = self._read(n)
        if len(data) < n:
            # a stream may return short reads before EOF
            parts = [data]
            got = len(data)
            while got < n:
                more = self._read(n - got)
                if not more:
                    self.pos += got
                    raise self._truncated(entry)
                parts.append(more)
                got += len(more)
            data = b"".join(parts)
        self.pos += n
        return data

    def skip(self, n: int) -> int:
        """Skip ``n`` bytes; returns how many were skipped (less only at EOF)."""
        if n <= 0:
            return 0
        if self._skip_fn is not None:
            done = int(self._skip_fn(n))
        elif self._base is not None and self._end is not None:
            cur = self._base + self.pos
            done = min(n, max(0, self._end - cur))
            self.f.seek(cur + done)
        else:
            done = 0
            read = self._read
            while done < n:
                chunk = read(min(SKIP_CHUNK, n - done))
                if not chunk:
                    break
                done += len(chunk)
        self.pos += done
        return done

    def data_offset(self) -> int | None:
        return None if self._base is None else self._base + self.pos

    # -- headers -----------------------------------------------------------------------------

    def _number(self, hdr: bytes, start: int, end: int, what: str, entry: str) -> int:
        field = hdr[start:end]
        if field[0] & 0x80:
            # GNU base-256: big-endian two's complement, 0x80 = positive, 0xff = negative
            if field[0] == 0xFF:
                return int.from_bytes(field, "big", signed=True)
            return int.from_bytes(bytes([field[0] & 0x7F]) + field[1:], "big")
        nul = field.find(b"\0")
        if nul >= 0:
            field = field[:nul]
        field = field.strip()
        if not field:
            return 0
        if not field.isdigit():
            raise LayerError(
                f"{self.name}: malformed tar header: bad {what} field {field!r} (entry {entry})"
            )
        try:
            return int(field, 8)
        except ValueError:
            raise LayerError(
                f"{self.name}: malformed tar header: bad {what} field {field!r} (entry {entry})"
            ) from None

    def _payload(self, size: int, kind: str, entry: str) -> bytes:
        if size > self.limits.max_header_bytes:
            raise UnsafeArchiveError(
                f"{self.name}: {kind} header of {size} bytes exceeds the limit of "
                f"{self.limits.max_header_bytes} bytes (after entry {entry})"
            )
        data = self.read_exact(size, entry)
        pad = -size % BLOCK
        if pad and self.skip(pad) < pad:
            raise self._truncated(entry)
        return data

    def _check_path(self, path: str, entry: str) -> None:
        if len(path) > self.limits.max_path_length:
            raise UnsafeArchiveError(
                f"{self.name}: path of {len(path)} characters exceeds the limit of "
                f"{self.limits.max_path_length} (entry {path[:80]}...)"
            )

    def _parse_pax(self, data: bytes, entry: str) -> dict[str, str]:
        out: dict[str, str] = {}
        pos = 0
        n = len(data)
        while pos < n:
            if data[pos] == 0:  # trailing NUL padding written by some tools
                break
            sp = data.find(b" ", pos, min(n, pos + 24))
            if sp < 0:
                raise LayerError(f"{self.name}: malformed pax header (entry {entry})")
            try:
                length = int(data[pos:sp])
            except ValueError:
                raise LayerError(f"{self.name}: malformed pax header (entry {entry})") from None
            end = pos + length
            if length <= 0 or end > n or end <= sp or data[end - 1] != 0x0A:
                raise LayerError(f"{self.name}: malformed pax header (entry {entry})")
            rec = data[sp + 1 : end - 1]
            eq = rec.find(b"=")
            if eq < 0:
                raise LayerError(f"{self.name}: malformed pax header (entry {entry})")
            out[_decode(rec[:eq])] = _decode(rec[eq + 1 :])
            pos = end
        return out

    def _pax_int(self, pax: dict[str, str], key: str, entry: str) -> int | None:
        v = pax.get(key)
        if v is None or v == "":
            return None
        try:
            if key == "mtime":
                return int(float(v))
            x = int(v, 10)
        except ValueError:
            raise LayerError(
                f"{self.name}: malformed pax {key} {v[:40]!r} (entry {entry})"
            ) from None
        if x < 0:
            raise LayerError(f"{self.name}: negative pax {key} (entry {entry})")
        return x

    # -- iteration ---------------------------------------------------------------------------

    def members(self) -> Iterator[TarMember]:
        limits = self.limits
        max_entries = limits.max_entries_per_layer
        max_path = limits.max_path_length
        count = 0
        last = "<start of archive>"
        global_pax: dict[str, str] = {}
        member: TarMember | None = None
        read = self._read
        sr = getattr(self.f, "skip_read", None)
        skip_read = sr if callable(sr) else None
        number = self._number
        kinds = _KINDS
        meta = _META
        skipped_types = _SKIPPED
        zero = _ZERO_BLOCK
        while True:
            # skip what the caller left of the previous member, then its padding
            hdr = None
            if member is not None:
                rem = member._remaining
                member._remaining = 0
                pad = -member.size & 511
                want = rem + pad
                if skip_read is not None:
                    done, hdr = skip_read(want, BLOCK)
                    self.pos += done
                elif want:
                    done = self.skip(want)
                else:
                    done = 0
                if done < want:
                    if done < rem:
                        raise self._truncated(member.name)
                    return  # EOF in the padding after complete data: be lenient
                member = None

            pax: dict[str, str] | None = None
            long_name: str | None = None
            long_link: str | None = None
            chain = 0
            while True:
                if hdr is None:
                    hdr = read(BLOCK)
                if len(hdr) != BLOCK:
                    while hdr and len(hdr) < BLOCK:
                        more = read(BLOCK - len(hdr))
                        if not more:
                            break
                        hdr += more
                    if not hdr:
                        if chain:
                            raise self._truncated(last)
                        return  # EOF at a header boundary: end of archive
                    if len(hdr) < BLOCK:
                        self.pos += len(hdr)
                        raise self._truncated(last)
                offset = self.pos
                self.pos = offset + BLOCK
                if hdr == zero:
                    if chain:
                        raise LayerError(
                            f"{self.name}: malformed tar: end marker after an extended header "
                            f"(entry {last})"
                        )
                    # end of archive (the second zero block and anything after are ignored)
                    return
                # checksum: the chksum field counts as eight spaces. Fast check: the
                # implied byte sum against zlib's adler32 (its low half is 1 + sum mod
                # 65521); anything odd goes to the exact check.
                stored = hdr[148:156]
                try:
                    total = int(stored.rstrip(b"\0 "), 8) + sum(stored) - 256
                except ValueError:
                    total = -1
                if not (
                    0 <= total <= 130560 and adler32(hdr) & 0xFFFF == (total + 1) % 65521
                ) and not self._checksum_slow(hdr, last):
                    raise LayerError(
                        f"{self.name}: bad tar header checksum at offset {offset} (after entry {last})"
                    )
                typeflag = hdr[156]
                if typeflag in meta or typeflag in skipped_types:
                    chain += 1
                    if chain > MAX_META_CHAIN:
                        raise UnsafeArchiveError(
                            f"{self.name}: more than {MAX_META_CHAIN} extended headers in a row "
                            f"(after entry {last})"
                        )
                    size = number(hdr, 124, 136, "size", last)
                    if size < 0:
                        raise LayerError(
                            f"{self.name}: negative size in tar header (after entry {last})"
                        )
                    if typeflag in skipped_types:
                        self._skip_data(size, last)
                        hdr = None
                        continue
                    payload = self._payload(size, chr(typeflag) + " extended", last)
                    if typeflag == 0x4C:  # 'L'
                        long_name = _decode(payload.split(b"\0", 1)[0])
                        self._check_path(long_name, last)
                    elif typeflag == 0x4B:  # 'K'
                        long_link = _decode(payload.split(b"\0", 1)[0])
                        self._check_path(long_link, last)
                    elif typeflag == 0x67:  # 'g'
                        for k, v in self._parse_pax(payload, last).items():
                            if v == "":
                                global_pax.pop(k, None)
                            elif len(global_pax) < 256 or k in global_pax:
                                global_pax[k] = v
                    elif typeflag in (0x78, 0x58):  # 'x', 'X'
                        if pax is None:
                            pax = {}
                        pax.update(self._parse_pax(payload, last))
                    # 'N' (old GNU names file): ignored
                    hdr = None
                    continue
                break

            # a real member
            count += 1
            if count > max_entries:
                raise UnsafeArchiveError(
                    f"{self.name}: more than {max_entries} entries in one layer"
                )
            if long_name is None:
                nul = hdr.find(0, 0, 100)
                raw_name = hdr[0:100] if nul < 0 else hdr[0:nul]
                if hdr[345] and hdr[257:263] == b"ustar\x00":
                    nul = hdr.find(0, 345, 500)
                    raw_name = (hdr[345:500] if nul < 0 else hdr[345:nul]) + b"/" + raw_name
                try:
                    name = raw_name.decode()
                except UnicodeDecodeError:
                    name = _decode(raw_name)
            else:
                name = long_name
            if long_link is not None:
                linkname = long_link
            elif hdr[157]:
                nul = hdr.find(0, 157, 257)
                linkname = _decode(hdr[157:257] if nul < 0 else hdr[157:nul])
            else:
                linkname = ""
            size_f = hdr[124:136]
            try:
                size = int(size_f.rstrip(b"\0 "), 8) if size_f[0] < 0x80 else -1
            except ValueError:
                size = -1
            if size < 0:
                size = number(hdr, 124, 136, "size", name)
            sparse = typeflag == 0x53  # 'S'
            merged: dict[str, str] | None = None
            if global_pax or pax:
                merged = {**global_pax, **pax} if (global_pax and pax) else (pax or global_pax)
                name = merged.get("path") or name
                linkname = merged.get("linkpath") or linkname
                psize = self._pax_int(merged, "size", name)
                if psize is not None:
                    size = psize
                if (
                    "GNU.sparse.name" in merged
                    or "GNU.sparse.major" in merged
                    or ("GNU.sparse.map" in merged)
                ):
                    sparse = True
                    name = merged.get("GNU.sparse.name") or name
            if len(name) > max_path:
                self._check_path(name, last)
            if len(linkname) > max_path:
                self._check_path(linkname, name)
            if size < 0:
                raise LayerError(f"{self.name}: negative size in tar header (entry {name})")
            kind_info = kinds.get(typeflag)
            if kind_info is None:
                # POSIX: unknown types are read as regular files; we report them as "other"
                kind, has_data = EntryKind.OTHER, True
            else:
                kind, has_data = kind_info
            if sparse and typeflag == 0x53 and hdr[482]:
                # old GNU sparse: extension blocks with more sparse map entries follow
                ext = 0
                while True:
                    ext += 1
                    if ext > 4096:
                        raise UnsafeArchiveError(
                            f"{self.name}: too many sparse headers (entry {name})"
                        )
                    blk = self.read_exact(BLOCK, name)
                    if not blk[504]:
                        break
            if not has_data:
                size = 0
            last = name
            member = TarMember(
                name,
                kind,
                size,
                linkname,
                None if self._base is None else self._base + self.pos,
                sparse,
                chr(typeflag) if typeflag else "0",
                self,
                hdr,
                merged,
            )
            yield member

    def _checksum_slow(self, hdr: bytes, entry: str) -> bool:
        """The careful checksum check (odd field formats, signed-char sums)."""
        try:
            stored = self._number(hdr, 148, 156, "checksum", entry)
        except LayerError:
            return False
        unsigned = sum(hdr) - sum(hdr[148:156]) + 256
        if stored == unsigned:
            return True
        # some old tars computed the sum over signed chars
        signed = sum(b - 256 if b > 127 else b for b in hdr[:148] + hdr[156:]) + 256
        return stored == signed

    def _skip_data(self, size: int, entry: str) -> None:
        if size and self.skip(size) < size:
            raise self._truncated(entry)
        pad = -size % BLOCK
        if pad and self.skip(pad) < pad:
            raise self._truncated(entry)


def iter_tar(f: BinaryIO | Any, *, limits: Limits, name: str) -> Iterator[TarMember]:
    """Iterate the members of the tar stream ``f``; see the module docstring.

    Raises ``LayerError`` (truncated or malformed archive, bad checksum) and
    ``UnsafeArchiveError`` (a limit exceeded), both naming ``name``.
    """
    return _Parser(f, limits, name).members()
