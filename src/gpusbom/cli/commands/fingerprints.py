"""``gpusbom fingerprints``: the fingerprint database that identifies NVIDIA libraries by
their SHA-256 or ELF build-id and checks versions against the vendor's release lists:
``status``, ``update`` (from NVIDIA's wheels on PyPI), ``export`` and ``import`` (the
air-gapped path, as for the advisory database)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from .._common import exits
from ..app import app

fingerprints_app = typer.Typer(
    help="The fingerprint database: NVIDIA library files -> product and exact version.",
    no_args_is_help=True,
)
app.add_typer(fingerprints_app, name="fingerprints")


def status_lines() -> list[str]:
    """Which database scans use, its build date and record count, then one line per
    product: files, versions, the oldest and newest version; then the release lists."""
    from packaging.version import InvalidVersion, Version

    from ...fingerprints.active import load_active, user_db_path

    db = load_active()
    counts = db.counts()
    out = [f"source: {db.source}", f"built: {db.built or 'unknown'}",
           f"records: {len(db)}", f"products: {len(counts)}"]

    def key(v: str) -> tuple[int, Version | str]:
        try:
            return (0, Version(v))
        except InvalidVersion:
            return (1, v)

    for product, per in counts.items():
        vs = sorted(per, key=key)
        out.append(f"{product}\t{sum(per.values())} files\t{len(vs)} versions\t{vs[0]} .. {vs[-1]}")
    rel = db.release_counts()
    out.append(f"release lists: {sum(rel.values())} releases of {len(rel)} products")
    for product, n in rel.items():
        cf = db.complete_from.get(product)
        out.append(f"{product}\t{n} releases" + (f"\tcomplete from {cf}" if cf else ""))
    if db.source == "bundled" and user_db_path().exists():
        out.append(f"note: {user_db_path()} is not used (invalid, or older than the bundled "
                   "snapshot)")
    return out


@fingerprints_app.command("status")
@exits
def fingerprints_status(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
) -> None:
    """Which database scans use, its build date and record count, and per product the
    files, versions and version range it covers and the releases its vendor lists name."""
    for line in status_lines():
        print(line)


@fingerprints_app.command("update")
@exits
def fingerprints_update(
    index: Annotated[str, typer.Option("--index", help="The package index (PEP 691 JSON) to "
                                       "read NVIDIA's wheels from.")] = "https://pypi.org/simple",
    since: Annotated[str | None, typer.Option("--since", help="Oldest upload date (YYYY-MM-DD) "
                                              "of the wheels fingerprinted (default: three "
                                              "years ago).")] = None,
    max_wheel_mb: Annotated[float, typer.Option("--max-wheel-mb", help="Larger wheels are not "
                                                "downloaded (cuDNN's run to 700 MB).")] = 150.0,
    dist: Annotated[list[str] | None, typer.Option("--dist", help="Only this distribution "
                                                   "(repeatable), e.g. nvidia-cublas-cu12.")] = None,
    redistrib: Annotated[list[str] | None, typer.Option(
        "--redistrib", help="Also an NVIDIA redistrib_*.json manifest (URL, file or directory; "
        "repeatable): its linux-x86_64 archives the database lacks, checked against the "
        "manifest's sha256.")] = None,
    reset: Annotated[bool, typer.Option("--reset", help="Drop the updated database: scans use "
                                        "the bundled snapshot again. Fetches nothing.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress lines.")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
) -> None:
    """Refresh the vendor release lists from PyPI and fingerprint the NVIDIA wheels the
    database lacks (each checked against the index's sha256), then swap the new database
    into the user cache atomically.

    Any failure (offline, bad checksum, invalid data) leaves the current database as it was
    and exits 3. Without an update, scans use the snapshot bundled with gpusbom."""
    from ...fingerprints import update as upd

    if reset:
        gone = upd.reset()
        print(f"{gone}: removed; scans use the bundled snapshot" if gone
              else "no updated database; scans use the bundled snapshot")
        return
    report = upd.update(index=index, since=since, max_wheel_mb=max_wheel_mb, dists=dist,
                        redistrib=redistrib or (),
                        progress=None if quiet else (lambda m: print(f"{m}...", file=sys.stderr)))
    print(report.summary())


@fingerprints_app.command("export")
@exits
def fingerprints_export(
    path: Annotated[str, typer.Argument(help="Database file to write (PATH.sha256 beside it).")],
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
) -> None:
    """Write the database scans use, plus its SHA-256, for ``fingerprints import`` on an
    air-gapped machine."""
    from ...fingerprints import update as upd

    digest = upd.export_db(path)
    print(f"{path}: exported (sha256 {digest}; {path}.sha256 written)")


@fingerprints_app.command("import")
@exits
def fingerprints_import(
    path: Annotated[str, typer.Argument(help="A database written by `gpusbom fingerprints "
                                        "export` (or the builder).")],
    sha256: Annotated[str | None, typer.Option("--sha256", help="Expected SHA-256 (default: "
                                               "read FILE.sha256 beside it).")] = None,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
) -> None:
    """Install a database file into the user cache after checking its SHA-256 and every row
    (JSON only, bounded, schema-checked); on any failure the current database stays as it
    was (exit 3)."""
    from ...fingerprints import update as upd

    dest, db, used = upd.import_db(path, sha256)
    print(f"{dest}: {len(db)} files, {len(db.releases)} listed releases imported from {path}"
          + ("" if used else "; scans keep the bundled snapshot, which is newer"))
