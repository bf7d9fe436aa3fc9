"""A table for people: what was found, where, and what could not be read."""

from __future__ import annotations

from typing import TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..model import Component, ScanResult
from . import register
from .base import Writer, WriterOptions


def short_digest(digest: str | None, n: int = 12) -> str:
    """``sha256:abcdef...`` -> first ``n`` hex digits; empty for None."""
    if not digest:
        return ""
    hexpart = digest.split(":", 1)[1] if ":" in digest else digest
    return hexpart[:n]


def _sort_key(c: Component) -> tuple[str, str, str, str]:
    return (c.type.value, c.name.lower(), c.version or "", c.bom_ref)


def _origin(c: Component) -> str:
    collectors = sorted({ev.collector for ev in c.evidence if ev.collector})
    eco = c.ecosystem or ""
    src = ", ".join(collectors)
    if eco and src and eco != src:
        return f"{eco} ({src})"
    return eco or src


def _locations(c: Component) -> tuple[str, str]:
    layers: list[str] = []
    paths: list[str] = []
    for ev in c.evidence:
        if ev.layer:
            s = short_digest(ev.layer)
            if s not in layers:
                layers.append(s)
        if ev.path and ev.path not in paths:
            paths.append(ev.path)
    if len(paths) > 2:
        paths = paths[:2] + [f"(+{len(paths) - 2} more)"]
    return "\n".join(layers), "\n".join(paths)


@register
class TableWriter(Writer):
    format = "table"
    description = "human-readable table (default on a terminal)"
    for_humans = True

    def write(self, result: ScanResult, out: TextIO, options: WriterOptions) -> None:
        console = Console(
            file=out,
            width=options.width or 120,
            force_terminal=bool(options.color),
            no_color=not options.color,
            color_system="standard" if options.color else None,
            highlight=False,
            emoji=False,
            markup=False,
            soft_wrap=False,
            legacy_windows=False,
            force_jupyter=False,
        )
        t = result.target
        table = Table(title=None, show_lines=False, header_style="bold" if options.color else None)
        table.add_column("NAME", overflow="fold")
        table.add_column("VERSION", overflow="fold")
        table.add_column("TYPE", no_wrap=True)
        table.add_column("SOURCE", overflow="fold")
        table.add_column("LAYER", no_wrap=True)
        table.add_column("PATH", overflow="fold")
        for c in sorted(result.components, key=_sort_key):
            layers, paths = _locations(c)
            table.add_row(
                Text(c.name), Text(c.version or "-"), Text(c.type.value),
                Text(_origin(c)), Text(layers), Text(paths),
            )

        digest = t.manifest_digest or t.image_id or "-"
        os_name = t.os_release.get("PRETTY_NAME") or " ".join(
            x for x in (t.os_release.get("ID"), t.os_release.get("VERSION_ID")) if x
        ) or "-"
        n = len(result.components)
        u = len(result.unknowns)
        summary = (
            f"{n} component{'s' if n != 1 else ''}, {u} unknown{'s' if u != 1 else ''}"
            f" | target: {t.reference} | digest: {digest}"
            f" | platform: {t.platform or '-'} | os: {os_name}"
        )
        if result.components:
            console.print(table)
        else:
            console.print(Text("no components found"))
        console.print(Text(summary, style="bold" if options.color else ""))
        if result.unknowns:
            console.print(Text(""))
            console.print(Text("Unknowns (the scan went on, but these could not be read):",
                               style="yellow" if options.color else ""))
            for unk in sorted(result.unknowns, key=lambda x: (x.collector, x.path or "", x.reason)):
                where = f" ({unk.path})" if unk.path else ""
                console.print(Text(f"  - {unk.collector}: {unk.reason}{where}"))
