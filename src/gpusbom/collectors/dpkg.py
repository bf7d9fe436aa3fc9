"""dpkg: Debian and Ubuntu packages.

Reads ``/var/lib/dpkg/status`` (with every layer's version, to find the layer
that introduced each package's current version) and the distroless
``/var/lib/dpkg/status.d/*`` files (one or more stanzas each). Stanzas are
parsed as python-debian's deb822 does (``_stanzas.py``). Licenses come from
``/usr/share/doc/<package>/copyright`` when it is machine-readable (DEP-5).

File ownership (phase 1 ``claim``): ``/var/lib/dpkg/info/<pkg>.list`` or
``<pkg>:<arch>.list`` (one absolute path a line; ``/.`` is the root and is
skipped); distroless images have no ``.list`` files, so
``/var/lib/dpkg/status.d/<name>.md5sums`` (``<md5>  <path relative to />``)
is used there.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, BinaryIO

from ..fsview.spec import PathSpec
from ..fsview.types import ContentRef
from ..fsview.view import NotCapturedError
from ..model import Component
from . import register
from ._digests import own_rows
from ._pkgdb import attribute_layers, distro_purl, history_snapshots, package_component, present
from ._premade import PremadeParser, premade, text_of
from ._stanzas import iter_paragraphs
from .base import VIEW_ERRORS, CollectContext, Collector, GroupedPaths

if TYPE_CHECKING:
    from ..fsview.view import FsView

__all__ = [
    "INFO",
    "STATUS",
    "STATUS_D",
    "DebPackage",
    "DpkgCollector",
    "deb_purl",
    "installed_versions",
    "parse_copyright_licenses",
    "parse_dep5_licenses",
    "parse_dpkg_list",
    "parse_dpkg_md5sums",
    "parse_dpkg_status",
    "parse_relation_names",
]

STATUS = "/var/lib/dpkg/status"
STATUS_D = "/var/lib/dpkg/status.d"
INFO = "/var/lib/dpkg/info"
LIST_GLOB = INFO + "/*.list"
MD5SUMS_GLOB = INFO + "/*.md5sums"
MAX_LIST = 64 * 1024 * 1024
COPYRIGHT_GLOB = "/usr/share/doc/*/copyright"

#: dpkg states in which the package's files are on disk (dpkg-query(1));
#: ``not-installed`` and ``config-files`` are the ones that are not.
_PRESENT_STATES = frozenset(
    {"installed", "triggers-pending", "triggers-awaited", "half-configured", "unpacked",
     "half-installed"}
)
_NAME_RX = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9+.\-]*)")
_SOURCE_RX = re.compile(r"^\s*(\S+)(?:\s*\(\s*([^)\s]+)\s*\))?")


@dataclass
class DebPackage:
    """One package of a dpkg status database."""

    name: str
    version: str
    architecture: str | None = None
    status: str | None = None  # the third word of Status (installed, unpacked, ...)
    source: str | None = None  # source package name (the binary name when not given)
    source_version: str | None = None  # the binary version when not given
    maintainer: str | None = None
    section: str | None = None
    installed_size: str | None = None
    description: str | None = None
    homepage: str | None = None
    depends: list[str] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, str]:
        return (self.name, self.architecture or "")


def parse_relation_names(value: str | None) -> list[str]:
    """Package names of a Depends-style field: the first alternative of each
    comma-separated relation, without version constraints or ``:arch`` qualifiers."""
    if not value:
        return []
    names: list[str] = []
    seen: set[str] = set()
    for rel in value.split(","):
        first = rel.split("|", 1)[0]
        m = _NAME_RX.match(first)
        if m is None:
            continue
        name = m.group(1)
        if name not in seen:
            seen.add(name)
            names.append(name)
    return names


def _decode(data: bytes | str) -> str:
    return data if isinstance(data, str) else data.decode("utf-8", errors="replace")


def _lines(data: bytes | str | BinaryIO) -> Iterable[str]:
    if isinstance(data, (bytes, str)):
        return _decode(data).splitlines(True)
    # a file: read line by line, so a status file of hundreds of MB is never held whole
    return io.TextIOWrapper(data, encoding="utf-8", errors="replace", newline="")


def parse_dpkg_status(
    data: bytes | str | BinaryIO, *, require_installed: bool = True
) -> tuple[list[DebPackage], list[str]]:
    """Parse a dpkg status file (or a distroless status.d file): its bytes, text, or a
    binary file object (streamed).

    Returns the packages whose files are on disk and a list of problems
    (stanzas that name a package but lack a version). With
    ``require_installed=False`` (status.d) a stanza without Status counts as
    installed.
    """
    pkgs: list[DebPackage] = []
    problems: list[str] = []
    # python-debian's paragraph parser, faster (_stanzas.py: the same result, tested)
    for para in iter_paragraphs(_lines(data)):
        name = (para.get("package") or "").strip()
        if not name:
            continue
        status_field = (para.get("status") or "").split()
        state = status_field[-1] if status_field else None
        if state is None:
            if require_installed:
                continue
        elif state not in _PRESENT_STATES:
            continue
        version = (para.get("version") or "").strip()
        if not version:
            problems.append(f"package {name} has no Version")
            continue
        src_name, src_version = name, version
        src = para.get("source")
        if src:
            m = _SOURCE_RX.match(src)
            if m:
                src_name = m.group(1)
                src_version = m.group(2) or version
        depends = parse_relation_names(para.get("pre-depends")) + parse_relation_names(
            para.get("depends")
        )
        desc = para.get("description")
        pkgs.append(
            DebPackage(
                name=name,
                version=version,
                architecture=(para.get("architecture") or "").strip() or None,
                status=state or "installed",
                source=src_name,
                source_version=src_version,
                maintainer=(para.get("maintainer") or "").strip() or None,
                section=(para.get("section") or "").strip() or None,
                installed_size=(para.get("installed-size") or "").strip() or None,
                description=desc.split("\n", 1)[0].strip() or None if desc else None,
                homepage=(para.get("homepage") or "").strip() or None,
                depends=list(dict.fromkeys(d for d in depends if d != name)),
            )
        )
    return pkgs, problems


def _parse_status_file(fs: FsView) -> tuple[list[DebPackage], list[str]]:
    with fs.open(STATUS) as f:
        return parse_dpkg_status(f)


def _read_list(fs: FsView, path: str) -> list[str]:
    return parse_dpkg_list(fs.read_bytes(path))


def parse_dpkg_list(data: bytes | str) -> list[str]:
    """Paths of a ``/var/lib/dpkg/info/<pkg>.list`` file (absolute; ``/.`` and blank
    lines dropped). Paths may contain spaces: only the line break ends one."""
    text = _decode(data)
    return [ln for ln in text.split("\n") if ln and ln != "/." and ln[0] == "/"]


def parse_dpkg_md5sums(data: bytes | str) -> list[str]:
    """Absolute paths of a ``md5sums`` file (``<32 hex>  <path relative to />``)."""
    out: list[str] = []
    for ln in _decode(data).split("\n"):
        # the sum, then two spaces (or " *" for binary mode), then the path
        if len(ln) < 35 or ln[32] != " ":
            continue
        rel = ln[34:] if ln[33] in " *" else ln[33:]
        rel = rel.lstrip("/")
        if rel and rel != ".":
            out.append("/" + rel)
    return out


def installed_versions(data: bytes | str | BinaryIO) -> dict[tuple[str, str], str]:
    """(name, arch) -> version of the installed packages in a status file."""
    pkgs, _ = parse_dpkg_status(data)
    return {p.key: p.version for p in pkgs}


def parse_dep5_licenses(text: str) -> list[str]:
    """License short names of a machine-readable (DEP-5) copyright file; [] otherwise.

    Takes the header paragraph's License and every Files paragraph's License
    (first line only: the rest is the license text), in order, deduplicated.
    """
    first = text.lstrip()[:400].split("\n", 1)[0]
    if not first.startswith("Format:") or (
        "copyright-format" not in first and "dep5" not in first.lower()
    ):
        return []
    out: list[str] = []
    # python-debian's paragraphs (``Deb822.iter_paragraphs(lines, use_apt_pkg=False)``),
    # keys lower-cased: ``_stanzas.py``, without importing debian.deb822 and
    # charset_normalizer (20-25 ms of a small image's scan)
    for i, para in enumerate(iter_paragraphs(text.splitlines(True))):
        if i > 0 and "files" not in para:
            continue
        lic = (para.get("license") or "").split("\n", 1)[0].strip()
        if lic and lic not in out:
            out.append(lic)
    return out


_LICENSE_LINE = re.compile(r"^License:\s*(?P<name>\S.*?)\s*$", re.MULTILINE)
_COMMON_LICENSE = re.compile(r"/usr/share/common-licenses/(?P<name>[0-9A-Za-z_.+\-]+)")


def parse_copyright_licenses(text: str) -> list[str]:
    """License names of a Debian copyright file, DEP-5 or not.

    DEP-5 files: :func:`parse_dep5_licenses`. Older free-form files (libc6, libstdc++6,
    gcc-12-base, base-files) name their licences by pointing at
    ``/usr/share/common-licenses/<NAME>`` and sometimes with ``License:`` lines; both
    are read, as Syft's dpkg cataloger does, in order of appearance, deduplicated.
    """
    dep5 = parse_dep5_licenses(text)
    if dep5:
        return dep5
    found: list[tuple[int, str]] = []
    for m in _LICENSE_LINE.finditer(text):
        found.append((m.start(), m.group("name")))
    for m in _COMMON_LICENSE.finditer(text):
        found.append((m.start(), m.group("name").rstrip(".")))
    out: list[str] = []
    for _, name in sorted(found):
        if name and name not in out:
            out.append(name)
    return out


def deb_purl(pkg: DebPackage, os_release: dict[str, str]) -> str:
    namespace = (os_release.get("ID") or "debian").strip().lower() or "debian"
    # upstream=SOURCE[@VERSION] as Syft writes it: Debian's trackers and OSV key advisories
    # by source package, so matchers need it (only when it differs from the binary's)
    upstream = None
    if pkg.source and (pkg.source != pkg.name or (pkg.source_version or pkg.version) != pkg.version):
        upstream = pkg.source
        if pkg.source_version and pkg.source_version != pkg.version:
            upstream += f"@{pkg.source_version}"
    return distro_purl("deb", namespace, pkg.name, pkg.version, os_release,
                       arch=pkg.architecture, upstream=upstream)


@register
class DpkgCollector(Collector):
    id = "dpkg"
    phase = 1
    version = "2"  # 2: info/*.md5sums (declared file digests)
    paths = (
        PathSpec(STATUS, history=True),
        PathSpec(STATUS_D + "/*", max_size=8 * 1024 * 1024),
        PathSpec(LIST_GLOB, max_size=MAX_LIST),
        PathSpec(MD5SUMS_GLOB, max_size=MAX_LIST),
        PathSpec(COPYRIGHT_GLOB, max_size=1024 * 1024),
    )

    def collect(self, ctx: CollectContext) -> Iterable[Component]:
        fs = ctx.fs
        osr = ctx.target.os_release or {}
        out: list[Component] = []
        seen: set[tuple[str, str, str]] = set()
        licenses: dict[str, list[str]] = {}
        try:
            lists = {n for n in fs.listdir(INFO) if n.endswith((".list", ".md5sums"))}
        except (OSError, LookupError):
            lists = set()

        def add(pkg: DebPackage, path: str, layer: str | None, md5sums: str | None = None) -> None:
            ident = (pkg.name, pkg.architecture or "", pkg.version)
            if ident in seen:
                return
            seen.add(ident)
            comp = self._component(ctx, pkg, osr, path, layer, licenses)
            out.append(comp)
            self._claim(ctx, comp, pkg, lists, md5sums)

        if fs.exists(STATUS):
            try:
                pkgs, problems = premade(fs, "dpkg-status", STATUS,
                                         lambda: _parse_status_file(fs))
            except NotCapturedError as e:
                ctx.unknown(str(e), STATUS)
                pkgs, problems = [], []
            except Exception as e:  # noqa: BLE001 - a bad file is an unknown naming it
                ctx.unknown(f"cannot read dpkg status: {e}", STATUS)
            else:
                for p in problems:
                    ctx.unknown(f"dpkg status: {p}", STATUS)
                final_versions = {p.key: p.version for p in pkgs}
                final_entry = fs.lookup(STATUS)
                final_ref = final_entry.content if final_entry is not None else None

                def versions_of(c: ContentRef) -> dict[tuple[str, str], str]:
                    # the newest snapshot is the file already parsed above: don't parse it twice
                    if c is final_ref:
                        return final_versions
                    with c.open() as f:
                        return installed_versions(f)

                snaps = history_snapshots(fs, STATUS, versions_of, ctx.unknown)
                intro = attribute_layers(snaps, final_versions)
                final_layer = fs.layer_of(STATUS)
                for pkg in pkgs:
                    add(pkg, STATUS, intro.get(pkg.key) or final_layer)

        for path in fs.glob(STATUS_D + "/*"):
            base = path.rsplit("/", 1)[-1]
            if base.endswith(".md5sums") or base.startswith(".") or not fs.is_file(path):
                continue
            try:
                pkgs, problems = parse_dpkg_status(fs.read_bytes(path), require_installed=False)
            except Exception as e:  # noqa: BLE001 - a bad file is an unknown naming it
                ctx.unknown(f"cannot read dpkg status.d file: {e}", path)
                continue
            for p in problems:
                ctx.unknown(f"dpkg status.d: {p}", path)
            layer = fs.layer_of(path)
            for pkg in pkgs:
                add(pkg, path, layer, md5sums=self._md5sums_path(fs, path, pkg, len(pkgs)))
        return out

    @staticmethod
    def _md5sums_path(fs: FsView, status_file: str, pkg: DebPackage, n: int) -> str | None:
        """The distroless ``status.d/<name>.md5sums`` of ``pkg``: named after the package,
        or after its status.d file when that file describes only this package."""
        cands = [f"{STATUS_D}/{pkg.name}.md5sums"]
        if n == 1:
            cands.append(status_file + ".md5sums")
        for c in cands:
            if fs.is_file(c):
                return c
        return None

    @staticmethod
    def _claim(
        ctx: CollectContext,
        comp: Component,
        pkg: DebPackage,
        lists: set[str],
        md5sums: str | None,
    ) -> None:
        """Claim the files dpkg lists for ``pkg`` (``<name>:<arch>.list`` for Multi-Arch:
        same packages, ``<name>.list`` otherwise; status.d md5sums on distroless)."""
        names = []
        if pkg.architecture:
            names.append(f"{pkg.name}:{pkg.architecture}.list")
        names.append(f"{pkg.name}.list")
        # the package's md5sums: the digests dpkg recorded for its files (_digests.py)
        sums = [n[:-5] + ".md5sums" for n in names if n[:-5] + ".md5sums" in lists]
        if sums:
            ctx.manifest(comp, "md5sums", f"{INFO}/{sums[0]}")
        elif md5sums is not None:
            ctx.manifest(comp, "md5sums", md5sums)
        for n in names:
            if n not in lists:
                continue
            path = f"{INFO}/{n}"
            try:
                ctx.claim(comp, premade(ctx.fs, "dpkg-list", path,
                                        partial(_read_list, ctx.fs, path)))
            except Exception as e:  # noqa: BLE001 - ownership is best effort, say so
                ctx.unknown(f"cannot read dpkg file list: {e}", path)
            return
        if md5sums is not None:
            try:
                ctx.claim(comp, parse_dpkg_md5sums(ctx.fs.read_bytes(md5sums)))
            except Exception as e:  # noqa: BLE001 - a bad file is an unknown naming it
                ctx.unknown(f"cannot read dpkg md5sums: {e}", md5sums)

    def _component(
        self,
        ctx: CollectContext,
        pkg: DebPackage,
        osr: dict[str, str],
        path: str,
        layer: str | None,
        cache: dict[str, list[str]],
    ) -> Component:
        props = present(
            ("source-package", pkg.source),
            ("source-version", pkg.source_version),
            ("architecture", pkg.architecture),
            ("installed-size", pkg.installed_size),
            ("section", pkg.section),
            ("dpkg-status", pkg.status if pkg.status != "installed" else None),
        )
        return package_component(
            self.id,
            name=pkg.name,
            version=pkg.version,
            purl=deb_purl(pkg, osr),
            supplier=pkg.maintainer,
            description=pkg.description,
            licenses=self._licenses(ctx, pkg.name, cache),
            properties=props,
            path=path,
            layer=layer,
            depends_on=list(pkg.depends),
            ecosystem="deb",
        )

    @staticmethod
    def _licenses(ctx: CollectContext, name: str, cache: dict[str, list[str]]) -> list[str]:
        if name in cache:
            return list(cache[name])
        lics: list[str] = []
        path = f"/usr/share/doc/{name}/copyright"
        try:
            if ctx.fs.exists(path):
                lics = parse_copyright_licenses(ctx.fs.read_text(path))
        except VIEW_ERRORS as e:
            ctx.unknown(f"licenses of {name}: {e}", path)
            lics = []
        cache[name] = lics
        return list(lics)


def _status(path: str, c: ContentRef) -> tuple[list[DebPackage], list[str]]:
    with c.open() as f:
        return parse_dpkg_status(f)


#: what a host walk's workers parse for this collector (``host/premake.py``)
PREMADE = (
    # the rows naming a file "status" (the package's own evidence): usually none
    PremadeParser("manifest-digests",
                  lambda p: p.startswith(INFO + "/") and p.endswith(".md5sums"),
                  lambda p, c: own_rows("md5sums", text_of(c), "/")),
    PremadeParser("dpkg-list", lambda p: p.startswith(INFO + "/") and p.endswith(".list"),
                  lambda p, c: GroupedPaths.of(parse_dpkg_list(c.read())), returns=(GroupedPaths,)),
    PremadeParser("dpkg-status", lambda p: p == STATUS, _status, returns=(DebPackage,)),
)
