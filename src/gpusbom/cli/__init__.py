"""The command line: a thin typer layer. The only place that maps errors to exit codes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .app import main

__all__ = ["main", "run"]


def __getattr__(name: str) -> Any:
    # the typer app (~0.1-0.2 s of imports) loads only when a command needs it
    if name == "main":
        from .app import main

        return main
    raise AttributeError(name)


def run() -> None:
    """Console-script entry point. ``gpusbom --version`` answers without loading the
    command-line framework (it is what scripts and health checks call most)."""
    import sys

    if sys.argv[1:] == ["--version"]:
        from .. import __version__

        print(f"gpusbom {__version__}")
        sys.exit(0)
    from .. import _gc

    _gc.pause()  # no collection while the framework and the command load (gpusbom._gc)
    from .app import main

    _exit(main())


def _exit(code: int) -> None:
    """Exit with ``code``, without tearing the interpreter down when nothing needs it.

    A scan leaves large module-level caches (the advisory database, the catalog); freeing
    them one object at a time at shutdown took 60-80 ms on a 2-core VM and more on a
    sandboxed host. Outputs are already written and renamed into place by then: flush the
    standard streams, run the ``atexit`` handlers (logging, temporary files), and leave.
    With another thread still running (nothing of gpusbom's leaves one), exit normally."""
    import sys
    import threading

    if threading.active_count() > 1:
        sys.exit(code)
    import atexit
    import os

    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:  # None: started with that descriptor closed
                stream.flush()
    except (OSError, ValueError):  # a closed pipe: what the normal exit would report
        sys.exit(code)
    atexit._run_exitfuncs()
    os._exit(code)
