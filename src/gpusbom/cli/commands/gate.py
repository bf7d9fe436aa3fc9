"""``gpusbom gate``: apply a policy to images, a host or existing SBOMs (CI gate).

Exit codes: 0 every target passed; 1 a policy violation; 2 usage; 3 input or policy
error (bad policy, missing target); 70 internal error. Reports are rendered in memory
and written atomically only after every target was read, so an input error leaves no
partial report behind.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any

import typer

from .._common import EXIT_OK, EXIT_POLICY
from .._common import fail as _fail
from ..app import app

_FORMATS = ("table", "json", "sarif", "junit", "html")


@app.command()
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
                     "sarif (SARIF 2.1.0), junit (JUnit XML), html (one self-contained file). "
                     "Default: table to stdout."),
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
) -> None:
    """Apply a policy to images, a host or SBOMs; exit 1 when a rule is violated."""
    try:
        code = _gate(targets or [], policy, output, host, root, probe, probe_timeout, strict,
                     platform, quiet)
    except KeyboardInterrupt:
        print("gpusbom: interrupted", file=sys.stderr)
        code = 130
    except Exception as exc:  # noqa: BLE001 - the one place errors become exit codes
        code = _fail(exc, debug)
    raise typer.Exit(code)


def _parse_outputs(values: list[str] | None) -> list[tuple[str, str | None]]:
    from .._common import parse_report_outputs

    return parse_report_outputs(values, _FORMATS)


def _gate(
    targets: list[str], policy_path: str, output: list[str] | None, host: bool,
    root: str | None, probe: bool, probe_timeout: float, strict: bool,
    platform: str | None, quiet: bool,
) -> int:
    import io

    from ...errors import UsageError
    from ...policy import evaluate, load_policy, print_summary, render_json
    from ...policy import junit as junit_report
    from ...policy import sarif as sarif_report
    from ..output import write_atomic

    specs = [] if quiet and not output else _parse_outputs(output)
    if (host or root) and targets:
        raise UsageError("--host/--root gate a machine: give no image or SBOM")
    if not (host or root) and not targets:
        raise UsageError("nothing to gate: give an image, SBOM files, or --host "
                         "(see gpusbom gate --help)")
    if probe and not host:
        raise UsageError("--probe needs --host (it runs kernels on this machine's GPUs)")
    if probe and root not in (None, "/"):
        raise UsageError("--probe runs kernels on this machine's GPUs: not with --root")
    pol = load_policy(policy_path)  # a bad policy is exit 3 before any scan

    from ...advisories.db import load_active

    db = load_active()
    loaded: list[tuple[str, Any]] = []
    if host or root:
        loaded.append((f"host:{root or '/'}", _scan_host(root or "/", db, probe, probe_timeout)))
    for t in targets:
        loaded.append((t, _load_target(t, db, platform)))
    decisions = [evaluate(pol, r, target=name, strict=strict, db=db) for name, r in loaded]

    rendered: list[tuple[str | None, str]] = []
    for fmt, path in specs:
        if fmt == "table":
            buf = io.StringIO()
            for d in decisions:
                print_summary(d, buf)
            text = buf.getvalue()
        elif fmt == "json":
            text = render_json(decisions, pol)
        elif fmt == "sarif":
            text = sarif_report.render(decisions, pol)
        elif fmt == "html":
            from ...writers.html import render_report

            text = render_report(title="gpusbom gate: " + ", ".join(n for n, _ in loaded),
                                 scans=[r for _, r in loaded], decisions=decisions)
        else:
            text = junit_report.render(decisions, pol)
        rendered.append((path, text))
    for path, text in rendered:
        if path is None:
            sys.stdout.write(text)
            sys.stdout.flush()
        else:
            write_atomic(path, text)
    if not quiet and not any(f == "table" for f, _ in specs):
        for d in decisions:  # the job log always shows why
            print_summary(d, sys.stderr)
    return EXIT_OK if all(d.passed for d in decisions) else EXIT_POLICY


def _scan_host(root: str, db: Any, probe: bool, timeout: float) -> Any:
    from ...host import scan_host

    result = scan_host(root, advisory_db=db)
    if probe:
        from ...probe import attach_probes, run_probes

        attach_probes(result, run_probes(None, timeout=timeout))
    return result


def _load_target(target: str, db: Any, platform: str | None) -> Any:
    from ...errors import InputError
    from ...sbomin import sniff

    path = target.removeprefix("sbom:")
    kind = sniff(path) if os.path.isfile(path) else None
    if target.startswith("sbom:"):
        if not os.path.isfile(path):
            raise InputError(f"{path}: SBOM file not found")
        if kind is None:
            raise InputError(f"{path}: not a CycloneDX, SPDX or gpusbom JSON SBOM")
    if kind is None:
        from ...scan import scan

        return scan(target, platform=platform, advisory_db=db)
    return _load_sbom(path, kind, db)


def _load_sbom(path: str, kind: str, db: Any) -> Any:
    """Read an SBOM and match its components against today's database (as scan --sbom)."""
    from ...scan import scan_sbom

    return scan_sbom(path, advisory_db=db)
