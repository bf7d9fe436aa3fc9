#!/usr/bin/env python3
"""Real-data check: the importers over full copies of the vendors' data (not committed).

    scripts/csaf_real_data_check.py [--nvidia GITDIR] [--cve5 DIR_OR_GITDIR ...]

``--nvidia``: a git copy of github.com/NVIDIA/product-security (default: the mirror path);
every CSAF document and every CVE JSON 5 file beside it is imported. ``--cve5``: CVE JSON
5 records (a directory of ``CVE-*.json`` or a git copy of CVEProject/cvelistV5); records
of the Intel and AMD assigners are imported. Prints the counts: documents, version phrases
parsed and not, the phrase classes not parsed (with one example each), products no
catalog row names.
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def _git_files(repo: str) -> list[str]:
    return subprocess.run(["git", "-C", repo, "ls-tree", "-r", "--name-only", "HEAD"],
                          check=True, capture_output=True, text=True).stdout.split("\n")


def _git_show(repo: str, path: str) -> bytes:
    return subprocess.run(["git", "-C", repo, "show", f"HEAD:{path}"], check=True,
                          capture_output=True).stdout


def nvidia(repo: str) -> None:
    from gpusbom.advisories.importers.csaf import import_csaf, phrase_class
    from gpusbom.advisories.importers.cve5 import import_cve5

    files = _git_files(repo)
    docs = [f for f in files if f.endswith(".json") and f.count("/") == 2
            and f.rsplit("/", 1)[1].split(".")[0].isdigit()]
    cves = [f for f in files if f.endswith(".json") and f.rsplit("/", 1)[-1].startswith("CVE-")]
    n = phrases = parsed = 0
    classes: collections.Counter[str] = collections.Counter()
    example: dict[str, str] = {}
    unmapped: collections.Counter[str] = collections.Counter()
    for f in docs:
        d = json.loads(_git_show(repo, f))
        if "document" not in d:
            continue
        n += 1
        imp = import_csaf(d)
        phrases += imp.phrases
        parsed += imp.parsed
        for _pid, text in imp.unparsed:
            c = phrase_class(text)
            classes[c] += 1
            example.setdefault(c, f"{f}: {text}")
        unmapped.update(set(imp.unmapped))
    print(f"NVIDIA CSAF: {n} documents, {phrases} version phrases, {parsed} parsed, "
          f"{phrases - parsed} not; {len(classes)} phrase classes not parsed; "
          f"{len(unmapped)} product names no catalog row names")
    for c, k in classes.most_common():
        print(f"  {k:3d}  {c!r}  e.g. {example[c]}")
    _cve5_run("NVIDIA CVE JSON 5", [(f, _git_show(repo, f)) for f in cves],
              published="2000-01-01", import_cve5=import_cve5)


def _cve5_run(label: str, items: list[tuple[str, bytes]], *, published: str | None,
              import_cve5: Any) -> None:
    from gpusbom.advisories.importers.cve5 import phrase_class, version_understood

    n = made = phrases = parsed = 0
    why: collections.Counter[str] = collections.Counter()
    classes: collections.Counter[str] = collections.Counter()
    example: dict[str, str] = {}
    for name, raw in items:
        try:
            d = json.loads(raw)
        except ValueError:
            why["not JSON"] += 1
            continue
        n += 1
        imp = import_cve5(d, published=published)
        phrases += imp.phrases
        parsed += imp.parsed
        for text in imp.unparsed_phrases:
            c = phrase_class(text)
            classes[c] += 1
            example.setdefault(c, f"{name.rsplit('/', 1)[-1]}: {text}")
        if imp.record is not None:
            made += 1
        else:
            why[(imp.skipped or "?").split(": ", 1)[-1]] += 1
    # every version string of every product, whether the catalog names it or not
    every = ok = 0
    every_classes: collections.Counter[str] = collections.Counter()
    for _name, raw in items:
        try:
            d = json.loads(raw)
        except ValueError:
            continue
        for a in (d.get("containers") or {}).get("cna", {}).get("affected") or []:
            for v in a.get("versions") or [] if isinstance(a, dict) else []:
                if isinstance(v, dict) and v.get("status") in ("affected", "unaffected"):
                    every += 1
                    good, text = version_understood(v, named=label.startswith("AMD"))
                    ok += good
                    if not good:
                        every_classes[phrase_class(text)] += 1
    print(f"{label}, all products: {every} version phrases, parsed {ok}, not {every - ok}; "
          f"{len(every_classes)} phrase classes not parsed; most common: "
          f"{every_classes.most_common(6)}")
    print(f"{label}: {n} records, {made} imported (a product in the catalog); version "
          f"phrases of those products: {phrases}, parsed {parsed}, not {phrases - parsed}; "
          f"{len(classes)} phrase classes not parsed; not imported: {dict(why.most_common(8))}")
    for c, k in classes.most_common():
        print(f"  {k:3d}  {c!r}  e.g. {example[c]}")


def cve5(paths: list[str]) -> None:
    from gpusbom.advisories.importers.cve5 import import_cve5

    items: list[tuple[str, bytes]] = []
    for p in paths:
        if (Path(p) / ".git").exists() or p.endswith(".git") or Path(p, "HEAD").exists():
            files = [f for f in _git_files(p) if f.rsplit("/", 1)[-1].startswith("CVE-")]
            items += [(f, _git_show(p, f)) for f in files]
        else:
            items += [(str(f), f.read_bytes()) for f in sorted(Path(p).rglob("CVE-*.json"))]
    by: dict[str, list[tuple[str, bytes]]] = {"intel": [], "amd": []}
    for name, raw in items:
        try:
            who = str(json.loads(raw).get("cveMetadata", {}).get("assignerShortName", ""))
        except (ValueError, AttributeError):
            continue
        if who.lower() in by:
            by[who.lower()].append((name, raw))
    print(f"CVE JSON 5 copies {', '.join(paths)}: {len(items)} records; Intel "
          f"{len(by['intel'])}, AMD {len(by['amd'])}")
    _cve5_run("Intel CVE JSON 5", by["intel"], published=None, import_cve5=import_cve5)
    _cve5_run("AMD CVE JSON 5", by["amd"], published=None, import_cve5=import_cve5)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nvidia", default="/work/.mirror/NVIDIA+product-security/repo",
                    help="'' to skip NVIDIA")
    ap.add_argument("--cve5", nargs="*", default=[])
    a = ap.parse_args(argv)
    if a.nvidia:
        nvidia(a.nvidia)
    if a.cve5:
        cve5(a.cve5)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
