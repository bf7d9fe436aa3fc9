"""The CUDA fatbin states of the stream scanner: a container's header, then its entries.

Entries are walked by their size fields: only the 64-byte entry headers are collected, the
payloads are skipped (``ScanLoop._step``). The headers are decoded with the parsers of
``binary.fatbin``, as the seekable decoder does.
"""

from __future__ import annotations

from typing import Any

from gpusbom.binary.fatbin import (
    CONTAINER_HEADER_SIZE,
    ENTRY_HEADER_MIN,
    FATBIN_MAGIC,
    MAX_CONTAINER_HEADER,
    MAX_FATBIN_ENTRIES,
    parse_container_header,
    parse_entry_header,
)
from gpusbom.binary.scanloop import ScanLoop

#: Most fatbin containers one file may make the scanner count (its state stays bounded).
MAX_CONTAINERS = 1 << 16


def _zero(data: bytes | bytearray) -> bool:
    return not data.strip(b"\0")


class FatbinStates(ScanLoop):
    """The handlers of a CUDA fatbin container (``_fat_container`` starts one)."""

    def _fat_container(self, acc: bytearray, eof: bool) -> None:
        if len(acc) < CONTAINER_HEADER_SIZE:
            return self._reject(acc, eof)
        magic, version, hsize, body = parse_container_header(acc)
        if (
            magic != FATBIN_MAGIC
            or version != 1
            or not CONTAINER_HEADER_SIZE <= hsize <= MAX_CONTAINER_HEADER
            or body < ENTRY_HEADER_MIN
        ):
            return self._reject(acc, eof)
        self._c_pos = self._acc_pos
        self._c_hsize = hsize
        self._c_left = body
        self._want(hsize + ENTRY_HEADER_MIN)
        self._handler = self._fat_first

    def _fat_first(self, acc: bytearray, eof: bool) -> None:
        """The first entry decides whether the magic started a real container."""
        hsize = self._c_hsize
        if len(acc) < hsize + ENTRY_HEADER_MIN:
            return self._reject(acc, eof)
        h = parse_entry_header(acc[hsize:])
        if h.is_padding or not h.valid_size() or h.header_size + h.payload_size > self._c_left:
            return self._reject(acc, eof)
        if self._containers >= MAX_CONTAINERS:
            self._error(True, f"more than {MAX_CONTAINERS} fatbin containers")
            return self._stop_cuda()
        self._containers += 1
        self._fat_add(h, self._c_pos + hsize)

    def _fat_add(self, h: Any, offset: int) -> None:
        if self._fat.entries >= MAX_FATBIN_ENTRIES:
            self._error(True, f"more than {MAX_FATBIN_ENTRIES} fatbin entries")
            return self._stop_cuda()
        self._fat.add(h.entry(offset, self._c_pos))
        self._c_left -= h.header_size + h.payload_size
        self._fat_next(h.header_size - ENTRY_HEADER_MIN + h.payload_size)

    def _fat_next(self, skip: int) -> None:
        left = self._c_left
        if left <= 0:
            self._search(skip)
        elif left < ENTRY_HEADER_MIN:
            self._step(skip, left, self._fat_trailer)
        else:
            self._step(skip, ENTRY_HEADER_MIN, self._fat_entry)

    def _fat_trailer(self, acc: bytearray, eof: bool) -> None:
        if len(acc) < self._c_left:
            self._error(True, f"truncated fatbin container at {self._c_pos:#x}")
        elif not _zero(acc):
            self._error(True, f"truncated fatbin entry at {self._acc_pos:#x}")
        self._c_left = 0
        self._search()

    def _fat_entry(self, acc: bytearray, eof: bool) -> None:
        at = self._acc_pos
        if len(acc) < ENTRY_HEADER_MIN:
            self._error(True, f"fatbin entry at {at:#x} is truncated")
            return self._search()
        h = parse_entry_header(acc)
        if h.is_padding:
            # zero padding at the end of a container body
            left, self._c_left = self._c_left, 0
            return self._search(left - ENTRY_HEADER_MIN)
        if not h.valid_size():
            self._error(True, f"fatbin entry header size {h.header_size} at {at:#x}")
            return self._replay(acc)
        if h.header_size + h.payload_size > self._c_left:
            self._error(True, f"fatbin entry at {at:#x} runs past its container")
            return self._replay(acc)
        self._fat_add(h, at)

    def _stop_cuda(self) -> None:
        self._cuda = False
        self._set_needles()
        self._search()
