"""The per-file device code of a component (``Component.device_code``) as the writers render
it: which files to nest under their owner, and each file's properties (``gpusbom:`` keys).

A component that *is* its one file (a stand-alone library found by its ELF content) carries
that file's targets in its own properties: nothing is nested. A package (a wheel, a deb) or
a component over several files gets one nested file element per file, with the file's own
targets; its own ``cuda:*``/``hip:*`` properties are then the union over those files, and
``gpusbom:device-code:union-of-files`` says over how many.
"""

from __future__ import annotations

from ..devicecode import DeviceCode
from ..model import Component

__all__ = ["file_pairs", "nested_files", "summary_pairs"]


def nested_files(c: Component) -> list[DeviceCode]:
    """The files to render under ``c`` (empty when ``c`` is its one file)."""
    codes = sorted(c.device_code, key=lambda d: d.path)
    if len(codes) == 1 and c.ecosystem in (None, "generic"):
        paths = {e.path for e in c.evidence if e.path}
        if paths == {codes[0].path}:
            return []
    return codes


def summary_pairs(c: Component) -> list[tuple[str, str]]:
    """(key, value) properties of the owner: over how many files its union is taken."""
    n = len(nested_files(c))
    return [("device-code:union-of-files", str(n))] if n else []


def file_pairs(d: DeviceCode) -> list[tuple[str, str]]:
    """(key, value) properties of one file's element, keys without the ``gpusbom:`` prefix."""
    out = [("path", d.path), ("device-code:kind", d.kind)]
    if d.format:
        out.append(("device-code:format", d.format))
    out.append(("collector", d.collector))
    if d.layer:
        out.append(("layer", d.layer))
    if d.detail:
        out.append(("evidence:detail", d.detail))
    out.extend(sorted(d.targets.items()))
    return out
