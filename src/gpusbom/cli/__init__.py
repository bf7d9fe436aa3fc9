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
    """Console-script entry point. ``gpusbom version`` answers without loading the
    command-line framework (it is what scripts and health checks call most)."""
    import sys

    if sys.argv[1:] == ["version"]:
        from .. import __version__

        print(f"gpusbom {__version__}")
        sys.exit(0)
    from .app import main

    sys.exit(main())
