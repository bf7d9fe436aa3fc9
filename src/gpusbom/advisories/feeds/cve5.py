"""The ``cve5`` feed: per-CVE descriptions of Intel's and AMD's records, from their CVE JSON 5
records (CVEProject/cvelistV5's layout: ``<base>/<year>/<N>xxx/CVE-<year>-<number>.json``).

The shipped snapshot holds no vendor prose; the facts of the INTEL-SA / AMD-SB records
(products, ranges, scores, CWE) come from the same CVE records at build time
(``scripts/build_advisory_bundle.py --cve5 PATH ...``: :meth:`Cve5.from_local`, with the
Intel and AMD sections of the coverage report). This feed runs after the others' records are
merged (``after_merge``) and fetches, for every CVE of an Intel or AMD record in the new
database that has no description yet, the CNA's English description into the user cache,
beside the NVIDIA CSAF notes and OSV details. CVEProject publishes no checksums: a record
is kept only when it is JSON whose ``cveMetadata.cveId`` is the CVE asked for. A record the
server does not have (404), or one that is not such a record, is skipped alone and named in
the summary; a connection failure, an HTTP error other than 404 or a short body fails the
update (the old database stays), as for every other feed.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..enrich import cve5_description
from ..fetch import UpdateError, parse_json
from . import Feed, LocalImport, Output, Run, register

__all__ = ["DEFAULT_CVE5_URL", "Cve5", "cve5_path", "import_intel_amd"]

DEFAULT_CVE5_URL = "https://raw.githubusercontent.com/CVEProject/cvelistV5/main/cves"
_CVE = re.compile(r"^CVE-(\d{4})-(\d{4,})$")
_VENDORS = ("Intel", "AMD")


def cve5_path(cve: str) -> str | None:
    """``CVE-2025-20079`` -> ``2025/20xxx/CVE-2025-20079.json`` (cvelistV5's layout)."""
    m = _CVE.match(cve)
    if not m:
        return None
    return f"{m.group(1)}/{int(m.group(2)) // 1000}xxx/{cve}.json"


@register
class Cve5(Feed):
    name = "cve5"
    order = 40
    progress = "Intel and AMD CVE records (descriptions)"
    default_url = DEFAULT_CVE5_URL
    setting = "cve5_url"
    after_merge = True

    def fetch(self, run: Run, url: str | None) -> tuple[int, list[tuple[str, str, bytes]]]:
        """How many CVEs were asked for, and each record the server has (a 404 is named in
        ``run.skipped``)."""
        cves = sorted({v["id"] for r in run.records if r.get("vendor") in _VENDORS
                       for v in r.get("vulnerabilities", [])
                       if cve5_path(str(v.get("id", ""))) and v["id"] not in run.descriptions})

        def one(cve: str) -> tuple[str, str, bytes | None]:
            rec_url = f"{url}/{cve5_path(cve)}"
            data = run.fetch.get(rec_url, missing_ok=True)  # a transport failure: whole feed
            if data is None:
                run.skipped.append(f"{rec_url}: not published (HTTP 404); description skipped")
            return cve, rec_url, data

        with ThreadPoolExecutor(max_workers=max(1, run.workers)) as pool:
            got = list(pool.map(one, cves))
        return len(cves), [(c, u, d) for c, u, d in got if d is not None]

    def parse(self, run: Run, url: str | None, fetched: tuple[int, list[tuple[str, str, bytes]]]
              ) -> tuple[int, list[tuple[str, dict[str, Any]]]]:
        """The records that are the CVE JSON 5 record of the CVE asked for."""
        asked, got = fetched
        docs = []
        for cve, rec_url, data in got:
            try:
                doc = parse_json(data, rec_url)
            except UpdateError as exc:
                run.skipped.append(f"{rec_url}: {exc.args[0].split(': ', 1)[-1]}")
                continue
            meta = doc.get("cveMetadata") if isinstance(doc, dict) else None
            cve_id = meta.get("cveId") if isinstance(meta, dict) else None
            if cve_id != cve:
                run.skipped.append(f"{rec_url}: invalid data: not the CVE JSON 5 record of "
                                   f"{cve} (cveMetadata.cveId {str(cve_id)[:40]!r})")
                continue
            docs.append((cve, doc))
        return asked, docs

    def records(self, run: Run, url: str | None,
                parsed: tuple[int, list[tuple[str, dict[str, Any]]]]) -> Output:
        """No records: the descriptions of the CVEs, kept in ``run.descriptions``."""
        asked, docs = parsed
        kept = 0
        for cve, doc in docs:
            text = cve5_description(doc)
            if text:
                run.descriptions[cve] = text
                kept += 1
        return Output({"name": "cve5", "url": url, "records": kept, "asked": asked,
                       "checked": "each record's cveMetadata.cveId is the CVE asked for "
                                  "(CVEProject publishes no checksums)"})

    # -- the shipped snapshot, from local copies (scripts/build_advisory_bundle.py) --

    local_option = "--cve5"
    report_heads = ("Intel (INTEL-SA", "AMD (AMD-SB")

    def local_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(self.local_option, nargs="+", metavar="PATH",
                            help="directories / git directories of Intel and AMD CVE JSON 5 "
                                 "records")
        parser.add_argument("--intel-index", metavar="GITDIR",
                            help="git directory of github.com/intel/security-center (Intel's "
                                 "CSAF advisories): lists the INTEL-SA whose CVE records no "
                                 "copy held")

    def from_local(self, opts: argparse.Namespace, since: str) -> LocalImport:
        """The INTEL-SA / AMD-SB advisories the copies hold; a curated file of one of them
        is replaced (unless an override), the others stay."""
        records, lines = import_intel_amd(opts.cve5, since, opts.intel_index)
        fresh = {r["id"] for r in records}
        return LocalImport(records, lines, replaces=lambda f: f.stem in fresh)

    def wrote(self, path: Path, record: dict[str, Any]) -> bool:
        return "--cve5" in record.get("verification", {}).get("notes", "")


def _cve5_items(paths: list[str]) -> tuple[list[tuple[str, dict[str, Any]]], list[str]]:
    """(where, record) of every Intel/AMD CVE JSON 5 record under the paths; one per CVE,
    the copy with the latest ``dateUpdated`` winning. Also the copies read, for the report."""
    from ..localcopy import GitCopy, is_git_dir, origin

    copies: list[str] = []
    best: dict[str, tuple[str, str, dict[str, Any]]] = {}
    for p in paths:
        newest = ""
        if is_git_dir(p):
            git = GitCopy(p)
            when = git.date()
            copies.append(f"{origin(p)} at {git.commit[:12]} (data date {when})")
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
            copies.append(f"{Path(p).name}/ ({len(files)} records read one by one from "
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
    return [(w, d) for w, _u, d in sorted(best.values(), key=lambda x: x[0])], copies


# titles of Intel advisories that name the GPU/AI stack (for the known-missing list)
_GPU_AI_TITLE = re.compile(r"graphics|\bGPU|\bArc\b|oneAPI|\bVPL\b|\bmedia\b|OpenVINO|Neural "
                           r"Compressor|PyTorch|Level Zero|compute runtime|VTune|\bAdvisor\b|"
                           r"MPI Library|Trace Analyzer|Math Kernel|\bIPP\b|Distribution for "
                           r"Python|ITT API|DPC\+\+|Kubernetes", re.IGNORECASE)


def intel_index(gitdir: str, since: str, read: set[str]) -> list[str]:
    """The known-missing part of the Intel section, from Intel's own advisory index
    (github.com/intel/security-center: one CSAF file per INTEL-SA with its CVE ids): every
    advisory first released on or after ``since`` whose CVE records no copy held."""
    from ..importers.cve5 import vendor_product
    from ..localcopy import GitCopy

    git = GitCopy(gitdir)
    when = git.date()
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
    """The INTEL-SA / AMD-SB records of the CVE JSON 5 copies ``paths`` (records published
    on or after ``since``), and the Intel and AMD sections of the coverage report
    (``index``: a git copy of intel/security-center, for the known-missing list)."""
    from ... import catalog
    from ..db import AdvisoryError, validate_record
    from ..importers.cve5 import (
        advisory_id,
        by_advisory,
        import_cve5,
        phrase_class,
        version_understood,
    )

    items, copies = _cve5_items(paths)
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
            f"  copies read: {'; '.join(copies)}",
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
