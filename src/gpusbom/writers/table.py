"""A table for people: what was found, where, and what could not be read."""

from __future__ import annotations

import io
import shutil
from typing import TYPE_CHECKING, TextIO

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..model import Component, ScanResult
from . import register
from ._common import advisory_db_text
from ._probes import probe_detail, probe_facts_text
from .base import Rows, Writer, WriterOptions

if TYPE_CHECKING:
    from ..compat.report import CheckReport
    from ..inventory.types import Drift
    from ..policy.report import GateReport
    from ..reconcile import Reconciliation

#: the columns of an inventory drift's table and CSV
DRIFT_COLUMNS = ("section", "change", "key", "before", "after")


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
            # piped or captured: wide enough that rows rarely wrap
            tty = callable(isatty) and isatty()
            width = shutil.get_terminal_size((160, 24)).columns if tty else 200
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
        general = [f for f in result.findings if f.kind != "advisory"]  # advisories: own table
        if general:
            console.print(Text(""))
            console.print(Text(f"Findings ({len(general)}):", style=bold))
            for fnd in general:
                console.print(Text(f"  - [{fnd.severity}] {fnd.title} ({fnd.id})"))
                if fnd.detail:
                    console.print(Text(f"      {fnd.detail}"))
        _device_code_table(console, result, bold)
        _advisory_table(console, result, bold)
        _probe_table(console, result, bold)
        # rich pads every line to the console width; people and diffs want no trailing blanks
        out.write("\n".join(line.rstrip() for line in buf.getvalue().splitlines()) + "\n")


def _device_code_table(console: Console, result: ScanResult, bold: str) -> None:
    """Each file's own device code (a package's cuda:*/hip:* properties are only the union
    of these: a summary)."""
    rows = [(c, d) for c in sorted(result.components, key=_sort_key) for d in c.device_code]
    if not rows:
        return
    console.print(Text(""))
    console.print(Text(f"Device code per file ({len(rows)} files; a package's own targets "
                       "are the union of its files):", style=bold))
    table = Table(box=box.SIMPLE_HEAD, header_style=bold or None, pad_edge=False)
    for col in ("COMPONENT", "FILE", "SASS", "PTX", "LTO", "GFX"):
        table.add_column(col, overflow="fold", no_wrap=col == "COMPONENT")
    for c, d in rows:
        t = d.targets
        table.add_row(*(Text(x or "-") for x in (
            c.name, _display_path(d.path), t.get("cuda:sass"), t.get("cuda:ptx"),
            t.get("cuda:lto"), t.get("hip:gfx"))))
    console.print(table)


def _probe_table(console: Console, result: ScanResult, bold: str) -> None:
    """Smoke-test probe results: one row per (backend, device), then backend-level rows."""
    if not result.probes:
        return
    console.print(Text(""))
    table = Table(box=box.SIMPLE_HEAD, header_style=bold or None, pad_edge=False)
    for col in ("BACKEND", "MODEL", "DEVICE", "OUTCOME", "DETAIL", "TIME", "FACTS"):
        table.add_column(col, no_wrap=col in ("BACKEND", "OUTCOME", "TIME"), overflow="fold")
    rows = sorted(result.probes, key=lambda p: (p.device is None, p.backend, p.device_id or ""))
    for p in rows:
        table.add_row(
            Text(p.label), Text(p.facts.get("programming-model", "-")), Text(p.device or "-"),
            Text(p.outcome), Text(probe_detail(p)),
            Text(f"{p.seconds:.2f} s" if p.seconds is not None else "-"), Text(probe_facts_text(p)),
        )
    console.print(Text("Probe (tiled FP32 matmul, N=100, exact compare):", style=bold))
    console.print(table)
    counts: dict[str, int] = {}
    for p in result.probes:
        counts[p.outcome] = counts.get(p.outcome, 0) + 1
    console.print(Text("probes: " + ", ".join(f"{n} {o}" for o, n in sorted(counts.items())),
                       style=bold))


#: matcher rules that prove "not affected" (auto-VEX), as opposed to a user's VEX statement
_AUTO_VEX_RULES = ("windows-only", "kernel-mode-on-image", "cuda-part-absent")


def _advisory_table(console: Console, result: ScanResult, bold: str) -> None:
    """Advisory findings (``Finding.kind == "advisory"``): affected first, then review.

    Findings a VEX statement marked ``not-affected`` are left out of the table and listed
    below it, one line each with the VEX justification; then the database line."""
    every = [f for f in result.findings if f.kind == "advisory" and f.advisory is not None]
    found = [f for f in every if f.advisory and f.advisory.status != "not-affected"]
    suppressed = [f for f in every if f.advisory and f.advisory.status == "not-affected"]
    names = {c.bom_ref: c.name for c in result.components}
    if not every:
        db_line = advisory_db_text(result)
        if db_line:
            console.print(Text(""))
            console.print(Text(db_line))
        return
    console.print(Text(""))
    table = Table(box=box.SIMPLE_HEAD, header_style=bold or None, pad_edge=False)
    for col in ("VULNERABILITY", "ADVISORY", "SEVERITY", "STATUS", "COMPONENT", "VERSION",
                "FIXED IN", "PATH"):
        table.add_column(col, no_wrap=col != "PATH", overflow="fold")
    order = {"affected": 0, "unsupported-branch": 1, "review": 2, "not-affected": 3}
    for f in sorted(found, key=lambda f: order.get(f.advisory.status if f.advisory else "", 3)):
        a = f.advisory
        assert a is not None  # noqa: S101 - type narrowing of an invariant
        comp = ", ".join(names.get(r, r) for r in f.components)
        table.add_row(
            Text(a.vulnerability + (" KEV" if a.kev else "")), Text(a.advisory),
            Text(f.severity), Text(a.status),
            Text(comp), Text(a.installed_version or "-"), Text(a.fixed_version or "-"),
            Text(f.evidence[0] if f.evidence else ""),
        )
    if found:
        console.print(table)
    counts: dict[str, int] = {}
    for f in every:
        st = f.advisory.status if f.advisory else "?"
        counts[st] = counts.get(st, 0) + 1
    auto = sum(1 for f in suppressed if f.advisory and f.advisory.rule in _AUTO_VEX_RULES)
    console.print(Text(
        f"advisories: {len(every)} raw matches, {len(found)} after analysis ("
        + ", ".join(f"{n} {st}" for st, n in sorted(counts.items()))
        + (f"; {auto} not affected by gpusbom analysis, {len(suppressed) - auto} by VEX"
           if suppressed else "") + ")", style=bold
    ))
    kev = sorted({(f.advisory.vulnerability, f.advisory.kev) for f in found
                  if f.advisory and f.advisory.kev})
    if kev:
        console.print(Text(
            f"Known exploited (CISA KEV, {len(kev)}): "
            + ", ".join(f"{cve} (added {date})" for cve, date in kev), style=bold))
    analysed = [f for f in suppressed if f.advisory and f.advisory.rule in _AUTO_VEX_RULES]
    if analysed:
        by_rule: dict[str, int] = {}
        for f in analysed:
            assert f.advisory is not None and f.advisory.rule is not None  # noqa: S101 - filtered above
            by_rule[f.advisory.rule] = by_rule.get(f.advisory.rule, 0) + 1
        console.print(Text(
            f"Not affected by gpusbom analysis ({len(analysed)}: "
            + ", ".join(f"{n} {r}" for r, n in sorted(by_rule.items()))
            + "; each with its evidence in -o json, -o openvex=PATH, -o cyclonedx-vex=PATH)"))
    suppressed = [f for f in suppressed if f not in analysed]
    if suppressed:
        console.print(Text(f"Not affected per VEX ({len(suppressed)}, not in the table above):"))
        for f in suppressed:
            a = f.advisory
            assert a is not None  # noqa: S101 - type narrowing of an invariant
            comp = ", ".join(names.get(r, r) for r in f.components)
            why = a.justification or "no justification given"
            console.print(Text(f"  - {a.vulnerability} ({a.advisory}) on {comp}: {why}"))
    db_line = advisory_db_text(result)
    if db_line:
        console.print(Text(db_line))


@register
class GateTableWriter(Writer):
    format = "table"
    subject = "gate"
    description = "the gate's summary: one block per violation"
    for_humans = True

    def write(self, result: GateReport, out: TextIO, options: WriterOptions) -> None:
        from ..policy import print_summary

        for d in result.decisions:
            print_summary(d, out)


@register
class CheckTableWriter(Writer):
    format = "table"
    subject = "check"
    description = "a verdict per target, with its reasons"
    for_humans = True

    def write(self, result: CheckReport, out: TextIO, options: WriterOptions) -> None:
        from ..compat.report import to_table

        out.write(to_table(result.verdicts, verbose=options.verbose))


@register
class RowsTableWriter(Writer):
    format = "table"
    subject = "rows"
    description = "aligned plain-text columns"
    for_humans = True

    def write(self, result: Rows, out: TextIO, options: WriterOptions) -> None:
        from ..inventory.render import render

        out.write(render(result.rows, result.columns, "table"))


@register
class DriftTableWriter(Writer):
    format = "table"
    subject = "drift"
    description = "the two scans compared, and a row per change"
    for_humans = True

    def write(self, result: Drift, out: TextIO, options: WriterOptions) -> None:
        from ..inventory.render import as_dict, render

        d = result
        out.write(f"{d.kind} {d.subject}: {d.old.id[:12]} ({d.old.ts}) -> "
                  f"{d.new.id[:12]} ({d.new.ts}): {len(d.changes)} change(s)\n")
        if d.changes:
            out.write(render([as_dict(c) for c in d.changes], DRIFT_COLUMNS, "table"))


@register
class ReconcileTableWriter(Writer):
    format = "table"
    subject = "reconcile"
    description = "a summary, then one row per difference"
    for_humans = True

    def write(self, result: Reconciliation, out: TextIO, options: WriterOptions) -> None:
        from ..reconcile import render_table

        out.write(render_table(result))
