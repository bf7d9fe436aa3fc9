"""``gpusbom gate``: apply a policy to images, a host or existing SBOMs (CI gate).

Exit codes: 0 every target passed; 1 a policy violation; 2 usage; 3 input or policy
error (bad policy, missing target); 70 internal error. Reports are rendered in memory
and written atomically only after every target was read, so an input error leaves no
partial report behind.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from .._common import EXIT_OK, EXIT_POLICY, exits
from ..app import app


@app.command()
@exits
def gate(
    targets: Annotated[
        list[str] | None,
        typer.Argument(help="Image references (as for scan) or SBOM files (CycloneDX, SPDX, "
                       "gpusbom JSON; sbom:PATH forces it). Several may be given."),
    ] = None,
    policy: Annotated[
        str, typer.Option("--policy", "-p", help="Policy YAML file, or a built-in policy: "
                          "default, strict (see docs/policy.md).")
    ] = "default",
    output: Annotated[
        list[str] | None,
        typer.Option("--output", "-o", help="FORMAT[=PATH], repeatable: table (summary), json, "
                     "sarif (SARIF 2.1.0), junit (JUnit XML), html (one self-contained file), "
                     "in-toto (a verification summary attestation). Default: table to stdout."),
    ] = None,
    host: Annotated[bool, typer.Option("--host", help="Gate this machine (a host scan).")] = False,
    root: Annotated[
        str | None, typer.Option("--root", help="Host scan of a mounted root or host snapshot.")
    ] = None,
    probe: Annotated[
        bool, typer.Option("--probe", help="With --host: run the GPU smoke-test probes too.")
    ] = False,
    probe_timeout: Annotated[
        float, typer.Option("--probe-timeout", help="With --probe: seconds per device.")
    ] = 20.0,
    strict: Annotated[
        bool, typer.Option("--strict", help="Unknowns in a scan are violations (exit 1).")
    ] = False,
    platform: Annotated[
        str | None, typer.Option(help="os/arch[/variant] to pick from a multi-platform index.")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No summary.")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks and debug logs.")] = False,
) -> int:
    """Apply a policy to images, a host or SBOMs; exit 1 when a rule is violated."""
    from ...gate import GateRequest, run_gate
    from ..output import emit, parse_outputs

    specs = [] if quiet and not output else parse_outputs(output, "gate")
    report = run_gate(GateRequest(
        targets=tuple(targets or ()), policy=policy, host=host, root=root, probe=probe,
        probe_timeout=probe_timeout, strict=strict, platform=platform))
    emit(report, specs, subject="gate")
    if not quiet and not any(s.format == "table" for s in specs):
        from ...policy import print_summary

        for d in report.decisions:  # the job log always shows why
            print_summary(d, sys.stderr)
    return EXIT_OK if report.passed else EXIT_POLICY
