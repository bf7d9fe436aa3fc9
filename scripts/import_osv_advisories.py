#!/usr/bin/env python3
"""Import OSV entries (JSON or YAML, e.g. a file of pypa/advisory-database) into curated
records: ``advisories/<id>.json``. The entries themselves are not copied.

    scripts/import_osv_advisories.py ENTRY.yaml [...] [--source URL] [--out advisories]

``--source``: where the entry was read (cited in the record beside osv.dev). Prints what
the importer could not parse.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gpusbom.advisories.db import validate_record
from gpusbom.advisories.importers.osv import gpu_relevant, import_osv


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--source", action="append", default=[])
    ap.add_argument("--out", default="advisories")
    a = ap.parse_args(argv)
    for i, f in enumerate(a.files):
        text = Path(f).read_text(encoding="utf-8")
        if f.endswith((".yaml", ".yml")):
            import yaml

            doc = yaml.safe_load(text)
        else:
            doc = json.loads(text)
        imp = import_osv(doc, keep=gpu_relevant)
        for u in imp.unparsed:
            print(f"{f}: not understood: {u}", file=sys.stderr)
        if imp.record is None:
            print(f"{f}: no record ({imp.skipped})", file=sys.stderr)
            continue
        rec = imp.record
        if i < len(a.source):
            rec["sources"].append(a.source[i])
        validate_record(rec)
        out = Path(a.out) / f"{rec['id']}.json"
        out.write_text(json.dumps(rec, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"{out}: {len(rec['vulnerabilities'])} vulnerabilities")
    return 0


if __name__ == "__main__":
    sys.exit(main())
