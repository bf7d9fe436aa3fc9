"""``gpusbom scan dir:ROOT`` through the CLI's entry point, as the fingerprint tests run it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def scan_dir(root: Path, out: Path, *formats: str) -> dict[str, Any]:
    """Scan ``root``; the JSON result (also written to ``out``), and each of ``formats``
    written beside it (``out`` with the format as its suffix)."""
    from gpusbom.cli.app import main

    args = ["scan", f"dir:{root}", "-q", "-o", f"json={out}"]
    for fmt in formats:
        args += ["-o", f"{fmt}={out.with_suffix('.' + fmt)}"]
    assert main(args) == 0
    doc: dict[str, Any] = json.loads(out.read_text())
    return doc
