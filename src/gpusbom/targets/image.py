"""An image as a scan target: any reference ``sources.resolve_source`` reads (a registry, a
Docker Engine, an archive, an OCI layout, a directory, a SIF file, containerd and
containers-storage stores), its layers read through the layer cache and squashed."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from ..fsview.types import Spool
from .base import TargetSource, View

if TYPE_CHECKING:
    from ..collectors import Collector
    from ..fsview.types import ProgressSink
    from ..fsview.view import FsView
    from ..pipeline import ScanRequest


class ImageSource(TargetSource):
    has_layers = True

    @staticmethod
    def named_by(req: ScanRequest) -> bool:
        return bool(req.reference)

    @property
    def name(self) -> str:
        return self.req.reference or ""

    @contextlib.contextmanager
    def open(self, classes: Sequence[type[Collector]], progress: ProgressSink
             ) -> Iterator[View]:
        from ..collect import build_matcher, check_needed_links
        from ..fsview.squash import squash
        from ..sources import resolve_source
        from ..sources.base import ReadContext

        req = self.req
        matcher = build_matcher(classes)
        with Spool(req.limits) as spool:
            src = resolve_source(req.reference or "", source=req.source, registry=req.registry)
            layer_cache = None
            if req.cache is not False:  # --no-cache: not even imported (with sqlite3, ~5 ms)
                from ..fsview import layercache
                if req.cache or not layercache.disabled_by_env():
                    layer_cache = layercache.LayerCache.open(
                        collectors={c.id: c.version for c in classes}, limits=req.limits,
                        max_size=req.cache_max_size or layercache.DEFAULT_MAX_SIZE)
            ctx = ReadContext(matcher=matcher, spool=spool, limits=req.limits,
                              progress=progress, platform=req.platform,
                              layer_cache=layer_cache)
            from .. import stagetime

            try:
                with stagetime.stage("layers"):
                    read = src.read(ctx)
            finally:
                if layer_cache is not None:
                    layer_cache.close()
            from .._alloc import release_free

            release_free()  # what the layer threads freed (gpusbom._alloc)
            view: FsView | None = getattr(read, "view", None)
            with stagetime.stage("squash"):
                fs = view if view is not None else squash(read.layers, req.limits)
            check_needed_links(fs, matcher)
            earlier = []
            if req.scope == "all-layers" and view is None and len(read.layers) > 1:
                from ..layerscope import earlier_views

                earlier = earlier_views(read.layers, req.limits)
            yield View(target=read.target, fs=fs, earlier=earlier,
                       attachments=getattr(read, "attachments", None))
