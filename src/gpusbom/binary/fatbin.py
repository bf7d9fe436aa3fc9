"""Decode CUDA fatbin containers (``.nv_fatbin``, ``__nv_relfatbin``, standalone ``.fatbin``).

Layout (little endian; verified against ``cuobjdump`` on nvcc 13.0 output and NVIDIA wheels):

Container header (16 bytes), containers follow each other (8-byte aligned, zero padded)::

    u32 magic = 0xBA55ED50   u16 version = 1   u16 header_size = 16   u64 body_size

Entry header (``header_size`` bytes, at least 64; 64/80/96/112/120 seen), then the payload;
the next entry starts at ``entry + header_size + payload_size``::

    +0  u16 kind            1 = PTX, 2 = ELF (SASS cubin), 8 = NVVM IR (LTO)
    +2  u16 (0x0101)
    +4  u32 header_size
    +8  u64 payload_size    stored bytes (padded)
    +16 u32 compressed_size 0 when not compressed
    +20 u32 options_offset
    +24 u16 minor  +26 u16 major   code version: PTX ISA for PTX, cubin ABI for ELF
    +28 u32 arch             e.g. 90 for sm_90
    +32 u32 name_offset  +36 u32 name_size
    +40 u64 flags            see ``FLAG_*``
    +48 u64 (unknown)
    +56 u64 uncompressed_size  0 when not compressed

Flag bits (empirical): 0x1 64-bit, 0x2 debug, 0x10 Linux host, 0x2000 LZ4 raw block
compression (``--compress-mode=speed``), 0x8000 zstd (payload starts ``28 b5 2f fd``),
0x100000 arch-specific ``a`` variant (sm_90a), 0x200000 family ``f`` variant (sm_100f).

``cuobjdump --list-elf`` prints the ``f`` variant of ELF entries without its suffix
(``sm_100f`` -> ``sm_100.cubin``) while ``cuobjdump -ptx``'s headers show ``arch = sm_100f``;
:attr:`FatbinEntry.arch` is the real one, :attr:`FatbinEntry.list_name` the listing's.

Only headers are read: payloads are skipped by their size fields, so memory stays bounded for
sections of any size.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from gpusbom.binary.elf import BinaryFormatError, find_gpu_sections, is_elf, read_at

__all__ = [
    "FATBIN_MAGIC",
    "MAX_FATBIN_ENTRIES",
    "CudaTargets",
    "CudaTargetsBuilder",
    "EntryHeader",
    "FatbinEntry",
    "cuda_targets",
    "is_fatbin",
    "iter_fatbin",
    "list_fatbin",
    "parse_container_header",
    "parse_entry_header",
    "scan_cuda",
]

FATBIN_MAGIC = 0xBA55ED50
_MAGIC_BYTES = struct.pack("<I", FATBIN_MAGIC)

KIND_PTX = 1
KIND_ELF = 2
KIND_NVVM = 8
_KIND_NAMES = {KIND_PTX: "ptx", KIND_ELF: "elf", KIND_NVVM: "nvvm"}

FLAG_64BIT = 0x1
FLAG_DEBUG = 0x2
FLAG_LINUX = 0x10
FLAG_COMPRESSED_LZ4 = 0x2000
FLAG_COMPRESSED_ZSTD = 0x8000
FLAG_ARCH_SPECIFIC = 0x100000  # "a"
FLAG_FAMILY_SPECIFIC = 0x200000  # "f"

#: Safety caps. A fatbin with more entries than this is refused (libtorch_cuda has ~10^4).
MAX_FATBIN_ENTRIES = 1 << 18
_MAX_CONTAINER_HEADER = 4096
_MAX_ENTRY_HEADER = 1 << 16
_ENTRY_MIN = 64
_ENTRY = struct.Struct("<HHIQIIHHIIIQQQ")  # 64 bytes
_CONTAINER = struct.Struct("<IHHQ")
_ZERO_CHUNK = 1 << 16


@dataclass(frozen=True)
class FatbinEntry:
    """One entry of a fatbin container."""

    kind: str  # "elf", "ptx", "nvvm" or "unknown-<n>"
    kind_code: int
    arch_number: int  # 90 for sm_90a
    variant: str  # "", "a" or "f"
    version: tuple[int, int]  # (major, minor): PTX ISA for PTX, cubin ABI for ELF
    flags: int
    compression: str  # "none", "lz4" or "zstd"
    offset: int  # absolute offset of the entry header in the file
    header_size: int
    payload_size: int  # bytes stored in the container (padded)
    compressed_size: int  # 0 when not compressed
    uncompressed_size: int  # 0 when not compressed
    container_offset: int

    @property
    def arch(self) -> str:
        """``sm_90a``-style architecture (for every kind, as ``cuobjdump -ptx`` prints it)."""
        return f"sm_{self.arch_number}{self.variant}"

    @property
    def target(self) -> str:
        """``sm_90a`` for SASS, ``compute_90a`` for PTX, ``lto_90`` for NVVM IR."""
        if self.kind == "ptx":
            return f"compute_{self.arch_number}{self.variant}"
        if self.kind == "nvvm":
            return f"lto_{self.arch_number}{self.variant}"
        return self.arch

    @property
    def list_name(self) -> str | None:
        """The architecture as ``cuobjdump --list-elf/--list-ptx`` names the file (None for
        kinds it does not list): ELF entries lose the ``f`` suffix there."""
        if self.kind == "elf":
            return f"sm_{self.arch_number}{'a' if self.variant == 'a' else ''}"
        if self.kind == "ptx":
            return self.arch
        return None

    @property
    def ptx_isa(self) -> str | None:
        return f"{self.version[0]}.{self.version[1]}" if self.kind == "ptx" else None

    @property
    def is_64bit(self) -> bool:
        return bool(self.flags & FLAG_64BIT)

    @property
    def debug(self) -> bool:
        return bool(self.flags & FLAG_DEBUG)

    @property
    def compressed(self) -> bool:
        return self.compression != "none"

    @property
    def payload_offset(self) -> int:
        return self.offset + self.header_size


def _arch_key(target: str) -> tuple[str, int, str]:
    prefix, _, rest = target.partition("_")
    digits = "".join(ch for ch in rest if ch.isdigit())
    return (prefix, int(digits) if digits else -1, rest[len(digits) :])


def _sorted_targets(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(set(items), key=_arch_key))


@dataclass(frozen=True)
class CudaTargets:
    """Summary of the CUDA device code of a binary.

    ``sass``/``ptx``/``lto`` are sorted numerically (``sm_75`` < ``sm_90`` < ``sm_90a`` <
    ``sm_100``); ``ptx_isa`` sorted by version; ``compressed`` the compression methods seen.
    ``errors`` is non-empty when decoding stopped early (the lists hold what was read).
    """

    sass: tuple[str, ...] = ()
    ptx: tuple[str, ...] = ()
    lto: tuple[str, ...] = ()
    ptx_isa: tuple[str, ...] = ()
    compressed: tuple[str, ...] = ()
    entries: int = 0
    containers: int = 0
    all_64bit: bool = True
    errors: tuple[str, ...] = field(default_factory=tuple)

    @property
    def empty(self) -> bool:
        return not self.entries


class CudaTargetsBuilder:
    """Incremental :func:`cuda_targets`: ``add`` entries one at a time (constant memory per
    distinct target), then ``build``. Used by the streaming scanner."""

    __slots__ = ("_all64", "_comp", "_containers", "_count", "_isa", "_lto", "_ptx", "_sass")

    def __init__(self) -> None:
        self._sass: set[str] = set()
        self._ptx: set[str] = set()
        self._lto: set[str] = set()
        self._isa: set[str] = set()
        self._comp: set[str] = set()
        self._containers: set[int] = set()
        self._count = 0
        self._all64 = True

    @property
    def entries(self) -> int:
        return self._count

    def add(self, e: FatbinEntry) -> None:
        self._count += 1
        self._containers.add(e.container_offset)
        self._all64 = self._all64 and e.is_64bit
        if e.compressed:
            self._comp.add(e.compression)
        if e.kind == "elf":
            self._sass.add(e.target)
        elif e.kind == "ptx":
            self._ptx.add(e.target)
            if e.ptx_isa:
                self._isa.add(e.ptx_isa)
        elif e.kind == "nvvm":
            self._lto.add(e.target)

    def build(self, errors: Iterable[str] = ()) -> CudaTargets:
        count = self._count
        return CudaTargets(
            sass=_sorted_targets(self._sass),
            ptx=_sorted_targets(self._ptx),
            lto=_sorted_targets(self._lto),
            ptx_isa=tuple(sorted(self._isa, key=lambda v: tuple(int(p) for p in v.split(".")))),
            compressed=tuple(sorted(self._comp)),
            entries=count,
            containers=len(self._containers),
            all_64bit=self._all64 if count else True,
            errors=tuple(errors),
        )


def cuda_targets(entries: Iterable[FatbinEntry], errors: Iterable[str] = ()) -> CudaTargets:
    """Summarise decoded entries."""
    b = CudaTargetsBuilder()
    for e in entries:
        b.add(e)
    return b.build(errors)


def is_fatbin(head: bytes) -> bool:
    """True when ``head`` starts with a fatbin container magic."""
    return head[:4] == _MAGIC_BYTES


def _skip_zeros(f: BinaryIO, pos: int, end: int) -> int:
    """Return the offset of the first non-zero byte in [pos, end) (or ``end``)."""
    while pos < end:
        f.seek(pos)
        chunk = f.read(min(_ZERO_CHUNK, end - pos))
        if not chunk:
            return end
        stripped = chunk.lstrip(b"\0")
        if stripped:
            return pos + len(chunk) - len(stripped)
        pos += len(chunk)
    return end


def _compression(flags: int) -> str:
    if flags & FLAG_COMPRESSED_ZSTD:
        return "zstd"
    if flags & FLAG_COMPRESSED_LZ4:
        return "lz4"
    return "none"


def _variant(flags: int) -> str:
    if flags & FLAG_ARCH_SPECIFIC:
        return "a"
    if flags & FLAG_FAMILY_SPECIFIC:
        return "f"
    return ""


#: Bytes of a container header and of the fixed part of an entry header.
CONTAINER_HEADER_SIZE = _CONTAINER.size
ENTRY_HEADER_MIN = _ENTRY_MIN
MAX_CONTAINER_HEADER = _MAX_CONTAINER_HEADER
MAX_ENTRY_HEADER = _MAX_ENTRY_HEADER


def parse_container_header(head: bytes | bytearray) -> tuple[int, int, int, int]:
    """``(magic, version, header_size, body_size)`` of the 16 bytes at a container start."""
    magic, version, hsize, body = _CONTAINER.unpack_from(head)
    return magic, version, hsize, body


@dataclass(frozen=True)
class EntryHeader:
    """The fields of a fatbin entry header that the decoders use (see the module doc)."""

    kind: int
    header_size: int
    payload_size: int
    compressed_size: int
    minor: int
    major: int
    arch: int
    flags: int
    uncompressed_size: int

    @property
    def is_padding(self) -> bool:
        """All-zero kind/size fields: the zero padding at the end of a container body."""
        return self.kind == 0 and self.header_size == 0 and self.payload_size == 0

    def valid_size(self) -> bool:
        return _ENTRY_MIN <= self.header_size <= _MAX_ENTRY_HEADER

    def entry(self, offset: int, container_offset: int) -> FatbinEntry:
        comp = _compression(self.flags)
        return FatbinEntry(
            kind=_KIND_NAMES.get(self.kind, f"unknown-{self.kind}"),
            kind_code=self.kind,
            arch_number=self.arch,
            variant=_variant(self.flags),
            version=(self.major, self.minor),
            flags=self.flags,
            compression=comp,
            offset=offset,
            header_size=self.header_size,
            payload_size=self.payload_size,
            compressed_size=self.compressed_size if comp != "none" else 0,
            uncompressed_size=self.uncompressed_size if comp != "none" else 0,
            container_offset=container_offset,
        )


def parse_entry_header(head: bytes | bytearray) -> EntryHeader:
    """Decode the first 64 bytes of an entry header (``head`` may be longer)."""
    (
        kind,
        _u1,
        ehs,
        psize,
        csize,
        _opt,
        minor,
        major,
        arch,
        _noff,
        _nlen,
        flags,
        _u2,
        usize,
    ) = _ENTRY.unpack_from(head)
    return EntryHeader(kind, ehs, psize, csize, minor, major, arch, flags, usize)


def iter_fatbin(
    f: BinaryIO, offset: int = 0, size: int | None = None, *, name: str = "<fatbin>"
) -> Iterator[FatbinEntry]:
    """Yield the entries of every fatbin container in ``f[offset:offset+size]`` in file order.

    ``size`` None means "to the end of the file". Raises :class:`BinaryFormatError` (after
    yielding the entries read so far) on a malformed or truncated structure.
    """
    file_end = f.seek(0, io.SEEK_END)
    if size is None:
        size = max(0, file_end - offset)
    if offset < 0 or size < 0:
        raise BinaryFormatError(f"{name}: negative offset or size")
    end = offset + size
    if end > file_end:
        raise BinaryFormatError(f"{name}: fatbin region {offset:#x}+{size:#x} runs past the end")
    pos = offset
    count = 0
    while pos < end:
        if end - pos < _CONTAINER.size:
            if _skip_zeros(f, pos, end) == end:
                return
            raise BinaryFormatError(f"{name}: trailing bytes at {pos:#x} are not a fatbin")
        magic, version, hsize, body = parse_container_header(
            read_at(f, pos, _CONTAINER.size, name=name, what="fatbin header")
        )
        if magic != FATBIN_MAGIC:
            nxt = _skip_zeros(f, pos, end)
            if nxt == end:
                return
            aligned = nxt & ~7
            if nxt != pos and aligned > pos:
                pos = aligned
                continue
            raise BinaryFormatError(f"{name}: no fatbin magic at {pos:#x}")
        if version != 1:
            raise BinaryFormatError(f"{name}: fatbin version {version} at {pos:#x} not supported")
        if not _CONTAINER.size <= hsize <= _MAX_CONTAINER_HEADER:
            raise BinaryFormatError(f"{name}: fatbin header size {hsize} at {pos:#x}")
        body_start = pos + hsize
        body_end = body_start + body
        if body_end > end:
            raise BinaryFormatError(f"{name}: fatbin container at {pos:#x} runs past its section")
        e = body_start
        while e < body_end:
            if body_end - e < _ENTRY_MIN:
                if _skip_zeros(f, e, body_end) == body_end:
                    break
                raise BinaryFormatError(f"{name}: truncated fatbin entry at {e:#x}")
            h = parse_entry_header(read_at(f, e, _ENTRY.size, name=name, what="fatbin entry"))
            if h.is_padding:
                # zero padding at the end of a container body
                if _skip_zeros(f, e, body_end) == body_end:
                    break
                raise BinaryFormatError(f"{name}: empty fatbin entry at {e:#x}")
            if not h.valid_size():
                raise BinaryFormatError(
                    f"{name}: fatbin entry header size {h.header_size} at {e:#x}"
                )
            nxt = e + h.header_size + h.payload_size
            if nxt > body_end:
                raise BinaryFormatError(f"{name}: fatbin entry at {e:#x} runs past its container")
            count += 1
            if count > MAX_FATBIN_ENTRIES:
                raise BinaryFormatError(f"{name}: more than {MAX_FATBIN_ENTRIES} fatbin entries")
            yield h.entry(e, pos)
            e = nxt
        pos = body_end


def list_fatbin(
    f: BinaryIO, offset: int = 0, size: int | None = None, *, name: str = "<fatbin>"
) -> list[FatbinEntry]:
    """All entries of the fatbin containers in ``f[offset:offset+size]``; raises
    :class:`BinaryFormatError` on malformed input."""
    return list(iter_fatbin(f, offset, size, name=name))


def scan_cuda(f: BinaryIO, *, name: str = "<binary>") -> tuple[list[FatbinEntry], CudaTargets]:
    """Decode every fatbin in an ELF file (or a standalone fatbin file).

    Returns the entries and their summary. Decoding errors of one section are recorded in
    ``CudaTargets.errors`` (the entries read before the error are kept); a file that is
    neither ELF nor fatbin raises :class:`BinaryFormatError`.
    """
    f.seek(0)
    head = f.read(4)
    if is_fatbin(head):
        regions: list[tuple[int, int | None, str]] = [(0, None, name)]
    elif is_elf(head):
        regions = [
            (s.offset, s.size, f"{name}:{s.name}")
            for s in find_gpu_sections(f, name=name)
            if s.kind == "cuda-fatbin"
        ]
    else:
        raise BinaryFormatError(f"{name}: neither an ELF file nor a fatbin")
    entries: list[FatbinEntry] = []
    errors: list[str] = []
    for off, size, label in regions:
        try:
            entries.extend(iter_fatbin(f, off, size, name=label))
        except BinaryFormatError as exc:
            errors.append(str(exc))
    return entries, cuda_targets(entries, errors)
