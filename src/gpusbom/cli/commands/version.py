"""``gpusbom version`` (also ``gpusbom --version``; the console script answers it without
loading the command-line framework)."""

from __future__ import annotations

from ... import __version__
from ..app import app


@app.command()
def version() -> None:
    """Print the gpusbom version."""
    print(f"gpusbom {__version__}")
