"""SPDX 2.3 writers (JSON and tag-value), validated before writing.

The work is in ``_spdx_impl``, imported on first use: spdx-tools takes a
noticeable share of a second to import, and most runs never need it.
"""

from __future__ import annotations

from typing import TextIO

from ..model import ScanResult
from . import register
from .base import Writer, WriterOptions

#: what writing SPDX imports (spdx-tools: ~0.17 CPU-s on a 2-core VM), imported beside a
#: host's walk (``Writer.imports``) rather than after the scan, in the output's child
_IMPORTS = ("gpusbom.writers._spdx_impl", "gpusbom.writers._spdx_validate",
            "gpusbom.writers._spdx_impl:warm")


@register
class SpdxJsonWriter(Writer):
    format = "spdx-json"
    description = "SPDX 2.3 JSON"
    imports = _IMPORTS + ("gpusbom.writers._spdx_convert",)
    document_id = True

    def write(self, result: ScanResult, out: TextIO, options: WriterOptions) -> None:
        from . import _spdx_impl

        _spdx_impl.render_json(result, out)


@register
class SpdxTagValueWriter(Writer):
    format = "spdx-tag-value"
    description = "SPDX 2.3 tag-value"
    imports = _IMPORTS
    document_id = True

    def write(self, result: ScanResult, out: TextIO, options: WriterOptions) -> None:
        from . import _spdx_impl

        _spdx_impl.render_tag_value(result, out)


def build_document(result: ScanResult) -> object:
    """The spdx-tools ``Document`` for ``result``."""
    from . import _spdx_impl

    return _spdx_impl.build_document(result)
