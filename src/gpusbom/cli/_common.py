"""What every command module shares: exit codes and the one error-to-exit-code mapping
(:func:`fail`, applied to every command by the :func:`exits` decorator).

Exit codes (documented in the README):
    0  ok
    1  policy / gate failed (gate, --fail-on, probe --require-pass)
    2  usage error
    3  input or configuration error (missing image, corrupt layer, digest mismatch, ...)
    4  incomplete: --strict and the scan recorded unknowns
    70 internal error (a bug: please report it)
    130 interrupted (Ctrl-C)
"""

from __future__ import annotations

import functools
import logging
import sys
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

from ..errors import GpusbomError, IncompleteError, InputError, PolicyFailed, UsageError

F = TypeVar("F", bound=Callable[..., Any])

EXIT_OK = 0
EXIT_POLICY = 1
EXIT_USAGE = 2
EXIT_INPUT = 3
EXIT_INCOMPLETE = 4
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143  # 128 + SIGTERM, as a shell reports a process SIGTERM ended

#: what each exit code means, as the man page's EXIT STATUS lists them
EXIT_MEANINGS = (
    (EXIT_OK, "ok"),
    (EXIT_POLICY, "policy or gate failed (gate, --fail-on, probe --require-pass)"),
    (EXIT_USAGE, "usage error"),
    (EXIT_INPUT, "input or configuration error; a missing optional extra"),
    (EXIT_INCOMPLETE, "incomplete: --strict and the scan recorded unknowns"),
    (EXIT_INTERNAL, "internal error (a bug: please report it)"),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C): workers stopped, temp files removed"),
    (EXIT_TERMINATED, "terminated (SIGTERM): workers stopped, temp files removed"),
)


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread by :func:`stop_on_sigterm`'s handler: a
    ``KeyboardInterrupt``, so that what cleans up after Ctrl-C (layer and walk workers
    stopped, the spool directory removed, no output file left half-written) runs for it too."""


def stop_on_sigterm() -> None:
    """Let SIGTERM (``kill PID``, ``timeout``, a scheduler stopping a job, a pod ending) end
    the command as Ctrl-C does, with :data:`EXIT_TERMINATED`, instead of killing this process
    at once and leaving its forked workers running and its temp files behind. Only where
    SIGTERM has its default action and this is the main thread (an application that
    embeds the CLI keeps its own handler)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return
    try:
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return
    except (AttributeError, ValueError):  # no SIGTERM here
        return

    def handler(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends it at once
        raise _Terminated

    signal.signal(signal.SIGTERM, handler)


#: the one table from the library's errors to exit codes: the first class ``exc`` is an
#: instance of gives its code; any other ``GpusbomError``, and anything else, is 70 (a bug)
EXIT_CODES: tuple[tuple[type[GpusbomError], int], ...] = (
    (PolicyFailed, EXIT_POLICY),
    (UsageError, EXIT_USAGE),
    (InputError, EXIT_INPUT),
    (IncompleteError, EXIT_INCOMPLETE),
)


def exit_code(exc: BaseException) -> int:
    """The exit code of a library error (:data:`EXIT_CODES`); 70 for anything else."""
    for cls, code in EXIT_CODES:
        if isinstance(exc, cls):
            return code
    return EXIT_INTERNAL


def fail(exc: BaseException, debug: bool = False) -> int:
    """What ends a command, said on stderr, and its exit status: the only place an error
    becomes an exit code. Both boundaries call it: :func:`exits` (around each command, also
    when tests invoke the typer app) and ``app.main`` (argument parsing, global options).

    ``typer.Exit``/``SystemExit``: their code, silently. click's usage errors (they can
    ``show`` themselves): shown, with their code (2). Ctrl-C (``KeyboardInterrupt``, click's
    ``Abort``): 130; SIGTERM (``_Terminated``): 143. A ``GpusbomError``: one line,
    :func:`exit_code`. Anything else: a bug, 70, with the exception's type."""
    import typer

    if isinstance(exc, typer.Exit):
        return int(exc.exit_code or 0)
    if isinstance(exc, SystemExit):  # click internals
        return int(exc.code or 0) if isinstance(exc.code, int) else EXIT_USAGE
    if isinstance(exc, _Terminated):
        print("gpusbom: terminated", file=sys.stderr)
        return EXIT_TERMINATED
    if isinstance(exc, KeyboardInterrupt):
        print("gpusbom: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    show = getattr(exc, "show", None)
    click_code = getattr(exc, "exit_code", None)
    if callable(show) and isinstance(click_code, int):
        show(file=sys.stderr)  # click/typer usage errors: exit 2
        return click_code
    if type(exc).__name__ == "Abort":  # click's, on Ctrl-C while it prompts
        return EXIT_INTERRUPTED
    if debug:
        traceback.print_exc(file=sys.stderr)
    code = exit_code(exc)
    if isinstance(exc, GpusbomError):
        kind = "error" if code != EXIT_INTERNAL else "internal error"
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"gpusbom: {kind}: {msg}", file=sys.stderr)
        return code
    print(
        f"gpusbom: internal error: {type(exc).__name__}: {exc} (run with --debug for details)",
        file=sys.stderr,
    )
    return code


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
        except typer.Exit:
            raise
        except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - errors become exit codes in fail() only
            code = fail(exc, debug)
        raise typer.Exit(int(code or 0))

    return command  # type: ignore[return-value]
