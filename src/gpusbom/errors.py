"""Exception hierarchy of gpusbom.

The library raises these; only ``gpusbom.cli`` turns them into exit codes (one table,
``gpusbom.cli._common.exit_status``; the codes below are what it gives)::

    GpusbomError                    exit 70 unless a subclass is in the table
    +-- PolicyFailed                exit 1   a policy said no (--fail-on)
    +-- UsageError                  exit 2   bad flags or combinations
    +-- InputError                  exit 3   the thing we were asked to read is missing or bad
    |   +-- SourceError                 a source cannot read its target (sources/, fsview/)
    |   |   +-- SourceNotFoundError         no source could resolve the reference
    |   |   +-- ImageFormatError            not an image / garbage manifest, index or config
    |   |   +-- LayerError                  corrupt compression, truncated or malformed tar
    |   |   +-- DigestMismatchError         a blob's sha256 differs from its descriptor
    |   |   +-- UnsafeArchiveError          path traversal, hostile links, bombs, limits
    |   +-- ConfigError                 malformed policy / config files
    |   +-- MissingExtraError           a feature whose optional extra is not installed
    +-- ViewError                   a question a file view cannot answer (fsview/)
    +-- CollectorError              a collector cannot read a structure (collectors/, binary/,
    |                               probe/): recorded as an unknown of the scan, never fatal
    +-- AdvisoryError               an advisory record or version that does not follow its
    |                               format (advisories/); also a ValueError
    +-- WriterError                 an output that cannot be written (writers/)
    +-- IncompleteError             exit 4   --strict and the scan recorded unknowns

Errors of a layer that also subclass a built-in (``ValueError``, ``LookupError``) keep it, so
code that catches the built-in still does. Every message is a single line that names the
input and the problem.
"""

from __future__ import annotations


class GpusbomError(Exception):
    """Base class. Its exit code is the CLI's to decide (``gpusbom.cli._common``)."""


class PolicyFailed(GpusbomError):
    """A policy decided against the target (``scan --fail-on``). The library returns it
    (``scan.Outcome.failed``) after writing the outputs: failing is the answer, not a fault."""


class UsageError(GpusbomError):
    pass


class InputError(GpusbomError):
    pass


class SourceError(InputError):
    """A source cannot read its target."""


class SourceNotFoundError(SourceError):
    pass


class ImageFormatError(SourceError):
    pass


class LayerError(SourceError):
    pass


class DigestMismatchError(SourceError):
    pass


class UnsafeArchiveError(SourceError):
    pass


class ConfigError(InputError):
    pass


class MissingExtraError(InputError):
    """A feature needs an optional extra (``gpusbom[inventory]``, ``gpusbom[probe]``) that is
    not installed; the message names the ``pip install`` to run."""


class ViewError(GpusbomError):
    """A question a file view cannot answer."""


class CollectorError(GpusbomError):
    """A collector (or the binary readers and probes it uses) cannot read a structure."""


class AdvisoryError(GpusbomError, ValueError):
    """An advisory record, range or version that does not follow its format."""


class WriterError(GpusbomError):
    """An output that cannot be written."""


class IncompleteError(GpusbomError):
    pass
