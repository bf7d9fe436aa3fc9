"""Exception hierarchy of gpusbom.

The library raises these; only ``gpusbom.cli`` turns them into exit codes::

    GpusbomError                    exit 70 unless a subclass says otherwise
    +-- UsageError                  exit 2   bad flags or combinations
    +-- InputError                  exit 3   the thing we were asked to read is missing or bad
    |   +-- SourceNotFoundError         no source could resolve the reference
    |   +-- ImageFormatError            not an image / garbage manifest, index or config JSON
    |   +-- LayerError                  corrupt compression, truncated or malformed tar
    |   +-- DigestMismatchError         a blob's sha256 differs from its descriptor
    |   +-- UnsafeArchiveError          path traversal, hostile links, bombs, limits exceeded
    |   +-- ConfigError                 malformed policy / config files
    +-- IncompleteError             exit 4   --strict and the scan recorded unknowns

Every message is a single line that names the input and the problem.
"""

from __future__ import annotations


class GpusbomError(Exception):
    """Base class. ``exit_code`` is what the CLI returns for it."""

    exit_code: int = 70


class UsageError(GpusbomError):
    exit_code = 2


class InputError(GpusbomError):
    exit_code = 3


class SourceNotFoundError(InputError):
    pass


class ImageFormatError(InputError):
    pass


class LayerError(InputError):
    pass


class DigestMismatchError(InputError):
    pass


class UnsafeArchiveError(InputError):
    pass


class ConfigError(InputError):
    pass


class IncompleteError(GpusbomError):
    exit_code = 4
