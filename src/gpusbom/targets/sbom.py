"""An existing SBOM as a scan target (``scan --sbom FILE``): its view is the parsed document
(``sbomin``); no collectors run on it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from ..errors import UsageError
from .base import TargetSource, View

if TYPE_CHECKING:
    from ..collectors import Collector
    from ..fsview.types import ProgressSink
    from ..pipeline import ScanRequest


class SbomSource(TargetSource):
    runs_collectors = False

    @staticmethod
    def named_by(req: ScanRequest) -> bool:
        return req.sbom is not None

    @property
    def name(self) -> str:
        return f"sbom:{self.req.sbom}"

    def check(self) -> None:
        if self.req.host is not None or self.req.reference:
            raise UsageError("--sbom matches an existing SBOM: give no image and no --host")

    @contextlib.contextmanager
    def open(self, classes: Sequence[type[Collector]], progress: ProgressSink
             ) -> Iterator[View]:
        from ..sbomin import load_sbom

        doc = load_sbom(str(self.req.sbom))
        yield View(target=doc.target, document=doc)
