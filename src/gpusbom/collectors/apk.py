"""apk: Alpine (and Wolfi / Chainguard) packages from ``/lib/apk/db/installed``.

The installed database is a list of stanzas separated by blank lines; each
line is ``<letter>:<value>``. Letters used here: P name, V version, A arch,
L license, o origin (source package), m maintainer, T description, U url,
I installed size, c commit, D depends, p provides. File lines: F is a
directory (relative to /), R a file in the directory of the last F; the
package's directories and files are claimed for stack collectors (phase 1).
Other file attributes (a, M, Z) are skipped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..fsview.spec import PathSpec
from ..model import Component
from . import register
from ._pkgdb import attribute_layers, distro_purl, history_snapshots, package_component, present
from .base import CollectContext, Collector

__all__ = [
    "INSTALLED",
    "ApkCollector",
    "ApkPackage",
    "apk_purl",
    "parse_apk_installed",
    "resolve_depends",
]

INSTALLED = "/lib/apk/db/installed"

_DEP_NAME_RX = re.compile(r"^([^<>=~@]+)")
_WANTED = frozenset("PVALomTUIcDp")


@dataclass
class ApkPackage:
    """One package of an Alpine ``installed`` database."""

    name: str
    version: str
    arch: str | None = None
    license: str | None = None
    origin: str | None = None
    maintainer: str | None = None
    description: str | None = None
    url: str | None = None
    installed_size: str | None = None
    commit: str | None = None
    depends: list[str] = field(default_factory=list)  # names/capabilities, no constraints
    provides: list[str] = field(default_factory=list)  # capability names, no versions
    files: list[str] = field(default_factory=list)  # absolute paths: F dirs and R files


def _dep_names(value: str) -> list[str]:
    out: list[str] = []
    for tok in value.split():
        if tok.startswith("!"):
            continue  # a conflict, not a dependency
        m = _DEP_NAME_RX.match(tok)
        if m and m.group(1) not in out:
            out.append(m.group(1))
    return out


def parse_apk_installed(data: bytes | str) -> tuple[list[ApkPackage], list[str]]:
    """Parse an apk installed database. Returns packages and problems (stanzas without
    a name or version)."""
    text = data if isinstance(data, str) else data.decode("utf-8", errors="replace")
    pkgs: list[ApkPackage] = []
    problems: list[str] = []
    cur: dict[str, str] = {}
    files: list[str] = []
    fdir = ""  # the last F: line's directory, "" for the root

    def flush() -> None:
        nonlocal files, fdir
        got, files, fdir = files, [], ""
        if not cur:
            return
        name, version = cur.get("P", "").strip(), cur.get("V", "").strip()
        if not name or not version:
            problems.append(f"stanza without name or version (P:{name or '?'})")
        else:
            pkgs.append(
                ApkPackage(
                    name=name,
                    version=version,
                    arch=cur.get("A") or None,
                    license=cur.get("L") or None,
                    origin=cur.get("o") or None,
                    maintainer=cur.get("m") or None,
                    description=cur.get("T") or None,
                    url=cur.get("U") or None,
                    installed_size=cur.get("I") or None,
                    commit=cur.get("c") or None,
                    depends=[d for d in _dep_names(cur.get("D", "")) if d != name],
                    provides=_dep_names(cur.get("p", "")),
                    files=got,
                )
            )
        cur.clear()

    for line in text.splitlines():
        if not line.strip():
            flush()
            continue
        if len(line) < 2 or line[1] != ":":
            continue
        letter = line[0]
        if letter == "F":
            fdir = line[2:].strip().strip("/")
            if fdir:
                files.append("/" + fdir)
        elif letter == "R":
            name = line[2:].strip()
            if name:
                files.append(("/" + fdir if fdir else "") + "/" + name)
        elif letter in _WANTED and letter not in cur:
            cur[letter] = line[2:].strip()
    flush()
    return pkgs, problems


def resolve_depends(pkgs: list[ApkPackage]) -> dict[str, list[str]]:
    """name -> names of installed packages satisfying its depends (``so:``/``cmd:``
    capabilities resolved through provides); unresolved ones are dropped."""
    providers: dict[str, str] = {}
    for p in pkgs:
        for cap in p.provides:
            providers.setdefault(cap, p.name)
    for p in pkgs:
        providers[p.name] = p.name
    out: dict[str, list[str]] = {}
    for p in pkgs:
        deps: list[str] = []
        for d in p.depends:
            target = providers.get(d)
            if target and target != p.name and target not in deps:
                deps.append(target)
        out[p.name] = deps
    return out


def apk_purl(pkg: ApkPackage, os_release: dict[str, str]) -> str:
    namespace = (os_release.get("ID") or "alpine").strip().lower() or "alpine"
    return distro_purl("apk", namespace, pkg.name, pkg.version, os_release, arch=pkg.arch)


def _snapshot(content: object) -> dict[str, str]:
    pkgs, _ = parse_apk_installed(content.read())  # type: ignore[attr-defined]
    return {p.name: p.version for p in pkgs}


@register
class ApkCollector(Collector):
    id = "apk"
    phase = 1
    version = "1"
    paths = (PathSpec(INSTALLED, history=True),)

    def collect(self, ctx: CollectContext) -> Iterable[Component]:
        fs = ctx.fs
        if not fs.exists(INSTALLED):
            return []
        try:
            pkgs, problems = parse_apk_installed(fs.read_bytes(INSTALLED))
        except Exception as e:  # noqa: BLE001 - a bad file is an unknown naming it
            ctx.unknown(f"cannot read apk database: {e}", INSTALLED)
            return []
        for p in problems:
            ctx.unknown(f"apk database: {p}", INSTALLED)
        osr = ctx.target.os_release or {}
        snaps = history_snapshots(fs, INSTALLED, _snapshot, ctx.unknown)
        intro = attribute_layers(snaps, {p.name: p.version for p in pkgs})
        final_layer = fs.layer_of(INSTALLED)
        deps = resolve_depends(pkgs)
        out: list[Component] = []
        seen: set[str] = set()
        for pkg in pkgs:
            if pkg.name in seen:
                continue
            seen.add(pkg.name)
            props = present(
                ("source-package", pkg.origin),
                ("architecture", pkg.arch),
                ("installed-size", pkg.installed_size),
                ("commit", pkg.commit),
            )
            comp = package_component(
                self.id,
                name=pkg.name,
                version=pkg.version,
                purl=apk_purl(pkg, osr),
                supplier=pkg.maintainer,
                description=pkg.description,
                licenses=[pkg.license] if pkg.license else [],
                properties=props,
                path=INSTALLED,
                layer=intro.get(pkg.name) or final_layer,
                depends_on=deps.get(pkg.name, []),
                ecosystem="apk",
            )
            out.append(comp)
            ctx.claim(comp, pkg.files)
        return out
