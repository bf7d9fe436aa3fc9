"""conda: packages of conda environments, from ``<prefix>/conda-meta/*.json``.

Every installed package has one JSON record in its environment's
``conda-meta`` directory (``history`` is a log, not a record). Fields used:
name, version, build, build_number, channel, url, fn, subdir, license,
depends, md5, sha256, and ``files`` (paths relative to the environment
prefix, the parent of ``conda-meta``; ``paths_data.paths[]._path`` when
``files`` is absent), which are claimed for stack collectors (phase 1).
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from packageurl import PackageURL

from ..fsview.spec import PathSpec
from ..model import Component, ComponentType, EvidenceMethod
from ..safetext import loads_json
from . import register
from .base import CollectContext, Collector

__all__ = [
    "CondaCollector",
    "CondaPackage",
    "channel_name",
    "conda_files",
    "conda_purl",
    "parse_conda_meta",
]

_GLOB = "/**/conda-meta/*.json"
_MAX = 64 * 1024 * 1024
_KNOWN_SUBDIRS = {
    "noarch", "linux-64", "linux-aarch64", "linux-ppc64le", "linux-s390x", "linux-32",
    "linux-armv6l", "linux-armv7l", "osx-64", "osx-arm64", "win-64", "win-32", "win-arm64",
    "emscripten-wasm32", "wasi-wasm32", "zos-z",
}
_DEP_NAME_RX = re.compile(r"^\s*([^\s=<>!~,\[]+)")


@dataclass
class CondaPackage:
    """One package of a conda environment's ``conda-meta``."""

    name: str
    version: str
    build: str | None = None
    build_number: int | None = None
    channel: str | None = None  # short name: conda-forge, main, nvidia, ...
    channel_url: str | None = None
    subdir: str | None = None
    license: str | None = None
    url: str | None = None
    fn: str | None = None
    md5: str | None = None
    sha256: str | None = None
    depends: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)  # relative to the environment prefix

    @property
    def package_type(self) -> str | None:
        fn = self.fn or (self.url or "").rsplit("/", 1)[-1]
        if fn.endswith(".conda"):
            return "conda"
        if fn.endswith(".tar.bz2"):
            return "tar.bz2"
        return None


def channel_name(channel: str | None, url: str | None = None) -> str | None:
    """The short channel name from a channel string or package URL:
    ``https://conda.anaconda.org/conda-forge/linux-64`` -> ``conda-forge``,
    ``https://repo.anaconda.com/pkgs/main/linux-64/x.conda`` -> ``main``,
    ``pkgs/main`` -> ``main``, ``nvidia`` -> ``nvidia``."""
    for is_url, value in ((False, channel), (True, url)):
        if not value:
            continue
        value = value.strip()
        if "://" in value:
            parts = [p for p in urlsplit(value).path.split("/") if p]
        else:
            parts = [p for p in value.split("/") if p]
        if is_url and parts:
            parts = parts[:-1]  # the package file name
        while parts and parts[-1] in _KNOWN_SUBDIRS:
            parts = parts[:-1]
        if len(parts) >= 2 and parts[-2] == "label":
            return "/".join(parts[-3:]) if len(parts) >= 3 else parts[-1]
        if parts:
            return parts[-1]
    return None


def _s(v: Any) -> str | None:
    if v is None or isinstance(v, (dict, list)):
        return None
    s = str(v).strip()
    return s or None


def parse_conda_meta(data: bytes | str) -> CondaPackage:
    """Parse one conda-meta record. Raises ValueError when it is not one."""
    try:
        rec = loads_json(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"not JSON: {e}") from e
    if not isinstance(rec, dict):
        raise ValueError("not a JSON object")  # noqa: TRY004 - bad input, not a bad call
    name, version = _s(rec.get("name")), _s(rec.get("version"))
    if not name or not version:
        raise ValueError("conda-meta record has no name or version")
    channel_raw = _s(rec.get("channel"))
    url = _s(rec.get("url"))
    subdir = _s(rec.get("subdir"))
    if not subdir and url:
        parent = url.rsplit("/", 2)
        if len(parent) == 3 and parent[1] in _KNOWN_SUBDIRS:
            subdir = parent[1]
    bn = rec.get("build_number")
    deps: list[str] = []
    raw_deps = rec.get("depends")
    if isinstance(raw_deps, list):
        for d in raw_deps:
            if isinstance(d, str):
                m = _DEP_NAME_RX.match(d)
                if m and m.group(1) != name and m.group(1) not in deps:
                    deps.append(m.group(1))
    raw_files = rec.get("files")
    files: list[str] = []
    if isinstance(raw_files, list):
        files = [f for f in raw_files if isinstance(f, str) and f]
    if not files:
        pd = rec.get("paths_data")
        paths = pd.get("paths") if isinstance(pd, dict) else None
        if isinstance(paths, list):
            files = [
                p["_path"]
                for p in paths
                if isinstance(p, dict) and isinstance(p.get("_path"), str) and p["_path"]
            ]
    return CondaPackage(
        name=name,
        version=version,
        build=_s(rec.get("build") or rec.get("build_string")),
        build_number=bn if isinstance(bn, int) and not isinstance(bn, bool) else None,
        channel=channel_name(channel_raw, url),
        channel_url=channel_raw if channel_raw and "://" in channel_raw else None,
        subdir=subdir,
        license=_s(rec.get("license")),
        url=url,
        fn=_s(rec.get("fn")),
        md5=_s(rec.get("md5")),
        sha256=_s(rec.get("sha256")),
        depends=deps,
        files=files,
    )


def conda_files(pkg: CondaPackage, prefix: str) -> list[str]:
    """Absolute image paths of ``pkg``'s files in the environment at ``prefix``
    (normalised; ``..`` never leaves the image root)."""
    out: list[str] = []
    for f in pkg.files:
        p = posixpath.normpath(posixpath.join(prefix, f.strip()))
        if p.startswith("//"):
            p = "/" + p.lstrip("/")
        if p != "/":
            out.append(p)
    return out


def conda_purl(pkg: CondaPackage) -> str:
    q: dict[str, str] = {}
    if pkg.build:
        q["build"] = pkg.build
    if pkg.channel:
        q["channel"] = pkg.channel
    if pkg.subdir:
        q["subdir"] = pkg.subdir
    if pkg.package_type:
        q["type"] = pkg.package_type
    return PackageURL(type="conda", name=pkg.name, version=pkg.version, qualifiers=q).to_string()


@register
class CondaCollector(Collector):
    id = "conda"
    phase = 1
    version = "1"
    paths = (PathSpec(_GLOB, max_size=_MAX),)

    def collect(self, ctx: CollectContext) -> Iterable[Component]:
        fs = ctx.fs
        out: list[Component] = []
        for path in fs.glob(_GLOB):
            if not fs.is_file(path):
                continue
            try:
                pkg = parse_conda_meta(fs.read_bytes(path))
            except Exception as e:  # noqa: BLE001 - a bad file is an unknown naming it
                ctx.unknown(f"cannot read conda-meta record: {e}", path)
                continue
            env = path.rsplit("/conda-meta/", 1)[0] or "/"
            props: dict[str, str] = {"location": env}
            for key, val in (
                ("build", pkg.build),
                ("build-number", None if pkg.build_number is None else str(pkg.build_number)),
                ("channel", pkg.channel),
                ("channel-url", pkg.channel_url),
                ("subdir", pkg.subdir),
                ("download-url", pkg.url),
                ("sha256", pkg.sha256),
                ("md5", pkg.md5),
            ):
                if val:
                    props[key] = val
            comp = Component(
                name=pkg.name,
                version=pkg.version,
                type=ComponentType.LIBRARY,
                purl=conda_purl(pkg),
                licenses=[pkg.license] if pkg.license else [],
                properties=props,
                evidence=[ctx.evidence(EvidenceMethod.PACKAGE_DB.value, path)],
                depends_on=list(pkg.depends),
                ecosystem="conda",
            )
            out.append(comp)
            ctx.claim(comp, conda_files(pkg, env))
        return out
