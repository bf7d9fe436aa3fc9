"""gpusbom's directory in the user cache, one rule for every part that keeps files there.

``$GPUSBOM_CACHE_DIR`` when set, else ``$XDG_CACHE_HOME/gpusbom``, else ``~/.cache/gpusbom``:
the layer-result cache, the updated advisory database, the parsed catalog tables and the
collector plug-in list all live below it.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["user_cache_dir"]


def user_cache_dir() -> Path:
    """The base directory (not created here)."""
    env = os.environ.get("GPUSBOM_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "gpusbom"
