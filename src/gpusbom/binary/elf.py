"""Find the GPU code sections of an ELF file without reading the whole file.

Only the ELF header, the section header table and the names of the sections are read (via
pyelftools for the header structures, with our own bounded reads for the names); section
contents are left to the decoders in :mod:`gpusbom.binary.fatbin` and
:mod:`gpusbom.binary.hipbundle`, which read them in small pieces.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import BinaryIO

from ..errors import CollectorError

__all__ = [
    "ELF_MAGIC",
    "MAX_SECTIONS",
    "SECTION_KINDS",
    "BinaryFormatError",
    "GpuSection",
    "find_gpu_sections",
    "is_elf",
    "read_at",
]


class BinaryFormatError(CollectorError, ValueError):
    """A GPU binary structure is malformed, truncated or exceeds a safety cap.

    The only exception the decoders in :mod:`gpusbom.binary` raise for bad input (I/O errors
    of the underlying file propagate unchanged). The message names the input and the offset.
    """


def read_at(f: BinaryIO, offset: int, n: int, *, name: str, what: str) -> bytes:
    """Read exactly ``n`` bytes at ``offset`` or raise :class:`BinaryFormatError`."""
    f.seek(offset)
    data = f.read(n)
    if len(data) != n:
        raise BinaryFormatError(f"{name}: {what} at offset {offset:#x} is truncated")
    return data


ELF_MAGIC = b"\x7fELF"

#: Hard cap on the number of section headers we are willing to walk.
MAX_SECTIONS = 1 << 17
#: Longest section name we read; longer names cannot be ours.
_MAX_NAME = 512
#: Prefix of the per-target sections written by clang-offload-bundler's object-file handler.
CLANG_BUNDLE_SECTION_PREFIX = "__CLANG_OFFLOAD_BUNDLE__"

#: Section name -> kind.  Sections named ``__CLANG_OFFLOAD_BUNDLE__<target id>`` are kind
#: ``clang-offload-section`` (matched by prefix).
SECTION_KINDS: dict[str, str] = {
    ".nv_fatbin": "cuda-fatbin",
    "__nv_relfatbin": "cuda-fatbin",
    ".nvFatBinSegment": "cuda-wrapper",
    ".hip_fatbin": "hip-fatbin",
    ".hipFatBinSegment": "hip-wrapper",
}


@dataclass(frozen=True)
class GpuSection:
    """A GPU-related section of an ELF file.

    ``offset``/``size`` are absolute file offsets of the section data, already clipped to the
    file; ``truncated`` is True when the section header claimed more bytes than the file has.
    ``kind`` is one of ``cuda-fatbin``, ``cuda-wrapper``, ``hip-fatbin``, ``hip-wrapper`` and
    ``clang-offload-section`` (then ``target_id`` is the part of the name after the prefix).
    """

    name: str
    offset: int
    size: int
    kind: str
    truncated: bool = False

    @property
    def target_id(self) -> str | None:
        if self.kind == "clang-offload-section":
            return self.name[len(CLANG_BUNDLE_SECTION_PREFIX) :]
        return None


def is_elf(head: bytes) -> bool:
    """Cheap pre-check on the first bytes of a file (4 are enough)."""
    return head[:4] == ELF_MAGIC


def _file_size(f: BinaryIO) -> int:
    pos = f.tell()
    try:
        return f.seek(0, io.SEEK_END)
    finally:
        f.seek(pos)


def _read_name(f: BinaryIO, strtab_off: int, strtab_size: int, name_off: int) -> str | None:
    if name_off >= strtab_size:
        return None
    f.seek(strtab_off + name_off)
    raw = f.read(min(_MAX_NAME, strtab_size - name_off))
    end = raw.find(b"\0")
    if end < 0:
        return None  # unterminated or longer than any name we care about
    return raw[:end].decode("utf-8", errors="replace")


def _kind_of(name: str) -> str | None:
    kind = SECTION_KINDS.get(name)
    if kind is None and name.startswith(CLANG_BUNDLE_SECTION_PREFIX):
        kind = "clang-offload-section"
    return kind


def find_gpu_sections(f: BinaryIO, *, name: str = "<binary>") -> list[GpuSection]:
    """List the GPU code sections of the ELF file ``f`` (seekable, binary), in header order.

    Raises :class:`BinaryFormatError` when ``f`` is not an ELF file or its headers are
    malformed (offsets past the end, absurd counts). I/O errors propagate unchanged.
    """
    # pyelftools is imported here, not at module load: the streaming scanners (every
    # scan) use this module's constants but never parse section headers
    from elftools.common.exceptions import ELFError
    from elftools.common.utils import struct_parse
    from elftools.elf.elffile import ELFFile

    size = _file_size(f)
    f.seek(0)
    if not is_elf(f.read(4)):
        raise BinaryFormatError(f"{name}: not an ELF file")
    try:
        elf = ELFFile(f)
        shoff = int(elf["e_shoff"])
        if shoff == 0:
            return []  # no section headers (stripped to program headers only)
        entsize = int(elf["e_shentsize"])
        shdr = elf.structs.Elf_Shdr
        if entsize < shdr.sizeof():
            raise BinaryFormatError(f"{name}: section header size {entsize} is too small")
        count = int(elf.num_sections())
        if count > MAX_SECTIONS:
            raise BinaryFormatError(f"{name}: {count} section headers (more than {MAX_SECTIONS})")
        if shoff + count * entsize > size:
            raise BinaryFormatError(f"{name}: section header table runs past the end of the file")
        strndx = int(elf.get_shstrndx())
        if not 0 <= strndx < count:
            raise BinaryFormatError(f"{name}: section name table index {strndx} out of range")
        headers = [struct_parse(shdr, f, stream_pos=shoff + i * entsize) for i in range(count)]
    except BinaryFormatError:
        raise
    except (ELFError, ValueError, TypeError, KeyError, IndexError, OverflowError, EOFError) as exc:
        raise BinaryFormatError(f"{name}: malformed ELF headers: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - construct's own error types on short reads; others re-raised
        if type(exc).__module__.split(".")[0] in ("construct", "elftools"):
            raise BinaryFormatError(f"{name}: malformed ELF headers: {exc}") from None
        raise

    strtab = headers[strndx]
    str_off, str_size = int(strtab["sh_offset"]), int(strtab["sh_size"])
    if str_off > size:
        raise BinaryFormatError(f"{name}: section name table starts past the end of the file")
    str_size = min(str_size, size - str_off)

    found: list[GpuSection] = []
    for hdr in headers:
        sec_name = _read_name(f, str_off, str_size, int(hdr["sh_name"]))
        if sec_name is None:
            continue
        kind = _kind_of(sec_name)
        if kind is None or hdr["sh_type"] == "SHT_NOBITS":
            continue
        off, length = int(hdr["sh_offset"]), int(hdr["sh_size"])
        truncated = off + length > size
        if off > size:
            off, length = size, 0
        elif truncated:
            length = size - off
        found.append(GpuSection(sec_name, off, length, kind, truncated))
    return found
