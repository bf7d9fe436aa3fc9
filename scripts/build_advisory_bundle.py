#!/usr/bin/env python3
"""Build the advisory snapshot gpusbom ships, and its coverage report.

The options that import a local copy (``--nvidia``, ``--cve5``, ``--intel-index``) are the
registered advisory feeds' (``gpusbom.advisories.feeds``: ``Feed.local_options`` /
``from_local``): the builder asks every feed, in feed order, and a new feed that builds from
a copy adds its option, its import and its section of the report in its own module.

    scripts/build_advisory_bundle.py --nvidia GITDIR   # regenerate from NVIDIA's data
    scripts/build_advisory_bundle.py                   # re-bundle advisories/*.json
    scripts/build_advisory_bundle.py --check           # exit 1 when the bundle is stale

``--nvidia`` reads a git copy of github.com/NVIDIA/product-security (``fetch`` it; it is
not committed), imports every CSAF bulletin first released on or after ``--since``
(default 2022-01-01) with the CSAF importer, and rewrites ``advisories/NVIDIA-*.json``
(facts only: ids, titles, product names, version phrases, ranges, fixed versions, scores,
CWE, links). A curated ``NVIDIA-*.json`` that carries ``override`` (a reason and a source)
is kept as it is; any other is replaced by the fresh import. Each bulletin is checked
against the ``.sha256`` NVIDIA publishes beside it (the CRLF form of the file is accepted
only when the published hash is that form's); a mismatch excludes that bulletin only.

``--cve5 PATH ...`` reads Intel's and AMD's CVE JSON 5 records (directories of
``CVE-*.json``, e.g. a copy of github.com/cisagov/vulnrichment or of CVEProject/cvelistV5,
or their git directories; none is committed), imports every record of the ``intel`` and
``AMD`` assigners published on or after ``--since`` with the CVE 5 importer, groups the CVEs
of one advisory under its INTEL-SA / AMD-SB id (from the record's references) and rewrites
``advisories/INTEL-SA-*.json`` / ``AMD-SB-*.json`` for the advisories that name a product a
scan can identify (same rule as NVIDIA: a curated file with ``override`` is kept). When a
CVE is in several copies, the copy updated last wins. Facts only: the titles are made of
the products, CWE names and impact classes, never the records' descriptions.

``--intel-index GITDIR`` (a git copy of github.com/intel/security-center, Intel's CSAF
files: one per INTEL-SA with its CVE ids) makes the report list, as known missing, every
advisory of that index whose CVE records no ``--cve5`` copy held. ``--cve5`` also takes a
directory of records read one by one (``~/.cache/gpusbom-research/cve5``: not committed).

The coverage report (``src/gpusbom/data/advisories-coverage.txt``, next to the bundle) says
for each vendor and product the bulletins seen, imported and excluded, each exclusion with
its reason, plus the importer's phrase counts: one section per feed, in feed order, then the
curated advisories (the files no feed's import wrote: ``Feed.wrote``). A run with only one
of ``--nvidia`` / ``--cve5`` keeps the other feed's section of the report as it was. PyTorch records, and
Intel/AMD advisories no given copy holds, are the curated ``advisories/*.json``.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpusbom.advisories.feeds import Feed

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "advisories"
OUT = ROOT / "src" / "gpusbom" / "data" / "advisories.json"
REPORT = ROOT / "src" / "gpusbom" / "data" / "advisories-coverage.txt"


def build() -> str:
    from gpusbom.advisories.db import bundle, load_records

    recs = [
        json.loads(f.read_text(encoding="utf-8"))
        for f in sorted(SRC.glob("*.json"))
        if f.name != "schema.json"
    ]
    db = load_records(recs, source=str(SRC))  # validates
    built = db.newest or "1970-01-01"
    # one record per line: compact to load, and a bulletin's change is a one-line diff
    lines = ",\n".join(json.dumps(r, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
                       for r in sorted(recs, key=lambda r: str(r["id"])))
    head = json.dumps(bundle([], built), sort_keys=True)
    assert head.startswith('{"advisories": []')
    return '{"advisories": [\n' + lines + "\n]" + head[len('{"advisories": []'):] + "\n"


def _phrase_check(text: str) -> int:
    """Every vendor phrase of the bundle became a range or makes review: print the counts,
    and each phrase class that yields neither with its count; the number of such phrases."""
    from gpusbom.advisories.phrase_counts import count_phrases

    pc = count_phrases(json.loads(text)["advisories"])
    print(f"vendor version phrases: {pc.ranges} became ranges, {pc.review} make review, "
          f"{pc.neither_total} make neither", file=sys.stderr)
    for cls, n in pc.neither.most_common():
        print(f"  neither a range nor review: {n:4d}  {cls}", file=sys.stderr)
    return pc.neither_total


def _curated_report(feeds: list[Feed]) -> list[str]:
    """The report's last section: the advisory files no feed's import wrote."""
    out = []
    by_vendor: dict[str, list[str]] = collections.defaultdict(list)
    for f in sorted(SRC.glob("*.json")):
        if f.name == "schema.json":
            continue
        rec = json.loads(f.read_text(encoding="utf-8"))
        if any(feed.wrote(f, rec) for feed in feeds):
            continue
        targets = sorted({a["target"] for v in rec["vulnerabilities"] for a in v["affected"]})
        ranged = any("ranges" in a or "versions" in a for v in rec["vulnerabilities"]
                     for a in v["affected"])
        by_vendor[rec["vendor"]].append(
            f"    {rec['id']}: {', '.join(targets)}" + ("" if ranged else " (no machine-readable range: review)"))
    for vendor in sorted(by_vendor):
        out.append(f"{vendor} (curated from CVE JSON 5 records / OSV, not in the fetched "
                   f"copies; {len(by_vendor[vendor])} advisories)")
        out.extend(by_vendor[vendor])
    return out


def _sections(feeds: list[Feed]) -> dict[str, list[str]]:
    """The report's section of each feed as it is (kept for a run without its copy): a
    section starts at a line that begins with one of the feed's ``report_heads`` (the first
    at the top), the curated section ends them."""
    lines = REPORT.read_text(encoding="utf-8").split("\n") if REPORT.exists() else []
    out: dict[str, list[str]] = {feed.name: [] for feed in feeds}
    part = feeds[0].name if feeds else "curated"
    for line in lines:
        head = next((feed.name for feed in feeds if line.startswith(feed.report_heads)), None)
        if head is not None:
            part = head
        elif line and not line.startswith(" ") and "(curated" in line:
            part = "curated"
        if part in out:
            out[part].append(line)
    return out


def _write(records: list[dict[str, Any]], pattern: str, replace: Any) -> None:
    """Write the imported records as ``advisories/<id>.json``; a file of ``pattern`` that
    ``replace`` selects is removed first unless it is a curated ``override``."""
    fresh = {r["id"] for r in records}
    for f in SRC.glob(pattern):
        if f.name == "schema.json" or not replace(f):
            continue
        old = json.loads(f.read_text(encoding="utf-8"))
        if old.get("override"):
            fresh.discard(old["id"])  # a curated override that cites why
            continue
        f.unlink()
    for r in records:
        if r["id"] in fresh:
            (SRC / f"{r['id']}.json").write_text(
                json.dumps(r, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def main(argv: list[str]) -> int:
    from gpusbom.advisories.feeds import all_feeds

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    # every feed that builds from a local copy adds its options, in feed order
    feeds = [cls() for cls in all_feeds() if cls.local_option]
    for feed in feeds:
        feed.local_options(ap)
    ap.add_argument("--since", default="2022-01-01")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args(argv)
    sections = _sections(feeds)
    ran = [feed for feed in feeds
           if getattr(a, str(feed.local_option).lstrip("-").replace("-", "_"))]
    for feed in ran:
        imp = feed.from_local(a, a.since)
        _write(imp.records, imp.pattern, imp.replaces)
        sections[feed.name] = imp.report
    if ran:
        text = ("".join("\n".join(sections[feed.name]).rstrip("\n") + "\n\n" for feed in feeds)
                + "\n".join(_curated_report(feeds)) + "\n")
        REPORT.write_text(text, encoding="utf-8")
        print("\n".join(line for line in text.split("\n") if line and not line.startswith(" ")
                        or line.startswith("  ") and ":" in line and not line.startswith("    ")))
        print(f"{REPORT}: written")
    text = build()
    neither = _phrase_check(text)
    if neither:
        return 1
    if a.check:
        return 0 if OUT.exists() and OUT.read_text(encoding="utf-8") == text else 1
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text, encoding="utf-8")
    print(f"{OUT}: {len(json.loads(text)['advisories'])} advisories, {len(text) >> 10} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
