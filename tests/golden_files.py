"""The golden output files (``tests/golden/data/CASE/NAME``), as the tests that read them
see them: a golden over 1 MiB is kept gzip-compressed as ``NAME.gz``
(``tests/golden/test_goldens.py``)."""

from __future__ import annotations

import gzip
from pathlib import Path

DATA = Path(__file__).resolve().parent / "golden" / "data"


def goldens(name: str) -> list[Path]:
    """Every case's golden file ``name`` (``json``, ``cdx.json`` ...), plain or compressed,
    sorted by case."""
    found = [*DATA.glob(f"*/{name}"), *DATA.glob(f"*/{name}.gz")]
    return sorted(found, key=lambda p: p.parent.name)


def read(path: Path) -> str:
    """A golden file's text."""
    data = path.read_bytes()
    return (gzip.decompress(data) if path.suffix == ".gz" else data).decode()
