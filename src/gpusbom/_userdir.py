"""gpusbom's directory in the user cache, one rule for every part that keeps files there.

``$GPUSBOM_CACHE_DIR`` when set, else ``$XDG_CACHE_HOME/gpusbom``, else ``~/.cache/gpusbom``:
the layer-result cache, the updated advisory database, the parsed catalog tables and the
collector plug-in list all live below it. ``write_private`` is how each of them writes a
file there.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["user_cache_dir", "write_private"]


def user_cache_dir() -> Path:
    """The base directory (not created here)."""
    env = os.environ.get("GPUSBOM_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "gpusbom"


def write_private(path: Path, data: bytes, prefix: str) -> None:
    """``data`` as ``path``, mode 0600 (``mkstemp``'s), replaced whole or not at all: written
    to a temporary file beside it (named ``prefix``...), then renamed over it, so a reader
    never sees a half-written file. Raises ``OSError`` where the directory cannot take it
    (a read-only cache); the callers then go on without the file."""
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=prefix, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
