"""Decode clang offload bundles (HIP ``.hip_fatbin`` sections and standalone bundle files).

Uncompressed bundle (little endian)::

    char magic[24] = "__CLANG_OFFLOAD_BUNDLE__"
    u64  count
    count x { u64 offset; u64 size; u64 id_len; char id[id_len]; }   offsets from bundle start

Compressed bundle ("CCOB")::

    char magic[4] = "CCOB"; u16 version; u16 method (0 zlib, 1 zstd)
    v1: u32 uncompressed_size; u64 hash                                   (20 bytes)
    v2: u32 total_size; u32 uncompressed_size; u64 hash                   (24 bytes)
    v3: u64 total_size; u64 uncompressed_size; u64 hash                   (32 bytes)
    then the compressed uncompressed-bundle; total_size counts the header.

A section may hold several bundles one after another (zero padded): each is bounded by its
own size fields (the largest ``offset + size`` of its entries, or ``total_size``); v1
compressed bundles have no size and end where the next bundle magic starts.

Only what is needed to list target ids is read: the uncompressed header, or the first
decompressed bytes of a compressed bundle (streamed with a bounded output size).

Target ids look like ``hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-``: ``<kind>-<triple>-<target>``
where the target is a processor and optional ``:feature+``/``:feature-`` flags.

One module over 500 lines because it is one parser: the bundle layouts (plain, CCOB v1-v3)
and their bounds checks read the same byte buffer and share the entry decoding.
"""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO, cast

import zstandard

from gpusbom.binary.elf import BinaryFormatError, find_gpu_sections, is_elf, read_at

__all__ = [
    "BUNDLE_MAGIC",
    "CCOB_MAGIC",
    "MAX_BUNDLE_ENTRIES",
    "BundleEntry",
    "CcobHeader",
    "HipTargets",
    "OffloadBundle",
    "TargetId",
    "ccob_entries",
    "ccob_header_size",
    "hip_targets",
    "is_bundle",
    "iter_bundles",
    "list_bundles",
    "parse_bundle_header",
    "parse_ccob_header",
    "parse_target_id",
    "scan_hip",
]

BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
CCOB_MAGIC = b"CCOB"

#: Safety caps: entries per bundle, bundles per region, id length, decompressed header bytes.
MAX_BUNDLE_ENTRIES = 4096
MAX_BUNDLES = 1 << 16
MAX_ID_LEN = 4096
MAX_HEADER_BYTES = 4 << 20
_CHUNK = 1 << 16
_ZSTD_MAX_WINDOW = 1 << 27
_METHODS = {0: "zlib", 1: "zstd"}
_CCOB_HEADER = {1: 20, 2: 24, 3: 32}


@dataclass(frozen=True)
class TargetId:
    """A parsed bundle entry id."""

    raw: str
    kind: str  # "hipv4", "hip", "host", "openmp", ...
    triple: str  # "amdgcn-amd-amdhsa-" / "x86_64-unknown-linux"
    target: str  # "gfx90a:xnack-" or "" (host)

    @property
    def processor(self) -> str:
        return self.target.split(":", 1)[0]

    @property
    def features(self) -> tuple[tuple[str, str], ...]:
        """``(("sramecc", "+"), ("xnack", "-"))`` for ``gfx90a:sramecc+:xnack-``."""
        out = []
        for feat in self.target.split(":")[1:]:
            if feat and feat[-1] in "+-":
                out.append((feat[:-1], feat[-1]))
            elif feat:
                out.append((feat, ""))
        return tuple(out)

    @property
    def is_host(self) -> bool:
        return self.kind == "host"

    @property
    def is_gpu(self) -> bool:
        return self.processor.startswith("gfx") or self.triple.startswith(("amdgcn", "nvptx"))


def parse_target_id(raw: str) -> TargetId:
    """Split ``<kind>-<triple>-<target id>`` (never raises)."""
    kind, _, rest = raw.partition("-")
    parts = rest.split("-")
    # the triple has 3 or 4 components; the target id (if any) follows
    if len(parts) >= 5:
        triple, target = "-".join(parts[:4]), "-".join(parts[4:])
    elif len(parts) == 4 and (parts[3].startswith(("gfx", "sm_")) or ":" in parts[3]):
        triple, target = "-".join(parts[:3]), parts[3]
    else:
        triple, target = rest, ""
    return TargetId(raw=raw, kind=kind, triple=triple, target=target)


@dataclass(frozen=True)
class BundleEntry:
    id: str
    offset: (
        int  # absolute in the file for uncompressed bundles, else inside the decompressed bundle
    )
    size: int

    @property
    def target(self) -> TargetId:
        return parse_target_id(self.id)


@dataclass(frozen=True)
class OffloadBundle:
    offset: int  # absolute offset of the bundle (or CCOB header) in the file
    size: int  # bytes it occupies in the file
    entries: tuple[BundleEntry, ...]
    compression: str = "none"  # "none", "zlib", "zstd"
    ccob_version: int | None = None
    uncompressed_size: int | None = None
    hash: int | None = None

    @property
    def target_ids(self) -> tuple[str, ...]:
        return tuple(e.id for e in self.entries)


@dataclass(frozen=True)
class HipTargets:
    """Summary of the offload bundles of a binary.

    ``gfx``: sorted target ids of GPU entries without kind/triple (``gfx90a:xnack-``);
    ``processors``: sorted processors (``gfx90a``); ``target_ids``: sorted raw ids (host too);
    ``compressed``: compression methods seen; ``errors``: decoding problems (partial results).
    """

    gfx: tuple[str, ...] = ()
    processors: tuple[str, ...] = ()
    target_ids: tuple[str, ...] = ()
    compressed: tuple[str, ...] = ()
    bundles: int = 0
    errors: tuple[str, ...] = field(default_factory=tuple)

    @property
    def empty(self) -> bool:
        return not self.target_ids


def hip_targets(
    ids: Iterable[str],
    *,
    bundles: int = 0,
    compressed: Iterable[str] = (),
    errors: Iterable[str] = (),
) -> HipTargets:
    raw = sorted(set(ids))
    parsed = [parse_target_id(r) for r in raw]
    gpu = [p for p in parsed if p.is_gpu and p.target]
    return HipTargets(
        gfx=tuple(sorted({p.target for p in gpu})),
        processors=tuple(sorted({p.processor for p in gpu})),
        target_ids=tuple(raw),
        compressed=tuple(sorted(set(compressed))),
        bundles=bundles,
        errors=tuple(errors),
    )


def is_bundle(head: bytes) -> bool:
    """True when ``head`` starts an (uncompressed or compressed) offload bundle."""
    return head.startswith((BUNDLE_MAGIC, CCOB_MAGIC))


# --- uncompressed bundle header ---------------------------------------------------------------


def _parse_entries(
    read: Callable[[int, int], bytes], limit: int, *, name: str, base: int
) -> tuple[list[BundleEntry], int]:
    """Parse an uncompressed bundle header via ``read(off, n)`` (offsets relative to the bundle).

    ``limit`` is the number of bytes the bundle may span. Returns entries (offsets + ``base``)
    and the bundle's extent (largest end of header or entry).
    """
    head = read(0, 32)
    if head[:24] != BUNDLE_MAGIC:
        raise BinaryFormatError(f"{name}: no offload bundle magic at {base:#x}")
    (count,) = struct.unpack_from("<Q", head, 24)
    if count > MAX_BUNDLE_ENTRIES:
        raise BinaryFormatError(f"{name}: offload bundle at {base:#x} claims {count} entries")
    pos = 32
    extent = pos
    entries = []
    for _ in range(count):
        off, size, id_len = struct.unpack("<QQQ", read(pos, 24))
        if id_len > MAX_ID_LEN:
            raise BinaryFormatError(f"{name}: bundle entry id of {id_len} bytes at {base + pos:#x}")
        raw_id = read(pos + 24, id_len)
        pos += 24 + id_len
        if off > limit or size > limit - off:
            raise BinaryFormatError(
                f"{name}: bundle entry {raw_id[:64]!r} at {base:#x} lies outside the bundle"
            )
        extent = max(extent, pos, off + size)
        entries.append(BundleEntry(raw_id.decode("utf-8", errors="replace"), base + off, size))
    return entries, extent


class _Reader:
    """Bounded random reads on a region of a file, relative to its start."""

    def __init__(self, f: BinaryIO, start: int, limit: int, name: str) -> None:
        self.f, self.start, self.limit, self.name = f, start, limit, name

    def __call__(self, off: int, n: int) -> bytes:
        if off + n > self.limit:
            raise BinaryFormatError(
                f"{self.name}: offload bundle header at {self.start:#x} is truncated"
            )
        return read_at(self.f, self.start + off, n, name=self.name, what="offload bundle header")


class _Slice(io.RawIOBase):
    """Read-only view of ``f[start:start+size]`` for streaming decompressors."""

    def __init__(self, f: BinaryIO, start: int, size: int) -> None:
        self.f, self.pos, self.end = f, start, start + size

    def readable(self) -> bool:
        return True

    def readinto(self, buf: bytearray | memoryview) -> int:  # type: ignore[override]
        n = min(len(buf), self.end - self.pos, _CHUNK)
        if n <= 0:
            return 0
        self.f.seek(self.pos)
        data = self.f.read(n)
        buf[: len(data)] = data
        self.pos += len(data)
        return len(data)


class _Prefix:
    """Decompressed prefix of a compressed bundle, grown on demand up to a cap."""

    def __init__(
        self, f: BinaryIO, start: int, size: int, method: str, out_limit: int, name: str
    ) -> None:
        self.buf = bytearray()
        self.cap = min(out_limit, MAX_HEADER_BYTES)
        self.name = name
        self.done = False
        src = _Slice(f, start, size)
        self._reader: zstandard.ZstdDecompressionReader | None = None
        self._zlib: Any = None
        if method == "zstd":
            dctx = zstandard.ZstdDecompressor(max_window_size=_ZSTD_MAX_WINDOW)
            self._reader = dctx.stream_reader(
                cast(BinaryIO, src), read_size=_CHUNK, read_across_frames=True
            )
        else:
            self._zlib = zlib.decompressobj()
            self._src = src

    def _grow(self, want: int) -> None:
        try:
            while len(self.buf) < want and not self.done:
                need = min(_CHUNK, self.cap - len(self.buf))
                if need <= 0:
                    break
                if self._reader is not None:
                    data = self._reader.read(need)
                    if not data:
                        self.done = True
                    self.buf += data
                else:
                    assert self._zlib is not None  # noqa: S101 - type narrowing of an invariant
                    pending = self._zlib.unconsumed_tail
                    if not pending:
                        pending = self._src.read(_CHUNK) or b""
                        if not pending:
                            self.done = True
                            self.buf += self._zlib.flush()[:need]
                            continue
                    self.buf += self._zlib.decompress(pending, need)
                    if self._zlib.eof:
                        self.done = True
        except (zlib.error, zstandard.ZstdError) as exc:
            raise BinaryFormatError(
                f"{self.name}: cannot decompress offload bundle: {exc}"
            ) from None

    def __call__(self, off: int, n: int) -> bytes:
        if off + n > self.cap:
            raise BinaryFormatError(
                f"{self.name}: compressed bundle header exceeds {self.cap} bytes"
            )
        self._grow(off + n)
        if off + n > len(self.buf):
            raise BinaryFormatError(f"{self.name}: compressed offload bundle is truncated")
        return bytes(self.buf[off : off + n])


def _find_ccob(f: BinaryIO, pos: int, end: int) -> int:
    """Offset of the next ``CCOB`` magic in [pos, end), or ``end`` (how LLVM bounds v1
    compressed bundles, which carry no size; a plain bundle magic may occur inside compressed
    data as raw literals, so only ``CCOB`` is looked for)."""
    keep = len(CCOB_MAGIC) - 1
    while pos < end:
        f.seek(pos)
        chunk = f.read(min(_CHUNK * 16, end - pos))
        if not chunk:
            return end
        hit = chunk.find(CCOB_MAGIC)
        if hit >= 0:
            return pos + hit
        if pos + len(chunk) >= end:
            return end
        pos += max(1, len(chunk) - keep)
    return end


def _skip_zeros(f: BinaryIO, pos: int, end: int) -> int:
    while pos < end:
        f.seek(pos)
        chunk = f.read(min(_CHUNK, end - pos))
        if not chunk:
            return end
        stripped = chunk.lstrip(b"\0")
        if stripped:
            return pos + len(chunk) - len(stripped)
        pos += len(chunk)
    return end


@dataclass(frozen=True)
class CcobHeader:
    """A compressed bundle header. ``total_size`` is None for version 1 (no size field)."""

    version: int
    method: str  # "zlib" or "zstd"
    header_size: int
    total_size: int | None
    uncompressed_size: int
    hash: int


def ccob_header_size(head: bytes | bytearray) -> int | None:
    """Header size for the version in ``head`` (8+ bytes from the ``CCOB`` magic), or None."""
    if len(head) < 8:
        return None
    (version,) = struct.unpack_from("<H", head, 4)
    return _CCOB_HEADER.get(version)


def parse_ccob_header(head: bytes, *, name: str = "<bundle>", pos: int = 0) -> CcobHeader:
    """Decode a compressed bundle header (``head`` starts at the magic and holds at least the
    header size of its version); raises :class:`BinaryFormatError`."""
    if len(head) < 8 or not head.startswith(CCOB_MAGIC):
        raise BinaryFormatError(f"{name}: compressed bundle header at {pos:#x} is truncated")
    version, method_code = struct.unpack_from("<HH", head, 4)
    hsize = _CCOB_HEADER.get(version)
    if hsize is None:
        raise BinaryFormatError(f"{name}: compressed bundle version {version} at {pos:#x}")
    method = _METHODS.get(method_code)
    if method is None:
        raise BinaryFormatError(f"{name}: compression method {method_code} at {pos:#x}")
    if len(head) < hsize:
        raise BinaryFormatError(f"{name}: compressed bundle header at {pos:#x} is truncated")
    total: int | None
    if version == 1:
        usize, digest = struct.unpack_from("<IQ", head, 8)
        total = None
    elif version == 2:
        total, usize, digest = struct.unpack_from("<IIQ", head, 8)
    else:
        total, usize, digest = struct.unpack_from("<QQQ", head, 8)
    return CcobHeader(version, method, hsize, total, usize, digest)


def parse_bundle_header(
    read: Callable[[int, int], bytes], limit: int, *, name: str, base: int
) -> tuple[list[BundleEntry], int]:
    """Parse an uncompressed bundle header through ``read(off, n)`` (offsets relative to the
    bundle start; ``limit`` = bytes the bundle may span). Returns (entries, extent)."""
    return _parse_entries(read, limit, name=name, base=base)


def ccob_entries(
    compressed: bytes, method: str, uncompressed_size: int, *, name: str = "<bundle>"
) -> list[BundleEntry]:
    """Entries of a compressed bundle from (a prefix of) its compressed bytes; decompresses
    only the header, bounded like :func:`iter_bundles`. Raises :class:`BinaryFormatError`."""
    src = io.BytesIO(compressed)
    prefix = _Prefix(src, 0, len(compressed), method, uncompressed_size, name)
    entries, _extent = _parse_entries(prefix, uncompressed_size, name=name, base=0)
    return entries


def _read_ccob(f: BinaryIO, pos: int, end: int, name: str) -> OffloadBundle:
    head = read_at(f, pos, min(32, end - pos), name=name, what="compressed bundle header")
    h = parse_ccob_header(head, name=name, pos=pos)
    hsize = h.header_size
    total = _find_ccob(f, pos + hsize, end) - pos if h.total_size is None else h.total_size
    if total < hsize or total > end - pos:
        raise BinaryFormatError(f"{name}: compressed bundle at {pos:#x} has size {total}")
    prefix = _Prefix(f, pos + hsize, total - hsize, h.method, h.uncompressed_size, name)
    entries, _extent = _parse_entries(prefix, h.uncompressed_size, name=name, base=0)
    return OffloadBundle(
        offset=pos,
        size=total,
        entries=tuple(entries),
        compression=h.method,
        ccob_version=h.version,
        uncompressed_size=h.uncompressed_size,
        hash=h.hash,
    )


def iter_bundles(
    f: BinaryIO, offset: int = 0, size: int | None = None, *, name: str = "<bundle>"
) -> Iterator[OffloadBundle]:
    """Yield the offload bundles in ``f[offset:offset+size]`` (``None``: to the end of file).

    Raises :class:`BinaryFormatError` (after yielding the bundles read so far) on malformed
    input or when a safety cap is exceeded.
    """
    file_end = f.seek(0, io.SEEK_END)
    if size is None:
        size = max(0, file_end - offset)
    if offset < 0 or size < 0 or offset + size > file_end:
        raise BinaryFormatError(f"{name}: bundle region {offset:#x}+{size:#x} is outside the file")
    end = offset + size
    pos = offset
    count = 0
    while pos < end:
        pos = _skip_zeros(f, pos, end)
        if pos >= end:
            return
        magic = read_at(f, pos, min(len(BUNDLE_MAGIC), end - pos), name=name, what="bundle magic")
        count += 1
        if count > MAX_BUNDLES:
            raise BinaryFormatError(f"{name}: more than {MAX_BUNDLES} offload bundles")
        if magic == BUNDLE_MAGIC:
            entries, extent = _parse_entries(
                _Reader(f, pos, end - pos, name), end - pos, name=name, base=pos
            )
            bundle = OffloadBundle(offset=pos, size=extent, entries=tuple(entries))
        elif magic.startswith(CCOB_MAGIC):
            bundle = _read_ccob(f, pos, end, name)
        else:
            raise BinaryFormatError(f"{name}: no offload bundle at {pos:#x}")
        yield bundle
        pos += max(bundle.size, 1)


def list_bundles(
    f: BinaryIO, offset: int = 0, size: int | None = None, *, name: str = "<bundle>"
) -> list[OffloadBundle]:
    return list(iter_bundles(f, offset, size, name=name))


def scan_hip(f: BinaryIO, *, name: str = "<binary>") -> tuple[list[OffloadBundle], HipTargets]:
    """Decode the offload bundles of an ELF file (``.hip_fatbin`` and
    ``__CLANG_OFFLOAD_BUNDLE__*`` sections) or of a standalone bundle file.

    Per-section errors are recorded in ``HipTargets.errors``; a file that is neither ELF nor
    a bundle raises :class:`BinaryFormatError`.
    """
    f.seek(0)
    head = f.read(len(BUNDLE_MAGIC))
    bundles: list[OffloadBundle] = []
    errors: list[str] = []
    ids: list[str] = []
    if is_bundle(head):
        regions: list[tuple[int, int | None, str]] = [(0, None, name)]
    elif is_elf(head):
        regions = []
        for sec in find_gpu_sections(f, name=name):
            if sec.kind == "hip-fatbin":
                regions.append((sec.offset, sec.size, f"{name}:{sec.name}"))
            elif sec.kind == "clang-offload-section" and sec.target_id:
                ids.append(sec.target_id)
    else:
        raise BinaryFormatError(f"{name}: neither an ELF file nor an offload bundle")
    for off, size, label in regions:
        try:
            bundles.extend(iter_bundles(f, off, size, name=label))
        except BinaryFormatError as exc:
            errors.append(str(exc))
    ids.extend(i for b in bundles for i in b.target_ids)
    summary = hip_targets(
        ids,
        bundles=len(bundles),
        compressed=[b.compression for b in bundles if b.compression != "none"],
        errors=errors,
    )
    return bundles, summary
