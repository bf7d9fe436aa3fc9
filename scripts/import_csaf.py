#!/usr/bin/env python3
"""Import NVIDIA CSAF 2.0 bulletins into curated records: ``advisories/NVIDIA-<id>.json``.

    scripts/import_csaf.py PATH/TO/5747.json [...] [--out advisories]

Keeps the Linux entries whose vendor product maps to a gpusbom target; prints every
phrase it could not parse. The CSAF documents themselves are not copied.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gpusbom.advisories.db import validate_record
from gpusbom.advisories.importers.csaf import import_csaf


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--out", default="advisories")
    ap.add_argument("--year", help="year folder in NVIDIA/product-security (else from the date)")
    a = ap.parse_args(argv)
    for f in a.files:
        doc = json.loads(Path(f).read_text(encoding="utf-8"))
        tid = doc["document"]["tracking"]["id"]
        year = a.year or doc["document"]["tracking"]["initial_release_date"][:4]
        imp = import_csaf(
            doc,
            source_url=f"https://github.com/NVIDIA/product-security/blob/main/{year}/{tid}/{tid}.json",
        )
        rec = imp.record
        rec["sources"].insert(0, f"https://nvidia.custhelp.com/app/answers/detail/a_id/{tid}")
        for v in rec["vulnerabilities"]:
            v["affected"] = [x for x in v["affected"] if x.get("platform") in (None, "linux")]
        rec["vulnerabilities"] = [v for v in rec["vulnerabilities"] if v["affected"]]
        rec["aliases"] = sorted(v["id"] for v in rec["vulnerabilities"])
        validate_record(rec)
        for pid, phrase in imp.unparsed:
            print(f"{tid}: unparsed phrase {phrase!r} ({pid})", file=sys.stderr)
        out = Path(a.out) / f"{rec['id']}.json"
        out.write_text(json.dumps(rec, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"{out}: {len(rec['vulnerabilities'])} vulnerabilities")
    return 0


if __name__ == "__main__":
    sys.exit(main())
