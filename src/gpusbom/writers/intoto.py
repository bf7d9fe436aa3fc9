"""``-o in-toto=PATH``: an in-toto Bundle (``.intoto.jsonl``) of Statements v1 about the image.

``scan``: the CycloneDX and SPDX SBOMs, and the probe results when ``--probe`` ran;
``gate``: a verification summary per image; ``check``: one of the compatibility verdicts.
One unsigned DSSE envelope per line (``gpusbom attest --sign`` signs; see
docs/attestations.md). The work is in ``gpusbom.attest``.
"""

from __future__ import annotations

from typing import Any, TextIO

from . import register
from .base import Writer, WriterOptions


@register
class InTotoScanWriter(Writer):
    format = "in-toto"
    description = "in-toto Bundle (JSON Lines of DSSE envelopes): SBOM and probe attestations"
    imports = ("gpusbom.attest",)

    def write(self, result: Any, out: TextIO, options: WriterOptions) -> None:
        from ..attest import bundle_lines, scan_statements

        out.write(bundle_lines(scan_statements(result, options)))


@register
class InTotoGateWriter(Writer):
    format = "in-toto"
    subject = "gate"
    description = "in-toto Bundle: a verification summary (VSA v1) per image"

    def write(self, result: Any, out: TextIO, options: WriterOptions) -> None:
        from ..attest import bundle_lines, gate_statements

        out.write(bundle_lines(gate_statements(result)))


@register
class InTotoCheckWriter(Writer):
    format = "in-toto"
    subject = "check"
    description = "in-toto Bundle: the compatibility verdicts as a verification summary"

    def write(self, result: Any, out: TextIO, options: WriterOptions) -> None:
        from ..attest import bundle_lines, check_statements

        out.write(bundle_lines(check_statements(result)))
