"""The ``cve5`` feed of ``advisories update``: per-CVE descriptions of Intel's and AMD's
records, from their CVE JSON 5 records (CVEProject/cvelistV5's layout:
``<base>/<year>/<N>xxx/CVE-<year>-<number>.json``).

The shipped snapshot holds no vendor prose; the facts of the INTEL-SA / AMD-SB records
(products, ranges, scores, CWE) come from the same CVE records at build time
(``scripts/build_advisory_bundle.py --cve5``). This feed fetches, for every CVE of an Intel
or AMD record in the new database, the CNA's English description into the user cache,
beside the NVIDIA CSAF notes and OSV details. CVEProject publishes no checksums: a record
is kept only when it is JSON whose ``cveMetadata.cveId`` is the CVE asked for. A record the
server does not have (404), or one that is not such a record, is skipped alone and named in
the summary; a connection failure, an HTTP error other than 404 or a short body fails the
update (the old database stays), as for every other feed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .enrich import cve5_description
from .fetch import UpdateError, _Fetcher, _json

__all__ = ["DEFAULT_CVE5_URL", "cve5_feed", "cve5_path"]

DEFAULT_CVE5_URL = "https://raw.githubusercontent.com/CVEProject/cvelistV5/main/cves"
_CVE = re.compile(r"^CVE-(\d{4})-(\d{4,})$")
_VENDORS = ("Intel", "AMD")


def cve5_path(cve: str) -> str | None:
    """``CVE-2025-20079`` -> ``2025/20xxx/CVE-2025-20079.json`` (cvelistV5's layout)."""
    m = _CVE.match(cve)
    if not m:
        return None
    return f"{m.group(1)}/{int(m.group(2)) // 1000}xxx/{cve}.json"


def cve5_feed(fetch: _Fetcher, base: str, records: Iterable[dict[str, Any]],
              skipped: list[str], workers: int, descriptions: dict[str, str],
              ) -> dict[str, Any]:
    """Fill ``descriptions`` for the Intel/AMD CVEs of ``records`` that have none yet;
    returns the feed's summary entry."""
    cves = sorted({v["id"] for r in records if r.get("vendor") in _VENDORS
                   for v in r.get("vulnerabilities", [])
                   if cve5_path(str(v.get("id", ""))) and v["id"] not in descriptions})

    def one(cve: str) -> tuple[str, str | None]:
        url = f"{base}/{cve5_path(cve)}"
        data = fetch.get(url, missing_ok=True)  # a transport failure raises: whole feed
        if data is None:
            skipped.append(f"{url}: not published (HTTP 404); description skipped")
            return cve, None
        try:
            doc = _json(data, url)
        except UpdateError as exc:
            skipped.append(f"{url}: {exc.args[0].split(': ', 1)[-1]}")
            return cve, None
        meta = doc.get("cveMetadata") if isinstance(doc, dict) else None
        got = meta.get("cveId") if isinstance(meta, dict) else None
        if got != cve:
            skipped.append(f"{url}: invalid data: not the CVE JSON 5 record of {cve} "
                           f"(cveMetadata.cveId {str(got)[:40]!r})")
            return cve, None
        return cve, cve5_description(doc)

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        got = list(pool.map(one, cves))
    kept = 0
    for cve, text in got:
        if text:
            descriptions[cve] = text
            kept += 1
    return {"name": "cve5", "url": base, "records": kept, "asked": len(cves),
            "checked": "each record's cveMetadata.cveId is the CVE asked for (CVEProject "
                       "publishes no checksums)"}
