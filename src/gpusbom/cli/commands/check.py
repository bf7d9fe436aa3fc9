"""``gpusbom check``: will an image run on given GPUs and drivers? (see docs/check.md)

Exit codes: 0 every verdict is green: ``runs`` or ``runs-with-jit`` (with ``--fail-on-jit``:
every verdict is ``runs``; with ``--allow-unchecked`` ``unchecked`` passes too); 1 some verdict
is not (``will-fail``, ``not-applicable``, ``unchecked``: a gate); 2 usage; 3 bad input
(image, SBOM, host scan, inventory).
"""

from __future__ import annotations

from typing import Annotated

import typer

from .._common import EXIT_OK, EXIT_POLICY, exits
from ..app import app


@app.command()
@exits
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
                     help="FORMAT[=PATH], repeatable: table (default), json, sarif, html, "
                     "in-toto."),
    ] = None,
    fail_on_jit: Annotated[
        bool, typer.Option("--fail-on-jit", help="Exit 1 on runs-with-jit too.")
    ] = False,
    allow_unchecked: Annotated[
        bool, typer.Option("--allow-unchecked",
                           help="Exit 0 on unchecked too (device code that cannot be judged).")
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Table: every reason, also of what runs.")
    ] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
) -> int:
    """Predict whether IMAGE runs on a host, a fleet or given GPUs: runs, runs-with-jit
    (PTX/SPIR-V compiled at first launch), unchecked, not-applicable or will-fail, judged per
    binary, with the reasons and the failing files. Exit 1 when any verdict is not green."""
    from ...compat.run import CheckRequest, run_check
    from ..output import emit, parse_outputs, terminal_options

    specs = parse_outputs(output, "check")
    report = run_check(CheckRequest(image=image, against=against, host=host,
                                    inventory=inventory, gpus=tuple(gpu or ()), driver=driver))
    emit(report, specs, terminal_options(verbose=verbose), subject="check")
    if not report.passes(require_runs=fail_on_jit, allow_unchecked=allow_unchecked):
        return EXIT_POLICY
    return EXIT_OK
