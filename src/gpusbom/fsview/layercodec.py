"""The layer cache's entry format: plain data that cannot name code, validated whole on load.

An entry is ``MAGIC``, a 4-byte little-endian header length, a JSON header, then raw bytes:
the layer's ``shadow_hashes`` (signed 64-bit, little-endian) and each captured file's content,
back to back. The header holds the layer's ``LayerRef`` fields, its counters, whiteouts and
opaque directories, and its entries column by column (paths, kinds as indices into
``EntryKind``, sizes, modes, link names, layers, content numbers, flags, owners, mtimes, and
the stream analyzers' results as JSON). JSON decodes to str, int, float, bool, None, list and
dict only: nothing in an entry can name a class or a function, so a planted entry is at
worst wrong data, and ``decode`` checks every field's type and range before it builds
anything (a wrong entry raises :class:`CacheFormatError`; the cache drops it as a miss).

``encode`` returns None for a layer whose fields would not come back equal (an analyzer result
that is not plain JSON, a key that is not its entry's path): that layer is not cached.
"""

from __future__ import annotations

import json
import struct
import sys
from array import array
from typing import Any

from ..errors import ViewError
from ..model import LayerRef
from .types import ContentRef, Entry, EntryKind, LayerIndex

__all__ = ["MAGIC", "MAX_ENTRY_BYTES", "CacheFormatError", "decode", "encode"]

MAGIC = b"GSLC\x02"
#: the most bytes one stored entry may take (the reader refuses larger ones unread)
MAX_ENTRY_BYTES = 512 << 20
#: the most bytes of an entry's JSON header
MAX_HEADER_BYTES = 256 << 20
_KINDS = tuple(EntryKind)
_KIND_INDEX = {k: i for i, k in enumerate(_KINDS)}
_HDR = struct.Struct("<I")
_MATCHED, _HISTORY = 1, 2
_BIG = sys.byteorder == "big"


class CacheFormatError(ViewError, ValueError):
    """A stored entry is not one this code wrote (damaged, foreign or planted)."""


def _plain(value: Any) -> bool:
    """Whether ``value`` comes back equal from JSON."""
    try:
        return bool(json.loads(json.dumps(value, allow_nan=False)) == value)
    except (TypeError, ValueError, RecursionError):
        return False


def encode(li: LayerIndex) -> bytes | None:
    """``li`` as an entry (captured content read from its spool files), or None when it
    cannot be stored exactly."""
    paths: list[str] = []
    kinds: list[int] = []
    sizes: list[int] = []
    modes: list[int] = []
    links: list[str | None] = []
    layers: list[int] = []
    content: list[int] = []
    flags: list[int] = []
    uids: list[int] = []
    gids: list[int] = []
    mtimes: list[int] = []
    analysis: list[list[Any]] = []
    blobs: list[bytes] = []
    shared: dict[int, int] = {}  # hard links share one ContentRef: stored once
    for n, (key, e) in enumerate(li.entries.items()):
        if key != e.path:
            return None
        paths.append(e.path)
        kinds.append(_KIND_INDEX[e.kind])
        sizes.append(e.size)
        modes.append(e.mode)
        links.append(e.linkname)
        layers.append(e.layer)
        c = e.content
        if c is None:
            content.append(-1)
        else:
            i = shared.get(id(c))
            if i is None:
                i = shared[id(c)] = len(blobs)
                blobs.append(c.read())
            content.append(i)
        flags.append((_MATCHED if e.matched else 0) | (_HISTORY if e.history else 0))
        uids.append(e.uid)
        gids.append(e.gid)
        mtimes.append(e.mtime)
        if e.analysis is not None:
            if not _plain(e.analysis):
                return None
            analysis.append([n, e.analysis])
    r = li.ref
    shadow = array("q", li.shadow_hashes)
    if _BIG:
        shadow.byteswap()
    head = {
        "ref": [r.index, r.diff_id, r.digest, r.media_type, r.size, r.created_by],
        "files": li.file_count, "bytes": li.uncompressed_bytes,
        "whiteouts": sorted(li.whiteouts), "opaque": sorted(li.opaque_dirs),
        "salt": li.shadow_salt, "key": li.shadow_key.hex() if li.shadow_key else None,
        "shadow": len(shadow), "p": paths, "k": kinds, "s": sizes, "m": modes, "l": links,
        "y": layers, "c": content, "f": flags, "u": uids, "g": gids, "t": mtimes,
        "a": analysis, "b": [len(b) for b in blobs],
    }
    try:
        text = json.dumps(head, separators=(",", ":"), allow_nan=False).encode(
            "utf-8", "surrogateescape")
    except (TypeError, ValueError):
        return None
    if not _plain(head["ref"]):
        return None
    out = b"".join([MAGIC, _HDR.pack(len(text)), text, shadow.tobytes(), *blobs])
    return out if len(out) <= MAX_ENTRY_BYTES else None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not data encode writes")


def _types(col: Any, n: int, allowed: tuple[type, ...], what: str) -> list[Any]:
    if type(col) is not list or len(col) != n or not set(map(type, col)) <= set(allowed):
        raise CacheFormatError(f"layer cache entry: bad {what}")
    return col


def _int(v: Any, what: str, lo: int = 0, hi: int = 1 << 63) -> int:
    if type(v) is not int or not lo <= v < hi:
        raise CacheFormatError(f"layer cache entry: bad {what}")
    return v


def _opt(v: Any, t: type, what: str) -> Any:
    if v is not None and type(v) is not t:
        raise CacheFormatError(f"layer cache entry: bad {what}")
    return v


def _range(col: list[int], lo: int, hi: int, what: str) -> None:
    if col and (min(col) < lo or max(col) >= hi):
        raise CacheFormatError(f"layer cache entry: {what} out of range")


def decode(data: bytes, *, max_entries: int) -> LayerIndex:
    """The ``LayerIndex`` an entry holds; :class:`CacheFormatError` for anything that is not
    exactly what ``encode`` writes (or holds more than ``max_entries`` entries)."""
    if len(data) > MAX_ENTRY_BYTES or data[:len(MAGIC)] != MAGIC:
        raise CacheFormatError("layer cache entry: not this format")
    at = len(MAGIC) + _HDR.size
    if len(data) < at:
        raise CacheFormatError("layer cache entry: truncated")
    (hlen,) = _HDR.unpack_from(data, len(MAGIC))
    if hlen > MAX_HEADER_BYTES or at + hlen > len(data):
        raise CacheFormatError("layer cache entry: truncated header")
    try:
        head = json.loads(bytes(data[at:at + hlen]).decode("utf-8", "surrogateescape"),
                          parse_constant=_no_constant)
    except (ValueError, RecursionError):
        raise CacheFormatError("layer cache entry: header is not JSON") from None
    if type(head) is not dict:
        raise CacheFormatError("layer cache entry: header is not an object")
    try:
        return _build(head, memoryview(data)[at + hlen:], max_entries)
    except KeyError as exc:
        raise CacheFormatError(f"layer cache entry: no {exc}") from None


def _build(head: dict[str, Any], rest: memoryview, max_entries: int) -> LayerIndex:
    ref = head["ref"]
    if type(ref) is not list or len(ref) != 6:
        raise CacheFormatError("layer cache entry: bad ref")
    layer_ref = LayerRef(
        index=_int(ref[0], "ref index"), diff_id=_opt(ref[1], str, "diff_id"),
        digest=_opt(ref[2], str, "digest"), media_type=_opt(ref[3], str, "media type"),
        size=_opt(ref[4], int, "size"), created_by=_opt(ref[5], str, "created_by"))
    paths = head["p"]
    n = len(paths) if type(paths) is list else -1
    if not 0 <= n <= max_entries:
        raise CacheFormatError("layer cache entry: bad entry count")
    _types(paths, n, (str,), "paths")
    kinds = _types(head["k"], n, (int,), "kinds")
    _range(kinds, 0, len(_KINDS), "kind")
    sizes = _types(head["s"], n, (int,), "sizes")
    modes = _types(head["m"], n, (int,), "modes")
    links = _types(head["l"], n, (str, type(None)), "link names")
    layers = _types(head["y"], n, (int,), "layers")
    content = _types(head["c"], n, (int,), "content")
    flags = _types(head["f"], n, (int,), "flags")
    uids = _types(head["u"], n, (int,), "uids")
    gids = _types(head["g"], n, (int,), "gids")
    mtimes = _types(head["t"], n, (int,), "mtimes")
    lens = head["b"]
    _types(lens, len(lens) if type(lens) is list else -1, (int,), "content lengths")
    for col, what in ((sizes, "size"), (modes, "mode"), (layers, "layer"), (uids, "uid"),
                      (gids, "gid"), (flags, "flags"), (lens, "content length")):
        _range(col, 0, 1 << 63, what)
    _range(mtimes, -(1 << 63), 1 << 63, "mtime")
    _range(content, -1, len(lens), "content number")
    nshadow = _int(head["shadow"], "shadow count", 0, 1 << 40)
    if nshadow * 8 + sum(lens) != len(rest):
        raise CacheFormatError("layer cache entry: byte area does not match its header")
    shadow = array("q")
    shadow.frombytes(rest[:nshadow * 8])
    if _BIG:
        shadow.byteswap()
    refs: list[ContentRef] = []
    at = nshadow * 8
    for ln in lens:
        refs.append(ContentRef(data=bytes(rest[at:at + ln])))
        at += ln
    an: dict[int, dict[str, Any]] = {}
    pairs = head["a"]
    if type(pairs) is not list:
        raise CacheFormatError("layer cache entry: bad analysis")
    for pair in pairs:
        if (type(pair) is not list or len(pair) != 2 or type(pair[1]) is not dict
                or type(pair[0]) is not int or not 0 <= pair[0] < n):
            raise CacheFormatError("layer cache entry: bad analysis")
        an[pair[0]] = pair[1]
    whiteouts, opaque = head["whiteouts"], head["opaque"]
    _types(whiteouts, len(whiteouts) if type(whiteouts) is list else -1, (str,), "whiteouts")
    _types(opaque, len(opaque) if type(opaque) is list else -1, (str,), "opaque dirs")
    key = _opt(head["key"], str, "shadow key")
    try:
        shadow_key = bytes.fromhex(key) if key is not None else None
    except ValueError:
        raise CacheFormatError("layer cache entry: bad shadow key") from None
    kk = _KINDS
    entries = {
        p: Entry(p, kk[k], s, m, ln, y, refs[c] if c >= 0 else None, bool(f & _MATCHED),
                 u, g, t, bool(f & _HISTORY), an.get(i))
        for i, (p, k, s, m, ln, y, c, f, u, g, t) in enumerate(
            zip(paths, kinds, sizes, modes, links, layers, content, flags, uids, gids, mtimes,
                strict=True))
    }
    if len(entries) != n:
        raise CacheFormatError("layer cache entry: a path stored twice")
    return LayerIndex(
        ref=layer_ref, entries=entries, whiteouts=set(whiteouts), opaque_dirs=set(opaque),
        file_count=_int(head["files"], "file count"),
        uncompressed_bytes=_int(head["bytes"], "byte count"), shadow_hashes=shadow,
        shadow_salt=_int(head["salt"], "shadow salt", -(1 << 63)), shadow_key=shadow_key)
