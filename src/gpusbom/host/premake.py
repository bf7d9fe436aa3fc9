"""What the host walk's workers parse of the files they captured, for the collectors
(``collectors/_premade.py`` says why; the parsers are the collectors' own)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..fsview.types import Entry

STATUS = "/var/lib/dpkg/status"
_INFO = "/var/lib/dpkg/info/"
_TRITON_BIN = "/triton/backends/nvidia/bin/"


def _record_base(path: str) -> str:
    meta_dir = path.rsplit("/", 1)[0]
    return meta_dir.rsplit("/", 1)[0] or "/"


def make(entries: Iterable[Entry]) -> dict[tuple[str, str], Any]:
    """What the collectors will ask for, parsed from the captured files in ``entries``."""
    from ..collectors._digests import own_rows
    from ..collectors._libs import scan_stream
    from ..collectors.base import GroupedPaths
    from ..collectors.cuda import header_versions, header_wanted
    from ..collectors.dpkg import parse_dpkg_list, parse_dpkg_status
    from ..collectors.python import installer_name, parse_core_metadata, parse_record
    from ..collectors.triton import _TOOL_MAX, _TOOL_NEEDLE, _TOOL_RX, NVIDIA_TOOLS, tool_release

    out: dict[tuple[str, str], Any] = {}
    for e in entries:
        c = e.content
        if c is None:
            continue
        p = e.path
        try:
            if p.endswith((".dist-info/METADATA", ".egg-info/PKG-INFO", ".egg-info")):
                # a wheel's METADATA, an egg's PKG-INFO or a lone .egg-info file: the same
                # core metadata (Debian's python3-* packages install eggs)
                out["py-metadata", p] = parse_core_metadata(
                    c.read().decode("utf-8", errors="replace"))
            elif p.endswith(".dist-info/INSTALLER"):
                out["py-installer", p] = (installer_name(c.read().decode("utf-8",
                                                                        errors="replace")),)
            elif p.endswith(".dist-info/RECORD"):
                text = c.read().decode("utf-8", errors="replace")
                # grouped by directory: claimed per directory (collectors/base.py)
                out["py-record", p] = GroupedPaths.of(parse_record(text, _record_base(p)))
                # and the row of the distribution's METADATA, its declared digest
                out["manifest-digests", p] = own_rows("record", text, _record_base(p))
            elif p.startswith(_INFO) and p.endswith(".md5sums"):
                # the rows naming a file "status" (the package's own evidence): usually none
                out["manifest-digests", p] = own_rows(
                    "md5sums", c.read().decode("utf-8", errors="replace"), "/")
            elif p.startswith(_INFO) and p.endswith(".list"):
                out["dpkg-list", p] = GroupedPaths.of(parse_dpkg_list(c.read()))
            elif p == STATUS:
                with c.open() as f:
                    out["dpkg-status", p] = parse_dpkg_status(f)
            elif p.endswith(".h") and header_wanted(p):
                out["cuda-header", p] = header_versions(
                    p[p.rfind("/") + 1 :], c.read().decode("utf-8", errors="replace"))
            elif p[p.rfind("/") + 1 :] in NVIDIA_TOOLS and _TRITON_BIN in p:
                # a bundled ptxas is tens of MB: its release string is found here, on every
                # core, rather than after the walk in the scanning process
                with c.open() as f:
                    out["triton-tool", p] = (tool_release(
                        scan_stream(f, _TOOL_RX, _TOOL_MAX, _TOOL_NEEDLE)),)
        except Exception:  # noqa: BLE001, S112 - parsed again by the collector, which reports it
            continue
    return out


def warm() -> None:
    """Run each parser once on a small input, before the workers fork: what they import on
    first use is then imported once, not in every worker."""
    make(())
    from ..fsview.types import ContentRef, Entry, EntryKind

    samples = {
        "/w/x-1.dist-info/METADATA": b"Metadata-Version: 2.1\nName: x\nVersion: 1\n"
                                     b"Requires-Dist: y>=1\nAuthor-email: A <a@b.c>\n",
        "/w/x-1.dist-info/RECORD": b"x/__init__.py,,\n",
        "/w/x-1.dist-info/INSTALLER": b"pip\n",
        _INFO + "x.list": b"/.\n/usr\n",
        _INFO + "x.md5sums": b"d41d8cd98f00b204e9800998ecf8427e  usr/x\n",
        STATUS: b"Package: x\nStatus: install ok installed\nVersion: 1\n\n",
        "/w/include/cuda.h": b"#define CUDA_VERSION 12040\n",
        "/w/triton/backends/nvidia/bin/ptxas": b"Cuda compilation tools, release 12.4, V12.4.99",
    }
    make([Entry(p, EntryKind.FILE, content=ContentRef(data=b)) for p, b in samples.items()])
