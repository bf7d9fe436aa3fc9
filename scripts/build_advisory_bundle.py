#!/usr/bin/env python3
"""Build the advisory snapshot gpusbom ships, and its coverage report.

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
its reason, plus the importer's phrase counts. A run with only one of ``--nvidia`` /
``--cve5`` keeps the other vendor's section of the report as it was. PyTorch records, and
Intel/AMD advisories no given copy holds, are the curated ``advisories/*.json``.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "advisories"
OUT = ROOT / "src" / "gpusbom" / "data" / "advisories.json"
REPORT = ROOT / "src" / "gpusbom" / "data" / "advisories-coverage.txt"
NVIDIA_BLOB = "https://github.com/NVIDIA/product-security/blob/main/{path}"


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


class _Git:
    """Blobs of one commit of a git directory, read through one ``git cat-file --batch``."""

    def __init__(self, repo: str) -> None:
        self.repo = repo
        self.commit = subprocess.run(["git", "-C", repo, "rev-parse", "HEAD"], check=True,
                                     capture_output=True, text=True).stdout.strip()
        self.files = subprocess.run(["git", "-C", repo, "ls-tree", "-r", "--name-only", "HEAD"],
                                    check=True, capture_output=True, text=True).stdout.split("\n")
        self._p = subprocess.Popen(["git", "-C", repo, "cat-file", "--batch"],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def read(self, path: str) -> bytes | None:
        assert self._p.stdin is not None and self._p.stdout is not None
        self._p.stdin.write(f"{self.commit}:{path}\n".encode())
        self._p.stdin.flush()
        header = self._p.stdout.readline().split()
        if len(header) < 3 or header[1] != b"blob":
            return None
        data = self._p.stdout.read(int(header[2]))
        self._p.stdout.read(1)
        return data


def checksum_state(data: bytes, published: bytes | None) -> str:
    """``ok``, ``crlf`` (only the CRLF form of the file matches the published hash),
    ``missing`` or ``mismatch``."""
    if published is None:
        return "missing"
    want = published.decode("ascii", "replace").split()[:1]
    if not want:
        return "mismatch"
    if hashlib.sha256(data).hexdigest() == want[0].lower():
        return "ok"
    crlf = data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
    return "crlf" if hashlib.sha256(crlf).hexdigest() == want[0].lower() else "mismatch"


def import_nvidia(repo: str, since: str) -> tuple[list[dict[str, Any]], list[str]]:
    from gpusbom import catalog
    from gpusbom.advisories.db import AdvisoryError, validate_record
    from gpusbom.advisories.importers.csaf import gpu_record, import_csaf, phrase_class

    git = _Git(repo)
    docs = sorted(f for f in git.files if f.endswith(".json") and f.count("/") == 2
                  and f.rsplit("/", 1)[1].split(".")[0].isdigit())
    records: list[dict[str, Any]] = []
    # product -> bulletin -> (status, reason)
    per_product: dict[str, dict[str, tuple[str, str]]] = collections.defaultdict(dict)
    unmapped: dict[str, str] = {}  # bulletin -> reason
    counts = collections.Counter()
    classes: collections.Counter[str] = collections.Counter()
    sums = collections.Counter()
    crlf: list[str] = []
    for path in docs:
        data = git.read(path) or b""
        counts["documents"] += 1
        try:
            doc = json.loads(data)
        except ValueError as exc:
            unmapped[path] = f"not JSON: {exc}"
            continue
        tracking = (doc.get("document") or {}).get("tracking") or {}
        tid = str(tracking.get("id", ""))
        if str(tracking.get("initial_release_date", ""))[:10] < since:
            counts["before"] += 1
            continue
        counts["since"] += 1
        url = NVIDIA_BLOB.format(path=path)
        imp = import_csaf(doc, source_url=url)
        counts["phrases"] += imp.phrases
        counts["parsed"] += imp.parsed
        for _pid, text in imp.unparsed:
            classes[phrase_class(text)] += 1
        touched = sorted({t for v in imp.record["vulnerabilities"] for t in
                          (a["target"] for a in v["affected"])})
        state = checksum_state(data, git.read(path + ".sha256"))
        sums[state] += 1
        if state == "crlf":
            crlf.append(tid)
        bid = f"NVIDIA-{tid}"
        if not touched:
            unmapped[bid] = "no GPU-stack product in the catalog: " + ", ".join(
                sorted(set(imp.unmapped))[:5])
            continue
        if state in ("missing", "mismatch"):
            for t in touched:
                per_product[t][bid] = ("excluded", f"published .sha256 {state}")
            continue
        rec, why = gpu_record(imp)
        if rec is not None:
            rec["sources"].insert(0, f"https://nvidia.custhelp.com/app/answers/detail/a_id/{tid}")
            try:
                validate_record(rec)
            except AdvisoryError as exc:
                rec, why = None, f"invalid after import: {exc}"
        kept = {a["target"] for v in (rec or {}).get("vulnerabilities", []) for a in v["affected"]
                if a.get("platform") in (None, "linux")}
        for t in touched:
            row = catalog.get(t)
            if t in kept:
                per_product[t][bid] = ("imported", "")
            elif not (row.names or row.collector):
                per_product[t][bid] = ("excluded", "no scan can identify this product: "
                                       + str(row.extra.get("not_identifiable", "no names")))
            else:
                per_product[t][bid] = ("excluded", why or "no Linux entry for this product")
        if rec is not None:
            records.append(rec)
    from gpusbom.advisories.db import merge_records

    records, merged = merge_records([records])  # re-listed CVEs: once, in the newest bulletin
    lines = _report(per_product, unmapped, counts, classes, sums, crlf, git.commit, since)
    lines.insert(4, f"  re-listed CVEs merged into the newest bulletin: {len(merged)}")
    return records, lines


def _report(per_product: dict[str, dict[str, tuple[str, str]]], unmapped: dict[str, str],
            counts: collections.Counter[str], classes: collections.Counter[str],
            sums: collections.Counter[str], crlf: list[str], commit: str, since: str) -> list[str]:
    from gpusbom import catalog

    out = [(f"NVIDIA (github.com/NVIDIA/product-security at {commit[:12]}; bulletins first "
            f"released on or after {since})")]
    bulletins: dict[str, str] = {}
    for t, bs in per_product.items():
        row = catalog.get(t)
        for b, (st, _) in bs.items():
            if row.names or row.collector:
                bulletins[b] = "imported" if st == "imported" or bulletins.get(b) == "imported" else st
    inscope = len(bulletins)
    imported = sum(1 for s in bulletins.values() if s == "imported")
    out.append(f"  CSAF documents: {counts['documents']} ({counts['since']} since {since}); "
               f"checksums: {dict(sorted(sums.items()))}; CRLF-form hashes: "
               f"{', '.join(sorted(crlf)) or 'none'}")
    out.append(f"  version phrases: {counts['phrases']}, parsed {counts['parsed']}; phrase "
               f"classes not parsed: {len(classes)}")
    out.append(f"  in-scope bulletins (a product in the catalog that a scan can identify): "
               f"{inscope}; imported {imported} ({100 * imported / max(inscope, 1):.1f}%)")
    out.append(f"  out of scope (no GPU-stack product in the catalog): {len(unmapped)}")
    out.append("")
    out.append(f"  {'product':32} {'seen':>5} {'imported':>9} {'excluded':>9}")
    for t in sorted(per_product, key=lambda t: (-len(per_product[t]), t)):
        bs = per_product[t]
        imp = sum(1 for s, _ in bs.values() if s == "imported")
        out.append(f"  {t:32} {len(bs):5d} {imp:9d} {len(bs) - imp:9d}")
    out.append("")
    out.append("  exclusions:")
    for t in sorted(per_product):
        for b, (st, why) in sorted(per_product[t].items()):
            if st != "imported":
                out.append(f"    {t}: {b}: {why}")
    out.append("  out of scope:")
    for b, why in sorted(unmapped.items()):
        out.append(f"    {b}: {why}")
    if classes:
        out.append("  phrase classes not parsed (count, class):")
        for c, n in classes.most_common():
            out.append(f"    {n:3d}  {c}")
    return out


COPIES: list[str] = []  # the CVE JSON 5 copies read, for the report


def _origin(gitdir: str) -> str:
    """``owner/name`` of a ``fetch`` mirror (``.../owner+name/repo``), else the path."""
    parts = Path(gitdir).resolve().parts
    return parts[-2].replace("+", "/", 1) if len(parts) > 1 and parts[-1] == "repo" else gitdir


def _cve5_items(paths: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """(where, record) of every Intel/AMD CVE JSON 5 record under the paths; one per CVE,
    the copy with the latest ``dateUpdated`` winning."""
    best: dict[str, tuple[str, str, dict[str, Any]]] = {}
    for p in paths:
        newest = ""
        if Path(p, "HEAD").exists() or (Path(p) / ".git").exists():
            git = _Git(p)
            when = subprocess.run(["git", "-C", p, "log", "-1", "--format=%cI"], check=True,
                                  capture_output=True, text=True).stdout.strip()[:10]
            COPIES.append(f"{_origin(p)} at {git.commit[:12]} (data date {when})")
            names = [f for f in git.files if f.rsplit("/", 1)[-1].startswith("CVE-")
                     and f.endswith(".json")]
            blobs = ((f"{p}@{git.commit[:12]}:{f}", git.read(f) or b"") for f in names)
        else:
            files = sorted(Path(p).rglob("CVE-*.json"))
            for f in files:  # the newest record decides the data date of a directory
                try:
                    upd = str(json.loads(f.read_bytes())["cveMetadata"].get("dateUpdated"))
                except (ValueError, KeyError, TypeError):
                    continue
                newest = max(newest, upd[:10])
            COPIES.append(f"{Path(p).name}/ ({len(files)} records read one by one from "
                          f"CVEProject/cvelistV5; newest dateUpdated {newest or 'unknown'})")
            blobs = ((str(f), f.read_bytes()) for f in files)
        for where, raw in blobs:
            try:
                doc = json.loads(raw)
            except ValueError:
                continue
            meta = doc.get("cveMetadata") or {} if isinstance(doc, dict) else {}
            if str(meta.get("assignerShortName", "")).lower() not in ("intel", "amd"):
                continue
            cve, upd = str(meta.get("cveId", "")), str(meta.get("dateUpdated") or "")
            if cve and (cve not in best or upd > best[cve][1]):
                best[cve] = (where, upd, doc)
    return [(w, d) for w, _u, d in sorted(best.values(), key=lambda x: x[0])]


# titles of Intel advisories that name the GPU/AI stack (for the known-missing list)
_GPU_AI_TITLE = re.compile(r"graphics|\bGPU|\bArc\b|oneAPI|\bVPL\b|\bmedia\b|OpenVINO|Neural "
                           r"Compressor|PyTorch|Level Zero|compute runtime|VTune|\bAdvisor\b|"
                           r"MPI Library|Trace Analyzer|Math Kernel|\bIPP\b|Distribution for "
                           r"Python|ITT API|DPC\+\+|Kubernetes", re.IGNORECASE)


def intel_index(gitdir: str, since: str, read: set[str]) -> list[str]:
    """The known-missing part of the Intel section, from Intel's own advisory index
    (github.com/intel/security-center: one CSAF file per INTEL-SA with its CVE ids): every
    advisory first released on or after ``since`` whose CVE records no copy held."""
    from gpusbom.advisories.importers.cve5 import vendor_product

    git = _Git(gitdir)
    when = subprocess.run(["git", "-C", gitdir, "log", "-1", "--format=%cI"], check=True,
                          capture_output=True, text=True).stdout.strip()[:10]
    rows: list[tuple[str, str, str, list[str]]] = []
    for f in git.files:
        if not (f.startswith("advisories/") and f.endswith(".JSON")):
            continue
        try:
            doc = json.loads((git.read(f) or b"").decode("utf-8-sig"))
            track = doc["document"]["tracking"]
            rows.append((str(track["initial_release_date"])[:10], str(track["id"]),
                         " ".join(vendor_product(str(doc["document"]["title"])).split()),
                         [str(v.get("cve")) for v in doc.get("vulnerabilities") or []
                          if isinstance(v, dict) and v.get("cve")]))
        except (ValueError, KeyError, TypeError):
            continue
    rows = sorted(r for r in rows if r[0] >= since)
    first = rows[0][0] if rows else "-"
    covered = [r for r in rows if set(r[3]) & read]
    partial = [(r, sorted(set(r[3]) - read)) for r in covered if set(r[3]) - read]
    partial.sort(key=lambda x: not _GPU_AI_TITLE.search(x[0][2]))
    stack = [r for r in rows if r not in covered and _GPU_AI_TITLE.search(r[2])]
    other = [r for r in rows if r not in covered and r not in stack]
    out = [f"  Intel's advisory index (github.com/intel/security-center at {git.commit[:12]}, "
           f"data date {when}; CSAF files from {first}): {len(rows)} advisories; CVE records "
           f"read for {len(covered)}",
           f"  known missing: GPU/AI-stack titles with no CVE record read: {len(stack)}; "
           f"advisories read in part: {len(partial)}; advisories after {when} are not in the "
           "index (their records were looked up one by one); advisories before "
           f"{first} are known only through the copies (vulnrichment holds the records CISA "
           "enriched)"]
    out += [f"    {r[1]} ({r[0]}): {r[2][:70]}: CVE records not read ({', '.join(r[3])})"
            for r in stack]
    out += [f"    {r[1]} ({r[2][:50]}): CVE records not read: {', '.join(m)}"
            for r, m in partial]
    out.append(f"  not read, title names no GPU/AI-stack product: {len(other)} (CPU, "
               "firmware, network, storage, wireless, NPU, Gaudi, QAT ...): "
               + ", ".join(r[1] for r in other))
    return out


def import_intel_amd(paths: list[str], since: str, index: str | None = None,
                     ) -> tuple[list[dict[str, Any]], list[str]]:
    from gpusbom import catalog
    from gpusbom.advisories.db import AdvisoryError, validate_record
    from gpusbom.advisories.importers.cve5 import advisory_id, by_advisory, import_cve5
    from gpusbom.advisories.importers.cve5 import phrase_class, version_understood

    items = _cve5_items(paths)
    counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    classes: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    all_classes: dict[str, collections.Counter[str]] = collections.defaultdict(
        collections.Counter)
    per_adv: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    out_of_scope: dict[str, dict[str, set[str]]] = collections.defaultdict(
        lambda: collections.defaultdict(set))
    for _where, doc in items:
        meta = doc["cveMetadata"]
        vendor = "Intel" if str(meta["assignerShortName"]).lower() == "intel" else "AMD"
        c = counts[vendor]
        c["records"] += 1
        if meta.get("state") == "REJECTED":
            c["rejected"] += 1
            continue
        if str(meta.get("datePublished") or "")[:10] < since:
            c["before"] += 1
            continue
        c["since"] += 1
        for a in (doc.get("containers") or {}).get("cna", {}).get("affected") or []:
            for v in a.get("versions") or [] if isinstance(a, dict) else []:
                if isinstance(v, dict) and v.get("status") in ("affected", "unaffected"):
                    good, text = version_understood(v, named=vendor == "AMD")
                    c["all_phrases"] += 1
                    c["all_parsed"] += good
                    if not good:
                        all_classes[vendor][phrase_class(text)] += 1
        imp = import_cve5(doc)
        c["phrases"] += imp.phrases
        c["parsed"] += imp.parsed
        for text in imp.unparsed_phrases:
            classes[vendor][phrase_class(text)] += 1
        refs = [str(r.get("url", "")) for r in (doc.get("containers") or {}).get("cna", {})
                .get("references") or [] if isinstance(r, dict)]
        adv = advisory_id(refs) or str(meta.get("cveId"))
        if imp.record is None:
            out_of_scope[vendor][adv].update(imp.unmapped[:3])
            continue
        per_adv[imp.record["id"]].append(imp.record)
    records: list[dict[str, Any]] = []
    per_product: dict[str, dict[str, dict[str, tuple[str, str]]]] = collections.defaultdict(
        lambda: collections.defaultdict(dict))
    for adv, recs in sorted(per_adv.items()):
        rec = by_advisory(recs)[0]
        vendor = rec["vendor"]
        targets = sorted({a["target"] for v in rec["vulnerabilities"] for a in v["affected"]})
        for t in targets:
            row = catalog.get(t)
            plats = {a.get("platform") for v in rec["vulnerabilities"] for a in v["affected"]
                     if a["target"] == t}
            if not (row.names or row.collector):
                why = (str(row.extra.get("not_identifiable")) if row.extra.get("not_identifiable")
                       else f"{', '.join(row.platforms)}-only product: no Linux target holds it"
                       if row.platforms else "no package name a scan reads")
                per_product[vendor][t][adv] = ("unmatched", "no scan can identify this product: "
                                               + why)
            elif None not in plats and "linux" not in plats:
                per_product[vendor][t][adv] = (
                    "imported", f"{'/'.join(sorted(map(str, plats)))} only: a Linux component "
                    "of this product is shown not-affected (auto-VEX)")
            else:
                per_product[vendor][t][adv] = ("imported", "")
        products = sorted({a["vendor_product"] for v in rec["vulnerabilities"]
                           for a in v["affected"]})
        rec["title"] = f"{adv}: " + "; ".join(products)
        page = (f"https://www.intel.com/content/www/us/en/security-center/advisory/"
                f"{adv.lower()}.html" if adv.startswith("INTEL-SA-") else
                f"https://www.amd.com/en/resources/product-security/bulletin/{adv.lower()}.html"
                if adv.startswith("AMD-SB-") else None)
        if page:
            rec["sources"] = [page, *[u for u in rec["sources"] if u.lower() != page.lower()]]
        rec["verification"] = {"status": rec["verification"]["status"],
                               "notes": "imported from the vendor's CVE JSON 5 records by "
                                        "scripts/build_advisory_bundle.py --cve5"}
        try:
            validate_record(rec)
        except AdvisoryError as exc:
            for t in targets:
                per_product[vendor][t][adv] = ("excluded", f"invalid after import: {exc}")
            continue
        records.append(rec)
    read = {str(d["cveMetadata"].get("cveId")) for _w, d in items}
    amd = [d for _w, d in items if str(d["cveMetadata"]["assignerShortName"]).lower() == "amd"]
    rocm_product = sorted({str(d["cveMetadata"]["cveId"]) for d in amd for a in
                           d["containers"]["cna"].get("affected") or []
                           if "rocm" in str(a.get("product", "")).lower()})
    rocm_fix = sorted({str(d["cveMetadata"]["cveId"]) for d in amd for a in
                       d["containers"]["cna"].get("affected") or [] for v in
                       a.get("versions") or [] if "rocm" in str(v.get("version", "")).lower()})
    known_missing = {
        "Intel": intel_index(index, since, read) if index else [
            "  known missing: no advisory index given (--intel-index): records published "
            "after the copies' data dates may be missing"],
        "AMD": [
            "  known missing: AMD publishes no machine-readable bulletin index that could be "
            "read here; AMD records newer than the vulnrichment copy were found by searching "
            "stored cvelistV5 records and read one by one, so an AMD-SB published after that "
            "copy's data date that the search did not surface is missing",
            f"  ROCm: records naming a ROCm component as the affected product: "
            f"{len(rocm_product)}{' (' + ', '.join(rocm_product) + ')' if rocm_product else ''};"
            f" records whose fix for Instinct GPUs is a ROCm release: {len(rocm_fix)} "
            f"({', '.join(rocm_fix) or 'none'})"],
    }
    lines: list[str] = []
    for vendor in ("Intel", "AMD"):
        c, cl = counts[vendor], classes[vendor]
        bulletins: dict[str, str] = {}
        for bs in per_product[vendor].values():
            for b, (st, _) in bs.items():
                if st == "imported" or bulletins.get(b) != "imported":
                    bulletins[b] = st
        imported = sum(1 for x in bulletins.values() if x == "imported")
        unmatched = sum(1 for x in bulletins.values() if x == "unmatched")
        lines += [
            f"{vendor} ({'INTEL-SA' if vendor == 'Intel' else 'AMD-SB'}; CVE JSON 5 records of "
            f"the {vendor.lower() if vendor == 'Intel' else vendor} assigner published on or "
            f"after {since})",
            f"  copies read: {'; '.join(COPIES)}",
            f"  CVE records: {c['records']} ({c['since']} since {since}, {c['rejected']} "
            f"rejected)",
            f"  version phrases (of products in the catalog): {c['phrases']}, parsed "
            f"{c['parsed']}; phrase classes not parsed: {len(cl)}",
            f"  version phrases (of every product in the records): {c['all_phrases']}, parsed "
            f"{c['all_parsed']}; phrase classes not parsed: {len(all_classes[vendor])} (most "
            f"common: " + "; ".join(f"{k!r} {n}" for k, n in all_classes[vendor].most_common(4))
            + ")",
            f"  advisories naming a GPU/AI-stack product in the catalog: {len(bulletins)}; all "
            f"in the bundle; {imported} name a product a Linux scan identifies, {unmatched} "
            f"only products no scan identifies (kept, never matched; reason below)",
            f"  excluded: {len(bulletins) - imported - unmatched}",
            f"  out of scope (no GPU/AI-stack product in the catalog): "
            f"{len(out_of_scope[vendor])} advisories",
            *(known_missing[vendor]),
            "",
            f"  {'product':36} {'seen':>5} {'matchable':>9} {'unmatched':>9}",
        ]
        pp = per_product[vendor]
        for t in sorted(pp, key=lambda t: (-len(pp[t]), t)):
            n_imp = sum(1 for st, _ in pp[t].values() if st == "imported")
            lines.append(f"  {t:36} {len(pp[t]):5d} {n_imp:9d} {len(pp[t]) - n_imp:9d}")
        lines.append("")
        lines.append("  advisories (imported: a scan can match it; unmatched: kept, with the reason "
                     "no scan identifies the product):")
        for t in sorted(pp):
            for b, (st, why) in sorted(pp[t].items()):
                lines.append(f"    {t}: {b}: {st}" + (f" ({why})" if why else ""))
        if cl:
            lines.append("  phrase classes not parsed (count, class):")
            lines += [f"    {n:3d}  {k}" for k, n in cl.most_common()]
        lines.append("  out of scope:")
        for b, prods in sorted(out_of_scope[vendor].items()):
            lines.append(f"    {b}: " + ", ".join(sorted(prods))[:150])
        lines.append("")
    return records, lines


def _curated_report(fresh: set[str] | None = None) -> list[str]:
    out = []
    by_vendor: dict[str, list[str]] = collections.defaultdict(list)
    for f in sorted(SRC.glob("*.json")):
        if f.name == "schema.json" or f.name.startswith("NVIDIA-"):
            continue
        rec = json.loads(f.read_text(encoding="utf-8"))
        if fresh is not None and rec["id"] in fresh:
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


_INTEL_AMD_HEAD = ("Intel (INTEL-SA", "AMD (AMD-SB")


def _sections() -> dict[str, list[str]]:
    """The report's NVIDIA and Intel/AMD sections as they are (kept for a partial run)."""
    lines = REPORT.read_text(encoding="utf-8").split("\n") if REPORT.exists() else []
    out: dict[str, list[str]] = {"nvidia": [], "intel-amd": []}
    part = "nvidia"
    for line in lines:
        if line.startswith(_INTEL_AMD_HEAD):
            part = "intel-amd"
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
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nvidia", help="git directory of NVIDIA/product-security")
    ap.add_argument("--cve5", nargs="+", metavar="PATH",
                    help="directories / git directories of Intel and AMD CVE JSON 5 records")
    ap.add_argument("--intel-index", metavar="GITDIR",
                    help="git directory of github.com/intel/security-center (Intel's CSAF "
                         "advisories): lists the INTEL-SA whose CVE records no copy held")
    ap.add_argument("--since", default="2022-01-01")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args(argv)
    sections = _sections()
    if a.nvidia:
        records, lines = import_nvidia(a.nvidia, a.since)
        _write(records, "NVIDIA-*.json", lambda f: True)
        sections["nvidia"] = lines
    if a.cve5:
        records, lines = import_intel_amd(a.cve5, a.since, a.intel_index)
        fresh = {r["id"] for r in records}
        # a curated file of an advisory the copies hold is replaced; others stay
        _write(records, "*.json", lambda f: f.stem in fresh)
        sections["intel-amd"] = lines
    if a.nvidia or a.cve5:
        fresh = set()
        for f in SRC.glob("*.json"):
            if f.name != "schema.json" and not f.name.startswith("NVIDIA-"):
                rec = json.loads(f.read_text(encoding="utf-8"))
                if "--cve5" in rec.get("verification", {}).get("notes", ""):
                    fresh.add(rec["id"])
        text = ("\n".join(sections["nvidia"]).rstrip("\n") + "\n\n"
                + "\n".join(sections["intel-amd"]).rstrip("\n") + "\n\n"
                + "\n".join(_curated_report(fresh)) + "\n")
        REPORT.write_text(text, encoding="utf-8")
        print("\n".join(line for line in text.split("\n") if line and not line.startswith(" ")
                        or line.startswith("  ") and ":" in line and not line.startswith("    ")))
        print(f"{REPORT}: written")
    text = build()
    if a.check:
        return 0 if OUT.exists() and OUT.read_text(encoding="utf-8") == text else 1
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text, encoding="utf-8")
    print(f"{OUT}: {len(json.loads(text)['advisories'])} advisories, {len(text) >> 10} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
