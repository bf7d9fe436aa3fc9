"""``gpusbom check``: will an image run on given GPUs and drivers? (see docs/check.md)

Exit codes: 0 every verdict is ``runs`` or ``runs-with-jit`` (with ``--fail-on-jit``: every
verdict is ``runs``); 1 some verdict is ``will-fail`` (a predicted failure, like a gate);
2 usage; 3 bad input (image, SBOM, host scan, inventory).
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
                     help="FORMAT[=PATH], repeatable: table (default), json, sarif, html."),
    ] = None,
    fail_on_jit: Annotated[
        bool, typer.Option("--fail-on-jit", help="Exit 1 on runs-with-jit too.")
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Table: every reason, also of what runs.")
    ] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
) -> int:
    """Predict whether IMAGE runs on a host, a fleet or given GPUs: runs, runs-with-jit
    (PTX/SPIR-V compiled at first launch) or will-fail, with the reasons and evidence.
    Exit 1 when any verdict is will-fail."""
    from ...compat.run import CheckRequest, run_check
    from ..output import emit, parse_outputs, terminal_options

    specs = parse_outputs(output, "check")
    report = run_check(CheckRequest(image=image, against=against, host=host,
                                    inventory=inventory, gpus=tuple(gpu or ()), driver=driver))
    emit(report, specs, terminal_options(verbose=verbose), subject="check")
    if report.failed or (fail_on_jit and report.jit):
        return EXIT_POLICY
    return EXIT_OK
