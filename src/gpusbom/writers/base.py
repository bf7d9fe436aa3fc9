"""The writer interface: one module per output format, registering itself."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TextIO


@dataclass(frozen=True)
class WriterOptions:
    """Options that change how a writer renders a result."""

    cyclonedx_version: str = "1.6"
    #: CycloneDX JSON 1.6/1.7: evidence.identity as the single (deprecated) object that
    #: CycloneDX 1.5 readers such as Syft 1.18 (cyclonedx-go) can decode
    cyclonedx_compat: bool = False
    color: bool = False
    width: int | None = None
    #: reports (check's table): every reason, also of what passes
    verbose: bool = False


@dataclass(frozen=True)
class Rows:
    """A report of rows (the inventory commands): dicts, and the columns a table or CSV
    shows (JSON has every field)."""

    rows: Sequence[dict[str, Any]]
    columns: Sequence[str]


class Writer(ABC):
    #: format id used by ``-o FORMAT[=PATH]``
    format: ClassVar[str]
    #: what it writes: scan (a ScanResult), gate, check, rows, drift, metrics
    subject: ClassVar[str] = "scan"
    #: shown in ``--help``
    description: ClassVar[str] = ""
    #: True when the output is meant for a terminal (the default output)
    for_humans: ClassVar[bool] = False
    #: modules ``write`` imports on first use; a scan that has cores to spare imports them
    #: while it waits (``writers.asked_modules``); ``module:function`` also calls that
    #: function of the module then (no arguments: tables its first use would build)
    imports: ClassVar[tuple[str, ...]] = ()
    #: its document id hashes the whole scan (``_common.document_uuid``): with several
    #: outputs forked, the hash is computed once and sent to the children that need it
    document_id: ClassVar[bool] = False

    @abstractmethod
    def write(self, result: Any, out: TextIO, options: WriterOptions) -> None:
        """Write the whole document to ``out``. Must be deterministic for the same result."""
