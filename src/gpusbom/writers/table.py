"""A table for people: what was found, where, and what could not be read."""

from __future__ import annotations

import io
import shutil
from typing import TextIO

from rich import box
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


def _display_path(path: str) -> str:
    # the package directory says more than the metadata file inside it
    for suffix in ("/METADATA", "/PKG-INFO"):
        if path.endswith(suffix) and (".dist-info/" in path or ".egg-info/" in path):
            return path[: -len(suffix)]
    return path


def _locations(c: Component, layer_index: dict[str, int]) -> tuple[str, str]:
    layers: list[str] = []
    paths: list[str] = []
    for ev in c.evidence:
        if ev.layer:
            idx = layer_index.get(ev.layer)
            s = (f"#{idx} " if idx is not None else "") + short_digest(ev.layer, 8)
            if s not in layers:
                layers.append(s)
        if ev.path:
            shown = _display_path(ev.path)
            if shown not in paths:
                paths.append(shown)
    if len(paths) > 2:
        paths = paths[:2] + [f"(+{len(paths) - 2} more)"]
    return "\n".join(layers), "\n".join(paths)


@register
class TableWriter(Writer):
    format = "table"
    description = "human-readable table (default on a terminal)"
    for_humans = True

    def write(self, result: ScanResult, out: TextIO, options: WriterOptions) -> None:
        width = options.width
        if width is None:
            isatty = getattr(out, "isatty", None)
            if callable(isatty) and isatty():
                width = shutil.get_terminal_size((160, 24)).columns
            else:
                width = 200  # piped or captured: wide enough that rows rarely wrap
        buf = io.StringIO()
        console = Console(
            file=buf,
            width=width,
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
        bold = "bold" if options.color else ""
        t = result.target
        os_name = t.os_release.get("PRETTY_NAME") or " ".join(
            x for x in (t.os_release.get("ID"), t.os_release.get("VERSION_ID")) if x
        ) or "-"
        header = [
            ("Target", t.reference),
            ("Digest", t.manifest_digest or t.image_id or "-"),
            ("Platform", t.platform or "-"),
            ("OS", os_name),
        ]
        if result.stacks:
            header.append(("GPU stack", result.stack_text()))
        for key, value in header:
            line = Text(f"{key + ':':<11}", style=bold)
            line.append(value)
            console.print(line)

        layer_index = {la.diff_id: la.index for la in t.layers if la.diff_id}
        table = Table(
            title=None,
            box=box.SIMPLE_HEAD,
            show_lines=False,
            header_style=bold or None,
            pad_edge=False,
        )
        table.add_column("NAME", no_wrap=True)
        table.add_column("VERSION", no_wrap=True)
        table.add_column("TYPE", no_wrap=True)
        table.add_column("SOURCE", no_wrap=True)
        table.add_column("LAYER", no_wrap=True)
        table.add_column("PATH", overflow="fold")
        for c in sorted(result.components, key=_sort_key):
            layers, paths = _locations(c, layer_index)
            table.add_row(
                Text(c.name), Text(c.version or "-"), Text(c.type.value),
                Text(_origin(c)), Text(layers), Text(paths),
            )
        if result.components:
            console.print(table)
        else:
            console.print(Text("\nno components found\n"))
        n = len(result.components)
        u = len(result.unknowns)
        console.print(
            Text(f"{n} component{'s' if n != 1 else ''}, {u} unknown{'s' if u != 1 else ''}",
                 style=bold)
        )
        if result.unknowns:
            console.print(Text(""))
            console.print(Text("Unknowns (the scan went on, but these could not be read):",
                               style="yellow" if options.color else ""))
            for unk in sorted(result.unknowns, key=lambda x: (x.collector, x.path or "", x.reason)):
                where = f" ({unk.path})" if unk.path else ""
                console.print(Text(f"  - {unk.collector}: {unk.reason}{where}"))
        # rich pads every line to the console width; people and diffs want no trailing blanks
        out.write("\n".join(line.rstrip() for line in buf.getvalue().splitlines()) + "\n")
