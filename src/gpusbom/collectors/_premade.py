"""Package-database files parsed where they were read: in the host walk's workers.

The parsing that package catalogers do per package (a wheel's ``METADATA`` and ``RECORD``,
dpkg's ``status`` and ``info/*.list``) is a pure function of one file's bytes. On a host the
walk runs in forked workers (``host/parwalk.py``); each worker parses the files of these
kinds it captured and sends the results back with the entries, so the parsing runs on
every core instead of after the walk on one. A collector asks ``premade`` for the result:
it gets the worker's when there is one (the same function of the same bytes), else it
parses as always; a file a worker could not parse is parsed again here, so its error is
reported the usual way. Views other than a host's carry no results and nothing changes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from ..fsview.types import Entry

T = TypeVar("T")

STATUS = "/var/lib/dpkg/status"
_INFO = "/var/lib/dpkg/info/"


def premade(fs: Any, kind: str, path: str, parse: Callable[[], T]) -> T:
    """The result of ``kind`` for ``path`` a walk worker made, else ``parse()``."""
    got = getattr(fs, "premade", None)
    if got:
        hit = got.get((kind, path))
        if hit is not None:
            return hit  # type: ignore[no-any-return]
    return parse()


def _record_base(path: str) -> str:
    meta_dir = path.rsplit("/", 1)[0]
    return meta_dir.rsplit("/", 1)[0] or "/"


def make(entries: Iterable[Entry]) -> dict[tuple[str, str], Any]:
    """What the collectors will ask for, parsed from the captured files in ``entries``."""
    from .dpkg import parse_dpkg_list, parse_dpkg_status
    from .python import parse_core_metadata, parse_record

    out: dict[tuple[str, str], Any] = {}
    for e in entries:
        c = e.content
        if c is None:
            continue
        p = e.path
        try:
            if p.endswith(".dist-info/METADATA"):
                out["py-metadata", p] = parse_core_metadata(
                    c.read().decode("utf-8", errors="replace"))
            elif p.endswith(".dist-info/RECORD"):
                out["py-record", p] = list(parse_record(
                    c.read().decode("utf-8", errors="replace"), _record_base(p)))
            elif p.startswith(_INFO) and p.endswith(".list"):
                out["dpkg-list", p] = parse_dpkg_list(c.read())
            elif p == STATUS:
                with c.open() as f:
                    out["dpkg-status", p] = parse_dpkg_status(f)
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
        _INFO + "x.list": b"/.\n/usr\n",
        STATUS: b"Package: x\nStatus: install ok installed\nVersion: 1\n\n",
    }
    make([Entry(p, EntryKind.FILE, content=ContentRef(data=b)) for p, b in samples.items()])
