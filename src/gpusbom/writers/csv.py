"""CSV of the inventory's reports (one row per item, the table's columns)."""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

from . import register
from .base import Rows, Writer, WriterOptions

if TYPE_CHECKING:
    from ..inventory.types import Drift


@register
class RowsCsvWriter(Writer):
    format = "csv"
    subject = "rows"
    description = "comma-separated values, the table's columns"

    def write(self, result: Rows, out: TextIO, options: WriterOptions) -> None:
        from ..inventory.render import render

        out.write(render(result.rows, result.columns, "csv"))


@register
class DriftCsvWriter(Writer):
    format = "csv"
    subject = "drift"
    description = "a row per change"

    def write(self, result: Drift, out: TextIO, options: WriterOptions) -> None:
        from ..inventory.render import as_dict, render
        from .table import DRIFT_COLUMNS

        out.write(render([as_dict(c) for c in result.changes], DRIFT_COLUMNS, "csv"))
