"""What every command module shares: exit codes and the one error-to-exit-code mapping.

Exit codes (documented in the README):
    0  ok
    1  policy / gate failed (gate, --fail-on, probe --require-pass)
    2  usage error
    3  input or configuration error (missing image, corrupt layer, digest mismatch, ...)
    4  incomplete: --strict and the scan recorded unknowns
    70 internal error (a bug: please report it)
"""

from __future__ import annotations

import logging
import sys
import traceback

from ..errors import GpusbomError

EXIT_OK = 0
EXIT_POLICY = 1
EXIT_USAGE = 2
EXIT_INPUT = 3
EXIT_INCOMPLETE = 4
EXIT_INTERNAL = 70


def fail(exc: BaseException, debug: bool = False) -> int:
    """Print one line for ``exc`` on stderr and return its exit code (70 for anything
    that is not a ``GpusbomError``: a bug)."""
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


def setup_debug(debug: bool) -> None:
    if debug:
        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)


def parse_report_outputs(values: list[str] | None, formats: tuple[str, ...],
                         default: str = "table") -> list[tuple[str, str | None]]:
    """``-o FORMAT[=PATH]`` values of a report command (gate, check): (format, path or None
    for stdout); at most one to stdout. Raises UsageError."""
    from ..errors import UsageError

    out: list[tuple[str, str | None]] = []
    for v in values or [default]:
        fmt, sep, path = v.partition("=")
        fmt = fmt.strip()
        if fmt not in formats:
            raise UsageError(f"-o {v}: unknown format {fmt!r}; choose one of: {', '.join(formats)}")
        if sep and not path:
            raise UsageError(f"-o {v}: empty path")
        out.append((fmt, path or None))
    if sum(1 for _, p in out if p is None) > 1:
        raise UsageError("only one output can go to standard output; give the others =PATH")
    return out
