"""The clang offload-bundle states of the stream scanner: plain and compressed (CCOB) bundles.

A plain bundle's header is collected (growing x4 on demand) and its code objects skipped
by the bundle's extent; a compressed bundle's first compressed bytes are collected (growing
geometrically, at most :data:`MAX_CCOB_INPUT`) and decompressed with the bounded prefix
decoder of ``binary.hipbundle``.
"""

from __future__ import annotations

import re

from gpusbom.binary.elf import BinaryFormatError
from gpusbom.binary.hipbundle import (
    MAX_BUNDLE_ENTRIES,
    MAX_BUNDLES,
    MAX_HEADER_BYTES,
    ccob_entries,
    ccob_header_size,
    parse_bundle_header,
    parse_ccob_header,
)
from gpusbom.binary.scanloop import ScanLoop

#: Most distinct target ids one file may make the scanner hold.
MAX_TARGET_IDS = 4096
#: Most compressed bytes of one CCOB bundle collected to reach its header.
MAX_CCOB_INPUT = 4 << 20

_CCOB_FIRST = 16 << 10  # compressed bytes first collected for a CCOB header; grows x4
_NO_LIMIT = 1 << 62  # a streamed file's size is unknown: no bound on a bundle's span
# a target id (``hipv4-amdgcn-amd-amdhsa--gfx90a``): a magic in host code has none
_ID_RX = re.compile(r"[A-Za-z0-9_.]+-[!-~]*\Z")


class _NeedMore(Exception):
    def __init__(self, n: int) -> None:
        self.n = n


def _compressed_start(method: str, data: bytes | bytearray) -> bool:
    if method == "zstd":
        return data[:4] == b"\x28\xb5\x2f\xfd"
    return len(data) >= 2 and data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0


class BundleStates(ScanLoop):
    """The handlers of clang offload bundles (``_bundle``: plain, ``_ccob_head``: CCOB)."""

    def _bundle(self, acc: bytearray, eof: bool) -> None:
        def read(off: int, n: int) -> bytes:
            if off + n > len(acc):
                raise _NeedMore(off + n)
            return bytes(acc[off : off + n])

        try:
            entries, extent = parse_bundle_header(
                read, _NO_LIMIT, name=self.name, base=self._acc_pos
            )
        except _NeedMore as more:
            if not eof and more.n <= MAX_HEADER_BYTES:
                self._want(max(more.n, min(len(acc) * 4, MAX_HEADER_BYTES)))
                return None
            if eof and self._plausible_bundle(acc):
                self._error(False, f"offload bundle at {self._acc_pos:#x} is truncated")
                return self._search()
            return self._reject(acc, eof)
        except BinaryFormatError:
            return self._reject(acc, eof)
        if not entries or not all(_ID_RX.match(e.id) for e in entries):
            return self._reject(acc, eof)
        self._bundle_found([e.id for e in entries], "none")
        if extent >= len(acc):
            self._search(extent - len(acc))
        else:
            self._replay(acc[extent:])
        return None

    @staticmethod
    def _plausible_bundle(acc: bytearray) -> bool:
        if len(acc) < 32:
            return False
        count = int.from_bytes(acc[24:32], "little")
        return 1 <= count <= MAX_BUNDLE_ENTRIES

    def _bundle_found(self, ids: list[str], compression: str) -> None:
        if self._bundles >= MAX_BUNDLES:
            self._error(False, f"more than {MAX_BUNDLES} offload bundles")
            self._hip = False
            self._set_needles()
            return
        self._bundles += 1
        if compression != "none":
            self._hip_compressed.add(compression)
        for i in ids:
            if len(self._ids) >= MAX_TARGET_IDS and i not in self._ids:
                self._error(False, f"more than {MAX_TARGET_IDS} target ids")
                break
            self._ids.add(i)

    def _ccob_head(self, acc: bytearray, eof: bool) -> None:
        hsize = ccob_header_size(acc)
        if hsize is None:
            return self._reject(acc, eof)
        if len(acc) < hsize + 4:
            if eof:
                return self._reject(acc, eof)
            self._want(hsize + 4)
            return None
        try:
            h = parse_ccob_header(bytes(acc[:hsize]), name=self.name, pos=self._acc_pos)
        except BinaryFormatError:
            return self._reject(acc, eof)
        if (h.total_size is not None and h.total_size <= hsize) or not _compressed_start(
            h.method, acc[hsize : hsize + 4]
        ):
            return self._reject(acc, eof)
        self._ccob = h
        room = MAX_CCOB_INPUT if h.total_size is None else min(MAX_CCOB_INPUT, h.total_size - hsize)
        self._want(hsize + min(room, _CCOB_FIRST))
        self._handler = self._ccob_body
        return None

    def _ccob_body(self, acc: bytearray, eof: bool) -> None:
        h = self._ccob
        hsize = h.header_size
        room = MAX_CCOB_INPUT if h.total_size is None else min(MAX_CCOB_INPUT, h.total_size - hsize)
        have = len(acc) - hsize
        try:
            entries = ccob_entries(
                bytes(acc[hsize:]), h.method, h.uncompressed_size, name=self.name
            )
        except BinaryFormatError as exc:
            if not eof and have < room:
                self._want(hsize + min(room, have * 4))
                return None
            self._error(False, str(exc))
            entries = None
        if entries is not None:
            if not entries or not all(_ID_RX.match(e.id) for e in entries):
                self._error(False, f"compressed bundle at {self._acc_pos:#x}: no target ids")
            else:
                self._bundle_found([e.id for e in entries], h.method)
        if h.total_size is None:
            # version 1 has no size: it ends at the next CCOB magic; raw bundle magics inside
            # its compressed bytes are not looked for
            self._plain = False
            self._set_needles()
            return self._replay(acc[hsize:])
        if h.total_size >= len(acc):
            return self._search(h.total_size - len(acc))
        return self._replay(acc[h.total_size :])
