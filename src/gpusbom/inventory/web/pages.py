"""What each dashboard page shows, as plain JSON-ready dicts: the HTML pages render these
with Jinja2 and the ``/api/...`` routes return them as they are, so both always agree.

Every function reads the store only (no write path exists) and takes its parameters as
values: names, globs and version ranges go to the store, which binds them as SQL
parameters. Stored scans are content-addressed (the scan id is the sha256 of the scan), so
a scan loaded once is cached by id for the life of the process (:class:`Cache`).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import functools
import itertools
import re
import threading
from collections import Counter, OrderedDict
from typing import Any

from ...errors import InputError, UsageError
from ...model import ScanResult
from ..store import Store
from ..types import QueryRow

#: rows shown at most on a page (the API says when there were more)
ROW_LIMIT = 2000

_STACK_RX = re.compile(r"^(?P<name>[A-Za-z][\w .+-]*?)(?: (?P<rel>none|[0-9][\w.+-]*))?"
                       r"(?: \(.*)?$")


class Cache:
    """A bounded cache of loaded scans and computed verdicts, keyed by scan ids (which
    never change meaning: a scan id is the hash of the scan)."""

    def __init__(self, size: int = 512) -> None:
        self.size = size
        self._data: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any:
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                return self._data[key]
        return None

    def put(self, key: Any, value: Any) -> Any:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.size:
                self._data.popitem(last=False)
        return value

    def scans(self, store: Store, ids: list[str]) -> dict[str, ScanResult]:
        out: dict[str, ScanResult] = {}
        missing = []
        for sid in ids:
            hit = self.get(("scan", sid))
            if hit is None:
                missing.append(sid)
            else:
                out[sid] = hit
        if missing:
            for sid, r in store.load(missing).items():
                out[sid] = self.put(("scan", sid), r)
        return out


def inventory_version(store: Store) -> int:
    """Changes whenever a scan is stored or removed, findings are re-matched or a triage
    decision is written: the key of computed pages that depend on every latest scan (an
    advisory re-matched over the fleet). One row read (the change counter), not a count
    over the scans."""
    return store.change_count()


def stacks_of(stack_text: str | None) -> list[str]:
    """``"CUDA 13.0.2 (cudart ...); ROCm none"`` -> ``["CUDA 13.0.2"]`` (present stacks)."""
    return list(_stacks(stack_text or ""))


@functools.lru_cache(maxsize=4096)  # a fleet has a few distinct stacks over many scans
def _stacks(stack_text: str) -> tuple[str, ...]:
    out = []
    for part in stack_text.split("; "):
        m = _STACK_RX.match(part.strip())
        if not m or m.group("rel") == "none":
            continue
        out.append(m.group("name") + (f" {m.group('rel')}" if m.group("rel") else ""))
    return tuple(out)


def _cuda_of(stack_text: str | None) -> str:
    for s in stacks_of(stack_text):
        if s.startswith("CUDA"):
            return s.partition(" ")[2] or "unknown"
    return "none"


def _branch(version: str | None) -> str:
    return version.split(".")[0] if version else "unknown"


def advisory_db_info(adb: Any) -> dict[str, Any]:
    stamp = adb.built or adb.newest
    age = None
    if stamp:
        try:
            when = _dt.datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
            if when.tzinfo is None:
                when = when.replace(tzinfo=_dt.timezone.utc)
            from ...clock import now as _clock_now

            age = max(0, (_clock_now() - when).days)
        except ValueError:
            age = None
    return {"source": adb.source, "built": adb.built, "newest": adb.newest,
            "age_days": age, "advisories": len(adb)}


# ------------------------------------------------------------------------------ overview


def overview(store: Store, adb: Any, cache: Cache | None = None) -> dict[str, Any]:
    """The fleet overview, kept (``cache``) until a scan is stored: every panel is a
    function of the stored scans, the advisory database's age is computed per request."""
    key = ("overview", inventory_version(store))
    data = cache.get(key) if cache is not None else None
    if data is None:
        data = _overview(store)
        if cache is not None:
            cache.put(key, data)
    out = dict(data)  # the cached dict is shared: not changed here
    out["advisory_db"] = advisory_db_info(adb)
    return out


def _overview(store: Store) -> dict[str, Any]:
    """Read from the latest scans' rows only, each table joined once to the ``latest``
    table ingest keeps (devices carry their driver version; findings are read as the
    per-scan counts stored at ingest): no stored component or finding row is read, so a
    fleet of thousands of hosts with years of scans stays fast.

    The panels are counted per distinct (kind, component set, finding set, probe set,
    stack) of the latest scans, weighted by how many hosts and images have it (one
    GROUP BY: a fleet of 10,000 identical nodes is one group), and the host and image
    lists are the first ``ROW_LIMIT`` by name (read through ``latest``'s primary key):
    no Python work per host beyond the rows shown."""
    from sqlalchemy import func, select

    from ..schema import affected_advisories, devices, finding_counts, latest, probes

    def of_sets(table: Any, col: Any) -> Any:
        # the rows of the sets the latest scans reference, each set read once (hosts that
        # share a set share its rows: mapped below through latest)
        return table.c.set_id.in_(select(col).distinct())

    cols = (latest.c.id, latest.c.kind, latest.c.subject, latest.c.ts, latest.c.stack_text,
            latest.c.components, latest.c.digest, latest.c.n_scans, latest.c.cset,
            latest.c.fset, latest.c.pset)
    with store.engine.connect() as conn:
        groups = list(conn.execute(select(
            latest.c.kind, latest.c.cset, latest.c.fset, latest.c.pset, latest.c.stack_text,
            func.count().label("n")).group_by(latest.c.kind, latest.c.cset, latest.c.fset,
                                              latest.c.pset, latest.c.stack_text)))
        hosts = list(conn.execute(select(*cols).where(latest.c.kind == "host")
                                  .order_by(latest.c.kind, latest.c.subject).limit(ROW_LIMIT)))
        images = list(conn.execute(select(*cols).where(latest.c.kind != "host")
                                   .order_by(latest.c.kind, latest.c.subject)
                                   .limit(ROW_LIMIT)))
        set_gpus: dict[str, list[str]] = {}
        set_drivers: dict[str, set[str]] = {}
        for r in conn.execute(select(devices.c.set_id, devices.c.model, devices.c.pci_address,
                                     devices.c.compute_capability, devices.c.kernel_driver,
                                     devices.c.driver_version)
                              .where(of_sets(devices, latest.c.cset))
                              .order_by(devices.c.set_id, devices.c.idx)):
            bits = ", ".join(x for x in (r.pci_address, r.compute_capability and
                                         f"cc {r.compute_capability}") if x)
            set_gpus.setdefault(r.set_id, []).append(f"{r.model} ({bits})" if bits
                                                     else r.model)
            if r.kernel_driver:
                set_drivers.setdefault(r.set_id, set()).add(
                    f"{r.kernel_driver} {r.driver_version or '?'}")
        set_sev: dict[str, dict[str, int]] = {}
        for fset, severity, n in conn.execute(
                select(finding_counts.c.set_id, finding_counts.c.severity, finding_counts.c.n)
                .where(of_sets(finding_counts, latest.c.fset))):
            set_sev.setdefault(fset, {})[severity] = n
        set_outcomes: dict[str, set[str]] = {}
        for pset, outcome in conn.execute(select(probes.c.set_id, probes.c.outcome)
                                          .where(of_sets(probes, latest.c.pset)).distinct()):
            set_outcomes.setdefault(pset, set()).add(outcome)
        set_advs: dict[str, list[str]] = {}
        for fset, adv in conn.execute(select(affected_advisories.c.set_id,
                                             affected_advisories.c.advisory)
                                      .where(of_sets(affected_advisories, latest.c.fset))):
            set_advs.setdefault(fset, []).append(adv)

    def driver_of(cset: str) -> str | None:
        return ", ".join(sorted(set_drivers.get(cset, ()))) or None

    def probe_of(pset: str) -> str:
        got = set_outcomes.get(pset, set())
        return ("fail" if got & {"fail", "error", "timeout"} else "pass" if "pass" in got
                else "skipped" if got else "not probed")

    # hosts and images whose latest scan has a finding the advisory affects
    hits: Counter[str] = Counter()
    by_model: Counter[str] = Counter()
    by_branch: Counter[str] = Counter()
    by_cuda: Counter[str] = Counter()
    by_probe: Counter[str] = Counter()
    by_stack: Counter[str] = Counter()
    n_hosts = n_images = 0
    for g in groups:
        for adv in set_advs.get(g.fset, ()):
            hits[adv] += g.n
        if g.kind != "host":
            n_images += g.n
            for st in stacks_of(g.stack_text) or ["no GPU stack"]:
                by_stack[st] += g.n
            continue
        n_hosts += g.n
        for m in sorted({x.split(" (")[0] for x in set_gpus.get(g.cset, [])}) or ["no GPU"]:
            by_model[m] += g.n
        driver = driver_of(g.cset)
        vers = re.findall(r"nvidia ([0-9][0-9.]*)", driver or "")
        by_branch[_branch(vers[0]) if vers else ("none" if not driver else "other")] += g.n
        by_cuda[_cuda_of(g.stack_text)] += g.n
        by_probe[probe_of(g.pset)] += g.n
    touched = [{"advisory": a, "subjects": n} for a, n in sorted(
        hits.items(), key=lambda kv: (-kv[1], kv[0]))[:50]]
    host_rows = [{"subject": h.subject, "scans": h.n_scans, "last_scan": h.ts,
                  "gpus": set_gpus.get(h.cset, []), "driver": driver_of(h.cset),
                  "cuda": _cuda_of(h.stack_text), "probe": probe_of(h.pset),
                  "findings": dict(sorted(set_sev.get(h.fset, {}).items()))} for h in hosts]
    image_rows = [{"subject": i.subject, "kind": i.kind, "scans": i.n_scans,
                   "last_scan": i.ts, "digest": i.digest, "components": i.components,
                   "stacks": stacks_of(i.stack_text),
                   "findings": dict(sorted(set_sev.get(i.fset, {}).items()))}
                  for i in images]

    def counts(c: Counter[str]) -> list[dict[str, Any]]:
        return [{"value": k, "hosts": n} for k, n in sorted(c.items(), key=lambda kv:
                                                             (-kv[1], kv[0]))]

    return {
        "hosts": n_hosts, "images": n_images,
        "by_gpu_model": counts(by_model), "by_driver_branch": counts(by_branch),
        "by_cuda": counts(by_cuda), "by_probe": counts(by_probe),
        "images_by_stack": [{"stack": k, "images": n} for k, n in
                            sorted(by_stack.items(), key=lambda kv: (-kv[1], kv[0]))],
        "advisory_db": None,  # per request (its age)
        "advisories_in_fleet": touched,
        "host_list": host_rows, "image_list": image_rows,
        "truncated": n_hosts > ROW_LIMIT or n_images > ROW_LIMIT,
    }


# ------------------------------------------------------------------------------ search

SEARCH_FIELDS = ("component", "version", "scheme", "host", "image", "kind", "label",
                 "all_scans")


def search(store: Store, params: dict[str, Any]) -> dict[str, Any]:
    """``inventory query`` over the web: the same names, ranges, globs and labels."""
    from ..ranges import parse_range

    component = (params.get("component") or "").strip() or None
    version = (params.get("version") or "").strip() or None
    scheme = (params.get("scheme") or "").strip() or None
    kind = (params.get("kind") or "").strip() or None
    labels: dict[str, str | None] = {}
    for v in params.get("label") or []:
        key, eq, val = str(v).partition("=")
        if key.strip():
            labels[key.strip()] = val if eq else None
    out: dict[str, Any] = {"query": {k: params.get(k) for k in SEARCH_FIELDS},
                           "rows": [], "error": None, "total": 0}
    if not (component or params.get("host") or params.get("image") or labels):
        out["error"] = None
        return out
    try:
        if kind not in (None, "host", "image", "sbom"):
            raise UsageError(f"kind {kind!r}: use host, image or sbom")
        if version and not component:
            raise UsageError("a version range needs a component name")
        rng = parse_range(version, scheme) if version else None
        # the first ROW_LIMIT rows built, the total and subjects counted per set
        page = store.query_rows(component, rng, host=(params.get("host") or None),
                                image=(params.get("image") or None), kind=kind,
                                labels=labels or None, all_scans=bool(params.get("all_scans")))
        rows = list(itertools.islice(page, ROW_LIMIT))
    except (UsageError, InputError) as exc:
        out["error"] = str(exc)
        return out
    out["total"] = page.total
    # QueryRow is flat (its labels a dict of strings): a shallow copy is what asdict makes
    names = [f.name for f in dataclasses.fields(QueryRow)]
    out["rows"] = [{**{k: getattr(r, k) for k in names}, "labels": dict(r.labels)}
                   for r in rows]
    out["subjects"] = len(page.subjects)
    return out


# ------------------------------------------------------------------------------ advisories


def advisories(store: Store, adb: Any) -> dict[str, Any]:
    from sqlalchemy import func, select

    from ..schema import affected_advisories, latest

    with store.engine.connect() as conn:
        seen = dict(conn.execute(select(affected_advisories.c.advisory, func.count())
                                 .select_from(latest.join(affected_advisories,
                                                          affected_advisories.c.set_id
                                                          == latest.c.fset))
                                 .group_by(affected_advisories.c.advisory)).all())
    rows = []
    for a in adb:
        rows.append({"advisory": a.id, "vendor": a.vendor, "title": a.title,
                     "published": a.published,
                     "cves": [v.id for v in a.vulnerabilities][:8],
                     "affected_at_scan_time": seen.get(a.id, 0)})
    rows.sort(key=lambda r: (-r["affected_at_scan_time"], r["published"] or ""), reverse=False)
    return {"advisory_db": advisory_db_info(adb), "advisories": rows}


def advisory(store: Store, adb: Any, ident: str, cache: Cache | None = None) -> dict[str, Any]:
    """The hosts and images an advisory touches: the stored scans re-matched against the
    current database (affected, review), plus what the scans recorded as not affected
    (VEX statements and auto-VEX at scan time)."""


    adv = adb.get(ident) if ident.strip() else None
    if adv is None:
        raise InputError(f"no advisory {ident!r} in the advisory database ({adb.source})")
    # re-matching every latest scan costs seconds on a large fleet: the page is kept until
    # a scan is stored (the advisory database is loaded once per process)
    key = ("advisory", adv.id, inventory_version(store))
    hit = cache.get(key) if cache is not None else None
    if hit is None:
        hit = _advisory(store, adb, adv)
        if cache is not None:
            cache.put(key, hit)
    return hit


def _advisory(store: Store, adb: Any, adv: Any) -> dict[str, Any]:
    from sqlalchemy import select

    from ..schema import findings, latest

    rows = store.affected(adb, adv.id, include_review=True)
    out = [{"kind": r.kind, "subject": r.subject, "vulnerability": r.vulnerability,
            "status": r.status, "severity": r.severity, "component": r.component,
            "installed_version": r.installed_version, "fixed_version": r.fixed_version,
            "scan_id": r.scan_id} for r in rows]
    cves = {v.id for v in adv.vulnerabilities}
    with store.engine.connect() as conn:
        stmt = select(latest.c.kind, latest.c.subject, latest.c.id, findings.c.rule_id,
                      findings.c.component_ref, findings.c.installed_version,
                      findings.c.fixed_version, findings.c.severity).select_from(
            findings.join(latest, latest.c.fset == findings.c.set_id)).where(
            findings.c.advisory == adv.id, findings.c.status == "not-affected")
        for r in conn.execute(stmt):
            vuln = next((c for c in cves if c in r.rule_id), r.rule_id or "")
            out.append({"kind": r.kind, "subject": r.subject, "vulnerability": vuln,
                        "status": "not-affected", "severity": r.severity,
                        "component": r.component_ref or "", "installed_version":
                        r.installed_version, "fixed_version": r.fixed_version,
                        "scan_id": r.id})
    order = {"affected": 0, "review": 1, "not-affected": 2}
    out.sort(key=lambda r: (order.get(str(r["status"]), 3), r["kind"], r["subject"],
                            r["vulnerability"]))
    return {
        "advisory": {"id": adv.id, "vendor": adv.vendor, "title": adv.title,
                     "published": adv.published, "modified": adv.modified,
                     "sources": list(adv.sources), "aliases": list(adv.aliases),
                     "vulnerabilities": [v.id for v in adv.vulnerabilities]},
        "rows": out[:ROW_LIMIT], "total": len(out),
        "counts": dict(Counter(r["status"] for r in out)),
        "advisory_db": advisory_db_info(adb),
    }
