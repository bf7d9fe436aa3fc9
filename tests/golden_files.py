"""The golden output files (``tests/golden/data/CASE/NAME``), as the tests that read them
see them. A golden over ``MINIFY_OVER`` bytes is kept minified as ``NAME.min`` (JSON without
indentation, XML without the whitespace between tags), so that no file of the repository is
over 2 MB; the golden test minifies the output the same way before it compares."""

from __future__ import annotations

import json
import re
from pathlib import Path

DATA = Path(__file__).resolve().parent / "golden" / "data"
MINIFY_OVER = 2_000_000


def goldens(name: str) -> list[Path]:
    """Every case's golden file ``name`` (``json``, ``cdx.json`` ...), whole or minified,
    sorted by case."""
    found = [*DATA.glob(f"*/{name}"), *DATA.glob(f"*/{name}.min")]
    return sorted(found, key=lambda p: p.parent.name)


def read(path: Path) -> str:
    """A golden file's text."""
    return path.read_text()


def minify(name: str, text: str) -> str:
    """``text`` of the output ``name`` as its ``.min`` golden holds it."""
    if name.endswith(".xml"):
        return re.sub(r">\s+<", "><", text)
    return json.dumps(json.loads(text), ensure_ascii=False, separators=(",", ":")) + "\n"
