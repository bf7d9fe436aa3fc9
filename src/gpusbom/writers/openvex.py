"""OpenVEX 0.2.0 writer: a statement per advisory finding (``_vex_impl``)."""

from __future__ import annotations

from typing import TextIO

from ..model import ScanResult
from . import register
from .base import Writer, WriterOptions


@register
class OpenVexWriter(Writer):
    format = "openvex"
    document_id = True
    description = ("OpenVEX 0.2.0: not_affected (with justification) / affected / "
                   "under_investigation per advisory finding")

    def write(self, result: ScanResult, out: TextIO, options: WriterOptions) -> None:
        from . import _vex_impl

        _vex_impl.write(result, out, "openvex")
