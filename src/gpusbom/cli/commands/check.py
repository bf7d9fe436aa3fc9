"""``gpusbom check``: will an image run on given GPUs and drivers? (see docs/check.md)

Exit codes: 0 every verdict is ``runs`` or ``runs-with-jit`` (with ``--fail-on-jit``: every
verdict is ``runs``); 1 some verdict is ``will-fail`` (a predicted failure, like a gate);
2 usage; 3 bad input (image, SBOM, host scan, inventory).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ...safetext import loads_json
from ..app import app

if TYPE_CHECKING:
    from ...model import ScanResult

_FORMATS = ("table", "json", "sarif", "html")


def _parse_outputs(values: list[str] | None) -> list[tuple[str, str | None]]:
    from .._common import parse_report_outputs

    return parse_report_outputs(values, _FORMATS)


def _sniff(path: str) -> str | None:
    """'gpusbom' for a gpusbom JSON scan, 'sbom' for a CycloneDX/SPDX SBOM, None otherwise."""
    if not os.path.isfile(path):
        return None
    from ...sbomin import sniff

    kind = sniff(path)
    return None if kind is None else "gpusbom" if kind == "gpusbom" else "sbom"


def _load_file(path: str, kind: str) -> ScanResult:
    from ...errors import InputError
    from ...model import ScanResult

    if kind == "gpusbom":
        try:
            with open(path, encoding="utf-8") as f:
                return ScanResult.from_dict(loads_json(f.read()))
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"{path}: not a gpusbom scan: {exc}") from exc
    try:
        from ...sbomin import load_sbom
    except ImportError as exc:
        raise InputError(f"{path}: reading CycloneDX/SPDX needs gpusbom.sbomin, which this "
                         "build lacks; give a gpusbom JSON scan") from exc
    result: ScanResult = load_sbom(path)
    return result


def _load_image(ref: str) -> ScanResult:
    kind = _sniff(ref)
    if kind is not None:
        return _load_file(ref, kind)
    from ...scan import scan

    return scan(ref)


def _load_host(path: str) -> ScanResult:
    from ...errors import InputError

    kind = _sniff(path)
    if kind is None:
        if not os.path.exists(path):
            raise InputError(f"--against {path}: no such file")
        raise InputError(f"--against {path}: not a gpusbom JSON scan or a CycloneDX/SPDX SBOM")
    host = _load_file(path, kind)
    if host.target.kind not in ("host", ""):
        raise InputError(f"--against {path}: a scan of {host.target.kind} "
                         f"{host.target.reference!r}, not of a host")
    return host


def _inventory_hosts(url: str) -> list[ScanResult]:
    from ...errors import InputError

    try:
        from ...inventory import Store
    except ImportError as exc:
        raise InputError(f"--inventory {url}: this build has no inventory store") from exc
    got = Store(url).latest_scans(kind="host")
    hosts = [h[-1] if isinstance(h, tuple) else h for h in got]
    if not hosts:
        raise InputError(f"--inventory {url}: no host scans stored")
    return hosts


@app.command()
def check(
    image: Annotated[
        str,
        typer.Argument(help="Image reference (as for gpusbom scan) or a scan/SBOM file of it: "
                            "gpusbom JSON, CycloneDX, SPDX."),
    ],
    against: Annotated[
        str | None,
        typer.Option("--against", help="A host's scan or SBOM (gpusbom scan --host -o json)."),
    ] = None,
    host: Annotated[bool, typer.Option("--host", help="Check against this machine.")] = False,
    inventory: Annotated[
        str | None,
        typer.Option("--inventory", help="Inventory database URL: check against every host."),
    ] = None,
    gpu: Annotated[
        list[str] | None,
        typer.Option("--gpu", help="What-if GPU: a model (H100, B200, L4, RTX 4090, MI300X), "
                                   "sm_XY or gfxNNN[:xnack±]; repeatable."),
    ] = None,
    driver: Annotated[
        str | None,
        typer.Option("--driver", help="NVIDIA driver version for --gpu (e.g. 580.65.06)."),
    ] = None,
    output: Annotated[
        list[str] | None,
        typer.Option("--output", "-o",
                     help="FORMAT[=PATH], repeatable: table (default), json, sarif, html."),
    ] = None,
    fail_on_jit: Annotated[
        bool, typer.Option("--fail-on-jit", help="Exit 1 on runs-with-jit too.")
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Table: every reason, also of what runs.")
    ] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
) -> None:
    """Predict whether IMAGE runs on a host, a fleet or given GPUs: runs, runs-with-jit
    (PTX/SPIR-V compiled at first launch) or will-fail, with the reasons and evidence.
    Exit 1 when any verdict is will-fail."""
    from .._common import fail as _fail

    try:
        code = _check(image, against, host, inventory, gpu, driver, output, fail_on_jit, verbose)
    except Exception as exc:  # noqa: BLE001 - the one place errors become exit codes
        code = _fail(exc, debug)
    raise typer.Exit(code)


def _check(image: str, against: str | None, host: bool, inventory: str | None,
           gpu: list[str] | None, driver: str | None, output: list[str] | None,
           fail_on_jit: bool, verbose: bool) -> int:
    from ...compat import FAIL, JIT, check_against_host, evaluate
    from ...compat.report import to_json, to_sarif, to_table
    from ...errors import UsageError
    from ..output import write_atomic

    given = [x for x in (against is not None, host, inventory is not None, bool(gpu)) if x]
    if len(given) != 1:
        raise UsageError("give exactly one target: --against FILE, --host, --inventory DB or "
                         "--gpu MODEL|sm_XY|gfxNNN [--driver VERSION]")
    if driver is not None and not gpu:
        raise UsageError("--driver goes with --gpu (a host scan carries its own driver)")
    specs = _parse_outputs(output)
    if gpu:
        from ...compat import platform_from_string

        for g in gpu:  # a bad target is a usage error before the image is read
            platform_from_string(g, driver)
    hosts: list[ScanResult] = []
    if against is not None:
        hosts = [_load_host(against)]
    elif inventory is not None:
        hosts = _inventory_hosts(inventory)
    img = _load_image(image)
    if host:
        from ...host import scan_host
        from ...host.cache import cached_host_scan

        # a fresh scan of this host (same boot, package databases, driver) is reused
        hosts = [cached_host_scan(lambda: scan_host("/"), _load_host)[0]]
    if gpu:
        verdicts = evaluate(img, list(gpu), driver=driver)
    else:
        verdicts = [v for h in hosts for v in check_against_host(img, h)]
    def html(v: list[Any]) -> str:
        from ...writers.html import render_report

        return render_report(title=f"gpusbom check: {img.target.reference}", scans=[img],
                             verdicts=v)

    renderers = {"table": lambda v: to_table(v, verbose=verbose), "json": to_json,
                 "sarif": to_sarif, "html": html}
    rendered = [(renderers[fmt](verdicts), path) for fmt, path in specs]
    for text, path in rendered:
        if path is None:
            sys.stdout.write(text)
        else:
            write_atomic(path, text)
    if any(v.verdict == FAIL for v in verdicts):
        return 1
    if fail_on_jit and any(v.verdict == JIT for v in verdicts):
        return 1
    return 0
