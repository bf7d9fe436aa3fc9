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
    n = made = 0
    why: collections.Counter[str] = collections.Counter()
    unparsed = 0
    for _name, raw in items:
        try:
            d = json.loads(raw)
        except ValueError:
            why["not JSON"] += 1
            continue
        n += 1
        imp = import_cve5(d, published=published)
        unparsed += len(imp.unparsed)
        if imp.record is not None:
            made += 1
        else:
            why[(imp.skipped or "?").split(": ", 1)[-1]] += 1
    print(f"{label}: {n} records, {made} imported, {unparsed} version strings not parsed; "
          f"not imported: {dict(why.most_common(8))}")


def cve5(paths: list[str]) -> None:
    from gpusbom.advisories.importers.cve5 import import_cve5

    items: list[tuple[str, bytes]] = []
    for p in paths:
        if (Path(p) / ".git").exists() or p.endswith(".git") or Path(p, "HEAD").exists():
            files = [f for f in _git_files(p) if f.rsplit("/", 1)[-1].startswith("CVE-")]
            items += [(f, _git_show(p, f)) for f in files]
        else:
            items += [(str(f), f.read_bytes()) for f in sorted(Path(p).rglob("CVE-*.json"))]
    keep = []
    for name, raw in items:
        low = raw[:4000].lower()
        if b'"assignershortname": "intel"' in low or b'"assignershortname": "amd"' in low:
            keep.append((name, raw))
    _cve5_run("Intel/AMD CVE JSON 5", keep, published=None, import_cve5=import_cve5)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nvidia", default="/work/.mirror/NVIDIA+product-security/repo")
    ap.add_argument("--cve5", nargs="*", default=[])
    a = ap.parse_args(argv)
    if a.nvidia:
        nvidia(a.nvidia)
    if a.cve5:
        cve5(a.cve5)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
