"""The source interface: something that yields a Target and its layers, streamed once."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from ..fsview.spec import PathMatcher
from ..fsview.types import LayerIndex, Limits, NullProgress, ProgressSink, Spool
from ..model import Target

if TYPE_CHECKING:  # type-only: keeps importing sources cheap
    from ..fsview.view import FsView


@dataclass
class ReadContext:
    """What a source reads with: the path matcher, the spool, the limits."""

    matcher: PathMatcher
    spool: Spool
    limits: Limits = field(default_factory=Limits)
    progress: ProgressSink = field(default_factory=NullProgress)
    platform: str | None = None  # "os/arch[/variant]"; None: the host's
    # a ``fsview.layercache.LayerCache``: layers it holds are not read again
    layer_cache: Any = None


@dataclass
class SourceResult:
    """What a source read: the target and its layers (or its own view)."""

    target: Target
    layers: list[LayerIndex]  # in application order, bottom first
    # Set instead of ``layers`` by sources that build the view themselves (``dir:``);
    # the scanner uses it as is and does not squash.
    view: FsView | None = None
    #: a registry image's attachments (``sources.registry.referrers.Attachments``), if read
    attachments: Any = None


class Source(ABC):
    """One way of reading an image (or a root filesystem)."""

    #: prefix users type, e.g. "docker-archive" in "docker-archive:PATH"
    scheme: ClassVar[str]

    def __init__(self, reference: str, location: str) -> None:
        self.reference = reference  # what the user typed
        self.location = location  # the part after the prefix

    @abstractmethod
    def read(self, ctx: ReadContext) -> SourceResult:
        """Stream every layer once through ``fsview.layer.read_layer`` and describe the target."""
