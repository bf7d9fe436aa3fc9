"""What every command module shares: exit codes and the one error-to-exit-code mapping
(:func:`fail`, applied to every command by the :func:`exits` decorator).

Exit codes (documented in the README):
    0  ok
    1  policy / gate failed (gate, --fail-on, probe --require-pass)
    2  usage error
    3  input or configuration error (missing image, corrupt layer, digest mismatch, ...)
    4  incomplete: --strict and the scan recorded unknowns
    70 internal error (a bug: please report it)
"""

from __future__ import annotations

import functools
import logging
import sys
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

from ..errors import GpusbomError

F = TypeVar("F", bound=Callable[..., Any])

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


def loads_first(func: F) -> F:
    """Mark a command that resumes the garbage collector itself once it has loaded what it
    keeps (``gpusbom._gc``; ``scan``); put it under :func:`exits`."""
    func._gpusbom_loads_first = True  # type: ignore[attr-defined]
    return func


def exits(func: F) -> F:
    """Make a command's return value (an exit code; None is 0) its exit status, and every
    error one line on stderr with its documented exit code (:func:`fail`). ``--debug``
    (the command's ``debug`` parameter) shows debug logs and tracebacks. The garbage
    collector, paused while the CLI loads (``gpusbom._gc``), runs again from the command's
    start, unless the command says it resumes it itself (:func:`loads_first`)."""
    resumes_later = getattr(func, "_gpusbom_loads_first", False)

    @functools.wraps(func)
    def command(*args: Any, **kwargs: Any) -> None:
        import typer

        if not resumes_later:
            from .. import _gc

            _gc.resume()
        debug = bool(kwargs.get("debug"))
        setup_debug(debug)
        try:
            code = func(*args, **kwargs)
        except KeyboardInterrupt:
            print("gpusbom: interrupted", file=sys.stderr)
            code = 130
        except typer.Exit:
            raise
        except Exception as exc:  # noqa: BLE001 - the one place errors become exit codes
            code = fail(exc, debug)
        raise typer.Exit(int(code or 0))

    return command  # type: ignore[return-value]
