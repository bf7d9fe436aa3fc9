"""gpusbom's directory in the user cache, one rule for every part that keeps files there.

``$GPUSBOM_CACHE_DIR`` when set, else ``$XDG_CACHE_HOME/gpusbom``, else ``~/.cache/gpusbom``:
the layer-result cache, the updated advisory database, the parsed catalog tables and the
collector plug-in list all live below it. ``write_private`` is how each of them writes a
file there, ``read_bounded`` how each reads one back.

Placement: the directory is created 0700. A cache directory, or a file read back from it,
that is owned by another user or writable by group or others is refused
(:class:`CachePlacementError`, exit 3: whoever can write it could feed this user's scans
wrong results), unless the directory was named on the command line (``--cache-dir``): a
shared CI cache is then the user's explicit choice.
"""

from __future__ import annotations

import os
from pathlib import Path

from . import settings
from .errors import ConfigError

__all__ = ["CachePlacementError", "check_owned", "read_bounded", "user_cache_dir",
           "write_private"]


class CachePlacementError(ConfigError):
    """The cache directory or a file in it is another user's, or writable by others."""


def _explicit() -> bool:
    """Whether the cache directory was named on the command line (``--cache-dir``)."""
    return settings.source("cache_dir").startswith("flag")


def check_owned(what: str, st: os.stat_result) -> None:
    """Refuse ``what`` (a cache directory or file, as ``st``) when another user owns it or
    group or others may write it, unless ``--cache-dir`` named the directory."""
    euid = os.geteuid()
    if st.st_uid != euid and not _explicit():
        raise CachePlacementError(
            f"{what}: owned by uid {st.st_uid}, not this user (uid {euid}); refusing it "
            "(name the directory with --cache-dir to use it anyway)")
    if st.st_mode & 0o022 and not _explicit():
        raise CachePlacementError(
            f"{what}: writable by group or others (mode {st.st_mode & 0o7777:04o}); refusing "
            "it (chmod go-w, or name the directory with --cache-dir to use it anyway)")


def user_cache_dir() -> Path:
    """The base directory: created 0700 when missing, refused when misplaced (see the
    module docstring). One that cannot be created is returned as is (a read-only home: the
    callers go on without their files)."""
    env = settings.raw("cache_dir")
    if env:
        base = Path(env)
    else:
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = (Path(xdg) if xdg else Path.home() / ".cache") / "gpusbom"
    try:
        st = os.stat(base)
    except FileNotFoundError:
        try:
            os.makedirs(base, mode=0o700, exist_ok=True)
            st = os.stat(base)
        except OSError:
            return base
    except OSError:
        return base
    check_owned(f"cache directory {base}", st)
    return base


def read_bounded(path: Path, limit: int) -> bytes | None:
    """``path``'s bytes, or None when it cannot be read or holds more than ``limit`` (a file
    gpusbom reads back from its own directories is bounded: a larger one is never read).
    A file of another user's, or one group or others may write, is refused
    (:class:`CachePlacementError`)."""
    try:
        with open(path, "rb") as f:
            check_owned(f"cache file {path}", os.fstat(f.fileno()))
            data = f.read(limit + 1)
    except OSError:
        return None
    return data if len(data) <= limit else None


def write_private(path: Path, data: bytes, prefix: str) -> None:
    """``data`` as ``path``, mode 0600 (``mkstemp``'s), replaced whole or not at all: written
    to a temporary file beside it (named ``prefix``...), then renamed over it, so a reader
    never sees a half-written file. Raises ``OSError`` where the directory cannot take it
    (a read-only cache); the callers then go on without the file."""
    import tempfile

    os.makedirs(path.parent, mode=0o700, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=prefix, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
