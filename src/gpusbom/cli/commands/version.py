"""``gpusbom version [-o json]``: version, commit, Python, platform and the advisory
database (``gpusbom.about``). ``gpusbom --version`` prints the one line ``gpusbom X.Y.Z``
(the console script answers it without loading the command-line framework)."""

from __future__ import annotations

import json
from enum import Enum
from typing import Annotated

import typer

from .._common import exits
from ..app import app


class VersionFormat(str, Enum):
    text = "text"
    json = "json"


@app.command()
@exits
def version(
    output: Annotated[VersionFormat, typer.Option(
        "--output", "-o", help="text (Key: value lines) or json (schema gpusbom/version/1).")
    ] = VersionFormat.text,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
) -> None:
    """Print the gpusbom version, commit, Python, platform and advisory database."""
    from ...about import version_info, version_text

    info = version_info()
    if output is VersionFormat.json:
        print(json.dumps(info, indent=2, sort_keys=True))
    else:
        print(version_text(info), end="")
