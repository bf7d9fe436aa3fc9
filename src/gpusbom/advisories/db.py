"""The advisory database: curated records, one per advisory, validated on load.

A record (JSON; the JSON Schema is ``advisories/schema.json`` in the repository)::

    {"id": "NVIDIA-5582", "vendor": "NVIDIA", "aliases": ["CVE-2024-0132", ...],
     "title": ..., "published": "2024-09-26", "modified": ..., "sources": [URL, ...],
     "verification": {"status": "verified" | "partial" | "unverified", "notes": ...},
     "vulnerabilities": [
        {"id": "CVE-2024-0132", "severity": [{"type": "CVSS_V3_1", "vector": ..., "score": 9.0}],
         "affected": [
            {"target": "nvidia-container-toolkit", "vendor_product": "NVIDIA Container Toolkit",
             "scheme": "semver", "ranges": [{"last_affected": "1.16.1"}], "fixed": ["1.16.2"]},
            {"target": "nvidia-driver", "platform": "linux", "branch": "580",
             "scheme": "nvidia-driver", "ranges": [{"fixed": "580.126.09"}], "fixed": ["580.126.09"]},
            {"target": "level-zero", "no_range": "vendor gives no versions (see references)"}]}]}

``target`` names an entry of ``TARGETS``: the component identities collectors emit for
that product. An affected entry with ``no_range`` (or without ``ranges``/``versions``)
makes the matcher report ``review`` for every component of the target.

The database is split by concern: ``targets`` (what a target names), ``records`` (the
record model), ``validate`` (a record's checks), ``database`` (``AdvisoryDB`` and the bundle
format), ``active`` (which database a scan uses, the user cache, its age) and ``merge``
(feeds merged); this module re-exports their public names, where the rest of gpusbom
imports them from.
"""

from __future__ import annotations

from ..errors import AdvisoryError
from .active import (
    MAX_USER_DB_BYTES,
    USER_DB_NAME,
    age_days,
    cache_dir,
    describe,
    load_active,
    load_bundled,
    load_user,
    user_db_path,
)
from .database import (
    BUNDLE_SCHEMA,
    AdvisoryDB,
    bundle,
    load_bundle_text,
    load_directory,
    load_records,
    parse_stamp,
)
from .merge import merge_records
from .records import SCORE_TYPES, STATUSES, Advisory, Affected, Score, Vulnerability
from .targets import PACKAGE_TYPES, TARGETS, known_target, selectors
from .validate import validate_record

__all__ = [
    "BUNDLE_SCHEMA",
    "MAX_USER_DB_BYTES",
    "PACKAGE_TYPES",
    "SCORE_TYPES",
    "STATUSES",
    "TARGETS",
    "USER_DB_NAME",
    "Advisory",
    "AdvisoryDB",
    "AdvisoryError",
    "Affected",
    "Score",
    "Vulnerability",
    "age_days",
    "bundle",
    "cache_dir",
    "describe",
    "known_target",
    "load_active",
    "load_bundle_text",
    "load_bundled",
    "load_directory",
    "load_records",
    "load_user",
    "merge_records",
    "parse_stamp",
    "selectors",
    "user_db_path",
    "validate_record",
]
