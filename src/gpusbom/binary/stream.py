"""Streaming GPU code scanners: list what a file's device code was built for while it streams.

The layer reader feeds every chunk of a matched file to a :class:`StreamAnalyzer` once, in
order (see ``gpusbom.fsview``), so a 1 GB CUDA library is neither kept in memory nor spooled
to disk. The scanners here find the same structures as the seekable decoders of
:mod:`gpusbom.binary.fatbin` and :mod:`gpusbom.binary.hipbundle` and decode their headers with
the same parsers; they differ in how they *find* them: there is no section table yet when the
data streams by (ELF puts it at the end), so containers are found by their magic bytes
anywhere in the stream and then validated:

* CUDA fatbin container: ``50 ed 55 ba`` + version 1 + a sane header size, and a first entry
  header whose sizes fit the container. Entries are then walked by their size fields: the
  scanner only collects the 64-byte entry headers and *skips* the payloads (no buffering).
* Clang offload bundle: ``__CLANG_OFFLOAD_BUNDLE__`` with 1..4096 entries whose ids look like
  target ids (``hipv4-amdgcn-amd-amdhsa--gfx90a``); the code objects are skipped by the
  bundle's extent.
* Compressed bundle: ``CCOB`` with a known version and method and a zstd / zlib stream start;
  only the first compressed bytes are collected (growing geometrically, at most
  :data:`MAX_CCOB_INPUT`) and decompressed with the bounded prefix decoder of hipbundle.

A candidate that fails validation is not an error (the magic bytes also occur in host code
and in string tables): scanning resumes one byte after it. A structure that validated but is
then malformed or truncated is counted in ``errors``; nothing here raises for bad data, and
the state is bounded (a few header bytes, sets of target names, capped counts) whatever the
size fields say.

Cost: a search for the magics over the bytes outside fatbin payloads (one C call from
where the search resumes to the next match; see :func:`gpusbom.binary.needles.find_magic`), a few Python steps
per entry. Files that start with neither an ELF, fatbin or bundle magic are not scanned at
all. In ELF files laid out with separate code (see
:func:`gpusbom.binary.elf_ranges.executable_ranges`) the executable segments are not
searched either: device code containers are data and never linked there.

The scanner is split by concern: ``scanloop`` (the chunk loop), ``scan_fatbin`` and
``scan_bundle`` (the states of each structure), ``needles`` (the magic search),
``elf_ranges`` (the code not searched) and ``streamhash`` (the SHA-256); this module joins
them into the public scanners and re-exports the public names.
"""

from __future__ import annotations

from typing import Any

from gpusbom.binary.elf_ranges import MAX_PHDR_PREFIX, MIN_SKIP, executable_ranges
from gpusbom.binary.fatbin import CONTAINER_HEADER_SIZE
from gpusbom.binary.hipbundle import hip_targets
from gpusbom.binary.scan_bundle import MAX_CCOB_INPUT, MAX_TARGET_IDS, BundleStates
from gpusbom.binary.scan_fatbin import MAX_CONTAINERS, FatbinStates
from gpusbom.binary.scanloop import (
    HIP_GATE_WINDOW,
    K_BUNDLE,
    K_FAT,
    K_HIPREG,
    MAX_REPLAY,
)

__all__ = [
    "HIP_GATE_WINDOW",
    "MAX_CCOB_INPUT",
    "MAX_CONTAINERS",
    "MAX_PHDR_PREFIX",
    "MAX_REPLAY",
    "MAX_TARGET_IDS",
    "MIN_SKIP",
    "CudaFatbinScanner",
    "GpuCodeScanner",
    "HipBundleScanner",
    "executable_ranges",
]

_BUNDLE_FIRST = 256  # bytes first collected for a bundle header; grows x4 on demand


class _StreamScanner(FatbinStates, BundleStates):
    """A scanner of CUDA fatbins and / or clang offload bundles: the chunk loop of
    ``ScanLoop`` with the states of both structures (what it found, and which handler a
    candidate starts with)."""

    def result(self) -> dict[str, Any] | None:
        out: dict[str, Any] = {}
        if self._fat.entries or self._cuda_error_count:
            t = self._fat.build()
            out["cuda"] = {
                "sass": list(t.sass),
                "ptx": list(t.ptx),
                "lto": list(t.lto),
                "ptx_isa": list(t.ptx_isa),
                "compressed": list(t.compressed),
                "entries": t.entries,
                "containers": t.containers,
                "errors": self._cuda_error_count,
                **({"error_messages": list(self._cuda_errors)} if self._cuda_errors else {}),
            }
        if self._ids or self._hip_error_count:
            h = hip_targets(self._ids, bundles=self._bundles, compressed=self._hip_compressed)
            out["hip"] = {
                "targets": list(h.target_ids),
                "gfx": list(h.gfx),
                "processors": list(h.processors),
                "compressed": list(h.compressed),
                "bundles": h.bundles,
                "errors": self._hip_error_count,
                **({"error_messages": list(self._hip_errors)} if self._hip_errors else {}),
            }
        return out or None

    def _start(self, kind: int, pos: int, prefill: bytearray) -> None:
        if kind == K_HIPREG:  # a HIP host binary: look for bundles from here on
            self._hip_gate = False
            self._set_needles()
            self._search()
            return
        if kind == K_FAT:
            handler, need = self._fat_container, CONTAINER_HEADER_SIZE
        elif kind == K_BUNDLE:
            handler, need = self._bundle, _BUNDLE_FIRST
        else:
            handler, need = self._ccob_head, 8
            if not self._plain:  # a v1 compressed bundle ends where the next one starts
                self._plain = True
                self._set_needles()
        self._skip = 0
        self._acc = prefill
        self._acc_pos = pos
        self._need = need
        self._handler = handler
        self._tail = b""


class CudaFatbinScanner(_StreamScanner):
    """Stream analyzer for CUDA fatbins (``.nv_fatbin`` / ``__nv_relfatbin`` / ``.fatbin``)."""

    def __init__(self, name: str = "<stream>") -> None:
        super().__init__(cuda=True, hip=False, name=name)


class HipBundleScanner(_StreamScanner):
    """Stream analyzer for clang offload bundles, plain and compressed (``.hip_fatbin``)."""

    def __init__(self, name: str = "<stream>") -> None:
        super().__init__(cuda=False, hip=True, name=name)


class GpuCodeScanner(_StreamScanner):
    """Both in one pass: ``{"cuda": {...}, "hip": {...}}`` (either key absent), or None.
    With ``sha256``, a file with device code also gets ``"sha256"``: the hex SHA-256 of all
    its bytes, hashed as they were fed."""

    def __init__(self, name: str = "<stream>", *, sha256: bool = False) -> None:
        super().__init__(cuda=True, hip=True, name=name, sha256=sha256)
