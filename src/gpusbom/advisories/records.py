"""The record model of the advisory database: ``Advisory``, ``Vulnerability``, ``Affected``,
``Score`` (built by ``advisories.validate`` from a record; the format is in ``advisories.db``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

STATUSES = ("verified", "partial", "unverified")
SCORE_TYPES = ("CVSS_V3_0", "CVSS_V3_1", "CVSS_V4_0")


@dataclass(frozen=True)
class Score:
    """A severity score of a vulnerability (CVSS type, vector, base score)."""

    type: str
    vector: str | None
    score: float | None


@dataclass(frozen=True)
class Affected:
    """A target a vulnerability affects, with its version ranges, versions and fixes."""

    target: str
    scheme: str | None = None
    ranges: tuple[dict[str, str], ...] = ()
    versions: tuple[str, ...] = ()
    fixed: tuple[str, ...] = ()
    platform: str | None = None
    branch: str | None = None
    variant: str | None = None
    vendor_product: str | None = None
    no_range: str | None = None
    note: str | None = None
    # compare this component property instead of the version (Triton: "container-release")
    version_of: str | None = None
    # only for components of this distribution release (purl ``distro``: debian-12, ubuntu-22.04)
    distro: str | None = None

    @property
    def machine_readable(self) -> bool:
        return self.no_range is None and bool(self.ranges or self.versions)


@dataclass(frozen=True)
class Vulnerability:
    """One vulnerability of an advisory: its scores and the targets it affects."""

    id: str
    title: str | None
    scores: tuple[Score, ...]
    affected: tuple[Affected, ...]
    aliases: tuple[str, ...] = ()
    cwe: tuple[str, ...] = ()
    layer: str | None = None  # "kernel": the vendor names only the kernel-mode driver
    parts: tuple[str, ...] = ()  # tools/libraries named (cuobjdump, nvJPEG)
    state: str | None = None  # disputed | rejected


@dataclass
class Advisory:
    """One vendor bulletin (a validated record of the database)."""

    id: str
    vendor: str
    title: str
    published: str
    sources: list[str]
    vulnerabilities: list[Vulnerability]
    aliases: list[str] = field(default_factory=list)
    modified: str | None = None
    verification: dict[str, str] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict, repr=False)
