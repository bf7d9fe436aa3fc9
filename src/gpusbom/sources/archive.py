"""Images inside an outer tar: ``docker-archive:PATH`` and ``oci-archive:PATH``.

Two ways to read the outer tar, both through our own parser (``fsview.tarstream``):

* seekable and uncompressed (a plain file): one pass over the headers only, then the
  small JSON members are read with a size cap and each layer is streamed through
  ``read_layer`` from a bounded slice of the file;
* anything else (a gzip/zstd-compressed archive, the Docker Engine's export stream):
  one pass in which every member that is not small JSON is speculatively streamed
  through ``read_layer``; once the stream ends, the manifest says which of those
  results are the image's layers, and in which order.

Links between members (``docker save`` links duplicate layers) are resolved inside the
archive only; a link to an absolute path or out of the archive is refused.
"""

from __future__ import annotations

import io
import os
import posixpath
from dataclasses import dataclass
from typing import BinaryIO, ClassVar

from ..errors import (
    DigestMismatchError,
    GpusbomError,
    ImageFormatError,
    LayerError,
    SourceNotFoundError,
    UnsafeArchiveError,
)
from ..fsview.decompress import BlobSpan, open_decompressed
from ..fsview.layer import read_layer
from ..fsview.tarstream import iter_tar
from ..fsview.types import EntryKind, LayerIndex, Limits
from .base import ReadContext, Source, SourceResult
from .image import (
    MAX_JSON_BYTES,
    BlobStore,
    LayerPlan,
    check_platform,
    digest_from_name,
    make_target,
    plan_docker,
    plan_oci,
    read_layers,
    stream_layer,
    with_layer_index,
)

#: in the streaming pass, members up to this size are simply kept in memory
SMALL_MEMBER = 64 << 10

_GZIP = b"\x1f\x8b"
_ZSTD = b"\x28\xb5\x2f\xfd"
_OTHER_COMPRESSION = {b"BZh": "bzip2", b"\xfd7zXZ\x00": "xz"}


@dataclass
class _Member:
    """One member of a tar archive, as the index of an archive records it."""

    name: str
    kind: EntryKind
    size: int = 0
    linkname: str | None = None
    offset: int | None = None  # seekable pass: where the data starts
    data: bytes | None = None  # streaming pass: small members kept in memory
    layer: LayerIndex | None = None  # streaming pass: speculative read_layer result
    error: GpusbomError | None = None  # ... or why it failed


def _norm(name: str) -> str | None:
    """Archive member name -> key ("./a//b" -> "a/b"); None for names outside the archive."""
    name = name.lstrip("/")
    if not name:
        return None
    norm = posixpath.normpath(name)
    if norm in (".", "..") or norm.startswith("../"):
        return None
    return norm


class _TarStore(BlobStore):
    """Members of an outer tar, addressed by normalised name, links resolved inside it."""

    def __init__(self, label: str, limits: Limits) -> None:
        self.label = label
        self.limits = limits
        self.members: dict[str, _Member] = {}

    def _resolve(self, path: str) -> str:
        parts = [p for p in path.split("/") if p not in ("", ".")]
        done: list[str] = []
        hops = 0
        while parts:
            comp = parts.pop(0)
            if comp == "..":
                if not done:
                    raise UnsafeArchiveError(
                        f"{self.label}: a link on the way to {path} points out of the archive"
                    )
                done.pop()
                continue
            cur = "/".join([*done, comp])
            m = self.members.get(cur)
            if m is not None and m.kind in (EntryKind.SYMLINK, EntryKind.HARDLINK):
                hops += 1
                if hops > self.limits.max_symlink_hops:
                    raise UnsafeArchiveError(f"{self.label}: too many levels of links at {cur}")
                target = m.linkname or ""
                kind = "symlink" if m.kind is EntryKind.SYMLINK else "hard link"
                if target.startswith("/"):
                    raise UnsafeArchiveError(
                        f"{self.label}: {cur} is a {kind} to the absolute path {target!r}; "
                        "refusing to follow it"
                    )
                if m.kind is EntryKind.HARDLINK:  # hard link names are archive paths
                    done = []
                parts = target.split("/") + parts
                continue
            done.append(comp)
        return "/".join(done)

    def _file(self, path: str) -> _Member | None:
        m = self.members.get(self._resolve(path))
        return m if m is not None and m.kind is EntryKind.FILE else None

    def exists(self, path: str) -> bool:
        return self._file(path) is not None

    def _need(self, path: str, what: str) -> _Member:
        m = self._file(path)
        if m is None:
            raise ImageFormatError(f"{self.label}: {what} ({path}) is missing from the archive")
        if m.size > MAX_JSON_BYTES:
            raise ImageFormatError(
                f"{self.label}: {what} ({path}) is {m.size} bytes; image metadata is "
                f"limited to {MAX_JSON_BYTES} bytes"
            )
        return m


def _has_fileno(f: BinaryIO) -> bool:
    try:
        f.fileno()
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return False
    return True


class _SliceReader(io.RawIOBase):
    """``size`` bytes of ``f`` from ``offset``. The file is shared by parallel layer
    readers, so a real file is read with ``os.preadv`` (no shared seek position)."""

    def __init__(self, f: BinaryIO, offset: int, size: int, where: str) -> None:
        self._f, self._offset, self._size, self._pos, self._where = f, offset, size, 0, where
        try:
            self._fd: int | None = f.fileno() if hasattr(os, "preadv") else None
        except (OSError, ValueError, io.UnsupportedOperation):
            self._fd = None

    def readable(self) -> bool:
        return True

    def blob_span(self) -> BlobSpan | None:
        """Where the slice lies, for readers that ``pread`` it on several threads
        (``fsview.decompress``); None once read from or without a descriptor."""
        if self._fd is None or self._pos:
            return None
        return BlobSpan(self._fd, self._offset, self._size)

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        n = min(len(b), self._size - self._pos)
        if n <= 0:
            return 0
        if self._fd is not None:
            got = os.preadv(self._fd, [memoryview(b)[:n]], self._offset + self._pos)
        else:
            self._f.seek(self._offset + self._pos)
            got = self._f.readinto(memoryview(b)[:n])  # type: ignore[attr-defined]
        if not got:
            raise LayerError(f"{self._where}: unexpected end of archive")
        self._pos += got
        return int(got)


class SeekableTarStore(_TarStore):
    def __init__(self, f: BinaryIO, label: str, limits: Limits) -> None:
        # layers are read with os.preadv from a shared descriptor: safe in parallel
        self.parallel_safe = hasattr(os, "preadv") and _has_fileno(f)
        # and in forked layer workers: preadv on the inherited descriptor moves no offset
        self.fork_safe = self.parallel_safe
        super().__init__(label, limits)
        self._f = f
        for m in iter_tar(f, limits=limits, name=label):
            key = _norm(m.name)
            if key is None:
                continue
            if m.kind is EntryKind.FILE and m.data_offset is None:
                raise LayerError(f"{label}: cannot locate member data of {m.name}")
            self.members[key] = _Member(
                name=key, kind=m.kind, size=m.size, linkname=m.linkname, offset=m.data_offset
            )

    def read_small(self, path: str, what: str) -> bytes:
        m = self._need(path, what)
        assert m.offset is not None  # noqa: S101 - type narrowing of an invariant
        self._f.seek(m.offset)
        data = self._f.read(m.size)
        if len(data) != m.size:
            raise LayerError(f"{self.label}: {what} ({path}) is truncated")
        return data

    def read_layer(self, path: str, layer: LayerPlan, total: int, ctx: ReadContext) -> LayerIndex:
        m = self._file(path)
        if m is None or m.offset is None:
            raise ImageFormatError(f"{self.label}: layer {layer.index} ({path}) is missing")
        where = f"{self.label}: {path}"
        raw = io.BufferedReader(_SliceReader(self._f, m.offset, m.size, where), 1 << 20)
        return stream_layer(raw, layer, ctx, where, m.size, total=total, what=path)


class _MemberStream(io.RawIOBase):
    """A tar member's data as a file, with bytes already peeked put back in front."""

    def __init__(self, member: object, head: bytes) -> None:
        self._m = member
        self._head = head

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        if self._head:
            n = min(len(b), len(self._head))
            b[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        data = self._m.read(len(b))  # type: ignore[attr-defined]
        b[: len(data)] = data
        return len(data)


class StreamingTarStore(_TarStore):
    """One pass over a non-seekable outer tar; layers are read before we know they are."""

    def __init__(self, raw: BinaryIO | io.IOBase, label: str, ctx: ReadContext) -> None:
        super().__init__(label, ctx.limits)
        self._ctx = ctx
        n = 0
        for m in iter_tar(raw, limits=ctx.limits, name=label):
            key = _norm(m.name)
            if key is None:
                continue
            rec = _Member(name=key, kind=m.kind, size=m.size, linkname=m.linkname)
            self.members[key] = rec
            if m.kind is not EntryKind.FILE:
                continue
            if m.size <= SMALL_MEMBER:
                rec.data = self._read_all(m, m.size, key)
                continue
            head = m.read(64)
            if head.lstrip()[:1] in (b"{", b"[") and m.size <= MAX_JSON_BYTES:
                rec.data = head + self._read_all(m, m.size - len(head), key)
                continue
            # Not metadata: perhaps a layer. Read it now; the manifest decides later.
            where = f"{label}: {key}"
            digest = digest_from_name(key) if key.startswith("blobs/sha256/") else None
            ctx.progress.layer_started(n, 0, m.size, key)
            try:
                rec.layer = read_layer(
                    io.BufferedReader(_MemberStream(m, head), 1 << 20),
                    index=n,
                    name=where,
                    matcher=ctx.matcher,
                    spool=ctx.spool,
                    limits=ctx.limits,
                    progress=ctx.progress,
                    expected_digest=digest,
                    size=m.size,
                )
            except GpusbomError as e:
                rec.error = e
            ctx.progress.layer_done(n)
            n += 1

    def _read_all(self, m: object, size: int, key: str) -> bytes:
        data = m.read()  # type: ignore[attr-defined]
        if len(data) != size:
            raise LayerError(f"{self.label}: {key} is truncated")
        return bytes(data)

    def read_small(self, path: str, what: str) -> bytes:
        m = self._need(path, what)
        if m.data is None:
            raise ImageFormatError(f"{self.label}: {what} ({path}) is not JSON")
        return m.data

    def read_layer(self, path: str, layer: LayerPlan, total: int, ctx: ReadContext) -> LayerIndex:
        m = self._file(path)
        if m is None:
            raise ImageFormatError(f"{self.label}: layer {layer.index} ({path}) is missing")
        if m.error is not None:
            raise m.error
        if m.layer is not None:
            got = m.layer.ref.digest
            if layer.digest is not None and got is not None and got != layer.digest:
                raise DigestMismatchError(
                    f"{self.label}: layer {layer.index} ({path}): digest mismatch: expected "
                    f"{layer.digest}, got {got}"
                )
            return with_layer_index(m.layer, layer.index)
        assert m.data is not None  # noqa: S101 - invariant; a small member: read it now
        where = f"{self.label}: {path}"
        return stream_layer(io.BytesIO(m.data), layer, ctx, where, m.size, total=total, what=path)


def _compression(head: bytes) -> str | None:
    if head.startswith(_GZIP):
        return "gzip"
    if head.startswith(_ZSTD):
        return "zstd"
    for magic, name in _OTHER_COMPRESSION.items():
        if head.startswith(magic):
            return name
    return None


def open_store(f: BinaryIO, label: str, ctx: ReadContext) -> _TarStore:
    """The right store for an outer tar: seekable when we can, one streaming pass otherwise."""
    seekable = f.seekable()
    if seekable:
        head = f.read(8)
        f.seek(0)
        comp = _compression(head)
        if comp in ("bzip2", "xz"):
            raise ImageFormatError(f"{label}: {comp}-compressed archives are not supported")
        if comp is None:
            return SeekableTarStore(f, label, ctx.limits)
        return StreamingTarStore(open_decompressed(f, label), label, ctx)
    return StreamingTarStore(open_decompressed(f, label), label, ctx)


def split_selector(location: str) -> tuple[str, str | None]:
    """``PATH[:SELECTOR]`` where PATH may itself hold colons: the longest existing prefix wins."""
    if os.path.lexists(location) or ":" not in location:
        return location, None
    cut = len(location)
    while (cut := location.rfind(":", 0, cut)) > 0:
        if os.path.lexists(location[:cut]):
            return location[:cut], location[cut + 1 :] or None
    return location, None


def sniff_archive(path: str, limits: Limits) -> str | None:
    """'docker-archive', 'oci-archive', 'compressed' (decided when read) or None."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            if _compression(head) is not None:
                return "compressed"
            f.seek(0)
            names: set[str] = set()
            for m in iter_tar(f, limits=limits, name=path):
                key = _norm(m.name)
                if key is not None:
                    names.add(key)
    except (GpusbomError, OSError):
        return None
    if "manifest.json" in names:
        return "docker-archive"
    if "index.json" in names and "oci-layout" in names:
        return "oci-archive"
    return None


class _ArchiveSource(Source):
    #: the layout expected inside; None: whichever is there (a bare compressed file)
    expect: ClassVar[str | None] = None

    def read(self, ctx: ReadContext) -> SourceResult:
        path, selector = split_selector(self.location)
        label = f"{self.scheme}:{path}" if self.reference.startswith(self.scheme + ":") else path
        try:
            f = open(path, "rb")  # noqa: SIM115 - closed below
        except FileNotFoundError:
            raise SourceNotFoundError(f"{label}: no such file") from None
        except IsADirectoryError:
            hint = " (use oci:DIR or dir:DIR)"
            raise SourceNotFoundError(f"{label}: is a directory, not an archive{hint}") from None
        except OSError as e:
            raise SourceNotFoundError(f"{label}: cannot open: {e.strerror}") from None
        with f:
            store = open_store(f, label, ctx)
            fmt = self.expect
            if fmt is None:
                if store.exists("manifest.json"):
                    fmt = "docker-archive"
                elif store.exists("index.json"):
                    fmt = "oci-archive"
                else:
                    raise ImageFormatError(
                        f"{label}: not an image archive (no manifest.json or index.json)"
                    )
            if fmt == "docker-archive":
                plan = plan_docker(store, ctx, selector)
            else:
                if not store.exists("oci-layout") and not store.exists("index.json"):
                    raise ImageFormatError(f"{label}: not an OCI archive (no index.json)")
                plan = plan_oci(store, ctx, selector)
            check_platform(plan, ctx, label)
            layers = read_layers(store, plan, ctx)
            store.close()
        return SourceResult(target=make_target(self.reference, fmt, plan, layers), layers=layers)


class DockerArchiveSource(_ArchiveSource):
    """``docker-archive:PATH[:NAME:TAG|:@N]``: a ``docker save`` tar (legacy or Docker 25+)."""

    scheme = "docker-archive"
    expect = "docker-archive"


class OciArchiveSource(_ArchiveSource):
    """``oci-archive:PATH[:TAG]``: a tar of an OCI image layout."""

    scheme = "oci-archive"
    expect = "oci-archive"


class AutoArchiveSource(_ArchiveSource):
    """A bare path to a compressed archive: the layout inside is found while reading."""

    scheme = "docker-archive"
    expect = None
