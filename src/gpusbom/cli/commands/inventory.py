"""``gpusbom inventory``: the fleet inventory (ingest, query, affected, drift, hosts, images,
metrics, export, serve). The database is ``--db URL`` or ``$GPUSBOM_INVENTORY_DB``, else an SQLite
file in the user data dir. Exit codes: 0 ok, 1 ``affected --fail`` found something,
2 usage, 3 bad input or an unusable database (one line; the password is never shown).
Each command calls one function of ``gpusbom.inventory.reports`` and writes its report."""

from __future__ import annotations

import sys
from enum import Enum
from typing import Annotated, Any

import typer

from .._common import EXIT_OK, EXIT_POLICY, exits
from ..app import app

inventory_app = typer.Typer(
    help="Fleet inventory: keep every scan of every host and image; ask where a component "
    "is, who an advisory affects, what changed. Needs gpusbom[inventory].",
    invoke_without_command=True,
)
app.add_typer(inventory_app, name="inventory")


@inventory_app.callback()
def _needs_extra(ctx: typer.Context) -> None:
    """Without the ``inventory`` extra, every ``gpusbom inventory`` command (and the bare
    group) is the one line naming the ``pip install`` (exit 3); with it, the bare group
    prints its help, as ``no_args_is_help`` would."""
    from ...extras import require

    if ctx.resilient_parsing:  # shell completion
        return
    require("inventory")
    if ctx.invoked_subcommand is None:
        print(ctx.get_help())
        raise typer.Exit(0)


def _format(value: str) -> str:
    from ...writers import all_writers, has_writer

    if not has_writer(value, "rows"):
        raise typer.BadParameter(f"{value!r} is not one of "
                                 + ", ".join(repr(f) for f in all_writers("rows")))
    return value


DbOpt = Annotated[
    str | None,
    typer.Option("--db",
                 help="sqlite:///PATH, a file path, or postgresql://USER:PASSWORD@HOST/DB. "
                 "Default: the inventory_db setting ($GPUSBOM_INVENTORY_DB, the config file), "
                 "else $XDG_DATA_HOME/gpusbom/inventory.db."),
]
DebugOpt = Annotated[bool, typer.Option("--debug", help="Show tracebacks.")]
OutOpt = Annotated[
    str | None, typer.Option("--output", "-o", help="Write to this file (atomically) instead "
                             "of stdout.")
]
AllScansOpt = Annotated[
    bool, typer.Option("--all-scans", help="Every scan kept, not only the latest scan of each "
                       "host and image.")
]
FmtOpt = Annotated[str, typer.Option("--format", "-f", callback=_format,
                                     help="table, json or csv.")]


LimitOpt = Annotated[
    int | None, typer.Option("--limit", min=0, help="Show at most this many rows (the "
                             "summary line counts all). Default: 1000 in a table, every row "
                             "with --format json or csv; 0: every row.")
]


def row_limit(limit: int | None, fmt: str) -> int | None:
    """``--limit``: None (every row) for 0, or when not given and the format is not a
    table; a table shows ``reports.TABLE_LIMIT`` rows unless told."""
    from ...inventory.reports import TABLE_LIMIT

    if limit is None:
        return TABLE_LIMIT if fmt == "table" else None
    return limit or None


class Kind(str, Enum):
    host = "host"
    image = "image"
    sbom = "sbom"


KindOpt = Annotated[Kind | None, typer.Option("--kind", help="host, image or sbom.")]


def write_report(report: Any, fmt: str, output: str | None, subject: str = "rows",
           summary: str = "") -> None:
    """The report in ``fmt`` to ``output`` (or stdout); a table's summary line on stderr."""
    from ..output import OutputSpec, emit

    emit(report, [OutputSpec(fmt, output)], subject=subject)
    if summary and fmt == "table" and not output:
        print(summary, file=sys.stderr)


@inventory_app.command("ingest")
@exits
def ingest(
    files: Annotated[list[str], typer.Argument(help="gpusbom JSON scans, CycloneDX or SPDX "
                                               "SBOMs (JSON, XML, tag-value); - for stdin.")],
    db: DbOpt = None,
    label: Annotated[
        list[str] | None, typer.Option("--label", "-l", help="KEY=VALUE added to the scan's "
                                       "labels (cluster, pool, ...); repeatable.")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No line per file.")] = False,
    debug: DebugOpt = False,
) -> None:
    """Store scans, each as it is read (one in memory at a time), each in its own
    transaction; a scan already stored (same content) is kept once. A file that is not a
    scan stops there (exit 3): the files before it stay stored."""
    from ...inventory.reports import ingest as _ingest

    for line in _ingest(db, files, label):
        if not quiet:
            print(line, file=sys.stderr)


@inventory_app.command("query")
@exits
def query(
    component: Annotated[str | None, typer.Argument(help="Package or GPU product name "
                                                    "(cudnn finds debs, wheels and bare "
                                                    "libraries).")] = None,
    version: Annotated[str | None, typer.Option("--version", "-V", help="Range: '<9.1', "
                                                "'>=9.0,<9.1', '==2.28.3'.")] = None,
    scheme: Annotated[str | None, typer.Option("--scheme", help="Compare versions in this "
                                               "scheme (deb, rpm, pep440, semver, numeric, "
                                               "nvidia-driver, intel) instead of picking one "
                                               "per component.")] = None,
    host: Annotated[str | None, typer.Option("--host", help="Host name (glob).")] = None,
    image: Annotated[str | None, typer.Option("--image", help="Image name:tag (glob).")] = None,
    label: Annotated[list[str] | None, typer.Option("--label", "-l", help="KEY=GLOB or KEY "
                                                    "(present); repeatable.")] = None,
    kind: KindOpt = None, all_scans: AllScansOpt = False, fmt: FmtOpt = "table",
    limit: LimitOpt = None, output: OutOpt = None, db: DbOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Where is a component (and in which versions)? One row per component found (a
    table: the first 1000, see --limit)."""
    from ...inventory.reports import query as _query

    r = _query(db, component, version=version, scheme=scheme, host=host, image=image,
               labels=label, kind=kind.value if kind else None, all_scans=all_scans,
               short_ids=fmt == "table", limit=row_limit(limit, fmt))
    write_report(r.rows, fmt, output, summary=r.summary)


@inventory_app.command("affected")
@exits
def affected(
    advisory: Annotated[str | None, typer.Argument(help="Advisory id or CVE.")] = None,
    all_advisories: Annotated[bool, typer.Option("--all", help="Every advisory in the "
                                                 "database.")] = False,
    include_review: Annotated[bool, typer.Option("--include-review", help="Also components "
                                                 "a person must review (no machine-readable "
                                                 "range).")] = False,
    fail: Annotated[bool, typer.Option("--fail", help="Exit 1 when anything is affected.")
                    ] = False,
    kind: KindOpt = None, all_scans: AllScansOpt = False, fmt: FmtOpt = "table",
    limit: LimitOpt = None, output: OutOpt = None, db: DbOpt = None,
    debug: DebugOpt = False,
) -> int:
    """Hosts and images affected by an advisory: the stored scans re-matched against the
    current advisory database (nothing is rescanned). A table shows the first 1000 rows
    (see --limit); the summary and --fail count every row."""
    from ...inventory.reports import affected as _affected

    r = _affected(db, advisory, all_advisories=all_advisories, include_review=include_review,
                  kind=kind.value if kind else None, all_scans=all_scans,
                  short_ids=fmt == "table", limit=row_limit(limit, fmt))
    write_report(r.rows, fmt, output, summary=r.summary)
    return EXIT_POLICY if fail and r.found else EXIT_OK


@inventory_app.command("drift")
@exits
def drift(
    subject: Annotated[str | None, typer.Argument(help="Host name or image name:tag.")] = None,
    from_scan: Annotated[str | None, typer.Option("--from", help="Older scan (id prefix).")
                         ] = None,
    to_scan: Annotated[str | None, typer.Option("--to", help="Newer scan (id prefix).")
                       ] = None,
    fmt: FmtOpt = "table", output: OutOpt = None, db: DbOpt = None, debug: DebugOpt = False,
) -> None:
    """What changed on a host or image between its last two scans (or --from/--to):
    driver, devices, probe outcomes, components."""
    from ...inventory.reports import drift as _drift

    write_report(_drift(db, subject, from_scan=from_scan, to_scan=to_scan), fmt, output, "drift")


@inventory_app.command("rematch")
@exits
def rematch(
    all_scans: AllScansOpt = False, db: DbOpt = None, debug: DebugOpt = False,
) -> None:
    """Recompute the findings of the stored scans against the current advisory database
    (nothing is rescanned: each distinct scan content is matched once). The stored scan
    bodies (export) stay as ingested."""
    from ...inventory.reports import rematch as _rematch

    print(_rematch(db, all_scans=all_scans), file=sys.stderr)


@inventory_app.command("prune")
@exits
def prune(
    keep_days: Annotated[int | None, typer.Option("--keep-days", help="Remove scans older "
                                                  "than this many days.")] = None,
    keep_last: Annotated[int | None, typer.Option("--keep-last", help="Keep the newest N "
                                                  "scans of each host and image.")] = None,
    db: DbOpt = None, debug: DebugOpt = False,
) -> None:
    """Retention: remove old scans (with both options, a scan goes when it is older than
    --keep-days and not among the newest --keep-last of its host or image; the latest scan
    of each always stays). Default: the inventory_keep_days / inventory_keep_last
    settings. On PostgreSQL, months with nothing left to keep are dropped as partitions."""
    from ...inventory.reports import prune as _prune

    print(_prune(db, keep_days=keep_days, keep_last=keep_last), file=sys.stderr)
