"""Native JSON: the complete scan result, round-trippable with ``ScanResult.from_dict``."""

from __future__ import annotations

import json
from typing import TextIO

from ..model import ScanResult
from . import register
from .base import Writer, WriterOptions


@register
class JsonWriter(Writer):
    format = "json"
    description = "gpusbom native JSON (complete scan result, lossless)"

    def write(self, result: ScanResult, out: TextIO, options: WriterOptions) -> None:
        out.write(json.dumps(result.to_dict(), indent=2, sort_keys=True))
        out.write("\n")
