"""What the inventory answers with: plain, frozen records (no database in here), shared by
the store, the pure ``drift.diff`` and the command-line and web front ends."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Generic, TypeVar

__all__ = ["AffectedRow", "Change", "Drift", "Page", "QueryRow", "ScanInfo", "SubjectInfo"]

T = TypeVar("T")


class Page(Generic[T]):
    """The rows of an answer, produced as they are taken (iterate once), with what is
    known before any is built: ``total`` rows, the (kind, subject) pairs they name
    (``subjects``; for ``affected``: those with an ``affected`` row) and ``found``
    (``affected``: any row is ``affected``). A fleet's answer is its few distinct sets
    expanded to thousands of hosts: a caller that shows 1,000 rows builds 1,000."""

    def __init__(self, rows: Iterable[T], total: int, subjects: frozenset[tuple[str, str]],
                 *, found: bool = False) -> None:
        self._rows = iter(rows)
        self.total = total
        self.subjects = subjects
        self.found = found

    def __iter__(self) -> Iterator[T]:
        return self._rows


@dataclass(frozen=True)
class ScanInfo:
    id: str
    kind: str
    subject: str
    reference: str
    ts: str
    ingested_at: str
    digest: str | None = None
    hostname: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    tool_version: str | None = None
    advisory_db: str | None = None
    components: int = 0
    stack_text: str | None = None


@dataclass(frozen=True)
class SubjectInfo:
    """One host or image: its latest scan and what that scan holds."""

    kind: str
    subject: str
    scans: int
    latest: ScanInfo
    gpus: tuple[str, ...] = ()  # "NVIDIA H200 (0000:00:06.0, cc 9.0)"
    driver: str | None = None  # kernel driver versions, "nvidia 580.159.04"
    findings: dict[str, int] = field(default_factory=dict)  # severity -> count


@dataclass(frozen=True)
class QueryRow:
    kind: str
    subject: str
    scan_id: str
    ts: str
    component: str
    version: str | None
    matched_version: str | None  # the version compared: the GPU product's or the package's
    product: str | None
    type: str
    ecosystem: str | None
    purl: str | None
    location: str | None
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class AffectedRow:
    kind: str
    subject: str
    scan_id: str
    ts: str
    advisory: str
    vulnerability: str
    status: str
    severity: str
    component: str
    installed_version: str | None
    fixed_version: str | None
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Change:
    section: str  # components | devices | driver | probes
    change: str  # added | removed | changed
    key: str
    before: str | None
    after: str | None


@dataclass(frozen=True)
class Drift:
    kind: str
    subject: str
    old: ScanInfo
    new: ScanInfo
    changes: tuple[Change, ...]

    def section(self, name: str) -> list[Change]:
        return [c for c in self.changes if c.section == name]
