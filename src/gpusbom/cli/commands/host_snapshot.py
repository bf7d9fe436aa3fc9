"""``gpusbom host-snapshot``: capture exactly the files a host scan reads (no secrets), to
replay it with ``gpusbom scan --root OUT`` (``gpusbom.host.snapshot``)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from .._common import exits
from ..app import app


@app.command("host-snapshot")
@exits
def host_snapshot(
    out: Annotated[str, typer.Option("--out", help="Empty or new directory to write.")],
    root: Annotated[str, typer.Option("--root", help="Root to capture (default /).")] = "/",
    paths: Annotated[
        list[str] | None, typer.Option("--paths", help="Another directory to inventory.")
    ] = None,
    max_bytes: Annotated[
        int, typer.Option("--max-bytes", help="Bound on captured file content.")
    ] = 64 << 20,
    no_nvml: Annotated[bool, typer.Option("--no-nvml", help="Do not query NVML.")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks and debug logs.")] = False,
) -> None:
    """Capture exactly the files a host scan reads (no secrets); replay with scan --root OUT."""
    from ...host import snapshot_host

    m = snapshot_host(out, root=root, paths=tuple(paths or ()), max_bytes=max_bytes,
                      use_nvml=not no_nvml)
    print(f"{out}: {m['files']} files ({m['bytes']} bytes), {m['placeholders']} placeholders, "
          f"{m['links']} links, {len(m['skipped'])} skipped, nvml={'yes' if m['nvml'] else 'no'}",
          file=sys.stderr)
