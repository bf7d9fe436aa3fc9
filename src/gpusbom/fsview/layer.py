"""Stream one layer blob once and index what the scan needs.

See ``read_layer``. Memory stays bounded on layers with millions of files:
unmatched regular files are only counted (plus an 8-byte path hash that lets
``squash`` see a file replacing a lower directory or link); directories,
links and matched files are kept, up to ``Limits.max_kept_records``.
"""

from __future__ import annotations

import contextlib
import os
from array import array
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from typing import Any, BinaryIO, Protocol

from ..errors import DigestMismatchError, LayerError, UnsafeArchiveError
from ..model import LayerRef
from .decompress import open_decompressed
from .offload import OFFLOAD_MIN, Job, Offload
from .offload import enabled as offload_enabled
from .offload import threads_for as analysis_threads_for
from .spec import AnalyzerFactory, PathMatcher
from .tarstream import iter_tar
from .types import (
    ContentRef,
    Entry,
    EntryKind,
    LayerIndex,
    Limits,
    ProgressSink,
    Spool,
    StreamAnalyzer,
)

SPOOL_CHUNK = 1 << 20
STREAM_CHUNK = 4 << 20  # member data handed to stream analyzers per call
WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"

_FILE = EntryKind.FILE
_DIR = EntryKind.DIR
_SYMLINK = EntryKind.SYMLINK
_HARDLINK = EntryKind.HARDLINK


def shadow_salt() -> int:
    """Identifies this process's str hashing (see ``LayerIndex.shadow_hashes``)."""
    return hash("gpusbom-shadow")


def _shadow_hash(limits: Limits) -> Callable[[str], int]:
    if limits.shadow_key is None:
        return hash
    from .layercache import keyed_shadow_hash

    return keyed_shadow_hash(limits.shadow_key)


def layer_shadow_salt(limits: Limits) -> int:
    """The ``LayerIndex.shadow_salt`` of layers read with ``limits``."""
    if limits.shadow_key is None:
        return shadow_salt()
    from .layercache import keyed_shadow_salt

    return keyed_shadow_salt(limits.shadow_key)


def normalize_path(name: str, layer: str, what: str = "entry") -> str:
    """``./usr//lib/./x/`` -> ``/usr/lib/x``; ``..`` above the root raises UnsafeArchiveError."""
    s = name
    s = s.removeprefix("./")
    s = s.strip("/")
    # fast path: no "." / ".." component (each would start the name or follow a "/")
    if "/." not in s and "//" not in s and not s.startswith("."):
        return "/" + s
    parts: list[str] = []
    for p in s.split("/"):
        if p == "" or p == ".":
            continue
        if p == "..":
            if not parts:
                raise UnsafeArchiveError(f"{layer}: {what} {name!r} escapes the image root")
            parts.pop()
        else:
            parts.append(p)
    return "/" + "/".join(parts)


def _parent(path: str) -> str:
    i = path.rfind("/")
    return path[:i] if i > 0 else "/"


def _digest_alg(expected: str | None) -> str:
    if expected is None:
        return "sha256"
    alg, sep, _ = expected.partition(":")
    if not sep:
        raise LayerError(f"malformed digest {expected!r}")
    return alg


class Analyzers:
    """The stream analyzers of one file: fed together, closed into one merged result.

    An analyzer that raises is dropped (its error goes into the result) so that one bad
    analyzer cannot fail a layer."""

    __slots__ = ("_live", "_errors")

    def __init__(self, factories: Sequence[AnalyzerFactory]) -> None:
        self._live: list[StreamAnalyzer] = []
        self._errors: list[str] = []
        for f in factories:
            try:
                self._live.append(f())
            except Exception as exc:  # noqa: BLE001 - isolation
                self._errors.append(f"{getattr(f, '__name__', f)!s}: {exc!r}")

    @property
    def done(self) -> bool:
        """Every analyzer said more data cannot change its result."""
        return all(getattr(a, "done", False) for a in self._live)

    def feed(self, chunk: bytes) -> None:
        for a in self._live:
            try:
                a.feed(chunk)
            except Exception as exc:  # noqa: BLE001 - isolation
                self._errors.append(f"{type(a).__name__}: {exc!r}")
                self._live = [x for x in self._live if x is not a]

    def close(self, *, defer: bool = False) -> dict[str, Any] | None:
        """The merged result. With ``defer``, an analyzer that can (``can_defer``) may leave
        a value as a ``Future`` still being computed (a digest whose last bytes are being
        hashed): :func:`resolve_deferred` waits for them."""
        out: dict[str, Any] = {}
        for a in self._live:
            try:
                # can_defer: its close takes defer (not part of the StreamAnalyzer protocol)
                r = a.close(defer=True) if defer and getattr(a, "can_defer", False) else a.close()  # type: ignore[call-arg]
            except Exception as exc:  # noqa: BLE001 - isolation
                self._errors.append(f"{type(a).__name__}: {exc!r}")
                continue
            if r:
                out.update(r)
        if self._errors:
            out["analyzer_errors"] = self._errors[:8]
        return out or None


def resolve_deferred(results: Iterable[dict[str, Any]]) -> None:
    """Replace each ``Future`` value of ``results`` by what it computed (waiting for it); one
    that failed is dropped and named in ``analyzer_errors``, as :class:`Analyzers` does."""
    for r in results:
        for k, v in list(r.items()):
            if not isinstance(v, Future):
                continue
            try:
                r[k] = v.result()
            except Exception as exc:  # noqa: BLE001 - isolation, as in Analyzers
                del r[k]
                r.setdefault("analyzer_errors", []).append(f"{k}: {exc!r}")


def _analyze_member(member: Any, size: int, analyzers: Analyzers) -> None:
    """Feed a member's data to ``analyzers`` piecewise (nothing is kept); stop as soon as
    they are all done (a library that is not ELF, say): the rest is skipped, not copied."""
    left = size
    read = getattr(member, "read_some", None) or member.read
    while left > 0 and not analyzers.done:
        chunk = read(min(STREAM_CHUNK, left))
        if not chunk:
            break
        analyzers.feed(chunk)
        left -= len(chunk)


def _spool_file(
    member: object,
    size: int,
    spool: Spool,
    limits: Limits,
    analyzers: Analyzers | None = None,
) -> ContentRef | None:
    """Copy member data to a new spool file; None when the spool budget is spent (the data
    is then still fed to ``analyzers``)."""
    if spool.bytes + size > limits.max_spool_bytes:
        if analyzers is not None:
            _analyze_member(member, size, analyzers)
        return None
    path = spool.new_path()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
    spool.bytes += size
    try:
        with os.fdopen(fd, "wb") as out:
            left = size
            read = member.read  # type: ignore[attr-defined]
            while left > 0:
                chunk = read(min(SPOOL_CHUNK, left))
                out.write(chunk)
                if analyzers is not None:
                    analyzers.feed(chunk)
                left -= len(chunk)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
    return ContentRef(path=path, size=size)


class Member(Protocol):
    """What ``index_members`` needs of one filesystem member (``tarstream.TarMember``, or a
    squashfs inode or a file of a layer directory in other sources)."""

    name: str
    kind: EntryKind
    size: int
    linkname: str
    sparse: bool

    @property
    def mode(self) -> int: ...

    @property
    def uid(self) -> int: ...

    @property
    def gid(self) -> int: ...

    @property
    def mtime(self) -> int: ...

    def read(self, n: int = -1) -> bytes: ...


def index_members(
    members: Iterable[Member],
    *,
    index: int,
    name: str,
    matcher: PathMatcher,
    spool: Spool,
    limits: Limits,
    offload: bool = False,
    offload_threads: int = 1,
) -> tuple[dict[str, Entry], set[str], set[str], array[int], int]:
    """Index a layer's members as ``read_layer`` does (whiteouts, kept entries, captured
    content of matched files, path hashes of the others): (entries, whiteouts, opaque
    dirs, shadow hashes, member count). Members are visited once, in order.
    ``offload``: analyse large files that are not captured on a thread of their own
    (``fsview.offload``, on ``offload_threads`` threads) while the members after them are
    read."""
    off = Offload(STREAM_CHUNK, offload_threads) if offload else None
    try:
        out = _index_members(members, index, name, matcher, spool, limits, off)
    except BaseException:
        if off is not None:
            off.abort()
        raise
    if off is not None:
        resolve_deferred(off.finish())
    return out


def _index_members(
    members: Iterable[Member],
    index: int,
    name: str,
    matcher: PathMatcher,
    spool: Spool,
    limits: Limits,
    off: Offload | None,
) -> tuple[dict[str, Entry], set[str], set[str], array[int], int]:
    entries: dict[str, Entry] = {}
    whiteouts: set[str] = set()
    opaque: set[str] = set()
    shadow = array("q")
    shadow_add = shadow.append
    # with the layer cache on, a keyed hash that other processes can compare
    shash = _shadow_hash(limits)
    max_kept = limits.max_kept_records
    max_mem = limits.max_memory_content
    max_file = limits.max_file_bytes
    match = matcher.match if matcher else None
    # the matcher's combined regex rejects most paths without a Python-level call
    rx = getattr(matcher, "_rx", None)
    quick = rx.match if rx is not None and hasattr(rx, "match") else None
    count = 0
    deferred: list[dict[str, Any]] = []
    for m in members:
        count += 1
        path = normalize_path(m.name, name)
        kind = m.kind
        if WHITEOUT in path:
            slash = path.rfind("/")
            base = path[slash + 1 :]
            if base.startswith(WHITEOUT):
                parent = path[:slash] or "/"
                if base == OPAQUE:
                    opaque.add(parent)
                elif not base.startswith(".wh..wh."):
                    target = base[4:]
                    if target in ("", ".", ".."):
                        raise UnsafeArchiveError(f"{name}: malformed whiteout {m.name!r}")
                    whiteouts.add(parent.rstrip("/") + "/" + target)
                continue  # whiteouts are markers, not files
        if kind is _FILE:
            spec = None if match is None or quick is not None and quick(path) is None else match(path)
            if spec is None:
                shadow_add(shash(path))
                if entries:
                    entries.pop(path, None)
                continue
            content: ContentRef | None = None
            analysis: dict[str, Any] | None = None
            job: Job | None = None
            fsize = m.size
            factories = spec.stream
            cap = min(spec.max_size, max_file)
            if factories is not None and not m.sparse:
                # a stream analyzer sees every byte once, captured or not
                an = Analyzers(spec.analyzers)
                if fsize <= cap and fsize <= max_mem:
                    data = m.read(fsize)
                    content = ContentRef(data=data)
                    an.feed(data)
                elif fsize <= cap:
                    content = _spool_file(m, fsize, spool, limits, an)
                elif off is not None and fsize >= OFFLOAD_MIN:
                    job = off.analyze(m, fsize, an)
                else:
                    _analyze_member(m, fsize, an)
                if job is None:
                    # the digest of a big binary is still being hashed when its last byte
                    # has streamed: the next files stream meanwhile, and it is collected at
                    # the end
                    analysis = an.close(defer=True)
                    if analysis is not None and any(
                        isinstance(v, Future) for v in analysis.values()
                    ):
                        deferred.append(analysis)
            elif not m.sparse and fsize <= cap:
                content = ContentRef(data=m.read(fsize)) if fsize <= max_mem else _spool_file(m, fsize, spool, limits)
            entry = Entry(
                path=path,
                kind=_FILE,
                size=fsize,
                mode=m.mode,
                linkname=None,
                layer=index,
                content=content,
                matched=True,
                uid=m.uid,
                gid=m.gid,
                mtime=m.mtime,
                history=spec.history,
                analysis=analysis,
            )
            if job is not None and off is not None:
                off.add(entry, job)
        elif kind is _HARDLINK:
            target = normalize_path(m.linkname, name, "hard link target")
            tgt = entries.get(target)
            spec = match(path) if match is not None else None
            if tgt is not None and tgt.kind is _HARDLINK:
                # link to a link: point at the original
                target = tgt.linkname or target
                tgt = entries.get(target)
            content = tgt.content if tgt is not None and tgt.kind is _FILE else None
            fsize = tgt.size if tgt is not None and tgt.kind is _FILE else m.size
            if content is not None and spec is not None and fsize > min(spec.max_size, max_file):
                content = None
            entry = Entry(
                path=path,
                kind=_HARDLINK,
                size=fsize,
                mode=m.mode,
                linkname=target,
                layer=index,
                content=content,
                matched=spec is not None,
                uid=m.uid,
                gid=m.gid,
                mtime=m.mtime,
                history=spec.history if spec is not None else False,
                analysis=(
                    (tgt.analysis if off is None else off.result_of(tgt))
                    if tgt is not None and tgt.kind is _FILE
                    else None
                ),
            )
        else:
            # dirs, symlinks, devices / fifos: always kept (links resolve through them)
            entry = Entry(
                path=path,
                kind=kind,
                size=0,
                mode=m.mode,
                linkname=m.linkname if kind is _SYMLINK else None,
                layer=index,
                content=None,
                matched=False,
                uid=m.uid,
                gid=m.gid,
                mtime=m.mtime,
            )
        entries[path] = entry
        if len(entries) > max_kept:
            raise UnsafeArchiveError(
                f"{name}: more than {max_kept} kept records (directories, links, matched files)"
            )
    resolve_deferred(deferred)
    return entries, whiteouts, opaque, shadow, count


def read_layer(
    raw: BinaryIO,
    *,
    index: int,
    name: str,
    matcher: PathMatcher,
    spool: Spool,
    limits: Limits,
    progress: ProgressSink,
    expected_digest: str | None = None,
    expected_diff_id: str | None = None,
    size: int | None = None,
    threaded: bool = True,
    verify_diff_id: bool | None = None,
) -> LayerIndex:
    """Stream the layer blob ``raw`` once and return its ``LayerIndex``.

    Verifies ``expected_digest`` over the raw bytes and ``expected_diff_id`` over
    the uncompressed tar (``DigestMismatchError``); corrupt compression or tar
    raises ``LayerError``; hostile content (path traversal, bombs, limits)
    raises ``UnsafeArchiveError``. Messages name ``name``.
    ``threaded``: read and hash, and decompress, in worker threads while the tar
    is parsed here.
    ``verify_diff_id=False``: take ``expected_diff_id`` as given for a compressed
    blob instead of hashing the uncompressed bytes (hashing them costs more CPU
    than inflating them; the blob digest, when given, already pins the content).
    The default (None) hashes them only when no blob digest is given, or when
    ``limits.verify_diff_ids`` asks for it (``gpusbom scan --verify-diff-ids``).
    A plain-tar blob's diff_id is its raw digest and is always checked.
    """
    if verify_diff_id is None:
        verify_diff_id = limits.verify_diff_ids or expected_digest is None
    raw_alg = _digest_alg(expected_digest)
    out_alg = (
        _digest_alg(expected_diff_id) if expected_diff_id is not None and verify_diff_id else None
    )
    stream = open_decompressed(
        raw,
        name,
        limits=limits,
        raw_digest=raw_alg,
        out_digest=out_alg,
        threaded=threaded,
        on_raw=progress.advance,
        parallel=limits.inflate_threads,
    )
    try:
        entries, whiteouts, opaque, shadow, count = index_members(
            iter_tar(stream, limits=limits, name=name),
            index=index,
            name=name,
            matcher=matcher,
            spool=spool,
            limits=limits,
            # a layer granted inflate threads is a large one read in a worker of its own:
            # its reader is the scan's bound, so its large files are analysed beside it
            offload=limits.inflate_threads > 1 and offload_enabled(),
            offload_threads=analysis_threads_for(limits.inflate_threads),
        )
        # read to the end of the blob so the digests cover all of it
        stream.drain()
    finally:
        stream.close()

    raw_digest = stream.raw_digest()
    compressed = stream.format != "tar"
    if expected_digest is not None and raw_digest != expected_digest:
        raise DigestMismatchError(
            f"{name}: digest mismatch: expected {expected_digest}, got {raw_digest}"
        )
    diff_id: str | None
    if compressed:
        diff_id = expected_diff_id
        if expected_diff_id is not None and verify_diff_id:
            got = stream.out_digest()
            if got != expected_diff_id:
                raise DigestMismatchError(
                    f"{name}: diff_id mismatch: expected {expected_diff_id}, got {got}"
                )
    else:
        if expected_diff_id is not None:
            alg = _digest_alg(expected_diff_id)
            got = raw_digest if alg == raw_alg else None
            if got is None:
                raise LayerError(f"{name}: cannot verify diff_id with algorithm {alg}")
            if got != expected_diff_id:
                raise DigestMismatchError(
                    f"{name}: diff_id mismatch: expected {expected_diff_id}, got {got}"
                )
        diff_id = raw_digest
    ref = LayerRef(
        index=index,
        diff_id=diff_id,
        digest=raw_digest
        if compressed
        else (expected_digest if expected_digest != diff_id else None),
        size=size if size is not None else stream.raw_bytes,
    )
    return LayerIndex(
        ref=ref,
        entries=entries,
        whiteouts=whiteouts,
        opaque_dirs=opaque,
        file_count=count,
        uncompressed_bytes=stream.out_bytes,
        shadow_hashes=shadow,
        shadow_salt=layer_shadow_salt(limits),
        shadow_key=limits.shadow_key,
    )
