"""Tables, CSV and JSON for the inventory commands (rows are dicts, columns chosen per command)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import asdict, is_dataclass
from typing import Any

FORMATS = ("table", "json", "csv")


def as_dict(obj: Any) -> dict[str, Any]:
    if is_dataclass(obj) and not isinstance(obj, type):
        return asdict(obj)
    return dict(obj)


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, dict):
        return ",".join(f"{k}={x}" for k, x in sorted(v.items()))
    if isinstance(v, (list, tuple)):
        return "; ".join(str(x) for x in v)
    return str(v)


def render(rows: Sequence[dict[str, Any]], columns: Sequence[str], fmt: str,
           *, headers: dict[str, str] | None = None) -> str:
    """``rows`` as an aligned plain-text table, CSV (``columns``) or JSON (every field)."""
    if fmt == "json":
        return json.dumps(list(rows), indent=2, ensure_ascii=False, sort_keys=False) + "\n"
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(columns)
        for r in rows:
            w.writerow([_cell(r.get(c)) for c in columns])
        return buf.getvalue()
    heads = [(headers or {}).get(c, c.upper().replace("_", " ")) for c in columns]
    body = [[_cell(r.get(c)) for c in columns] for r in rows]
    widths = [max([len(h)] + [len(b[i]) for b in body]) for i, h in enumerate(heads)]
    lines = ["  ".join(h.ljust(widths[i]) for i, h in enumerate(heads)).rstrip()]
    for b in body:
        lines.append("  ".join(x.ljust(widths[i]) for i, x in enumerate(b)).rstrip())
    return "\n".join(lines) + "\n"
