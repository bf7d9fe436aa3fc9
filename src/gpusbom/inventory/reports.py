"""The inventory commands' library side: each reads the store and returns a report (rows
for a table, CSV or JSON writer, a drift, a metrics collector); ``gpusbom inventory`` parses
options, calls one of these and hands the report to the writers (``writers/``)."""

from __future__ import annotations

import contextlib
import fnmatch
import itertools
import json
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import _gc
from ..errors import InputError, UsageError
from ..safetext import loads_json
from ..writers.base import Rows

if TYPE_CHECKING:
    from ..model import ScanResult
    from .types import Drift

QUERY_COLUMNS = ("kind", "subject", "component", "version", "product", "matched_version",
                 "location", "ts", "scan_id")
AFFECTED_COLUMNS = ("kind", "subject", "advisory", "vulnerability", "severity", "status",
                    "component", "installed_version", "fixed_version", "scan_id")
COMPAT_COLUMNS = ("image", "host", "gpu", "driver", "verdict", "reason")


@dataclass(frozen=True)
class Report:
    """Rows, the line a table shows on stderr below them, and whether ``--fail`` fails."""

    rows: Rows
    summary: str = ""
    found: bool = False


def parse_labels(values: Sequence[str] | None, *, need_value: bool) -> dict[str, Any]:
    """``--label KEY=VALUE`` (or ``KEY`` alone, when a value is not needed)."""
    out: dict[str, Any] = {}
    for v in values or ():
        key, eq, val = v.partition("=")
        if not key.strip() or (need_value and not eq):
            raise UsageError(f"--label {v!r}: use KEY=VALUE" + ("" if need_value else
                                                                 " or KEY"))
        out[key.strip()] = val if eq else None
    return out


def read_input(path: str) -> ScanResult:
    """A gpusbom JSON scan, or CycloneDX / SPDX from any tool (via gpusbom.sbomin)."""
    from ..model import ScanResult

    name = "stdin" if path == "-" else path
    if path == "-":
        data = sys.stdin.buffer.read()
    else:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            raise InputError(f"{path}: no such file") from None
        except IsADirectoryError:
            raise InputError(f"{path}: is a directory, not a scan or SBOM file") from None
        except OSError as exc:
            raise InputError(f"{path}: cannot read: {exc.strerror}") from None
    doc: Any = None
    with contextlib.suppress(ValueError, UnicodeDecodeError):
        doc = loads_json(data)
    if isinstance(doc, dict) and str(doc.get("schema", "")).startswith("gpusbom/scan/"):
        try:
            return ScanResult.from_dict(doc)
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"{name}: not a valid gpusbom scan: {type(exc).__name__}: "
                             f"{str(exc)[:200]}") from None
    from ..sbomin import load_sbom

    if path != "-":
        return load_sbom(path)
    fd, tmp = tempfile.mkstemp(prefix="gpusbom-stdin-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return load_sbom(tmp)
    finally:
        os.unlink(tmp)


def ingest(db: str | None, files: Sequence[str], labels: Sequence[str] | None
           ) -> Iterator[str]:
    """Store every file in turn, each read, checked and stored before the next is read
    (one scan in memory at a time); a line per file, as it is stored. A file that cannot be
    read or is not a scan stops there (``InputError``, exit 3): the files before it stay
    stored, as their lines say."""
    from .normalize import scan_kind, subject_of
    from .store import Store

    if list(files).count("-") > 1:
        raise UsageError("stdin (-) can be read once")
    extra = parse_labels(labels, need_value=True)
    with Store(db) as store:
        for f in files:
            result = read_input(f)
            sid, created = store.ingest(result, labels=extra)
            state = "stored" if created else "already stored"
            yield (f"{'stdin' if f == '-' else f}: {state} {sid[:12]} "
                   f"({scan_kind(result)} {subject_of(result)})")


def rematch(db: str | None, *, all_scans: bool = False) -> str:
    """Findings of the stored scans recomputed against the current advisory database."""
    from ..advisories.db import load_active
    from .store import Store

    adb = load_active()
    with Store(db) as store:
        r = store.rematch(adb, all_scans=all_scans)
    return (f"rematched {r.sets} distinct scan content(s) against {r.advisory_db}: "
            f"{r.scans} scan(s) have new findings")


def prune(db: str | None, *, keep_days: int | None = None, keep_last: int | None = None
          ) -> str:
    """Retention: remove old scans (the latest of each host and image stays)."""
    from .. import settings
    from .store import Store

    if keep_days is None and keep_last is None:
        days, last = settings.raw("inventory_keep_days"), settings.raw("inventory_keep_last")
        keep_days = int(days) if days.strip() else None
        keep_last = int(last) if last.strip() else None
    with Store(db) as store:
        r = store.prune(keep_days=keep_days, keep_last=keep_last)
    parts = f", {len(r.partitions)} monthly partition(s) dropped" if r.partitions else ""
    return (f"pruned {r.scans} scan(s){parts}; {r.sets} unreferenced set(s) and "
            f"{r.blobs} blob(s) removed")


def _short_ids(dicts: list[dict[str, Any]], short: bool) -> list[dict[str, Any]]:
    if short:
        for d in dicts:
            d["scan_id"] = d["scan_id"][:12]
    return dicts


#: rows a table shows unless ``--limit`` says otherwise (JSON and CSV: every row)
TABLE_LIMIT = 1000


def _shown(n: int, total: int, what: str) -> str:
    return (f"; showing the first {n:,} of {total:,} {what} (--limit 0, --format json or "
            "--format csv for all)" if n < total else "")


def query(db: str | None, component: str | None, *, version: str | None = None,
          scheme: str | None = None, host: str | None = None, image: str | None = None,
          labels: Sequence[str] | None = None, kind: str | None = None,
          all_scans: bool = False, short_ids: bool = False, limit: int | None = None
          ) -> Report:
    """Where is a component (and in which versions)? One row per component found; the
    first ``limit`` (None: all), the summary counting all."""
    from .ranges import parse_range
    from .render import as_dict
    from .store import Store

    if version and not component:
        raise UsageError("--version needs a component name")
    rng = parse_range(version, scheme) if version else None
    with Store(db) as store:
        page = store.query_rows(component, rng, host=host, image=image, kind=kind,
                                labels=parse_labels(labels, need_value=False),
                                all_scans=all_scans)
        rows = list(itertools.islice(page, limit))
    return Report(Rows(_short_ids([as_dict(r) for r in rows], short_ids), QUERY_COLUMNS),
                  f"{page.total:,} component(s) on {len(page.subjects):,} host(s)/image(s)"
                  + _shown(len(rows), page.total, "rows"))


def affected(db: str | None, advisory: str | None, *, all_advisories: bool = False,
             include_review: bool = False, kind: str | None = None, all_scans: bool = False,
             short_ids: bool = False, limit: int | None = None) -> Report:
    """Hosts and images affected by an advisory: the stored scans re-matched against the
    current advisory database; the first ``limit`` rows (None: all), the summary and
    ``--fail`` counting all."""
    from ..advisories.db import load_active
    from .render import as_dict
    from .store import Store

    if bool(advisory) == all_advisories:
        raise UsageError("give an advisory id (or CVE) or --all")
    adb = load_active()
    _gc.freeze_loaded()  # the advisory database lives to the end (gpusbom._gc)
    with Store(db) as store:
        page = store.affected_rows(adb, advisory, include_review=include_review,
                                   all_scans=all_scans, kind=kind)
        rows = list(itertools.islice(page, limit))
    return Report(Rows(_short_ids([as_dict(r) for r in rows], short_ids), AFFECTED_COLUMNS),
                  f"{len(page.subjects):,} host(s)/image(s) affected ({adb.source} advisory "
                  f"database, data as of {adb.built or adb.newest})"
                  + _shown(len(rows), page.total, "rows"),
                  found=page.found)


def drift(db: str | None, subject: str | None, *, from_scan: str | None = None,
          to_scan: str | None = None) -> Drift:
    """What changed on a host or image between two scans."""
    from .store import Store

    with Store(db) as store:
        return store.drift(subject, from_scan=from_scan, to_scan=to_scan)


def subjects(db: str | None, kind: str, *, short_ids: bool = False,
             limit: int | None = None) -> Report:
    """Every host or image (the first ``limit`` by name; None: all): its latest scan and
    what it holds."""
    from .store import Store

    with Store(db) as store:
        subs = store.subjects(kind, limit=limit)
        total = len(subs) if limit is None or len(subs) < limit else store.count_subjects(kind)
    rows = []
    for s in subs:
        rows.append({
            "subject": s.subject, "scans": s.scans, "last_scan": s.latest.ts,
            "scan_id": s.latest.id[:12] if short_ids else s.latest.id,
            "digest": s.latest.digest, "components": s.latest.components,
            "gpus": list(s.gpus), "driver": s.driver,
            "findings": dict(sorted(s.findings.items())),
            "labels": s.latest.labels, "stack": s.latest.stack_text,
        })
    cols = ("subject", "scans", "last_scan", "components", "gpus", "driver", "findings",
            "scan_id") if kind == "host" else ("subject", "scans", "last_scan", "digest",
                                               "components", "findings", "scan_id")
    return Report(Rows(rows, cols), f"{total:,} {kind}(s)" + _shown(len(rows), total, f"{kind}s"))


def compat(db: str | None, *, image: str | None = None, host: str | None = None,
           failing: bool = False, on_node: bool = False, brief: bool = False,
           evidence: bool = False) -> Report:
    """``gpusbom check`` of the latest scan of every stored image against the latest scan of
    every stored host; one row per (image, host, GPU kind). ``brief``: the first reason
    only (tables), else every reason; ``evidence``: an evidence column (JSON)."""
    from ..compat import check_against_host
    from .normalize import subject_of
    from .store import Store

    with Store(db) as store:
        hosts = store.latest_scans(kind="host")
        if on_node:
            # the latest scan of each (node, image) pair, from the gpusbom.node label
            latest: dict[tuple[str, str], str] = {}
            for info in store.scans(kind="image", labels={"gpusbom.node": None}):
                latest[(info.labels["gpusbom.node"], info.subject)] = info.id  # oldest first
            loaded = store.load(list(latest.values()))
            images = [loaded[i] for i in latest.values() if i in loaded]
        else:
            images = store.latest_scans(kind="image")
    images = [s for s in images if image is None or fnmatch.fnmatch(subject_of(s), image)]
    hosts = [s for s in hosts if host is None or fnmatch.fnmatch(subject_of(s), host)]
    rows: list[dict[str, Any]] = []
    for img in sorted(images, key=lambda s: (subject_of(s),
                                             s.target.labels.get("gpusbom.node", ""))):
        for h in sorted(hosts, key=subject_of):
            if on_node and img.target.labels.get("gpusbom.node") != subject_of(h):
                continue
            for v in check_against_host(img, h):
                if failing and v.verdict in ("runs", "runs-with-jit"):
                    continue
                named = [lib.reason for lib in v.failing if lib.file]
                why = named[0] if named else next(
                    (r for r in v.reasons if "fail" in r.lower()),
                    v.reasons[0] if v.reasons else "")
                rows.append({"image": subject_of(img), "host": subject_of(h),
                             "gpu": v.target, "driver": v.driver, "verdict": v.verdict,
                             "reason": why if brief else "; ".join(v.reasons),
                             "evidence": v.evidence})
    bad = {(r["image"], r["host"]) for r in rows if r["verdict"] not in ("runs", "runs-with-jit")}
    cols = (*COMPAT_COLUMNS, "evidence") if evidence else COMPAT_COLUMNS
    return Report(Rows(rows, cols), f"{len(images)} image(s) x {len(hosts)} host(s): "
                  f"{len(bad)} pair(s) not green (will-fail, not-applicable or unchecked)",
                  found=bool(bad))


def export(db: str | None, scan: str) -> str:
    """A stored scan as gpusbom JSON, exactly as ingested."""
    from .store import Store

    with Store(db) as store:
        hist = store.history(scan)
        sid = hist[-1].id if hist else None
        if sid is None:
            try:
                sid = store.resolve(scan).id
            except (InputError, UsageError):
                raise InputError(f"inventory: no scan or host/image {scan!r}") from None
        doc = json.loads(store.document(sid))
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
