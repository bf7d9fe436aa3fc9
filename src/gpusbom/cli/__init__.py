"""The command line: a thin typer layer. The only place that maps errors to exit codes."""

from __future__ import annotations

from .app import main

__all__ = ["main", "run"]


def run() -> None:
    """Console-script entry point."""
    import sys

    sys.exit(main())
