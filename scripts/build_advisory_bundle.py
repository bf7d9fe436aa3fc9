#!/usr/bin/env python3
"""Bundle ``advisories/*.json`` into ``src/gpusbom/data/advisories.json`` (the snapshot
gpusbom ships and uses offline). ``--check`` exits 1 when the bundle is out of date."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "advisories"
OUT = ROOT / "src" / "gpusbom" / "data" / "advisories.json"


def build() -> str:
    from gpusbom.advisories.db import bundle, load_records

    recs = [
        json.loads(f.read_text(encoding="utf-8"))
        for f in sorted(SRC.glob("*.json"))
        if f.name != "schema.json"
    ]
    db = load_records(recs, source=str(SRC))  # validates
    built = db.newest or "1970-01-01"
    return json.dumps(bundle(recs, built), indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    text = build()
    if "--check" in argv:
        return 0 if OUT.exists() and OUT.read_text(encoding="utf-8") == text else 1
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text, encoding="utf-8")
    print(f"{OUT}: {len(json.loads(text)['advisories'])} advisories")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
