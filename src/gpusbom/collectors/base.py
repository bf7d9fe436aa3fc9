"""The collector interface.

A collector is one module in ``gpusbom.collectors`` holding one subclass of
``Collector`` decorated with ``@register``. It declares the files it needs as
``PathSpec`` globs (so the layer walker keeps only those) and turns them into
``Component`` objects, each with ``Evidence``. A collector that raises is
recorded as an ``Unknown`` and the scan goes on; a collector that can read
some files but not others calls ``ctx.unknown(...)`` and carries on.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import SourceError, ViewError
from ..fsview.types import EntryKind
from ..model import Component, Evidence, Target, Unknown

#: what a file view raises for a path it cannot give: absent or not a file (OSError), content
#: not captured (ViewError), a link loop or hostile link (SourceError: UnsafeArchiveError)
VIEW_ERRORS: tuple[type[Exception], ...] = (OSError, ViewError, SourceError)

_SYMLINK = EntryKind.SYMLINK

if TYPE_CHECKING:
    from ..fsview.spec import PathSpec
    from ..fsview.view import FsView


_SEP = "\0"  # joins a directory's file names: no path holds it (POSIX, tar, package lists)


def _names_blob(names: list[str]) -> str | frozenset[str]:
    """``names`` as one string, each between two separators (``in`` finds one: a C
    search); a set where a name holds the separator (a hostile list), so that a name
    is never found across two."""
    blob = _SEP + _SEP.join(names) + _SEP
    return blob if blob.count(_SEP) == len(names) + 1 else frozenset(names)


class GroupedPaths:
    """A package's file list grouped by directory: (directory, names) pairs, the names of a
    directory as one string (``_names_blob``). Made where the list is parsed (a host walk's
    worker: ``host/premake.py``), so that claiming it costs one step per directory instead
    of one per file (a GPU host's packages list ~130,000 files in ~4,000 directories)."""

    __slots__ = ("groups",)

    def __init__(self, groups: list[tuple[str, str | frozenset[str]]]) -> None:
        self.groups = groups

    @classmethod
    def of(cls, paths: Iterable[str]) -> GroupedPaths:
        """``paths`` grouped the way ``OwnershipIndex`` keys them (the directory is what
        precedes the last slash, trailing slashes dropped, empty paths skipped)."""
        by_dir: dict[str, list[str]] = {}
        last: str | None = None
        names: list[str] = []
        for p in paths:
            if not p:
                continue
            if p[-1] == "/":
                p = p.rstrip("/")
            head, _, name = p.rpartition("/")
            if head != last:  # package lists name a directory's files one after another
                last = head
                names = by_dir.setdefault(head, [])
            names.append(name)
        return cls([(head, _names_blob(names)) for head, names in by_dir.items()])

    def __reduce__(self) -> tuple[type[GroupedPaths], tuple[list[tuple[str, str | frozenset[str]]]]]:
        return GroupedPaths, (self.groups,)  # pickled by a walk worker: no state dict

    def __iter__(self) -> Iterator[str]:
        for head, names in self.groups:
            for n in sorted(names) if isinstance(names, frozenset) else names.split(_SEP)[1:-1]:
                yield head + "/" + n


class OwnershipIndex:
    """Which package owns which file, from the package databases (phase 1).

    Keys are normalised by resolving the parent directory inside the image, so
    ``/lib/x86_64-linux-gnu/libfoo.so.1`` (as dpkg lists it on a merged-/usr
    system) and ``/usr/lib/x86_64-linux-gnu/libfoo.so.1`` (where the file is)
    meet. Directory resolutions are cached: a CUDA image lists ~100k files.

    Claims are kept per resolved directory, in claim order, each as its file names
    (``GroupedPaths``); a file's owner is the first claim of its directory that names
    it. Claiming costs one step per directory (none per file when the list came
    grouped), and a look-up scans that directory's claims: only the evidence files
    are looked up (hundreds), while the lists name ~100,000 files.
    """

    def __init__(self, fs: FsView) -> None:
        self._fs = fs
        self._entries: dict[str, Any] | None = getattr(fs, "_entries", None)
        #: resolved directory -> [(package, its names there)], in claim order
        self._claims: dict[str, list[tuple[Component, str | frozenset[str]]]] = {}
        self._dirs: dict[str, str] = {}
        #: id(package) -> (package, manifest kind, manifest path, base directory)
        self._manifests: dict[int, tuple[Component, str, str, str]] = {}

    def _dir(self, head: str) -> str:
        """The real path of directory ``head`` without its trailing slash ("" for "/").

        Resolved one component at a time on top of the (cached) parent: only a
        component that is a symlink costs a full ``realpath``.
        """
        dirs = self._dirs
        real = dirs.get(head)
        if real is not None:
            return real
        entries = self._entries
        cut = head.rfind("/")
        name = head[cut + 1:]
        if entries is None or cut < 0 or name in ("", ".", ".."):
            real = self._realpath(head)
        else:
            parent = head[:cut]
            up = dirs.get(parent)  # the parent is resolved already, most often
            cand = (up if up is not None else self._dir(parent)) + "/" + name
            e = entries.get(cand)
            real = self._realpath(head) if e is not None and e.kind is _SYMLINK else cand
        dirs[head] = real
        return real

    def _realpath(self, head: str) -> str:
        try:
            real = self._fs.realpath(head or "/")
        except VIEW_ERRORS:  # a link loop above a file: its own path still keys it
            real = head
        return real.rstrip("/") or ""

    def _key(self, path: str) -> str:
        head, _, name = path.rstrip("/").rpartition("/")
        return self._dir(head) + "/" + name

    def add(self, component: Component, paths: Iterable[str]) -> None:
        grouped = paths if isinstance(paths, GroupedPaths) else GroupedPaths.of(paths)
        claims = self._claims
        dirs_get = self._dirs.get
        resolve = self._dir
        for head, names in grouped.groups:
            # a key is the resolved directory and the name (names hold no slash): two
            # claims meet exactly when their directories resolve alike and a name is shared
            real = dirs_get(head)
            if real is None:
                real = resolve(head)
            got = claims.get(real)
            if got is None:
                claims[real] = [(component, names)]
            else:
                got.append((component, names))

    def owner(self, path: str) -> Component | None:
        head, _, name = path.rstrip("/").rpartition("/")
        claims = self._claims.get(self._dir(head))
        if not claims:
            return None
        needle = _SEP + name + _SEP
        exact = _SEP in name  # never in a joined list: only a set may hold it
        for comp, names in claims:
            if isinstance(names, frozenset):
                if name in names:
                    return comp
            elif not exact and needle in names:
                return comp
        return None

    def key(self, path: str) -> str:
        """``path`` with its directory resolved inside the image (how files are compared)."""
        return self._key(path)

    def add_manifest(self, component: Component, kind: str, path: str, base: str) -> None:
        """``component``'s file manifest with digests (``md5sums`` or ``record``), read
        after collection for the files that are evidence (``collectors._digests``)."""
        self._manifests[id(component)] = (component, kind, path, base)

    def manifest(self, component: Component) -> tuple[str, str, str] | None:
        m = self._manifests.get(id(component))
        return (m[1], m[2], m[3]) if m is not None and m[0] is component else None

    def __len__(self) -> int:
        """How many distinct files are claimed."""
        total = 0
        for claims in self._claims.values():
            seen: set[str] = set()
            for _, names in claims:
                seen.update(names if isinstance(names, frozenset) else names.split(_SEP)[1:-1])
            total += len(seen)
        return total


@dataclass
class CollectContext:
    """What a collector may look at: the filesystem view and the target metadata.

    Package catalogers (phase 1) ``claim`` the files their packages own; stack
    collectors (phase 2) ask ``owner(path)`` which package a file belongs to.
    """

    fs: FsView
    target: Target
    collector_id: str
    unknowns: list[Unknown] = field(default_factory=list)
    ownership: OwnershipIndex | None = None

    def claim(self, component: Component, paths: Iterable[str]) -> None:
        """Record that ``component`` (a package) owns ``paths`` (absolute image paths)."""
        if self.ownership is not None:
            self.ownership.add(component, paths)

    def manifest(self, component: Component, kind: str, path: str, base: str = "/") -> None:
        """Record that ``path`` (a dpkg ``md5sums``, a wheel ``RECORD``) declares the
        digests of ``component``'s files (paths relative to ``base``)."""
        if self.ownership is not None:
            self.ownership.add_manifest(component, kind, path, base)

    def owner(self, path: str) -> Component | None:
        """The package component owning ``path``, when a package database says so."""
        return self.ownership.owner(path) if self.ownership is not None else None

    def unknown(self, reason: str, path: str | None = None) -> None:
        self.unknowns.append(Unknown(collector=self.collector_id, reason=reason, path=path))

    def evidence(self, method: str, path: str | None = None, detail: str | None = None) -> Evidence:
        """Evidence for ``path``, with the diff_id of the layer that holds its final version."""
        layer = None
        if path is not None:
            layer = self.fs.layer_of(path)
        return Evidence(
            collector=self.collector_id, method=method, path=path, layer=layer, detail=detail
        )


class Collector(ABC):
    """Base class. ``id`` is kebab-case and shared with CLI flags and SBOM properties."""

    id: ClassVar[str]
    version: ClassVar[str] = "1"
    #: 1 = package databases (run first, claim files); 2 = stack collectors
    phase: ClassVar[int] = 2
    #: files this collector needs; globs on absolute image paths
    paths: ClassVar[tuple[PathSpec, ...]] = ()

    @classmethod
    def active(cls) -> bool:
        """Whether the collector takes part in scans now (asked when the registry is listed,
        never at import: registration does not depend on the environment or settings)."""
        return True

    @abstractmethod
    def collect(self, ctx: CollectContext) -> Iterable[Component]:
        """Yield the components found. Never raise for a missing file: yield nothing."""
