"""``gpusbom reconcile``: compare a declared SBOM (attached to the image in its registry, or
a file) with what the image's bytes show (see ``gpusbom.reconcile``).

Exit codes: 0 the declared SBOM agrees with the image; 1 a difference (a package declared
but absent, present but undeclared, or at another version); 2 usage; 3 input (no declared
SBOM attached and no --declared, an unreadable SBOM, a missing image); 70 internal error.
"""

from __future__ import annotations

from typing import Annotated

import typer

from .. import scan_options as o
from .._common import EXIT_OK, EXIT_POLICY, exits
from ..app import app


@app.command()
@exits
def reconcile(
    target: Annotated[str, typer.Argument(
        help="The image (as for scan; registry:REF reads its attached SBOM).")],
    declared: Annotated[str | None, typer.Option(
        "--declared", help="The declared SBOM file (CycloneDX or SPDX) instead of the one "
        "attached to the image in its registry.")] = None,
    output: Annotated[list[str] | None, typer.Option(
        "--output", "-o", help="FORMAT[=PATH], repeatable: table (default), json "
        "(gpusbom/reconcile/1).")] = None,
    platform: o.Platform = None, source: o.Source = None,
    username: o.Username = None, password_stdin: o.PasswordStdin = False,
    insecure_registry: o.Insecure = None, debug: o.Debug = False,
) -> int:
    """Compare a declared SBOM with what the image holds; exit 1 on a difference."""
    from ...reconcile import ReconcileRequest, run_reconcile
    from ...sources.registry import RegistryOptions
    from ..output import emit, parse_outputs

    specs = parse_outputs(output, "reconcile")
    registry = o.registry_options(username, password_stdin, insecure_registry)
    report = run_reconcile(ReconcileRequest(
        reference=target, declared=declared, platform=platform,
        source=source.value if source else None, registry=registry or RegistryOptions()))
    emit(report, specs, subject="reconcile")
    return EXIT_OK if report.agrees else EXIT_POLICY
