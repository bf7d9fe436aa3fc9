"""os-release: which distribution the target runs.

``read_os_release(fs)`` is used by the scanner before any collector runs (it
fills ``Target.os_release``); the ``os-release`` collector reports the
distribution itself as one operating-system component.

The file format (os-release(5)) is a list of shell-style ``KEY=VALUE``
assignments; values may be double- or single-quoted, with backslash escapes
inside double quotes and in unquoted values.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .. import catalog
from ..fsview.spec import PathSpec
from ..model import Component, ComponentType, EvidenceMethod
from . import register

# re-exported for compatibility: they moved to _pkgdb (the package-database catalogers' helpers)
from ._pkgdb import attribute_layers, distro_qualifier
from .base import VIEW_ERRORS, CollectContext, Collector

if TYPE_CHECKING:
    from ..fsview.view import FsView

__all__ = [
    "OS_RELEASE_FILES",
    "OS_RELEASE_PATHS",
    "OsReleaseCollector",
    "attribute_layers",
    "distro_qualifier",
    "find_os_release",
    "parse_os_release",
    "read_os_release",
]

#: looked up in this order (os-release(5))
OS_RELEASE_FILES = ("/etc/os-release", "/usr/lib/os-release")
OS_RELEASE_PATHS = tuple(PathSpec(p, max_size=64 * 1024) for p in OS_RELEASE_FILES)

_KEY_RX = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_MAX_LINES = 1000


def _unquote(raw: str) -> str:
    """Shell-style unquoting of one value: quotes, backslash escapes, trailing comment."""
    out: list[str] = []
    i, n = 0, len(raw)
    while i < n:
        c = raw[i]
        if c == '"':
            i += 1
            while i < n and raw[i] != '"':
                if raw[i] == "\\" and i + 1 < n and raw[i + 1] in '$"\\`\n':
                    i += 1
                out.append(raw[i])
                i += 1
            i += 1  # closing quote (or end of an unbalanced value)
        elif c == "'":
            j = raw.find("'", i + 1)
            if j == -1:
                j = n
            out.append(raw[i + 1 : j])
            i = j + 1
        elif c == "\\" and i + 1 < n:
            out.append(raw[i + 1])
            i += 2
        elif c == "#" and (not out or raw[i - 1].isspace()):
            break
        elif c.isspace():
            # unquoted whitespace ends the word in a shell; os-release files in
            # the wild sometimes have it anyway: keep one space
            if out and not out[-1].endswith(" "):
                out.append(" ")
            i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out).strip()


def parse_os_release(text: str) -> dict[str, str]:
    """Parse os-release text into a dict; invalid lines are ignored."""
    result: dict[str, str] = {}
    for k, line in enumerate(text.splitlines()):
        if k >= _MAX_LINES:
            break
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        key = key.strip()
        if key.startswith("export "):
            key = key[7:].strip()
        if not _KEY_RX.match(key):
            continue
        result[key] = _unquote(value.strip())
    return result


def find_os_release(fs: FsView) -> tuple[str, dict[str, str]] | None:
    """The first readable os-release file and its parsed content, or None."""
    for path in OS_RELEASE_FILES:
        try:
            if not fs.exists(path):
                continue
            text = fs.read_text(path)
        except VIEW_ERRORS:  # not captured or a link loop: the next candidate may read
            continue
        data = parse_os_release(text)
        if data:
            return path, data
    return None


def read_os_release(fs: FsView) -> dict[str, str]:
    """/etc/os-release, else /usr/lib/os-release, parsed; {} when neither is readable."""
    found = find_os_release(fs)
    return dict(found[1]) if found else {}


#: os-release ID -> NVD CPE 2.3 vendor:product of the distribution (operating-system part),
#: as NVD's CPE dictionary names them; used when os-release has no CPE_NAME (Debian,
#: Ubuntu and Alpine write none)
OS_CPES: dict[str, str] = {
    "debian": "debian:debian_linux",
    "ubuntu": "canonical:ubuntu_linux",
    "rhel": "redhat:enterprise_linux",
    "centos": "centos:centos",
    "fedora": "fedoraproject:fedora",
    "alpine": "alpinelinux:alpine_linux",
    "almalinux": "almalinux:almalinux",
    "rocky": "rocky:rocky_linux",
    "ol": "oracle:linux",
    "sles": "suse:linux_enterprise_server",
    "opensuse-leap": "opensuse:leap",
    "amzn": "amazon:linux",
}


def os_identity(os_id: str, version: str | None, cpe_name: str | None) -> tuple[str, str | None]:
    """(purl, CPE) of a distribution: ``pkg:generic/debian@12`` (the purl spec has no
    OS type; syft and trivy write none) and the os-release CPE_NAME, else NVD's name."""
    from packageurl import PackageURL

    purl = PackageURL(type="generic", name=os_id, version=version).to_string()
    if cpe_name:
        return purl, cpe_name
    vp = OS_CPES.get(os_id)
    if vp is None:
        return purl, None
    # RHEL-like CPEs carry the major release only (NVD: enterprise_linux:9)
    v = version
    if os_id in ("rhel", "centos", "almalinux", "rocky", "ol") and version:
        v = version.split(".", 1)[0]
    return purl, catalog.cpe23(vp, v, part="o")


@register
class OsReleaseCollector(Collector):
    id = "os-release"
    phase = 1
    version = "1"
    paths = OS_RELEASE_PATHS

    def collect(self, ctx: CollectContext) -> Iterable[Component]:
        found = find_os_release(ctx.fs)
        if found is None:
            return []
        path, data = found
        os_id = data.get("ID") or "linux"  # os-release(5): ID defaults to "linux"
        props: dict[str, str] = {}
        for key, prop in (
            ("PRETTY_NAME", "pretty-name"),
            ("ID_LIKE", "id-like"),
            ("VERSION_CODENAME", "version-codename"),
            ("VERSION", "version-string"),
            ("BUILD_ID", "build-id"),
            ("VARIANT_ID", "variant-id"),
        ):
            if data.get(key):
                props[prop] = data[key]
        purl, cpe = os_identity(os_id, data.get("VERSION_ID") or None,
                                data.get("CPE_NAME") or None)
        comp = Component(
            name=os_id,
            version=data.get("VERSION_ID") or None,
            type=ComponentType.OPERATING_SYSTEM,
            purl=purl,
            cpe=cpe,
            supplier=data.get("NAME") or None,
            description=data.get("PRETTY_NAME") or None,
            properties=props,
            evidence=[ctx.evidence(EvidenceMethod.VERSION_FILE.value, path)],
            ecosystem="os",
        )
        return [comp]
