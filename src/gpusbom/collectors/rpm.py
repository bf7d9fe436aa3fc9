"""rpm: RHEL / UBI 8+ / Fedora / Rocky / Alma packages from the sqlite rpmdb.

The database (``rpmdb.sqlite``, table ``Packages(hnum, blob)``) holds one rpm
header per installed package. Headers are parsed here, bounded against
hostile values (no rpm library is needed):

    int32 il   number of index entries        (big-endian throughout)
    int32 dl   size of the data store
    il x 16 bytes: int32 tag, int32 type, int32 offset, int32 count
    dl bytes of data

The files each package owns come from the header's file list (DIRNAMES,
DIRINDEXES, BASENAMES; OLDFILENAMES in very old headers) and are claimed for
stack collectors (phase 1 ``claim``).

Berkeley DB databases (RHEL 7 and 8, UBI 8, Rocky 8: ``/var/lib/rpm/Packages``) are read
by the bounded hash-page reader in ``rpm_bdb``; a damaged page or overflow chain is an
unknown naming it. SUSE's ndb (``Packages.db``) is not read (no tool here can write a
real one to test against); it is reported as an unknown.
"""

from __future__ import annotations

import os
import struct
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import quote

from ..errors import CollectorError
from ..fsview.spec import PathSpec
from ..model import Component
from . import register
from ._pkgdb import attribute_layers, distro_purl, history_snapshots, package_component, present
from .base import CollectContext, Collector

__all__ = [
    "RpmCollector",
    "RpmHeaderError",
    "RpmPackage",
    "header_files",
    "parse_rpm_header",
    "read_bdb_content",
    "read_rpmdb_bytes",
    "read_rpmdb_file",
    "resolve_requires",
    "rpm_purl",
]

SQLITE_DBS = ("/usr/lib/sysimage/rpm/rpmdb.sqlite", "/var/lib/rpm/rpmdb.sqlite")
BDB_DBS = ("/var/lib/rpm/Packages", "/usr/lib/sysimage/rpm/Packages")
NDB_DBS = ("/var/lib/rpm/Packages.db", "/usr/lib/sysimage/rpm/Packages.db")
MAX_DB_SIZE = 512 * 1024 * 1024
MAX_WAL_SIZE = 64 * 1024 * 1024

# header tags
TAG_NAME = 1000
TAG_VERSION = 1001
TAG_RELEASE = 1002
TAG_EPOCH = 1003
TAG_SUMMARY = 1004
TAG_VENDOR = 1011
TAG_LICENSE = 1014
TAG_URL = 1020
TAG_ARCH = 1022
TAG_SOURCERPM = 1044
TAG_PROVIDENAME = 1047
TAG_REQUIRENAME = 1049
TAG_OLDFILENAMES = 1027
TAG_DIRINDEXES = 1116
TAG_BASENAMES = 1117
TAG_DIRNAMES = 1118
TAG_MODULARITYLABEL = 5096

_WANTED = frozenset(
    {TAG_NAME, TAG_VERSION, TAG_RELEASE, TAG_EPOCH, TAG_SUMMARY, TAG_VENDOR, TAG_LICENSE,
     TAG_URL, TAG_ARCH, TAG_SOURCERPM, TAG_PROVIDENAME, TAG_REQUIRENAME, TAG_MODULARITYLABEL}
)
_FILE_TAGS = frozenset({TAG_OLDFILENAMES, TAG_DIRINDEXES, TAG_BASENAMES, TAG_DIRNAMES})
_WANTED_WITH_FILES = _WANTED | _FILE_TAGS

# header data types
T_INT32 = 4
T_STRING = 6
T_BIN = 7
T_STRING_ARRAY = 8
T_I18NSTRING = 9

_MAX_INDEX = 0xFFFF  # rpm's own HEADER_TAGS_MAX
_MAX_DATA = 256 * 1024 * 1024  # rpm's HEADER_DATA_MAX
_ENTRY = struct.Struct(">iiii")
_HEAD = struct.Struct(">ii")


class RpmHeaderError(CollectorError, ValueError):
    pass


@dataclass
class RpmPackage:
    """One package of an RPM database."""

    name: str
    version: str
    release: str
    epoch: int | None = None
    arch: str | None = None
    license: str | None = None
    vendor: str | None = None
    summary: str | None = None
    url: str | None = None
    source_rpm: str | None = None
    modularity_label: str | None = None
    provides: list[str] = field(default_factory=list)
    requires: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)  # absolute paths the package owns

    @property
    def evr(self) -> str:
        """``[epoch:]version-release`` (epoch omitted when absent or 0)."""
        base = f"{self.version}-{self.release}"
        return f"{self.epoch}:{base}" if self.epoch else base

    @property
    def key(self) -> tuple[str, str]:
        return (self.name, self.arch or "")


def _cstring(store: bytes, off: int, dl: int) -> tuple[str, int]:
    end = store.find(b"\0", off, dl)
    if end == -1:
        raise RpmHeaderError("unterminated string")
    return store[off:end].decode("utf-8", errors="replace"), end + 1


def _string_array(store: bytes, off: int, count: int, dl: int) -> list[str]:
    """``count`` NUL-terminated strings from ``off`` (one split: file lists are long)."""
    parts = store[off:dl].split(b"\0", count)
    if len(parts) <= count:
        raise RpmHeaderError("unterminated string")
    return [b.decode("utf-8", errors="replace") for b in parts[:count]]


def parse_rpm_header(blob: bytes, *, files: bool = False) -> dict[int, object]:
    """Decode the tags we use from one header blob: tag -> str | list[str] | list[int].

    ``files``: also decode the file list tags (DIRNAMES, DIRINDEXES, BASENAMES,
    OLDFILENAMES)."""
    wanted = _WANTED_WITH_FILES if files else _WANTED
    n = len(blob)
    if n < 8:
        raise RpmHeaderError("header too short")
    il, dl = _HEAD.unpack_from(blob, 0)
    if il < 1 or il > _MAX_INDEX:
        raise RpmHeaderError(f"bad index count {il}")
    if dl < 0 or dl > _MAX_DATA:
        raise RpmHeaderError(f"bad data size {dl}")
    start = 8 + 16 * il
    if start + dl > n:
        raise RpmHeaderError("header truncated")
    store = blob[start : start + dl]
    out: dict[int, object] = {}
    for i in range(il):
        tag, typ, off, count = _ENTRY.unpack_from(blob, 8 + 16 * i)
        if tag not in wanted:
            continue
        if off < 0 or off >= dl or count < 1 or count > dl:
            raise RpmHeaderError(f"tag {tag}: bad offset/count")
        if typ == T_STRING:
            out[tag], _ = _cstring(store, off, dl)
        elif typ == T_I18NSTRING:
            out[tag], _ = _cstring(store, off, dl)  # the first is the C locale
        elif typ == T_STRING_ARRAY:
            out[tag] = _string_array(store, off, count, dl)
        elif typ == T_INT32:
            if off % 4 or off + 4 * count > dl:
                raise RpmHeaderError(f"tag {tag}: bad int32 array")
            out[tag] = list(struct.unpack_from(f">{count}i", store, off))
        # other types are not used for the tags we read
    return out


def _s(h: dict[int, object], tag: int) -> str | None:
    v = h.get(tag)
    if isinstance(v, list):
        v = v[0] if v and isinstance(v[0], str) else None
    return v.strip() or None if isinstance(v, str) else None


def header_files(h: dict[int, object]) -> list[str]:
    """Absolute paths of a decoded header's file list; [] when it has none or the
    three parallel arrays disagree (a damaged header owns nothing rather than
    the wrong files)."""
    base = h.get(TAG_BASENAMES)
    if isinstance(base, list):
        dirs = h.get(TAG_DIRNAMES)
        idx = h.get(TAG_DIRINDEXES)
        if not isinstance(dirs, list) or not isinstance(idx, list) or len(idx) != len(base):
            return []
        nd = len(dirs)
        out: list[str] = []
        for i, b in zip(idx, base, strict=False):
            if not isinstance(i, int) or not 0 <= i < nd or not isinstance(b, str):
                return []
            d = dirs[i]
            if not isinstance(d, str):
                return []
            out.append(d + b if d.startswith("/") else "/" + d + b)
        return out
    old = h.get(TAG_OLDFILENAMES)
    if isinstance(old, list):
        return [p if p.startswith("/") else "/" + p for p in old if isinstance(p, str) and p]
    return []


def _package_from_header(h: dict[int, object]) -> RpmPackage | None:
    name = _s(h, TAG_NAME)
    version = _s(h, TAG_VERSION)
    release = _s(h, TAG_RELEASE)
    if not name or version is None or release is None:
        raise RpmHeaderError("header has no name, version or release")
    if name == "gpg-pubkey":
        return None
    ep = h.get(TAG_EPOCH)
    epoch = ep[0] if isinstance(ep, list) and ep and isinstance(ep[0], int) else None
    provides = h.get(TAG_PROVIDENAME)
    requires = h.get(TAG_REQUIRENAME)
    return RpmPackage(
        name=name,
        version=version,
        release=release,
        epoch=epoch,
        arch=_s(h, TAG_ARCH),
        license=_s(h, TAG_LICENSE),
        vendor=_s(h, TAG_VENDOR),
        summary=_s(h, TAG_SUMMARY),
        url=_s(h, TAG_URL),
        source_rpm=_s(h, TAG_SOURCERPM),
        modularity_label=_s(h, TAG_MODULARITYLABEL),
        provides=[p for p in provides if isinstance(p, str)] if isinstance(provides, list) else [],
        requires=[r for r in requires if isinstance(r, str)] if isinstance(requires, list) else [],
        files=header_files(h),
    )


def read_rpmdb_file(
    path: str, *, private: bool = False, files: bool = False
) -> tuple[list[RpmPackage], list[str]]:
    """Read a sqlite rpmdb on disk. Returns packages and problems (headers that did not
    parse). Raises ``sqlite3.DatabaseError`` if the file is not a readable rpmdb.
    ``files``: fill ``RpmPackage.files`` from the headers' file lists.

    The file is opened read-only and immutable (its write-ahead log, if any, is
    ignored) unless ``private``: then it is a private copy, opened normally so
    that SQLite applies a ``-wal`` file lying next to it.
    """
    uri = "file:" + quote(os.path.abspath(path)) + ("" if private else "?mode=ro&immutable=1")
    import sqlite3  # only for an rpmdb.sqlite: not a start-up cost of every scan

    conn = sqlite3.connect(uri, uri=True)
    try:
        pkgs: list[RpmPackage] = []
        problems: list[str] = []
        for hnum, blob in conn.execute("SELECT hnum, blob FROM Packages ORDER BY hnum"):
            if not isinstance(blob, (bytes, bytearray, memoryview)):
                problems.append(f"header {hnum}: not a blob")
                continue
            try:
                pkg = _package_from_header(parse_rpm_header(bytes(blob), files=files))
            except RpmHeaderError as e:
                problems.append(f"header {hnum}: {e}")
                continue
            if pkg is not None:
                pkgs.append(pkg)
        return pkgs, problems
    finally:
        conn.close()


def read_rpmdb_bytes(
    data: bytes, wal: bytes | None = None, *, files: bool = False
) -> tuple[list[RpmPackage], list[str]]:
    """Same as ``read_rpmdb_file`` for database content held in memory, with the
    content of its write-ahead log (``rpmdb.sqlite-wal``) when it has one."""
    with tempfile.TemporaryDirectory(prefix="gpusbom-rpmdb-") as d:
        p = os.path.join(d, "rpmdb.sqlite")
        with open(p, "wb") as f:
            f.write(data)
        if wal:
            with open(p + "-wal", "wb") as f:
                f.write(wal)
        return read_rpmdb_file(p, private=bool(wal), files=files)


def _read_content(
    content: object, wal: bytes | None = None, *, files: bool = False
) -> tuple[list[RpmPackage], list[str]]:
    spooled = getattr(content, "spooled_path", None)
    if wal:
        return read_rpmdb_bytes(content.read(), wal, files=files)  # type: ignore[attr-defined]
    if spooled:
        return read_rpmdb_file(spooled, files=files)
    return read_rpmdb_bytes(content.read(), files=files)  # type: ignore[attr-defined]


def read_bdb_content(content: object, *, files: bool = False) -> tuple[list[RpmPackage], list[str]]:
    """Packages of a Berkeley DB rpmdb (``Packages``) held in ``content`` (a ContentRef).
    Raises ``BdbError`` when the file as a whole is unreadable."""
    from .rpm_bdb import read_bdb_headers

    pkgs: list[RpmPackage] = []
    with content.open() as f:  # type: ignore[attr-defined]
        size = f.seek(0, os.SEEK_END)
        blobs, problems = read_bdb_headers(f, size)
    for i, blob in enumerate(blobs):
        try:
            pkg = _package_from_header(parse_rpm_header(blob, files=files))
        except RpmHeaderError as e:
            problems.append(f"header {i}: {e}")
            continue
        if pkg is not None:
            pkgs.append(pkg)
    return pkgs, problems


def _snapshot(content: object) -> dict[tuple[str, str], str]:
    pkgs, _ = _read_content(content)
    return {p.key: p.evr for p in pkgs}


def _bdb_snapshot(content: object) -> dict[tuple[str, str], str]:
    pkgs, _ = read_bdb_content(content)
    return {p.key: p.evr for p in pkgs}


def rpm_purl(pkg: RpmPackage, os_release: dict[str, str]) -> str:
    namespace = (os_release.get("ID") or "").strip().lower() or None
    return distro_purl(
        "rpm",
        namespace,
        pkg.name,
        f"{pkg.version}-{pkg.release}",
        os_release,
        arch=pkg.arch,
        epoch=str(pkg.epoch) if pkg.epoch else None,
        # the source RPM file name, as Syft writes it (advisories name source packages)
        upstream=pkg.source_rpm or None,
    )


def resolve_requires(pkgs: list[RpmPackage]) -> dict[str, list[str]]:
    """name -> names of the installed packages providing what it requires."""
    providers: dict[str, list[str]] = {}
    for p in pkgs:
        for cap in [p.name, *p.provides]:
            lst = providers.setdefault(cap, [])
            if p.name not in lst:
                lst.append(p.name)
    out: dict[str, list[str]] = {}
    for p in pkgs:
        deps: list[str] = []
        for req in p.requires:
            if req.startswith("rpmlib("):
                continue
            cands = providers.get(req)
            if not cands:
                continue
            dep = req if req in cands else cands[0]
            if dep != p.name and dep not in deps:
                deps.append(dep)
        out.setdefault(p.name, [])
        for d in deps:
            if d not in out[p.name]:
                out[p.name].append(d)
    return out


@register
class RpmCollector(Collector):
    id = "rpm"
    phase = 1
    version = "1"
    paths = (
        *(PathSpec(p, history=True, max_size=MAX_DB_SIZE) for p in SQLITE_DBS),
        *(PathSpec(p + "-wal", max_size=MAX_WAL_SIZE) for p in SQLITE_DBS),
        *(PathSpec(p, history=True, max_size=MAX_DB_SIZE) for p in BDB_DBS),
        *(PathSpec(p, max_size=0) for p in NDB_DBS),
    )

    def collect(self, ctx: CollectContext) -> Iterable[Component]:
        fs = ctx.fs
        osr = ctx.target.os_release or {}
        out: list[Component] = []
        done: set[str] = set()
        for path in SQLITE_DBS:
            real = self._resolve(ctx, path)
            if real is not None and real not in done:
                done.add(real)
                out.extend(self._read_db(ctx, real, osr))
        if not done:
            for path in BDB_DBS:
                real = self._resolve(ctx, path)
                if real is not None and real not in done:
                    done.add(real)
                    out.extend(self._read_db(ctx, real, osr, bdb=True))
        if not done:
            for path in NDB_DBS:
                if fs.exists(path):
                    ctx.unknown("rpmdb in ndb format is not supported", path)
                    break
        return out

    @staticmethod
    def _resolve(ctx: CollectContext, path: str) -> str | None:
        """The real path of the rpmdb at ``path``; None when absent or unresolvable (an unknown)."""
        try:
            return ctx.fs.realpath(path) if ctx.fs.exists(path) else None
        except Exception as e:  # noqa: BLE001 - any view error: recorded as an unknown
            ctx.unknown(f"cannot resolve rpmdb: {e}", path)
            return None

    @staticmethod
    def _wal(ctx: CollectContext, path: str) -> bytes | None:
        """A non-empty write-ahead log next to the database (rpm normally checkpoints it
        on exit; one left behind holds the latest transactions)."""
        wal = path + "-wal"
        try:
            entry = ctx.fs.lookup(wal)
            if entry is None or entry.size == 0:
                return None
            return ctx.fs.read_bytes(wal)
        except Exception as e:  # noqa: BLE001 - a bad file is an unknown naming it
            ctx.unknown(f"cannot read rpmdb write-ahead log, it is ignored: {e}", wal)
            return None

    def _read_db(
        self, ctx: CollectContext, path: str, osr: dict[str, str], *, bdb: bool = False
    ) -> list[Component]:
        fs = ctx.fs
        what = "Berkeley DB rpmdb" if bdb else "rpmdb"
        try:
            entry = fs.lookup(path)
            content = entry.content if entry is not None else None
            if content is None:
                fs.read_bytes(path)  # raises the reason (not captured / too large)
                raise FileNotFoundError(path)
            if bdb:
                pkgs, problems = read_bdb_content(content, files=True)
            else:
                pkgs, problems = _read_content(content, self._wal(ctx, path), files=True)
        except Exception as e:  # noqa: BLE001 - a bad file is an unknown naming it
            ctx.unknown(f"cannot read {what}: {e}", path)
            return []
        for p in problems:
            ctx.unknown(f"{what}: {p}", path)
        snaps = history_snapshots(fs, path, _bdb_snapshot if bdb else _snapshot, ctx.unknown)
        intro = attribute_layers(snaps, {p.key: p.evr for p in pkgs})
        final_layer = fs.layer_of(path)
        deps = resolve_requires(pkgs)
        comps: list[Component] = []
        for pkg in pkgs:
            comp = self._component(pkg, osr, path, intro.get(pkg.key) or final_layer, deps)
            ctx.claim(comp, pkg.files)
            comps.append(comp)
        return comps

    def _component(
        self,
        pkg: RpmPackage,
        osr: dict[str, str],
        path: str,
        layer: str | None,
        deps: dict[str, list[str]],
    ) -> Component:
        props = present(
            ("architecture", pkg.arch),
            ("source-rpm", pkg.source_rpm),
            ("epoch", str(pkg.epoch) if pkg.epoch is not None else None),
            ("modularity-label", pkg.modularity_label),
        )
        return package_component(
            self.id,
            name=pkg.name,
            version=pkg.evr,
            purl=rpm_purl(pkg, osr),
            supplier=pkg.vendor,
            description=pkg.summary,
            licenses=[pkg.license] if pkg.license else [],
            properties=props,
            path=path,
            layer=layer,
            depends_on=list(deps.get(pkg.name, [])),
            ecosystem="rpm",
        )
