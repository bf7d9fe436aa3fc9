"""``gpusbom probe``: run a small kernel on every GPU through every runtime found
(``gpusbom.probe``), written by the scan writers. Exit 1 with ``--require-pass`` when any
probe failed, erred or timed out."""

from __future__ import annotations

import logging
import sys
from typing import Annotated

import typer

from ...errors import UsageError
from .._common import EXIT_OK, EXIT_POLICY, exits
from ..app import _START, app
from ..scan_options import CdxVersion


@app.command()
@exits
def probe(
    output: Annotated[
        list[str] | None,
        typer.Option("--output", "-o", help="FORMAT[=PATH], repeatable (as for scan). Default: table."),
    ] = None,
    backend: Annotated[
        list[str] | None,
        typer.Option("--backend", "-b", help="Only these backends (cuda, hip, level-zero, opencl, "
                     "sycl, triton, vulkan); repeatable. Default: all."),
    ] = None,
    python: Annotated[
        str | None,
        typer.Option("--python", help="Interpreter for the probe backends that run a Python package "
                     "(Triton, SYCL through dpctl). Default: the one that has the package."),
    ] = None,
    probe_timeout: Annotated[
        float, typer.Option("--probe-timeout", help="Seconds each device (and each backend's "
                            "enumeration) may take before it is killed and reported as timeout.")
    ] = 20.0,
    require_pass: Annotated[
        bool, typer.Option("--require-pass", help="Exit 1 when any probe failed, erred or timed out.")
    ] = False,
    cyclonedx_version: Annotated[
        CdxVersion, typer.Option("--cyclonedx-version", help="CycloneDX spec version.")
    ] = CdxVersion.v16,
    artifact: Annotated[
        list[str] | None,
        typer.Option("--artifact", help="Instead of the probe kernels: try to load this model "
                     "artifact on GPU 0 in a child process (a cubin, a Triton cache entry "
                     "directory, a TensorRT .engine/.plan); repeatable. Output: JSON evidence "
                     "(-o json=PATH) or a table."),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No summary line on stderr.")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks and debug logs.")] = False,
) -> int:
    """Run a small kernel on every GPU through every runtime found, and record the evidence.

    Each (backend, device) runs in its own child process with a deadline; outcomes are
    pass, fail (wrong result), error (runtime error code), timeout and skipped.
    """
    import time

    from ...clock import scan_timestamp
    from ...probe import probe_failures, probe_scan, run_probes
    from ..output import emit, parse_outputs, terminal_options

    logging.getLogger(__name__).debug("probe: +%.3f s command start", time.perf_counter() - _START)
    if artifact:
        return _artifacts(artifact, output, probe_timeout, python, require_pass)
    specs = parse_outputs(output)
    t0 = time.perf_counter()
    try:
        results = run_probes(backend, timeout=probe_timeout, python=python)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    elapsed = time.perf_counter() - t0
    logging.getLogger(__name__).debug("probe: +%.3f s all answered", time.perf_counter() - _START)
    emit(probe_scan(results, timestamp=scan_timestamp()), specs,
         terminal_options(cyclonedx_version=cyclonedx_version.value))
    if not quiet:
        devices = [r for r in results if r.device is not None]
        counts: dict[str, int] = {}
        for r in results:
            counts[r.outcome] = counts.get(r.outcome, 0) + 1
        print(f"gpusbom probe: {len(devices)} device probe(s) in {elapsed:.2f} s: "
              + ", ".join(f"{n} {o}" for o, n in sorted(counts.items())), file=sys.stderr)
    return EXIT_POLICY if require_pass and probe_failures(results) else EXIT_OK


def _artifacts(paths: list[str], output: list[str] | None, timeout: float, python: str | None,
               require_pass: bool) -> int:
    import json

    from ...probe.artifact import probe_artifact, resolve

    for p in paths:
        try:
            resolve(p)
        except ValueError as exc:
            raise UsageError(f"--artifact {exc}") from None
    records = [probe_artifact(p, timeout=max(timeout, 30.0), python=python) for p in paths]
    doc = json.dumps({"artifacts": records}, indent=2, sort_keys=True) + "\n"
    wrote = False
    for spec in output or []:
        fmt, _, dest = spec.partition("=")
        if fmt != "json":
            raise UsageError(f"--artifact: output {spec!r}: only json[=PATH]")
        if dest:
            with open(dest, "w", encoding="utf-8") as f:
                f.write(doc)
        else:
            sys.stdout.write(doc)
        wrote = True
    if not wrote:
        for r in records:
            why = " ".join(str(r.get(k)) for k in ("code", "name", "message") if r.get(k))
            print(f"{r['outcome']:8} {r['kind']:9} {r['file']}  {r.get('device', '')} {why}")
    bad = [r for r in records if r["outcome"] != "pass"]
    return EXIT_POLICY if require_pass and bad else EXIT_OK
