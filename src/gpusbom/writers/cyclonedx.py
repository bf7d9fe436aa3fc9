"""CycloneDX writers (JSON and XML; 1.6 by default, 1.5 or 1.7 on request).

The work is in ``_cyclonedx_impl``, imported on first use: cyclonedx-python-lib
takes a noticeable share of a second to import, and most runs never need it.
"""

from __future__ import annotations

from typing import ClassVar, TextIO

from ..model import ScanResult
from . import register
from .base import Writer, WriterOptions


class _CycloneDxWriter(Writer):
    xml: ClassVar[bool] = False
    imports = ("gpusbom.writers._cyclonedx_impl", "gpusbom.writers._cyclonedx_fast",
               "gpusbom.licenses:warm")
    document_id = True

    def write(self, result: ScanResult, out: TextIO, options: WriterOptions) -> None:
        from . import _cyclonedx_fast, _cyclonedx_impl

        # JSON's components and dependencies written directly where that gives the
        # library's bytes (_cyclonedx_fast), else all by cyclonedx-python-lib
        _cyclonedx_impl.write(result, out, options, xml=self.xml,
                              fast=_cyclonedx_fast.render_json)


@register
class CycloneDxJsonWriter(_CycloneDxWriter):
    format = "cyclonedx-json"
    description = "CycloneDX JSON (1.6; 1.5 or 1.7 with --cyclonedx-version)"


@register
class CycloneDxXmlWriter(_CycloneDxWriter):
    format = "cyclonedx-xml"
    description = "CycloneDX XML (1.6; 1.5 or 1.7 with --cyclonedx-version)"
    xml = True


def build_bom(result: ScanResult, spec: object) -> object:
    """The cyclonedx-python-lib ``Bom`` for ``result`` (for callers that post-process it)."""
    from . import _cyclonedx_impl

    return _cyclonedx_impl.build_bom(result, spec)  # type: ignore[arg-type]


@register
class CycloneDxVexWriter(Writer):
    format = "cyclonedx-vex"
    description = "CycloneDX 1.6 VEX (JSON): the advisory findings with their analysis"
    document_id = True

    def write(self, result: ScanResult, out: TextIO, options: WriterOptions) -> None:
        from . import _vex_impl

        _vex_impl.write(result, out, "cyclonedx-vex")
