"""The advisory feeds of ``gpusbom advisories update``: each module of this package is one
feed, a :class:`Feed` subclass that registers itself (:func:`register`). The update, the
``--source`` help and the feeds' settings iterate the registry (:func:`all_feeds`), so
adding a feed is adding one module here.

A feed is three steps (the update runs them in order, as one pipeline: each may be lazy):
``fetch`` downloads and checks what the feed publishes, ``parse`` turns that into
documents, ``records`` turns the documents into validated advisory records (and the
feed's entry in the database's ``feeds`` list, its descriptions, CISA's KEV catalog).
Entries that cannot be turned into records are named in ``Run.skipped``; anything that
makes the feed itself unreadable raises ``UpdateError`` and the old database stays.

A feed may also build records into the snapshot gpusbom ships, from a local copy of what it
publishes (``scripts/build_advisory_bundle.py``, which iterates the registry too): it names
the builder's option (``local_option``, plus any of its own in :meth:`Feed.local_options`),
imports the copy (:meth:`Feed.from_local`: the records and its section of the coverage
report, :class:`LocalImport`) and says which shipped advisory files its import wrote
(:meth:`Feed.wrote`), so that the report's curated section lists only the others.

Modules are found with :mod:`pkgutil` and imported when the registry is first listed;
they import their importers only when they run, so listing the feeds (``--help``) is cheap.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from ..fetch import Fetcher

__all__ = ["Feed", "LocalImport", "Output", "Run", "all_feeds", "get_feed", "register", "unregister"]


@dataclass
class Run:
    """What one update gives every feed: the downloader, a temporary directory beside the
    database, the thread count, the OSV ecosystems asked for; what the feeds add to
    (``skipped`` entries, per-CVE ``descriptions``); and, for a feed that runs after the
    merge (``Feed.after_merge``), the merged ``records`` of the feeds before it."""

    fetch: Fetcher
    tmp: Path
    workers: int = 8
    ecosystems: tuple[str, ...] = ()
    skipped: list[str] = field(default_factory=list)
    descriptions: dict[str, str] = field(default_factory=dict)
    records: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Output:
    """What a feed adds to the new database. ``info``: its entry in the database's
    ``feeds`` (name, url, record count, how it was checked). ``records`` merge in feed
    order; ``first`` before every feed's records (a curated record that cites why it
    overrides), ``last`` after them (the shipped copy that fresh vendor data supersedes).
    ``kev``: CISA's catalog (``enrich.parse_kev``)."""

    info: dict[str, Any]
    records: list[dict[str, Any]] = field(default_factory=list)
    first: list[dict[str, Any]] = field(default_factory=list)
    last: list[dict[str, Any]] = field(default_factory=list)
    kev: dict[str, Any] | None = None


@dataclass
class LocalImport:
    """What a feed's import of a local copy gives the bundle builder: the records, written
    as ``advisories/<id>.json``; ``replaces``: which existing file of ``pattern`` they
    replace (a curated ``override`` file stays); ``report``: the feed's section of the
    coverage report (``src/gpusbom/data/advisories-coverage.txt``)."""

    records: list[dict[str, Any]]
    report: list[str]
    pattern: str = "*.json"
    replaces: Callable[[Path], bool] = lambda _f: True


class Feed(ABC):
    """One advisory feed. A new instance serves each update."""

    #: ``--source NAME=URL``; the feed's entry in the database's ``feeds``
    name: ClassVar[str]
    #: where it runs among the feeds (lower first); also the order ``--help`` lists them in
    order: ClassVar[int]
    #: the progress line while it runs: ``fetching <progress>...``
    progress: ClassVar[str]
    #: its URL unless configured; None: none (a feed that can run without one says so)
    default_url: ClassVar[str | None] = None
    #: the setting (``gpusbom.settings``) that configures its URL, if it has one
    setting: ClassVar[str | None] = None
    #: runs without a URL too (``curated``: the records shipped with gpusbom)
    runs_without_url: ClassVar[bool] = False
    #: runs on the merged records of the feeds before it (``cve5``: their CVEs)
    after_merge: ClassVar[bool] = False

    @abstractmethod
    def fetch(self, run: Run, url: str | None) -> Any:
        """Download what the feed publishes at ``url`` and check it."""

    @abstractmethod
    def parse(self, run: Run, url: str | None, fetched: Any) -> Any:
        """The documents in what :meth:`fetch` returned."""

    @abstractmethod
    def records(self, run: Run, url: str | None, parsed: Any) -> Output:
        """The validated records of the documents, and the feed's summary."""

    #: the bundle builder's option naming a local copy (``--nvidia``); None: the feed adds
    #: nothing to the shipped snapshot
    local_option: ClassVar[str | None] = None
    #: the first words of its section's headings in the coverage report (a builder run
    #: without its copy keeps that section as it was)
    report_heads: ClassVar[tuple[str, ...]] = ()

    def local_options(self, parser: argparse.ArgumentParser) -> None:  # noqa: B027 - most feeds add none
        """Add ``local_option`` (and any option of its own) to the bundle builder's."""

    def from_local(self, opts: argparse.Namespace, since: str) -> LocalImport:
        """Import the local copy the builder's options name (entries first released on or
        after ``since``)."""
        raise NotImplementedError(f"feed {self.name!r} imports no local copy")

    def wrote(self, path: Path, record: dict[str, Any]) -> bool:
        """Is the shipped advisory file ``path`` (holding ``record``) this feed's import, or
        a curated override of one (not listed as curated in the coverage report)?"""
        return False

    def __call__(self, run: Run, url: str | None) -> Output:
        return self.records(run, url, self.parse(run, url, self.fetch(run, url)))


_REGISTRY: dict[str, type[Feed]] = {}
_loaded = False
F = TypeVar("F", bound=type[Feed])


def register(cls: F) -> F:
    """Class decorator: make ``cls`` one of the feeds."""
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"advisory feed {cls.name!r} registered twice")
    _REGISTRY[cls.name] = cls
    return cls


def unregister(name: str) -> None:
    """Take a feed off the registry (a test's toy feed)."""
    _REGISTRY.pop(name, None)


def _load() -> None:
    global _loaded
    if not _loaded:
        for m in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
            if not m.name.startswith("_"):
                importlib.import_module(f"{__name__}.{m.name}")
        _loaded = True


def all_feeds() -> list[type[Feed]]:
    """Every feed, in the order they run."""
    _load()
    return sorted(_REGISTRY.values(), key=lambda c: (c.order, c.name))


def get_feed(name: str) -> type[Feed] | None:
    _load()
    return _REGISTRY.get(name)
