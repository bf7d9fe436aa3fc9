"""``gpusbom config``: the effective settings and where each came from (``gpusbom.settings``:
a flag, a ``GPUSBOM_*`` variable, the config file with its line, or the default)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from .._common import EXIT_OK, exits
from ..app import app


@app.command("config")
@exits
def config(
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object: name -> "
                                          "{value, source}.")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
) -> int:
    """Print the effective settings and where each came from (flag, env, config FILE:LINE,
    default). Global options: --config PATH, --cache-dir DIR."""
    from ... import settings

    rows = settings.effective()
    path = settings.config_path()
    if as_json:
        print(json.dumps({"config_file": str(path) if path else None,
                          "settings": {n: {"value": v, "source": s} for n, v, s in rows}},
                         indent=2, sort_keys=True))
        return EXIT_OK
    print(f"# config file: {path if path else 'none'}")
    width = max(len(n) for n, _v, _s in rows)
    for name, value, src in rows:
        shown = "" if value is None else json.dumps(value)
        print(f"{name:<{width}}  {shown:<24}  {src}")
    return EXIT_OK
