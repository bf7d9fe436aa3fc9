"""``dir:PATH``: an unpacked root filesystem on disk, read through ``FsView.from_directory``."""

from __future__ import annotations

import os

from ..errors import SourceNotFoundError
from ..model import Target
from .base import ReadContext, Source, SourceResult


class DirectorySource(Source):
    scheme = "dir"

    def read(self, ctx: ReadContext) -> SourceResult:
        from ..fsview.view import FsView

        root = self.location
        if not os.path.exists(root):
            raise SourceNotFoundError(f"dir:{root}: no such directory")
        if not os.path.isdir(root):
            raise SourceNotFoundError(f"dir:{root}: not a directory")
        view = FsView.from_directory(root, ctx.matcher, ctx.spool, ctx.limits)
        target = Target(
            kind="directory",
            reference=self.reference,
            source="dir",
            name=os.path.basename(os.path.abspath(root)) or "/",
            layers=list(view.layers),
        )
        return SourceResult(target=target, layers=[], view=view)
