"""Streaming scanner for SYCL (DPC++) device code: what a library's Intel GPU code is built for.

Where DPC++ puts device code in a linked library (seen in dpctl 0.22.1, dpnp 0.20.0, oneMKL
2026.2 SYCL libraries, xpu-kernels 0.3.0 and vllm-xpu-kernels 0.1.16.2 from PyPI):

* the host code calls ``__sycl_register_lib`` (its name is in the dynamic string table, near
  the start of the file: the gate, as ``__hipRegisterFatBinary`` is for HIP);
* ``.tgtimg`` lists the device images, ``.tgtsym`` names each image's kernels after its target
  (``sycl-spir64-unknown-unknown.<kernel>``, ``sycl-spir64_gen-unknown-unknown.<kernel>``),
  and JIT images sit in a section ``__CLANG_OFFLOAD_BUNDLE__sycl-spir64`` (raw SPIR-V);
* AOT images (``spir64_gen``) are ocloc fat binaries: an ``ar`` archive of one zebin per
  device plus an optional ``generic_ir`` member (SPIR-V), see :mod:`.zebin`.

The scanner looks for three needles once the gate was seen: ``sycl-spir64`` (the target
names), ``!<arch>\\n`` (an ocloc archive: its member names are read, bodies skipped) and an
ELF64 header with ``e_machine`` 205 (a zebin: its first bytes up to the section table are
collected, at most :data:`MAX_ZEBIN` bytes, and its notes decoded). A file that starts with
a zebin header is read as one. Bounded state: pending reads, capped sets and counts.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .elf import ELF_MAGIC, BinaryFormatError
from .zebin import (
    AR_HEADER,
    AR_MAGIC,
    ArMember,
    is_zebin_header,
    parse_ar_member,
    parse_zebin,
    zebin_extent,
)

__all__ = ["GATE", "GATE_WINDOW", "MAX_ZEBIN", "SyclScanner"]

GATE = b"__sycl_register_lib"
#: the gate is looked for in this many leading bytes of an ELF file
GATE_WINDOW = 64 << 20
#: most bytes of one zebin collected to read its notes
MAX_ZEBIN = 32 << 20
MAX_ITEMS = 1024
MAX_AR_MEMBERS = 4096
_TARGET = b"sycl-spir64"
_ZE_ELF = ELF_MAGIC + b"\x02\x01\x01"
_KEEP = 64
_TARGET_RX = re.compile(rb"sycl-(spir64[A-Za-z0-9_]*)")
_MAX_ERRORS_KEPT = 8


@dataclass
class _Read:
    start: int
    need: int
    handler: Callable[[bytes, bool], None]
    buf: bytearray = field(default_factory=bytearray)


class SyclScanner:
    """Stream analyzer (``feed``/``close``/``done``): ``{"intel": {...}}`` or None."""

    def __init__(self, name: str = "<stream>") -> None:
        self.name = name
        self._pos = 0  # stream offset of the next chunk
        self._tail = b""
        self._searched = 0  # stream offset up to which needles were searched
        self._head = b""
        self._state = "head"  # head | gate | open | off
        self._reads: list[_Read] = []
        self.targets: set[str] = set()
        self.configs: set[int] = set()
        self.members: set[str] = set()
        self.families: set[int] = set()
        self.zebin_versions: set[str] = set()
        self.zebins = 0
        self.archives = 0
        self._ar_members = 0
        self.errors: list[str] = []
        self.error_count = 0

    @property
    def done(self) -> bool:
        return self._state == "off"

    def _error(self, msg: str) -> None:
        self.error_count += 1
        if len(self.errors) < _MAX_ERRORS_KEPT:
            self.errors.append(f"{self.name}: {msg}")

    # -- feeding ---------------------------------------------------------------------------

    def feed(self, chunk: bytes) -> None:
        if self._state == "off" or not chunk:
            return
        chunk = bytes(chunk)
        if self._state == "head":
            self._head += chunk
            if len(self._head) < 20:
                if self._head[:4] != ELF_MAGIC[: len(self._head)]:
                    self._state = "off"
                return
            chunk, self._head = self._head, b""
            if chunk[:4] != ELF_MAGIC:
                self._state = "off"
                return
            if is_zebin_header(chunk):  # a bare zebin file
                self._state = "open"
                self._zebin_at(0)
                self._searched = 1
            else:
                self._state = "gate"
        win_start = self._pos - len(self._tail)
        if self._state == "gate" and not self._gate_near(chunk, win_start):
            # what _scan does where the gate is not in the window, without joining the chunk
            # to the tail: that copied every byte of the first 64 MiB of every ELF file
            # under the interpreter lock (0.5 s of the 4.5 GB CUDA layer's worker)
            self._pos += len(chunk)
            self._searched = max(win_start, self._pos - len(GATE) + 1)
            if self._pos >= GATE_WINDOW:
                self._state = "off"
            self._tail = chunk[-_KEEP:] if len(chunk) >= _KEEP else (self._tail + chunk)[-_KEEP:]
            return
        window = self._tail + chunk
        self._pos += len(chunk)
        self._guarded(window, win_start, final=False)
        self._tail = window[-_KEEP:]

    def _gate_near(self, chunk: bytes, win_start: int) -> bool:
        """Would ``_scan`` find the gate in ``self._tail + chunk`` (searched from
        ``self._searched``)? Across the tail's end, then in the chunk."""
        tail = self._tail
        start = max(0, self._searched - win_start)
        if start < len(tail) and (tail[start:] + chunk[: len(GATE) - 1]).find(GATE) >= 0:
            return True
        return chunk.find(GATE, max(0, start - len(tail))) >= 0

    def _guarded(self, window: bytes, win_start: int, *, final: bool) -> None:
        try:
            self._scan(window, win_start, final=final)
        except Exception as exc:  # noqa: BLE001 - a scanner bug must not stop a scan
            self._error(f"internal error: {exc!r}")
            self._state = "off"
            self._reads.clear()

    def _scan(self, window: bytes, win_start: int, *, final: bool) -> None:
        if self._state == "gate":
            k = window.find(GATE, max(0, self._searched - win_start))
            if k < 0:
                self._searched = max(win_start, self._pos - len(GATE) + 1)
                if self._pos >= GATE_WINDOW:
                    self._state = "off"
                return
            self._state = "open"
            self._searched = win_start + k
        if self._state != "open":
            return
        start = max(0, self._searched - win_start)
        # the last bytes are searched with the next chunk (a hit needs bytes after it)
        limit = max(start, len(window) if final else len(window) - _KEEP)
        for needle, on_hit in ((_TARGET, self._target_hit), (AR_MAGIC, self._ar_hit),
                               (_ZE_ELF, self._zebin_at)):
            k = window.find(needle, start, limit + len(needle) - 1)
            while 0 <= k < limit:
                on_hit(win_start + k, window, win_start)
                k = window.find(needle, k + 1, limit + len(needle) - 1)
        self._searched = win_start + limit
        self._serve(window, win_start, eof=final)

    def _serve(self, window: bytes, win_start: int, *, eof: bool) -> None:
        win_end = win_start + len(window)
        rounds = 0
        progress = True
        while progress and self._reads and rounds < MAX_AR_MEMBERS * 2:
            rounds += 1
            progress = False
            for r in list(self._reads):
                have = r.start + len(r.buf)
                if have < win_start:  # cannot happen: reads start inside the window
                    self._reads.remove(r)
                    r.handler(bytes(r.buf), True)
                    progress = True
                    continue
                hi = min(r.start + r.need, win_end)
                if have < hi:
                    r.buf += window[have - win_start : hi - win_start]
                if len(r.buf) >= r.need or eof:
                    self._reads.remove(r)
                    r.handler(bytes(r.buf), len(r.buf) < r.need)
                    progress = True

    def close(self) -> dict[str, Any] | None:
        if self._state == "open":
            self._guarded(self._tail, self._pos - len(self._tail), final=True)
        self._reads.clear()
        self._state = "off"
        if not (self.targets or self.configs or self.members or self.zebins or self.error_count):
            return None
        out: dict[str, Any] = {
            "sycl": sorted(self.targets),
            "configs": sorted(self.configs),
            "members": sorted(self.members),
            "families": sorted(self.families),
            "zebin_versions": sorted(self.zebin_versions),
            "zebins": self.zebins,
            "archives": self.archives,
        }
        if self.error_count:
            out["errors"] = self.error_count
            out["error_messages"] = list(self.errors)
        return {"intel": out}

    # -- needles ---------------------------------------------------------------------------

    def _target_hit(self, at: int, window: bytes, win_start: int) -> None:
        m = _TARGET_RX.match(window, at - win_start)
        if m and len(self.targets) < MAX_ITEMS:
            self.targets.add(m.group(1).decode("ascii")[:32])

    def _ar_hit(self, at: int, window: bytes, win_start: int) -> None:
        self._reads.append(_Read(at + len(AR_MAGIC), AR_HEADER,
                                 lambda b, short: self._ar_member(at + len(AR_MAGIC), b, short,
                                                                  first=True)))

    def _ar_member(self, at: int, header: bytes, short: bool, *, first: bool = False) -> None:
        if short:
            if not first:
                self._error(f"ocloc archive member at {at:#x} is truncated")
            return
        try:
            m = parse_ar_member(header)
        except BinaryFormatError:
            if not first:
                self._error(f"bad ocloc archive member header at {at:#x}")
            return  # a first header that is no member: not an archive after all
        if first:
            if not (m.padding or m.device or m.name == "generic_ir"):
                return  # some other ar archive: not ocloc's
            self.archives += 1
        self._ar_members += 1
        if self._ar_members > MAX_AR_MEMBERS:
            self._error(f"more than {MAX_AR_MEMBERS} ocloc archive members")
            return
        self._member(m)
        nxt = at + AR_HEADER + m.size + (m.size & 1)
        self._reads.append(_Read(nxt, AR_HEADER, lambda b, s: self._ar_next(nxt, b, s)))

    def _ar_next(self, at: int, header: bytes, short: bool) -> None:
        if short or len(header) < AR_HEADER or header[58:60] != b"`\n":
            return  # the archive ended (its size is not recorded: the next header decides)
        self._ar_member(at, header, short)

    def _member(self, m: ArMember) -> None:
        if m.padding or len(self.members) >= MAX_ITEMS:
            return
        self.members.add(m.name[:64])

    def _zebin_at(self, at: int, window: bytes | None = None, win_start: int = 0) -> None:
        self._reads.append(_Read(at, 64, lambda b, short: self._zebin_head(at, b, short)))

    def _zebin_head(self, at: int, head: bytes, short: bool) -> None:
        if short or not is_zebin_header(head):
            return  # another ELF header (host code, SPIR-V container): not a zebin
        try:
            extent = zebin_extent(head)
        except BinaryFormatError as exc:
            self._error(f"zebin at {at:#x}: {exc}")
            return
        self.zebins += 1
        if extent > MAX_ZEBIN:
            self._error(f"zebin at {at:#x}: {extent} bytes to its section table, more than "
                        f"{MAX_ZEBIN} read")
            return
        self._reads.append(_Read(at, extent, lambda b, s: self._zebin_body(at, b, s)))

    def _zebin_body(self, at: int, data: bytes, short: bool) -> None:
        if short:
            self._error(f"zebin at {at:#x} is truncated")
            return
        try:
            z = parse_zebin(data)
        except BinaryFormatError as exc:
            self._error(f"zebin at {at:#x}: {exc}")
            return
        if z.product_config and len(self.configs) < MAX_ITEMS:
            self.configs.add(z.product_config)
        if z.product_family and len(self.families) < MAX_ITEMS:
            self.families.add(z.product_family)
        if z.zebin_version and len(self.zebin_versions) < MAX_ITEMS:
            self.zebin_versions.add(z.zebin_version)
