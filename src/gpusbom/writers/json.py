"""JSON: the complete scan result (round-trippable with ``ScanResult.from_dict``), and the
gate's, check's and the inventory's reports."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, TextIO

from ..model import ScanResult
from . import register
from .base import Rows, Writer, WriterOptions

if TYPE_CHECKING:
    from ..compat.report import CheckReport
    from ..inventory.types import Drift
    from ..policy.report import GateReport
    from ..reconcile import Reconciliation


@register
class JsonWriter(Writer):
    format = "json"
    description = "gpusbom native JSON (complete scan result, lossless)"

    def write(self, result: ScanResult, out: TextIO, options: WriterOptions) -> None:
        from ._jsonfast import dumps_indented

        out.write(dumps_indented(result.to_document(), indent=2, sort_keys=True))
        out.write("\n")


@register
class GateJsonWriter(Writer):
    format = "json"
    subject = "gate"
    description = "the policy and every decision (gpusbom/gate/1)"

    def write(self, result: GateReport, out: TextIO, options: WriterOptions) -> None:
        from ..policy import render_json

        out.write(render_json(result.decisions, result.policy))


@register
class CheckJsonWriter(Writer):
    format = "json"
    subject = "check"
    description = "every verdict with its reasons and evidence (gpusbom/check/1)"

    def write(self, result: CheckReport, out: TextIO, options: WriterOptions) -> None:
        from ..compat.report import to_json

        out.write(to_json(result.verdicts))


@register
class RowsJsonWriter(Writer):
    format = "json"
    subject = "rows"
    description = "a list of objects, every field"

    def write(self, result: Rows, out: TextIO, options: WriterOptions) -> None:
        from ..inventory.render import render

        out.write(render(result.rows, result.columns, "json"))


@register
class DriftJsonWriter(Writer):
    format = "json"
    subject = "drift"
    description = "the two scans and every change"

    def write(self, result: Drift, out: TextIO, options: WriterOptions) -> None:
        from ..inventory.render import as_dict

        d = result
        out.write(json.dumps({"kind": d.kind, "subject": d.subject, "from": as_dict(d.old),
                              "to": as_dict(d.new),
                              "changes": [as_dict(c) for c in d.changes]},
                             indent=2, ensure_ascii=False) + "\n")


@register
class ReconcileJsonWriter(Writer):
    format = "json"
    subject = "reconcile"
    description = "every difference with both versions and where it was seen (gpusbom/reconcile/1)"

    def write(self, result: Reconciliation, out: TextIO, options: WriterOptions) -> None:
        json.dump(result.to_dict(), out, indent=2, sort_keys=True)
        out.write("\n")
