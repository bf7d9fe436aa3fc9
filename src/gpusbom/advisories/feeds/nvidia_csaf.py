"""The ``nvidia-csaf`` feed: NVIDIA PSIRT's repository (raw files of NVIDIA/product-security).
``<base>/<year>/CVE_index.csv`` lists each year's bulletins (a missing year is skipped);
each bulletin's ``<base>/<year>/<id>/<id>.json`` is checked against the ``<id>.json.sha256``
NVIDIA publishes beside it, then imported with the CSAF importer. A bulletin that fails its
checksum or does not parse is skipped alone; the CSAF notes become the CVEs' descriptions.

The shipped snapshot's ``NVIDIA-*.json`` come from a local git copy of the same repository
(``scripts/build_advisory_bundle.py --nvidia GITDIR``: :meth:`NvidiaCsaf.from_local`), with
the NVIDIA section of the coverage report."""

from __future__ import annotations

import argparse
import collections
import csv
import hashlib
import io
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..db import AdvisoryError, validate_record
from ..enrich import csaf_descriptions
from ..fetch import TransportError, UpdateError, parse_json, short, verified_bulletin
from . import Feed, LocalImport, Output, Run, register

FIRST_CSAF_YEAR = 2022
NVIDIA_BLOB = "https://github.com/NVIDIA/product-security/blob/main/{path}"


@register
class NvidiaCsaf(Feed):
    name = "nvidia-csaf"
    order = 10
    progress = "NVIDIA CSAF bulletins"
    default_url = "https://raw.githubusercontent.com/NVIDIA/product-security/main"
    setting = "nvidia_csaf_url"

    def fetch(self, run: Run, url: str | None) -> tuple[int, list[tuple[str, bytes | None]]]:
        """The number of bulletins the indexes list, and each one's URL and checked bytes
        (None: skipped, named in ``run.skipped``)."""
        from ...clock import now as _now

        base = str(url)
        year_now = _now().year
        docs: list[tuple[str, str]] = []
        for year in range(FIRST_CSAF_YEAR, year_now + 1):
            index = f"{base}/{year}/CVE_index.csv"
            data = run.fetch.get(index, missing_ok=True)
            if data is None:
                continue
            try:
                rows = list(csv.DictReader(io.StringIO(data.decode("utf-8-sig")),
                                           delimiter=";"))
            except (UnicodeDecodeError, csv.Error) as exc:
                raise UpdateError(f"{index}: invalid data: {short(exc)}") from None
            if rows and "Bulletin" not in rows[0]:
                raise UpdateError(f"{index}: invalid data: no 'Bulletin' column")
            ids = sorted({r["Bulletin"].strip() for r in rows
                          if (r.get("Bulletin") or "").strip()})
            docs.extend((str(year), i) for i in ids if i.isdigit())
        if not docs:
            raise UpdateError(f"{base}: no CSAF index found (CVE_index.csv of "
                              f"{FIRST_CSAF_YEAR}-{year_now})")

        def one(item: tuple[str, str]) -> tuple[str, bytes | None]:
            year, bid = item
            doc_url = f"{base}/{year}/{bid}/{bid}.json"
            try:
                return doc_url, verified_bulletin(run.fetch, doc_url)
            except UpdateError as exc:
                if isinstance(exc, TransportError):
                    raise  # the feed itself failed: keep the old database
                run.skipped.append(f"{doc_url}: {exc.args[0].split(': ', 1)[-1]}")
                return doc_url, None

        with ThreadPoolExecutor(max_workers=max(1, run.workers)) as pool:
            return len(docs), list(pool.map(one, docs))

    def parse(self, run: Run, url: str | None,
              fetched: tuple[int, list[tuple[str, bytes | None]]]
              ) -> tuple[int, Iterator[tuple[str, dict[str, Any]]]]:
        """The CSAF documents, one by one (a skip is named where it happens among the
        importer's own, in bulletin order)."""
        count, got = fetched

        def docs() -> Iterator[tuple[str, dict[str, Any]]]:
            for doc_url, data in got:
                if data is None:
                    continue
                try:
                    doc = parse_json(data, doc_url)
                except UpdateError as exc:
                    run.skipped.append(f"{doc_url}: {exc.args[0].split(': ', 1)[-1]}")
                    continue
                if not isinstance(doc, dict) or "document" not in doc:
                    run.skipped.append(f"{doc_url}: invalid data: not a CSAF document")
                    continue
                yield doc_url, doc

        return count, docs()

    def records(self, run: Run, url: str | None,
                parsed: tuple[int, Iterator[tuple[str, dict[str, Any]]]]) -> Output:
        from ..importers import MalformedDocumentError
        from ..importers.csaf import import_csaf

        count, docs = parsed
        records = []
        phrases = n_parsed = 0
        for doc_url, doc in docs:
            try:
                imp = import_csaf(doc, source_url=doc_url)
            except MalformedDocumentError as exc:
                run.skipped.append(f"{doc_url}: {exc}")
                continue
            phrases += imp.phrases
            n_parsed += imp.parsed
            rec = imp.record
            rec["vulnerabilities"] = [v for v in rec["vulnerabilities"] if v["affected"]]
            if not rec["vulnerabilities"]:
                continue  # no product gpusbom identifies
            rec["aliases"] = sorted({v["id"] for v in rec["vulnerabilities"]} - {rec["id"]})
            try:
                validate_record(rec)
            except AdvisoryError as exc:
                run.skipped.append(f"{doc_url}: {exc}")
                continue
            records.append(rec)
            texts = csaf_descriptions(doc)
            run.descriptions.update((v["id"], texts[v["id"]]) for v in rec["vulnerabilities"]
                                    if v["id"] in texts)
        info = {"name": "nvidia-csaf", "url": url, "documents": count, "phrases": phrases,
                "phrases_parsed": n_parsed,
                "checked": "sha256 files published beside each document",
                "records": len(records)}
        return Output(info, records=records)

    # -- the shipped snapshot, from a local git copy (scripts/build_advisory_bundle.py) --

    local_option = "--nvidia"
    report_heads = ("NVIDIA (",)

    def local_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(self.local_option, help="git directory of NVIDIA/product-security")

    def from_local(self, opts: argparse.Namespace, since: str) -> LocalImport:
        """Every bulletin of the copy first released on or after ``since``; replaces every
        ``NVIDIA-*.json`` but a curated override."""
        records, lines = import_nvidia(opts.nvidia, since)
        return LocalImport(records, lines, pattern="NVIDIA-*.json")

    def wrote(self, path: Path, record: dict[str, Any]) -> bool:
        return path.name.startswith("NVIDIA-")


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
    """The records of the git copy ``repo`` of NVIDIA/product-security (bulletins first
    released on or after ``since``), and the NVIDIA section of the coverage report."""
    from ... import catalog
    from ..db import merge_records
    from ..importers.csaf import gpu_record, import_csaf, phrase_class
    from ..localcopy import GitCopy

    git = GitCopy(repo)
    docs = sorted(f for f in git.files if f.endswith(".json") and f.count("/") == 2
                  and f.rsplit("/", 1)[1].split(".")[0].isdigit())
    records: list[dict[str, Any]] = []
    # product -> bulletin -> (status, reason)
    per_product: dict[str, dict[str, tuple[str, str]]] = collections.defaultdict(dict)
    unmapped: dict[str, str] = {}  # bulletin -> reason
    counts: collections.Counter[str] = collections.Counter()
    classes: collections.Counter[str] = collections.Counter()
    sums: collections.Counter[str] = collections.Counter()
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
    records, merged = merge_records([records])  # re-listed CVEs: once, in the newest bulletin
    lines = _report(per_product, unmapped, counts, classes, sums, crlf, git.commit, since)
    lines.insert(4, f"  re-listed CVEs merged into the newest bulletin: {len(merged)}")
    return records, lines


def _report(per_product: dict[str, dict[str, tuple[str, str]]], unmapped: dict[str, str],
            counts: collections.Counter[str], classes: collections.Counter[str],
            sums: collections.Counter[str], crlf: list[str], commit: str, since: str) -> list[str]:
    """The NVIDIA section of the coverage report."""
    from ... import catalog

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
