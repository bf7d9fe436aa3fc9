"""``gpusbom`` command line.

Exit codes (documented in the README):
    0  ok
    1  policy / gate failed (gate, --fail-on)
    2  usage error
    3  input or configuration error (missing image, corrupt layer, digest mismatch, ...)
    4  incomplete: --strict and the scan recorded unknowns
    70 internal error (a bug: please report it)
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import traceback
from enum import Enum
from typing import Annotated, Any, Optional

import typer

from .. import __version__
from ..errors import GpusbomError, IncompleteError, UsageError
from ..fsview.types import Limits

EXIT_OK = 0
EXIT_POLICY = 1
EXIT_USAGE = 2
EXIT_INPUT = 3
EXIT_INCOMPLETE = 4
EXIT_INTERNAL = 70

app = typer.Typer(
    name="gpusbom",
    help="SBOMs and supply-chain facts for GPU software stacks.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


class SourceChoice(str, Enum):
    docker = "docker"
    docker_archive = "docker-archive"
    oci_archive = "oci-archive"
    oci = "oci"
    dir = "dir"
    registry = "registry"


class CdxVersion(str, Enum):
    v16 = "1.6"
    v15 = "1.5"


def _fail(exc: BaseException, debug: bool) -> int:
    if debug:
        traceback.print_exc(file=sys.stderr)
    if isinstance(exc, GpusbomError):
        kind = "error" if exc.exit_code != EXIT_INTERNAL else "internal error"
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"gpusbom: {kind}: {msg}", file=sys.stderr)
        return exc.exit_code
    print(
        f"gpusbom: internal error: {type(exc).__name__}: {exc} (run with --debug for details)",
        file=sys.stderr,
    )
    return EXIT_INTERNAL


@app.command()
def scan(
    target: Annotated[
        Optional[str], typer.Argument(help="Image reference or path (same as --image).")
    ] = None,
    image: Annotated[
        Optional[str],
        typer.Option(
            "--image",
            "-i",
            help="name:tag, name@sha256:... (the local Docker Engine if it has the image, else "
            "the registry), registry:REF, docker:REF, docker-archive:PATH, oci-archive:PATH, "
            "oci:DIR[:TAG], dir:PATH, or a bare path.",
        ),
    ] = None,
    output: Annotated[
        Optional[list[str]],
        typer.Option(
            "--output",
            "-o",
            help="FORMAT[=PATH], repeatable. Formats: table, json, cyclonedx-json, "
            "cyclonedx-xml, spdx-json, spdx-tag-value. Default: table to stdout.",
        ),
    ] = None,
    source: Annotated[
        Optional[SourceChoice], typer.Option(help="Force a source instead of detecting it.")
    ] = None,
    platform: Annotated[
        Optional[str], typer.Option(help="os/arch[/variant] to pick from a multi-platform index.")
    ] = None,
    cyclonedx_version: Annotated[
        CdxVersion, typer.Option("--cyclonedx-version", help="CycloneDX spec version.")
    ] = CdxVersion.v16,
    collector: Annotated[
        Optional[list[str]], typer.Option("--collector", help="Run only these collectors (ids).")
    ] = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="Exit 4 when anything could not be determined.")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress display.")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks and debug logs.")] = False,
    username: Annotated[
        Optional[str],
        typer.Option(help="Registry user name (with --password-stdin); else ~/.docker/config.json."),
    ] = None,
    password_stdin: Annotated[
        bool, typer.Option("--password-stdin", help="Read the registry password from stdin.")
    ] = False,
    insecure_registry: Annotated[
        Optional[list[str]],
        typer.Option(
            "--insecure-registry",
            help="HOST or HOST:PORT to reach over plain HTTP or unverified TLS; repeatable.",
        ),
    ] = None,
    verify_diff_ids: Annotated[
        bool,
        typer.Option(
            "--verify-diff-ids",
            help="Also hash the uncompressed layers against the config's diff_ids "
            "(blob digests are always verified; this about doubles CPU time).",
        ),
    ] = False,
) -> None:
    """Scan a container image or root filesystem and write SBOMs."""
    if debug:
        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)
    try:
        registry = _registry_options(username, password_stdin, insecure_registry)
    except Exception as exc:  # noqa: BLE001 - usage errors become exit codes
        raise typer.Exit(_fail(exc, debug)) from None
    scan_kwargs = {
        "source": source.value if source else None,
        "platform": platform,
        "collectors": collector,
        "registry": registry,
        "limits": Limits(verify_diff_ids=verify_diff_ids),
    }
    code = _scan(target, image, output, cyclonedx_version, strict, quiet, debug, scan_kwargs)
    raise typer.Exit(code)


def _registry_options(
    username: str | None, password_stdin: bool, insecure: list[str] | None
) -> object:
    from ..sources.registry import RegistryOptions, Secret

    if password_stdin and username is None:
        raise UsageError("--password-stdin needs --username")
    if username is not None and not password_stdin:
        raise UsageError("--username needs --password-stdin (the password is read from stdin)")
    password = None
    if password_stdin:
        if sys.stdin is None or sys.stdin.isatty():
            raise UsageError("--password-stdin: pipe the password into gpusbom's stdin")
        password = Secret(sys.stdin.read().rstrip("\r\n"))
        if not password:
            raise UsageError("--password-stdin: stdin was empty")
    return RegistryOptions(username=username, password=password, insecure=tuple(insecure or ()))


def _scan(
    target: str | None,
    image: str | None,
    output: list[str] | None,
    cyclonedx_version: CdxVersion,
    strict: bool,
    quiet: bool,
    debug: bool,
    scan_kwargs: dict[str, Any],
) -> int:
    from ..scan import scan as do_scan
    from ..writers import WriterOptions
    from .output import emit, parse_outputs
    from .progress import RichProgress, wants_progress

    try:
        if target and image and target != image:
            raise UsageError("give the image either as an argument or with --image, not both")
        ref = image or target
        if not ref:
            raise UsageError("nothing to scan: pass --image REF (see gpusbom scan --help)")
        specs = parse_outputs(output)
        options = WriterOptions(
            cyclonedx_version=cyclonedx_version.value,
            color=sys.stdout.isatty() and "NO_COLOR" not in os.environ,
        )
        progress = RichProgress() if wants_progress(quiet) else None
        with progress or contextlib.nullcontext():
            result = do_scan(ref, progress=progress, **scan_kwargs)
        emit(result, specs, options)
        if strict and result.unknowns:
            raise IncompleteError(
                f"{ref}: scan incomplete: {len(result.unknowns)} unknown(s), "
                f"first: {result.unknowns[0].collector}: {result.unknowns[0].reason}"
            )
        return EXIT_OK
    except KeyboardInterrupt:
        print("gpusbom: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the one place errors become exit codes
        return _fail(exc, debug)


@app.command()
def version() -> None:
    """Print the gpusbom version."""
    print(f"gpusbom {__version__}")


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code instead of raising."""
    try:
        rv = app(args=argv, standalone_mode=False)
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except SystemExit as exc:  # pragma: no cover - click internals
        return int(exc.code or 0) if isinstance(exc.code, int) else EXIT_USAGE
    except Exception as exc:  # usage errors from the parser, and anything unexpected
        show = getattr(exc, "show", None)
        if callable(show) and isinstance(getattr(exc, "exit_code", None), int):
            show(file=sys.stderr)  # click/typer usage errors: exit 2
            return EXIT_USAGE if exc.exit_code == 2 else int(exc.exit_code)
        if type(exc).__name__ == "Abort":
            return 130
        return _fail(exc, "--debug" in (argv if argv is not None else sys.argv))
    return rv if isinstance(rv, int) else EXIT_OK
