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
from collections.abc import Callable, Hashable, Iterable
from typing import TYPE_CHECKING, TypeVar

from ..fsview.spec import PathSpec
from ..model import Component, ComponentType, EvidenceMethod
from . import register
from .base import CollectContext, Collector

if TYPE_CHECKING:
    from ..fsview.types import ContentRef
    from ..fsview.view import FsView

__all__ = [
    "OS_RELEASE_FILES",
    "OS_RELEASE_PATHS",
    "OsReleaseCollector",
    "attribute_layers",
    "distro_qualifier",
    "find_os_release",
    "history_snapshots",
    "layer_diff_id",
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
        except Exception:  # noqa: BLE001, S112 - absent, not captured, link loop: try the next
            continue
        data = parse_os_release(text)
        if data:
            return path, data
    return None


def read_os_release(fs: FsView) -> dict[str, str]:
    """/etc/os-release, else /usr/lib/os-release, parsed; {} when neither is readable."""
    found = find_os_release(fs)
    return dict(found[1]) if found else {}


def distro_qualifier(os_release: dict[str, str]) -> str | None:
    """The purl ``distro`` qualifier: ``<ID>-<VERSION_ID>`` (``debian-12``, ``ubuntu-22.04``).

    Without VERSION_ID (Debian testing/sid) the codename is used; without ID, None.
    """
    os_id = (os_release.get("ID") or "").strip().lower()
    if not os_id:
        return None
    ver = (os_release.get("VERSION_ID") or os_release.get("VERSION_CODENAME") or "").strip()
    return f"{os_id}-{ver}" if ver else os_id


# ---------------------------------------------------------------------------
# Helpers shared by the distribution package-database catalogers (dpkg, rpm,
# apk): which layer introduced the current version of a package.

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


def layer_diff_id(fs: FsView, index: int) -> str | None:
    """diff_id of the image layer with this index (``Entry.layer``)."""
    layers = fs.layers
    if 0 <= index < len(layers) and layers[index].index == index:
        return layers[index].diff_id
    for ref in layers:
        if ref.index == index:
            return ref.diff_id
    return None


def history_snapshots(
    fs: FsView, path: str, parse: Callable[[ContentRef], T]
) -> list[tuple[str | None, T | None]]:
    """Every layer's version of ``path`` (oldest first) as ``(diff_id, parse(content))``.

    A version whose content was not captured or does not parse gives None, so
    attribution stops there rather than guessing.
    """
    try:
        real = fs.realpath(path)
        hist = fs.history(real)
    except Exception:  # noqa: BLE001 - attribution is best effort
        return []
    out: list[tuple[str | None, T | None]] = []
    for entry in hist:
        data: T | None = None
        if entry.content is not None:
            try:
                data = parse(entry.content)
            except Exception:  # noqa: BLE001
                data = None
        out.append((layer_diff_id(fs, entry.layer), data))
    return out


def attribute_layers(
    snapshots: list[tuple[str | None, dict[K, str] | None]], final: dict[K, str]
) -> dict[K, str | None]:
    """For each key of ``final`` (key -> version), the diff_id of the layer that introduced it.

    ``snapshots`` are a database's versions, oldest first, each ``(diff_id,
    {key: version})``. Walking from the newest back, the package is attributed
    to the earliest layer of the unbroken run of versions that still list it
    at its current version: an upgrade in layer 3 of a package installed in
    layer 1 is attributed to layer 3. A key missing from the newest snapshot
    maps to None (the caller falls back to the file's final layer).
    """
    result: dict[K, str | None] = {}
    for key, version in final.items():
        found: str | None = None
        for diff_id, snap in reversed(snapshots):
            if snap is None or snap.get(key) != version:
                break
            found = diff_id
        result[key] = found
    return result


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
        comp = Component(
            name=os_id,
            version=data.get("VERSION_ID") or None,
            type=ComponentType.OPERATING_SYSTEM,
            cpe=data.get("CPE_NAME") or None,
            supplier=data.get("NAME") or None,
            description=data.get("PRETTY_NAME") or None,
            properties=props,
            evidence=[ctx.evidence(EvidenceMethod.VERSION_FILE.value, path)],
            ecosystem="os",
        )
        return [comp]
