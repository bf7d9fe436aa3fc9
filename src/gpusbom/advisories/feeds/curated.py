"""The ``curated`` feed: the project's curated bundle (the format of
``gpusbom/data/advisories.json``) with its ``.sha256`` beside it. Without a URL, the curated
records shipped with this gpusbom; ``curated=off`` on the command line: none at all."""

from __future__ import annotations

import hashlib
from typing import Any

from ..db import AdvisoryDB, AdvisoryError, load_bundle_text, load_bundled
from ..fetch import UpdateError, short, verified
from . import Feed, Output, Run, register


@register
class Curated(Feed):
    name = "curated"
    order = 0
    progress = "curated records"
    setting = "curated_url"
    runs_without_url = True

    def fetch(self, run: Run, url: str | None) -> bytes | None:
        # "": explicitly off; None: the shipped records (nothing to download)
        return verified(run.fetch, url) if url else None

    def parse(self, run: Run, url: str | None, fetched: bytes | None
              ) -> tuple[AdvisoryDB, str | None] | None:
        """The bundle, and the SHA-256 of what was downloaded (None: the shipped one)."""
        if url == "":
            return None
        if fetched is None:
            return load_bundled(), None
        try:
            db = load_bundle_text(fetched.decode("utf-8"), source=str(url))
        except (AdvisoryError, UnicodeDecodeError) as exc:
            raise UpdateError(f"{url}: invalid data: {short(exc)}") from None
        return db, hashlib.sha256(fetched).hexdigest()

    def records(self, run: Run, url: str | None,
                parsed: tuple[AdvisoryDB, str | None] | None) -> Output:
        if parsed is None:
            return Output({"name": "curated", "url": None, "records": 0})
        db, sha256 = parsed
        recs = [a.raw for a in db]
        info: dict[str, Any] = {"name": "curated", "url": url or "bundled", "built": db.built,
                                "records": len(recs)}
        if sha256 is not None:
            info["sha256"] = sha256
        # a curated record that cites why (``override``) beats fresh vendor data; the rest
        # of the curated copy comes last: fresh vendor data supersedes it
        return Output(info, first=[r for r in recs if r.get("override")],
                      last=[r for r in recs if not r.get("override")])
