"""Intel GPU device images: zebin ELF files and ocloc's fat-binary archives.

* **zebin**: the ELF that Intel's compiler (IGC, through ``ocloc``) writes for an AOT target:
  ``e_machine`` 205 (``EM_INTELGT``), and a ``.note.intelgt.compat`` section whose ``IntelGT``
  notes say what it was built for: type 1 product family (``1271`` PVC, ``1274`` BMG), 2 the
  graphics core, 4 the zebin version (``1.70``), 6 the product config, an IP version
  ``architecture << 22 | release << 14 | revision`` (``0x030f0007`` = 12.60.7, PVC XT C0).
  Note types from compute-runtime's ``zebin_elf.h`` (``IntelGTSectionType``).
* **ocloc fat binary**: an ``ar`` archive (``!<arch>\\n``) of one zebin per ``-device`` target,
  members named ``64.<config or acronym>`` (``64.12.60.7``, ``64.bmg``) with ``pad_N`` members
  between them, and an optional ``generic_ir`` member (SPIR-V the driver compiles for a
  device that no AOT member fits). DPC++ embeds it for ``-fsycl-targets=spir64_gen``.

Both parsers take bytes already bounded by the caller and raise only
:class:`~gpusbom.binary.elf.BinaryFormatError`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .elf import BinaryFormatError

__all__ = [
    "AR_MAGIC",
    "EM_INTELGT",
    "ArMember",
    "Zebin",
    "ip_version",
    "is_zebin_header",
    "parse_ar_member",
    "parse_zebin",
    "zebin_extent",
]

EM_INTELGT = 205
AR_MAGIC = b"!<arch>\n"
AR_HEADER = 60
NOTE_SECTION = b".note.intelgt.compat"
NOTE_OWNER = b"IntelGT\0"
_NT_PRODUCT_FAMILY, _NT_GFX_CORE, _NT_ZEBIN_VERSION, _NT_PRODUCT_CONFIG = 1, 2, 4, 6
MAX_SECTIONS = 1 << 16
MAX_NOTES = 256


def ip_version(config: int) -> str:
    """``0x030f0007`` -> ``12.60.7`` (architecture.release.revision)."""
    return f"{config >> 22}.{(config >> 14) & 0xFF}.{config & 0x3F}"


@dataclass(frozen=True)
class Zebin:
    """What a zebin's header and notes say. ``product_config`` is the raw note value."""

    product_family: int | None = None
    gfx_core: int | None = None
    product_config: int | None = None
    zebin_version: str | None = None

    @property
    def ip(self) -> str | None:
        return ip_version(self.product_config) if self.product_config else None


def is_zebin_header(head: bytes | bytearray) -> bool:
    """An ELF64 little-endian header with ``e_machine`` 205 (needs 20 bytes)."""
    return (len(head) >= 20 and head[:4] == b"\x7fELF" and head[4] == 2 and head[5] == 1
            and struct.unpack_from("<H", head, 18)[0] == EM_INTELGT)


def zebin_extent(head: bytes | bytearray) -> int:
    """Bytes from the start of a zebin to the end of its section header table (from its
    64-byte ELF header): what :func:`parse_zebin` needs."""
    if len(head) < 64 or not is_zebin_header(head):
        raise BinaryFormatError("not a zebin header")
    shoff, = struct.unpack_from("<Q", head, 40)
    shentsize, shnum = struct.unpack_from("<HH", head, 58)
    if shentsize < 64 or shnum > MAX_SECTIONS or shoff < 64:
        raise BinaryFormatError(f"zebin section table {shoff:#x} x {shnum}/{shentsize}")
    return int(shoff + shnum * shentsize)


def _notes(data: bytes) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    pos = 0
    while pos + 12 <= len(data) and len(out) < MAX_NOTES:
        namesz, descsz, ntype = struct.unpack_from("<III", data, pos)
        name_end = pos + 12 + ((namesz + 3) & ~3)
        desc_end = name_end + ((descsz + 3) & ~3)
        if desc_end > len(data) + 3 or namesz > len(data) or descsz > len(data):
            raise BinaryFormatError("zebin note runs past its section")
        if data[pos + 12 : pos + 12 + namesz] == NOTE_OWNER:
            out.append((ntype, data[name_end : name_end + descsz]))
        pos = desc_end
    return out


def parse_zebin(data: bytes) -> Zebin:
    """Decode the ``.note.intelgt.compat`` notes of a zebin held in ``data`` (at least
    :func:`zebin_extent` bytes; the note and name table must lie inside)."""
    end = zebin_extent(data[:64])
    if end > len(data):
        raise BinaryFormatError(f"zebin truncated: {len(data)} of {end} bytes")
    shoff, = struct.unpack_from("<Q", data, 40)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 58)
    if shstrndx >= shnum:
        raise BinaryFormatError("zebin name table index out of range")

    def section(i: int) -> tuple[int, int, int]:
        at = shoff + i * shentsize
        name, _typ = struct.unpack_from("<II", data, at)
        off, size = struct.unpack_from("<QQ", data, at + 24)
        if off + size > len(data):
            raise BinaryFormatError(f"zebin section {i} lies outside the image")
        return name, off, size

    _, str_off, str_size = section(shstrndx)
    names = data[str_off : str_off + str_size]
    fields: dict[int, bytes] = {}
    for i in range(shnum):
        name_off, off, size = section(i)
        if names[name_off : name_off + len(NOTE_SECTION) + 1] == NOTE_SECTION + b"\0":
            for ntype, desc in _notes(data[off : off + size]):
                fields.setdefault(ntype, desc)

    def u32(t: int) -> int | None:
        d = fields.get(t)
        return struct.unpack_from("<I", d)[0] if d is not None and len(d) >= 4 else None

    ver = fields.get(_NT_ZEBIN_VERSION)
    return Zebin(
        product_family=u32(_NT_PRODUCT_FAMILY),
        gfx_core=u32(_NT_GFX_CORE),
        product_config=u32(_NT_PRODUCT_CONFIG),
        zebin_version=ver.split(b"\0", 1)[0].decode("ascii", "replace")[:32] if ver else None,
    )


@dataclass(frozen=True)
class ArMember:
    name: str  # "64.12.60.7", "64.bmg", "generic_ir", "pad_0"
    size: int

    @property
    def padding(self) -> bool:
        return self.name.startswith("pad_")

    @property
    def device(self) -> str | None:
        """The target the member was built for (``12.60.7``, ``bmg``); None for
        ``generic_ir`` and padding."""
        head, dot, rest = self.name.partition(".")
        return rest if dot and head.isdigit() and rest else None


def parse_ar_member(header: bytes | bytearray) -> ArMember:
    """One 60-byte ``ar`` member header (GNU style names ending in ``/``)."""
    if len(header) < AR_HEADER or header[58:60] != b"`\n":
        raise BinaryFormatError("bad ar member header")
    raw = bytes(header[:16]).rstrip(b" ")
    name = raw[:-1] if raw.endswith(b"/") else raw
    try:
        size = int(bytes(header[48:58]).strip() or b"0")
    except ValueError:
        raise BinaryFormatError("bad ar member size") from None
    if size < 0:
        raise BinaryFormatError("bad ar member size")
    return ArMember(name.decode("ascii", "replace"), size)
