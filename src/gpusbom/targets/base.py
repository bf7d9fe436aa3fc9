"""The interface of a scan target's source, the view it opens (``gpusbom.targets``), and
``Pending``: a value computed beside the reading (``pipeline`` re-exports it)."""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

if TYPE_CHECKING:
    from ..advisories.db import AdvisoryDB
    from ..collectors import Collector
    from ..fsview.types import ProgressSink
    from ..fsview.view import FsView
    from ..host.source import HostView
    from ..model import ScanResult, Target
    from ..pipeline import ScanRequest


_T = TypeVar("_T")


class Pending(Generic[_T]):
    """A value the pipeline computes beside a target's reading (the advisory database, while the
    walk's workers run), or, where nothing runs beside, when first asked for. ``get`` returns
    it or raises what computing it raised."""

    def __init__(self, fn: Callable[[], _T]) -> None:
        self._fn: Callable[[], _T] | None = fn
        self._value: _T | None = None
        self._error: BaseException | None = None

    def run(self) -> None:
        """Compute the value (once; a later call does nothing)."""
        fn, self._fn = self._fn, None
        if fn is None:
            return
        try:
            self._value = fn()
        except BaseException as exc:  # noqa: BLE001 - raised again by get(), in the scanning thread
            self._error = exc

    def get(self) -> _T:
        self.run()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]  # run() set it


@dataclass
class View:
    """What a source gives: the target, and its files (``fs``) or, for an SBOM, the parsed
    ``document``; a host root also gives its ``host`` view (procfs/sysfs, NVML)."""

    target: Target
    fs: FsView | None = None
    host: HostView | None = None
    document: ScanResult | None = None
    #: ``--scope all-layers``: the filesystem after each layer but the last (``layerscope``)
    earlier: list[FsView] = field(default_factory=list)
    #: a registry image's attachments (``sources.registry.referrers.Attachments``) or None
    attachments: Any = None


class TargetSource(ABC):
    """One kind of scan target, for one request."""

    #: collectors run over its files (an SBOM's view is the document: none run)
    runs_collectors: ClassVar[bool] = True
    #: it has layers (``--scope all-layers``)
    has_layers: ClassVar[bool] = False
    #: it is a machine whose GPUs ``--probe`` can run kernels on
    can_probe: ClassVar[bool] = False
    #: ``gpusbom scan`` keeps the cyclic garbage collector paused (``gpusbom._gc``) until the
    #: outputs are written, not only while it loads: what reading it builds lives to the end
    keeps_gc_paused: ClassVar[bool] = False

    def __init__(self, req: ScanRequest) -> None:
        self.req = req

    @staticmethod
    @abstractmethod
    def named_by(req: ScanRequest) -> bool:
        """Does ``req`` name a target of this kind?"""

    @property
    @abstractmethod
    def name(self) -> str:
        """The target as the user named it (messages)."""

    def check(self) -> None:  # noqa: B027 - most kinds have nothing of their own to check
        """Usage errors of the request that concern this kind, before anything is read."""

    def prepare(self, load_db: Callable[[], AdvisoryDB]) -> ScanRequest:
        """The request ``gpusbom scan`` runs, once the usage checks passed: the advisory
        database (``load_db``) loaded now. A kind with work to start before the scan, or to
        run beside its reading, starts it here (a host root: ``host.HostRootSource``)."""
        return replace(self.req, advisory_db=load_db())

    def node_root(self) -> str | None:
        """The root of the node whose container images ``scan --images`` scans after it;
        None: the target is no node."""
        return None

    @abstractmethod
    def open(self, classes: Sequence[type[Collector]], progress: ProgressSink
             ) -> contextlib.AbstractContextManager[View]:
        """The view, readable until the context closes."""
