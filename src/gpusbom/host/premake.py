"""What the host walk's workers parse of the files they captured, for the collectors
(``collectors/_premade.py`` says why). The parses and the files they apply to are the
collectors' own declarations (``gpusbom.collectors.premade_parsers``): nothing here copies
a collector's file patterns or parsers."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..fsview.types import Entry


def make(entries: Iterable[Entry]) -> dict[tuple[str, str], Any]:
    """What the collectors will ask for, parsed from the captured files in ``entries``."""
    from ..collectors import premade_parsers

    parsers = premade_parsers()
    out: dict[tuple[str, str], Any] = {}
    for e in entries:
        c = e.content
        if c is None:
            continue
        p = e.path
        for parser in parsers:
            if not parser.wants(p):
                continue
            try:
                out[parser.kind, p] = parser.parse(p, c)
            except parser.errors:
                # no result: the collector parses the file again and reports its error as
                # an unknown naming it (a worker has no report to write to)
                continue
    return out


def warm() -> None:
    """Run each parser once on a small input, before the workers fork: what they import on
    first use is then imported once, not in every worker."""
    make(())
    from ..collectors.dpkg import INFO, STATUS
    from ..fsview.types import ContentRef, Entry, EntryKind

    samples = {
        "/w/x-1.dist-info/METADATA": b"Metadata-Version: 2.1\nName: x\nVersion: 1\n"
                                     b"Requires-Dist: y>=1\nAuthor-email: A <a@b.c>\n",
        "/w/x-1.dist-info/RECORD": b"x/__init__.py,,\n",
        "/w/x-1.dist-info/INSTALLER": b"pip\n",
        INFO + "/x.list": b"/.\n/usr\n",
        INFO + "/x.md5sums": b"d41d8cd98f00b204e9800998ecf8427e  usr/x\n",
        STATUS: b"Package: x\nStatus: install ok installed\nVersion: 1\n\n",
        "/w/include/cuda.h": b"#define CUDA_VERSION 12040\n",
        "/w/triton/backends/nvidia/bin/ptxas": b"Cuda compilation tools, release 12.4, V12.4.99",
    }
    make([Entry(p, EntryKind.FILE, content=ContentRef(data=b)) for p, b in samples.items()])
