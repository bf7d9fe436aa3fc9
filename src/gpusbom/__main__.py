"""``python -m gpusbom``."""

from __future__ import annotations

from .cli import run

run()
