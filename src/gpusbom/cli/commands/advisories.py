"""``gpusbom advisories``: the advisory database (list, show, update)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from ...errors import UsageError
from .._common import exits
from ..app import app

advisories_app = typer.Typer(
    help="The advisory database: list and show records, update from the vendor feeds.",
    no_args_is_help=True,
)
app.add_typer(advisories_app, name="advisories")


@advisories_app.command("list")
@exits
def advisories_list(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
) -> None:
    """One line per advisory: id, date, vendor, CVEs, title; then which database it is."""
    from ...advisories.db import describe, load_active

    db = load_active()
    for a in db:
        cves = ",".join(v.id for v in a.vulnerabilities)
        print(f"{a.id}\t{a.published[:10]}\t{a.vendor}\t{cves}\t{a.title}")
    info = describe(db)
    print(f"{len(db)} advisories ({info['source']}, built {info['built']}, "
          f"{info['age_days']} days old)")


@advisories_app.command("show")
@exits
def advisories_show(
    ident: Annotated[str, typer.Argument(help="Advisory id or CVE.")],
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
) -> None:
    """The record of one advisory (by id or CVE) as JSON."""
    import json as _json

    from ...advisories.db import load_active

    a = load_active().get(ident)
    if a is None:
        raise UsageError(f"no advisory {ident!r} in the database")
    print(_json.dumps(a.raw, indent=2, ensure_ascii=False))


@advisories_app.command("update")
@exits
def advisories_update(
    source: Annotated[
        list[str] | None,
        typer.Option("--source", help="NAME=URL for a feed ({feeds}), or NAME=off; "
                     "repeatable. Also {feed_vars}."),
    ] = None,
    ecosystem: Annotated[
        list[str] | None,
        typer.Option("--ecosystem", help="OSV ecosystem archive to fetch; repeatable "
                     "(default: PyPI, Debian, Ubuntu)."),
    ] = None,
    reset: Annotated[
        bool, typer.Option("--reset", help="Drop the updated database: scans use the "
                           "bundled snapshot again. Fetches nothing.")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress lines.")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
) -> None:
    """Fetch every advisory feed (those --source names) over HTTPS, verify their checksums,
    and swap the new database into the user cache atomically (with the CVE descriptions the
    feeds carry).

    Any failure (offline, interrupted download, bad checksum, invalid data) leaves the
    current database as it was and exits 3. Without an update, scans use the snapshot
    bundled with gpusbom."""
    from ...advisories import update as upd

    if reset:
        gone = upd.reset()
        print(f"{gone}: removed; scans use the bundled snapshot" if gone
              else "no updated database; scans use the bundled snapshot")
        return
    sources = upd.resolve_sources(source or ())
    report = upd.update(
        sources=sources,
        ecosystems=tuple(ecosystem or upd.DEFAULT_ECOSYSTEMS),
        progress=None if quiet else (lambda m: print(f"fetching {m}...", file=sys.stderr)),
    )
    print(report.summary())


@advisories_app.command("export")
@exits
def advisories_export(
    path: Annotated[str, typer.Argument(help="Bundle file to write (PATH.sha256 beside it).")],
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
) -> None:
    """Write the active database as a bundle plus its SHA-256, for ``advisories import`` on
    an air-gapped machine."""
    from ...advisories import transfer

    digest = transfer.export_bundle(path)
    print(f"{path}: exported (sha256 {digest}; {path}.sha256 written)")


@advisories_app.command("import")
@exits
def advisories_import(
    path: Annotated[str, typer.Argument(help="A bundle made by `gpusbom advisories export`.")],
    sha256: Annotated[
        str | None, typer.Option("--sha256", help="Expected SHA-256 (default: read "
                                 "BUNDLE.sha256 beside the bundle).")
    ] = None,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
) -> None:
    """Load an exported bundle into the user cache after checking its SHA-256 and content;
    on any failure the current database stays as it was (exit 3)."""
    from ...advisories import transfer

    dest, n = transfer.import_bundle(path, sha256)
    print(f"{dest}: {n} advisories imported from {path}")


@advisories_app.command("status")
@exits
def advisories_status(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
) -> None:
    """Which database scans use: its sources, counts per vendor, the newest data date and
    the build date, each on its own line."""
    from ...advisories import transfer

    for line in transfer.status_lines():
        print(line)
