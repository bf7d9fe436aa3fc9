"""``gpusbom inventory`` commands over the whole fleet: compat, hosts, images, metrics, export
and serve (the group and its shared options are in ``inventory.py``)."""

from __future__ import annotations

import contextlib
import sys
from typing import Annotated

import typer

from .._common import EXIT_OK, EXIT_POLICY, exits
from .inventory import (
    DbOpt,
    DebugOpt,
    FmtOpt,
    LimitOpt,
    OutOpt,
    inventory_app,
    row_limit,
    write_report,
)


@inventory_app.command("compat")
@exits
def compat(
    image: Annotated[str | None, typer.Option("--image", help="Image name:tag (glob).")] = None,
    host: Annotated[str | None, typer.Option("--host", help="Host name (glob).")] = None,
    failing: Annotated[bool, typer.Option("--failing", help="Only the pairs predicted to "
                                          "fail.")] = False,
    fail: Annotated[bool, typer.Option("--fail", help="Exit 1 when an image is predicted to "
                                       "fail on a host.")] = False,
    on_node: Annotated[bool, typer.Option("--on-node", help="Only the images each host holds "
                                          "(scan --root/--host --images), each checked against "
                                          "its own node.")] = False,
    fmt: FmtOpt = "table", output: OutOpt = None, db: DbOpt = None, debug: DebugOpt = False,
) -> int:
    """Which images will fail on which hosts: gpusbom check of the latest scan of every stored
    image against the latest scan of every stored host (GPUs and driver; nothing rescanned).
    One row per (image, host, GPU kind): runs, runs-with-jit, unchecked,
    not-applicable or will-fail, with the first
    reason. With --on-node: the images found on each node, against that node."""
    from ...inventory.reports import compat as _compat

    r = _compat(db, image=image, host=host, failing=failing, on_node=on_node,
                brief=fmt == "table", evidence=fmt == "json")
    write_report(r.rows, fmt, output, summary=r.summary)
    return EXIT_POLICY if fail and r.found else EXIT_OK


@inventory_app.command("hosts")
@exits
def hosts(fmt: FmtOpt = "table", limit: LimitOpt = None, output: OutOpt = None,
          db: DbOpt = None, debug: DebugOpt = False) -> None:
    """Every host: latest scan, GPUs, kernel driver, findings by severity
    (a table: the first 1000 by name, see --limit)."""
    from ...inventory.reports import subjects

    r = subjects(db, "host", short_ids=fmt == "table", limit=row_limit(limit, fmt))
    write_report(r.rows, fmt, output, summary=r.summary)


@inventory_app.command("images")
@exits
def images(fmt: FmtOpt = "table", limit: LimitOpt = None, output: OutOpt = None,
           db: DbOpt = None, debug: DebugOpt = False) -> None:
    """Every image: latest scan, digest, components, findings by severity
    (a table: the first 1000 by name, see --limit)."""
    from ...inventory.reports import subjects

    r = subjects(db, "image", short_ids=fmt == "table", limit=row_limit(limit, fmt))
    write_report(r.rows, fmt, output, summary=r.summary)


@inventory_app.command("metrics")
@exits
def metrics(output: OutOpt = None, db: DbOpt = None, debug: DebugOpt = False) -> None:
    """Prometheus text format: findings by severity per host, probe outcome per GPU, scan
    age. --output FILE.prom for node-exporter's textfile collector (written atomically)."""
    from ...inventory import Store
    from ...inventory.metrics import collector

    with Store(db) as store:
        write_report(collector(store), "prometheus", output, "metrics")


@inventory_app.command("export")
@exits
def export(
    scan: Annotated[str, typer.Argument(help="Scan id (prefix), or a host / image: its latest "
                                        "scan.")],
    output: OutOpt = None, db: DbOpt = None, debug: DebugOpt = False,
) -> None:
    """A stored scan as gpusbom JSON, exactly as ingested (feed it to scan --sbom, check...)."""
    from ...inventory.reports import export as _export
    from ..output import write_atomic

    text = _export(db, scan)
    if output:
        write_atomic(output, text)
    else:
        sys.stdout.write(text)


@inventory_app.command("serve")
@exits
def serve(
    db: DbOpt = None,
    bind: Annotated[str, typer.Option("--bind", help="HOST:PORT to listen on ([::1]:8080 for "
                                      "IPv6). Localhost by default: put a reverse proxy or "
                                      "--auth-token-file in front of anything wider.")
                    ] = "127.0.0.1:8080",
    auth_token_file: Annotated[
        str | None, typer.Option("--auth-token-file", help="A file holding one token: every "
                                 "request then needs 'Authorization: Bearer TOKEN' (or basic "
                                 "auth with the token as password).")] = None,
    write_token_file: Annotated[
        str | None, typer.Option("--write-token-file",
                                 help="A file holding the write token: enables triage "
                                 "(record analyses; sign in with the token). Without it the "
                                 "dashboard is read-only.")] = None,
    debug: DebugOpt = False,
) -> None:
    """A read-only web dashboard over the inventory: fleet overview, search, advisories,
    the image x GPU compatibility matrix, hosts, images; a JSON API for each page
    (/api/openapi.json) and Prometheus /metrics. Runs until interrupted."""
    from ...inventory.web import serve as _serve

    with contextlib.suppress(KeyboardInterrupt):  # the way to stop it: exit 0
        from ... import settings

        write_token_file = write_token_file or settings.get("dashboard_write_token_file")
        _serve(db, bind=bind, token_file=auth_token_file, write_token_file=write_token_file)
