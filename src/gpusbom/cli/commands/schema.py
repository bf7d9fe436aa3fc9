"""``gpusbom schema``: print the JSON Schema of ``gpusbom scan -o json``."""

from __future__ import annotations

import sys

from .._common import exits
from ..app import app


@app.command(rich_help_panel="Advanced")
@exits
def schema() -> None:
    """Print the JSON Schema (draft 2020-12) of gpusbom scan -o json (schema:
    gpusbom/scan/1)."""
    from ...scanschema import scan_schema_text

    sys.stdout.write(scan_schema_text())
