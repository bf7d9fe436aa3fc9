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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Iterable

from ..model import Component, Evidence, Target, Unknown

if TYPE_CHECKING:
    from ..fsview.spec import PathSpec
    from ..fsview.view import FsView


@dataclass
class CollectContext:
    """What a collector may look at: the filesystem view and the target metadata."""

    fs: FsView
    target: Target
    collector_id: str
    unknowns: list[Unknown] = field(default_factory=list)

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
    #: files this collector needs; globs on absolute image paths
    paths: ClassVar[tuple[PathSpec, ...]] = ()

    @abstractmethod
    def collect(self, ctx: CollectContext) -> Iterable[Component]:
        """Yield the components found. Never raise for a missing file: yield nothing."""
