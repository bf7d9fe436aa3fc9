"""python: installed Python distributions (dist-info and egg-info metadata).

Finds ``*.dist-info/METADATA``, ``*.egg-info/PKG-INFO`` and ``*.egg-info``
files anywhere and reads their RFC 822 style headers (core metadata, any
version). The body (long description) is not parsed.

File ownership (phase 1 ``claim``): a dist-info's ``RECORD`` (CSV; paths
relative to the directory holding the dist-info, e.g. site-packages, and may
climb out of it: ``../../../bin/tool``) and an egg-info directory's
``installed-files.txt`` (paths relative to the egg-info directory). Paths are
normalised lexically and never leave the image root.

Declared SBOMs (PEP 770): the files of a dist-info's ``sboms/`` directory, reported on its
component (``pep770``).
"""

from __future__ import annotations

import csv
import posixpath
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from packageurl import PackageURL

from .._pep503 import canonicalize_name
from ..fsview.spec import PathSpec
from ..model import Component, ComponentType, EvidenceMethod
from . import pep770, register
from ._pkgdb import plain_purl
from ._premade import PremadeParser, premade, text_of
from .base import VIEW_ERRORS, CollectContext, Collector, GroupedPaths

if TYPE_CHECKING:
    from ..fsview.view import FsView

__all__ = [
    "PyDistribution",
    "PythonCollector",
    "parse_core_metadata",
    "parse_installed_files",
    "parse_record",
    "pypi_purl",
    "requirement_name",
]

_MAX_META = 16 * 1024 * 1024
_REQ_NAME_RX = re.compile(r"^\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)")
_EXTRA_RX = re.compile(r"\bextra\s*==")
_HEAD_END_RX = re.compile(r"\r?\n\r?\n")
_UNSET = {"", "unknown", "none"}


@dataclass
class PyDistribution:
    """One installed Python distribution's core metadata."""

    name: str
    version: str
    summary: str | None = None
    licenses: list[str] = field(default_factory=list)
    author: str | None = None
    home_page: str | None = None
    metadata_version: str | None = None
    requires: list[str] = field(default_factory=list)  # canonical names, no extras-only deps

    @property
    def canonical_name(self) -> str:
        return str(canonicalize_name(self.name))


def requirement_name(req: str) -> str | None:
    """Canonical project name of a Requires-Dist value; None when the requirement applies
    only to an extra (``foo; extra == "test"``) or cannot be read."""
    spec, _, marker = req.partition(";")
    if marker and _EXTRA_RX.search(marker):
        return None
    m = _REQ_NAME_RX.match(spec)
    return str(canonicalize_name(m.group(1))) if m else None


def _clean(v: str | None) -> str | None:
    if v is None:
        return None
    v = str(v).strip()
    return None if v.lower() in _UNSET else v


def _licenses(msg: object) -> list[str]:
    get = msg.get  # type: ignore[attr-defined]
    expr = _clean(get("License-Expression"))
    if expr:
        return [expr]
    lic = _clean(get("License"))
    # a short License field is a name; a long one is usually the whole license text
    if lic and "\n" not in lic and len(lic) <= 200:
        return [lic]
    out: list[str] = []
    for c in msg.get_all("Classifier") or []:  # type: ignore[attr-defined]
        parts = [p.strip() for p in str(c).split("::")]
        if len(parts) >= 2 and parts[0] == "License":
            name = parts[-1]
            if name not in ("OSI Approved",) and name not in out:
                out.append(name)
    return out


def _author(msg: object) -> str | None:
    get = msg.get  # type: ignore[attr-defined]
    for key in ("Author", "Maintainer"):
        v = _clean(get(key))
        if v:
            return " ".join(v.split())
    for key in ("Author-email", "Maintainer-email"):
        v = _clean(get(key))
        if v:
            from email.utils import getaddresses  # with email.parser ~15 ms: only when used

            addrs = [n or a for n, a in getaddresses([v]) if n or a]
            if addrs:
                return ", ".join(addrs)
    return None


def parse_core_metadata(text: str) -> PyDistribution:
    """Parse METADATA / PKG-INFO text. Raises ValueError without Name or Version."""
    m = _HEAD_END_RX.search(text)
    head = text[: m.start()] if m else text
    # imported here: email.parser and email.utils (with socket, calendar...) are ~15 ms of
    # start-up, needed only when an image has Python distributions
    from email.parser import HeaderParser

    msg = HeaderParser().parsestr(head)
    name = _clean(msg.get("Name"))
    version = _clean(msg.get("Version"))
    if not name or not version:
        raise ValueError("core metadata has no Name or Version")
    reqs: list[str] = []
    own = str(canonicalize_name(name))
    for r in msg.get_all("Requires-Dist") or []:
        n = requirement_name(str(r))
        if n and n != own and n not in reqs:
            reqs.append(n)
    summary = _clean(msg.get("Summary"))
    return PyDistribution(
        name=name,
        version=version,
        summary=" ".join(summary.split()) if summary else None,
        licenses=_licenses(msg),
        author=_author(msg),
        home_page=_clean(msg.get("Home-page")),
        metadata_version=_clean(msg.get("Metadata-Version")),
        requires=reqs,
    )


def _under(base: str, rel: str) -> str | None:
    """``rel`` joined to the absolute directory ``base`` and normalised; ``..`` at the
    root stays at the root (the image root is the only root there is)."""
    rel = rel.strip()
    if not rel:
        return None
    p = posixpath.normpath(posixpath.join(base, rel))
    if p.startswith("//"):  # normpath keeps a leading "//"
        p = "/" + p.lstrip("/")
    return None if p == "/" else p


def _slow_path(rel: str) -> bool:
    """Whether ``rel`` needs ``normpath`` (absolute, ``.``/``..``/empty components)."""
    return (rel[0] == "/" or rel[0] == "." or rel[-1] == "/" or "//" in rel
            or "/." in rel)


def parse_record(text: str, base: str) -> Iterator[str]:
    """Absolute paths of a dist-info ``RECORD``; ``base`` is the directory holding the
    ``.dist-info`` (paths in RECORD are relative to it; absolute ones are kept)."""
    if '"' in text:  # quoted fields (a path with a comma): the csv module reads those
        for row in csv.reader(text.splitlines()):
            if row:
                p = _under(base, row[0])
                if p is not None:
                    yield p
        return
    # fast path (no quoting anywhere): the path is everything before the first comma;
    # plain relative paths are joined without normpath (same result, ~10x faster)
    nbase = _under("/", base) or "/"
    prefix = "/" if nbase == "/" else nbase + "/"
    for line in text.splitlines():
        rel = line.split(",", 1)[0].strip()
        if not rel:
            continue
        if _slow_path(rel):
            p = _under(base, rel)
            if p is not None:
                yield p
        else:
            yield prefix + rel


def _read_metadata(fs: FsView, path: str) -> PyDistribution:
    return parse_core_metadata(fs.read_text(path))


def _read_record(fs: FsView, path: str, base: str) -> Iterable[str]:
    return parse_record(fs.read_text(path), base)


def parse_installed_files(text: str, egg_info_dir: str) -> Iterator[str]:
    """Absolute paths of an egg-info ``installed-files.txt`` (one path a line,
    relative to the ``.egg-info`` directory)."""
    for line in text.splitlines():
        p = _under(egg_info_dir, line)
        if p is not None:
            yield p


def installer_name(text: str) -> str | None:
    """The tool an ``INSTALLER`` file names (its first line, at most 100 characters)."""
    first = text.strip().splitlines()
    return first[0].strip()[:100] or None if first else None


def _read_installer(ctx: CollectContext, path: str) -> tuple[str | None]:
    try:
        if not ctx.fs.exists(path):
            return (None,)
        return (installer_name(ctx.fs.read_text(path)),)
    except VIEW_ERRORS as e:
        ctx.unknown(f"cannot read INSTALLER: {e}", path)
        return (None,)


def pypi_purl(dist: PyDistribution) -> str:
    fast = plain_purl("pypi", None, dist.canonical_name, dist.version, {})
    if fast is not None:
        return fast
    return PackageURL(type="pypi", name=dist.canonical_name, version=dist.version).to_string()


@register
class PythonCollector(Collector):
    id = "python"
    phase = 1
    version = "2"  # 2: PEP 770 declared SBOMs
    paths = (
        pep770.SPEC,
        PathSpec("/**/*.dist-info/METADATA", max_size=_MAX_META),
        PathSpec("/**/*.dist-info/INSTALLER", max_size=4096),
        PathSpec("/**/*.dist-info/RECORD", max_size=_MAX_META),
        PathSpec("/**/*.egg-info/installed-files.txt", max_size=_MAX_META),
        PathSpec("/**/*.egg-info/PKG-INFO", max_size=_MAX_META),
        PathSpec("/**/*.egg-info", max_size=_MAX_META),
    )

    def collect(self, ctx: CollectContext) -> Iterable[Component]:
        fs = ctx.fs
        files: list[tuple[str, str]] = []  # (metadata file, the .dist-info / .egg-info path)
        for path in fs.glob("/**/*.dist-info/METADATA"):
            files.append((path, path.rsplit("/", 1)[0]))
        for path in fs.glob("/**/*.egg-info/PKG-INFO"):
            files.append((path, path.rsplit("/", 1)[0]))
        for path in fs.glob("/**/*.egg-info"):
            if fs.is_file(path):
                files.append((path, path))
        out: list[Component] = []
        seen: set[str] = set()
        for path, meta_dir in sorted(files):
            if path in seen:
                continue
            seen.add(path)
            try:
                dist = premade(fs, "py-metadata", path, partial(_read_metadata, fs, path))
            except Exception as e:  # noqa: BLE001 - a bad file is an unknown naming it
                ctx.unknown(f"cannot read Python package metadata: {e}", path)
                continue
            props = {"location": meta_dir.rsplit("/", 1)[0] or "/"}
            if meta_dir.endswith(".dist-info"):
                installer = self._installer(ctx, meta_dir + "/INSTALLER")
                if installer:
                    props["installer"] = installer
            if dist.metadata_version:
                props["metadata-version"] = dist.metadata_version
            comp = Component(
                name=dist.name,
                version=dist.version,
                type=ComponentType.LIBRARY,
                purl=pypi_purl(dist),
                supplier=dist.author,
                description=dist.summary,
                licenses=list(dist.licenses),
                properties=props,
                evidence=[ctx.evidence(EvidenceMethod.PACKAGE_METADATA.value, path)],
                depends_on=list(dist.requires),
                ecosystem="pypi",
            )
            if meta_dir.endswith(".dist-info"):
                pep770.attach(ctx, comp, meta_dir)
            out.append(comp)
            self._claim(ctx, comp, meta_dir)
        return out

    @staticmethod
    def _claim(ctx: CollectContext, comp: Component, meta_dir: str) -> None:
        """Claim the files the distribution's installer recorded."""
        fs = ctx.fs
        parse: Callable[[str, str], Iterator[str]]
        if meta_dir.endswith(".dist-info"):
            path = meta_dir + "/RECORD"
            base = meta_dir.rsplit("/", 1)[0] or "/"
            parse = parse_record
        elif fs.is_dir(meta_dir):
            path = meta_dir + "/installed-files.txt"
            base = meta_dir
            parse = parse_installed_files
        else:
            return  # a lone .egg-info file lists nothing
        try:
            if not fs.is_file(path):
                return
            if parse is parse_record:  # parsed by a host walk's worker, or here
                ctx.claim(comp, premade(fs, "py-record", path,
                                        partial(_read_record, fs, path, base)))
            else:
                ctx.claim(comp, parse(fs.read_text(path), base))
            if parse is parse_record:  # its sha256 column: declared digests (_digests.py)
                ctx.manifest(comp, "record", path, base)
        except Exception as e:  # noqa: BLE001 - ownership is best effort, say so
            ctx.unknown(f"cannot read Python package file list: {e}", path)

    @staticmethod
    def _installer(ctx: CollectContext, path: str) -> str | None:
        (got,) = premade(ctx.fs, "py-installer", path, partial(_read_installer, ctx, path))
        return got


def record_base(path: str) -> str:
    """The directory a ``RECORD``'s relative paths start from: the one holding its
    ``.dist-info``."""
    meta_dir = path.rsplit("/", 1)[0]
    return meta_dir.rsplit("/", 1)[0] or "/"


#: what a host walk's workers parse for this collector (``host/premake.py``)
PREMADE = (
    # a wheel's METADATA, an egg's PKG-INFO or a lone .egg-info file: the same core
    # metadata (Debian's python3-* packages install eggs)
    PremadeParser("py-metadata",
                  lambda p: p.endswith((".dist-info/METADATA", ".egg-info/PKG-INFO", ".egg-info")),
                  lambda p, c: parse_core_metadata(text_of(c)), returns=(PyDistribution,)),
    PremadeParser("py-installer", lambda p: p.endswith(".dist-info/INSTALLER"),
                  lambda p, c: (installer_name(text_of(c)),)),
    # grouped by directory: claimed per directory (collectors/base.py)
    PremadeParser("py-record", lambda p: p.endswith(".dist-info/RECORD"),
                  lambda p, c: GroupedPaths.of(parse_record(text_of(c), record_base(p))),
                  returns=(GroupedPaths,)),
)
