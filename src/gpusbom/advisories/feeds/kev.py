"""The ``kev`` feed: CISA's Known Exploited Vulnerabilities catalog (JSON). CISA publishes no
checksum: the length and the catalog's own ``count`` are checked. Findings of a CVE in it
carry its ``dateAdded``. Whole or not at all: a bad download keeps the old database."""

from __future__ import annotations

import hashlib
from typing import Any

from ..enrich import KEV_URL, KevError, parse_kev
from ..fetch import UpdateError, parse_json
from . import Feed, Output, Run, register

_MAX_KEV = 64 << 20  # CISA's catalog (about 1.5 MB in 2025)


@register
class Kev(Feed):
    name = "kev"
    order = 30
    progress = "CISA KEV catalog"
    default_url = KEV_URL
    setting = "kev_url"

    def fetch(self, run: Run, url: str | None) -> bytes:
        return run.fetch.get(str(url), limit=_MAX_KEV) or b""

    def parse(self, run: Run, url: str | None, fetched: bytes) -> tuple[dict[str, Any], str]:
        try:
            kev = parse_kev(parse_json(fetched, str(url)))
        except KevError as exc:
            raise UpdateError(f"{url}: invalid data: {exc}") from None
        return kev, hashlib.sha256(fetched).hexdigest()

    def records(self, run: Run, url: str | None, parsed: tuple[dict[str, Any], str]) -> Output:
        kev, sha256 = parsed
        return Output({"name": "kev", "url": url, "records": len(kev["entries"]),
                       "catalogVersion": kev["catalogVersion"],
                       "dateReleased": kev["dateReleased"], "sha256": sha256,
                       "checked": "length and the catalog's count (CISA publishes no "
                                  "checksum)"}, kev=kev)
