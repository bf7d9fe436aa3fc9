"""Shared helpers of the distribution package-database catalogers (dpkg, rpm, apk; not a
collector: the leading ``_`` keeps the registry from importing it as one).

- ``history_snapshots(fs, path, parse)``, ``attribute_layers(snapshots, final)``,
  ``layer_diff_id(fs, index)``: which image layer introduced the current version of a
  package (re-exported by ``osrelease``, where they used to live).
- ``distro_qualifier(os_release)``: the purl ``distro`` qualifier (re-exported by
  ``osrelease``).
- ``distro_purl(type, namespace, name, version, os_release, **qualifiers)``: a package URL
  with the given qualifiers (those set) and the ``distro`` one.
- ``present(*pairs)``: the properties whose value is set.
- ``package_component(collector, ...)``: one package component with its package-database
  evidence.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, TypeVar

from packageurl import PackageURL

from ..model import Component, ComponentType, Evidence, EvidenceMethod
from .base import VIEW_ERRORS

if TYPE_CHECKING:
    from ..fsview.types import ContentRef
    from ..fsview.view import FsView

__all__ = [
    "attribute_layers",
    "distro_purl",
    "distro_qualifier",
    "history_snapshots",
    "layer_diff_id",
    "package_component",
    "present",
]

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
    fs: FsView, path: str, parse: Callable[[ContentRef], T],
    unknown: Callable[[str, str], None] | None = None,
) -> list[tuple[str | None, T | None]]:
    """Every layer's version of ``path`` (oldest first) as ``(diff_id, parse(content))``.

    A version whose content was not captured or does not parse gives None, so
    attribution stops there rather than guessing; ``unknown(reason, path)`` (the
    collector's ``ctx.unknown``) hears why.
    """
    try:
        real = fs.realpath(path)
        hist = fs.history(real)
    except VIEW_ERRORS as e:
        if unknown is not None:
            unknown(f"layer attribution: {e}", path)
        return []
    out: list[tuple[str | None, T | None]] = []
    for entry in hist:
        data: T | None = None
        if entry.content is not None:
            try:
                data = parse(entry.content)
            except Exception as e:  # noqa: BLE001 - the package-database parsers raise their formats' own errors
                if unknown is not None:
                    unknown(f"layer attribution: an earlier version does not read: {e}", path)
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


def distro_qualifier(os_release: dict[str, str]) -> str | None:
    """The purl ``distro`` qualifier: ``<ID>-<VERSION_ID>`` (``debian-12``, ``ubuntu-22.04``).

    Without VERSION_ID (Debian testing/sid) the codename is used; without ID, None.
    """
    os_id = (os_release.get("ID") or "").strip().lower()
    if not os_id:
        return None
    ver = (os_release.get("VERSION_ID") or os_release.get("VERSION_CODENAME") or "").strip()
    return f"{os_id}-{ver}" if ver else os_id


def distro_purl(
    purl_type: str,
    namespace: str | None,
    name: str,
    version: str | None,
    os_release: dict[str, str],
    **qualifiers: str | None,
) -> str:
    """``pkg:<type>/<namespace>/<name>@<version>?<qualifiers>&distro=<ID>-<VERSION_ID>``:
    the qualifiers given (in order, those set), then ``distro`` when the os-release names one."""
    q = {k: v for k, v in qualifiers.items() if v}
    distro = distro_qualifier(os_release)
    if distro:
        q["distro"] = distro
    fast = plain_purl(purl_type, namespace, name, version, q)
    if fast is not None:
        return fast
    return PackageURL(
        type=purl_type, namespace=namespace, name=name, version=version, qualifiers=q
    ).to_string()


# Components packageurl-python would write unchanged but for ``+`` and ``@`` (urllib's quote
# keeps ASCII letters, digits, ``_.-~``; packageurl puts ``:`` back): nothing to strip, split
# or lower-case
_PLAIN = re.compile(r"[A-Za-z0-9._~:+@-]+")
_PLAIN_KEY = re.compile(r"[a-z][a-z0-9._-]*")


def _q(s: str) -> str:
    return s.replace("+", "%2B").replace("@", "%40") if "+" in s or "@" in s else s


def plain_purl(purl_type: str, namespace: str | None, name: str, version: str | None,
               qualifiers: dict[str, str]) -> str | None:
    """``PackageURL(...).to_string()`` without its two normalisation passes, for a ``deb``,
    ``rpm`` or ``pypi`` (a canonical name, no namespace or qualifiers) purl whose parts are
    plain (hundreds a scan: a tenth of a small image's collection time); None when a part
    needs packageurl's own rules. ``tests/collectors/test_pkgdb_purl.py``
    checks it against packageurl-python on every package of real status files and odd parts."""
    if purl_type not in ("deb", "rpm", "pypi") or not _PLAIN.fullmatch(name):
        return None
    if purl_type == "pypi" and (namespace or qualifiers or "_" in name or name != name.lower()):
        return None  # packageurl lower-cases a pypi name and writes "-" for "_"
    if (namespace and not _PLAIN.fullmatch(namespace)) or (
            version and not _PLAIN.fullmatch(version)):
        return None
    for k, v in qualifiers.items():
        if not _PLAIN_KEY.fullmatch(k) or not _PLAIN.fullmatch(v):
            return None
    out = [f"pkg:{purl_type}/"]
    if namespace:
        out.append(_q(namespace) + "/")
    out.append(_q(name))
    if version:
        out.append("@" + _q(version))
    if qualifiers:
        out.append("?" + "&".join(f"{k}={_q(v)}" for k, v in sorted(qualifiers.items())))
    return "".join(out)


def present(*pairs: tuple[str, str | None]) -> dict[str, str]:
    """The ``(key, value)`` pairs whose value is set, as properties (in order)."""
    return {k: v for k, v in pairs if v}


def package_component(
    collector: str,
    *,
    name: str,
    version: str | None,
    purl: str,
    supplier: str | None,
    description: str | None,
    licenses: list[str],
    properties: dict[str, str],
    path: str,
    layer: str | None,
    depends_on: list[str],
    ecosystem: str,
) -> Component:
    """A package of a distribution's package database, found in ``path`` (introduced by
    ``layer``)."""
    return Component(
        name=name,
        version=version,
        type=ComponentType.LIBRARY,
        purl=purl,
        supplier=supplier,
        description=description,
        licenses=licenses,
        properties=properties,
        evidence=[
            Evidence(
                collector=collector,
                method=EvidenceMethod.PACKAGE_DB.value,
                path=path,
                layer=layer,
            )
        ],
        depends_on=depends_on,
        ecosystem=ecosystem,
    )
