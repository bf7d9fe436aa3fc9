"""SPDX 3.0.1 JSON-LD writer (``-o spdx3-json``): the SPDX 2.3 content in the 3.0 model.

The work is in ``_spdx3_impl``, imported on first use (it loads the generated model
bindings and spdx-tools' licence parser).
"""

from __future__ import annotations

from typing import TextIO

from ..model import ScanResult
from . import register
from .base import Writer, WriterOptions


@register
class Spdx3JsonWriter(Writer):
    format = "spdx3-json"
    document_id = True
    description = "SPDX 3.0.1 JSON-LD"

    def write(self, result: ScanResult, out: TextIO, options: WriterOptions) -> None:
        from . import _spdx3_impl

        _spdx3_impl.render_json(result, out)
