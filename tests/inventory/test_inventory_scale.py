"""The inventory at scale, checked on small data: query plans, the change counter, text
PostgreSQL refuses, retention (prune, monthly partitions), rematch, and the S3 blob store.

- plans: every SELECT the dashboard's /, /matrix, /metrics and the CLI's hosts, query
  (where), affected and drift run is EXPLAINed on PostgreSQL with sequential scans
  disabled: a plan that still reads a history table (``scans`` or a partition of it) from
  end to end has no index to use, and fails the test; so does one that reads a
  ``(kind, subject, ts)`` index of history without naming the kind (the whole index).
- prune: every question answers the same for the scans retention keeps; months with
  nothing left are dropped as partitions on PostgreSQL.
- S3: the blob store against s3rver (npm ``s3rver``: a Node.js server speaking the S3 REST
  API over HTTP, objects on disk), through boto3.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from inv_scans import host_scan, image_scan

from gpusbom.inventory import Store, parse_range
from gpusbom.model import Finding, ProbeResult, ScanResult

DAY = 86400


def _fleet(hosts: int = 6, days: int = 75, start: str = "2026-01-01") -> Iterator[ScanResult]:
    """Daily scans of ``hosts`` hosts over ``days`` days from ``start``: most days
    unchanged, a driver and a cuDNN upgrade along the way, one probe failing on a day."""
    import datetime as dt

    t0 = dt.datetime.fromisoformat(start + "T06:00:00+00:00")
    for d in range(days):
        for h in range(hosts):
            ts = (t0 + dt.timedelta(days=d, minutes=h)).strftime("%Y-%m-%dT%H:%M:%SZ")
            r = host_scan(f"node-{h:02d}", ts=ts, cudnn="9.1.0" if d > 40 else "9.0.0",
                          driver="580.65.06" if d > 20 + h else "570.172.08")
            if d == 50 and h == 1:
                r.probes.append(ProbeResult(backend="cuda", outcome="fail",
                                            device="NVIDIA H200", device_id="0",
                                            reason="launch failed"))
            r.target.labels = {"pool": "a" if h % 2 else "b"}
            yield r
    for d in (0, 30, 60):
        yield image_scan("registry.local/ml/serve", "1.4", torch="2.5.1",
                         ts=(t0 + dt.timedelta(days=d)).strftime("%Y-%m-%dT%H:%M:%SZ"))


def _answers(store: Store, keep: set[str] | None = None) -> dict[str, Any]:
    """What the CLI and dashboard answer; with ``keep``: history restricted to those scans."""
    from gpusbom.advisories.db import load_active

    adb = load_active()

    def rows(xs: list[Any]) -> list[Any]:
        return [dataclasses.astuple(x) for x in xs
                if keep is None or getattr(x, "scan_id", None) in keep]

    hist = [s.id for s in store.scans() if keep is None or s.id in keep]
    return {
        "latest": sorted(s.id for s in store.scans(all_scans=False)),
        "subjects": [(s.kind, s.subject, s.latest.id, list(s.gpus), s.driver,
                      sorted(s.findings.items())) for s in store.subjects()],
        "query": rows(store.query("cudnn")),
        "query_all": rows(store.query("cudnn", parse_range("<9.1"), all_scans=True)),
        "affected": rows(store.affected(adb)),
        "affected_all": rows(store.affected(adb, all_scans=True)),
        "docs": {sid: store.document(sid) for sid in hist},
        "metrics": store.metrics(now=1790000000.0),
    }


@pytest.fixture
def history(db_url: str, tmp_path: Path) -> str:
    with Store(db_url) as store:
        for r in _fleet():
            store.ingest(r)
    return db_url


def test_unchanged_daily_scans_share_their_sets(history: str) -> None:
    from sqlalchemy import func, select

    from gpusbom.inventory.schema import components, content_sets, scans

    with Store(history) as store, store.engine.connect() as conn:
        n_scans = conn.execute(select(func.count()).select_from(scans)).scalar()
        n_sets = conn.execute(select(func.count()).select_from(content_sets).where(
            content_sets.c.kind == "components")).scalar()
        n_comps = conn.execute(select(func.count()).select_from(components)).scalar()
        assert n_scans == 6 * 75 + 3
        # per host: old driver + old cuDNN, new driver + old, new + new (3 contents); the
        # image: 1 -> far fewer sets than scans, and component rows per set, not per scan
        assert n_sets is not None and n_sets <= 6 * 3 + 1
        assert n_comps is not None and n_comps < n_scans * 2
        assert store.change_count() == n_scans
        [h] = [s for s in store.subjects("host") if s.subject == "node-00"]
        assert h.scans == 75


# ------------------------------------------------------------------------------ plans


def _capture(store: Store) -> list[tuple[str, Any]]:
    from sqlalchemy import event

    seen: list[tuple[str, Any]] = []

    @event.listens_for(store.engine, "before_cursor_execute")
    def _log(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any,
             executemany: bool) -> None:
        if statement.lstrip().upper().startswith("SELECT") and not executemany:
            seen.append((statement, parameters))

    return seen


def test_dashboard_and_cli_plans_read_no_history_table_whole(pg: Any) -> None:
    from inv_asgi import asgi_get

    from gpusbom.inventory.web.app import create_app

    url = pg.create_db()
    with Store(url) as store:
        for r in _fleet(hosts=8, days=70):
            store.ingest(r)
        with store.engine.connect() as conn:
            conn.exec_driver_sql("ANALYZE")
            conn.commit()
    app = create_app(url)
    store = app.app.state.dashboard.store  # type: ignore[attr-defined]
    seen = _capture(store)
    for path in ("/", "/matrix", "/metrics", "/advisories"):
        assert asgi_get(app, path)[0] == 200, path
    from gpusbom.advisories.db import load_active

    store.subjects("host")
    store.query("cudnn", parse_range("<9.1"))
    store.query("cudnn", host="node-0*")
    store.affected(load_active())
    store.drift("node-03")
    store.history("node-03")
    assert len(seen) > 10
    bad = []
    with store.engine.connect() as conn:
        conn.exec_driver_sql("SET enable_seqscan = off")
        # twice: then without plain index scans (with a fleet this small the planner may
        # walk a whole index in order, which it does not at scale), where every history
        # index read must have a condition, and a (kind, subject, ts) index its kind:
        # drift by subject alone once read that index of every month end to end (13 ms a
        # month at 10,000 hosts)
        for bitmaps_only in (False, True):
            if bitmaps_only:
                conn.exec_driver_sql("SET enable_indexscan = off")
            for sql, params in seen:
                if "pg_catalog" in sql or "alembic_version" in sql or "to_regclass" in sql:
                    continue
                plan = conn.exec_driver_sql("EXPLAIN (FORMAT JSON) " + sql, params).scalar()
                nodes = list(_nodes(plan[0]["Plan"] if isinstance(plan, list) else
                                    json.loads(plan)[0]["Plan"]))
                for n in nodes:
                    rel = n.get("Relation Name", "")
                    if n["Node Type"] == "Seq Scan" and (rel == "scans" or rel.startswith(
                            "scans_p")):
                        bad.append((rel, sql[:300]))
                    index = n.get("Index Name", "")
                    cond = n.get("Index Cond") or ""
                    if bitmaps_only and index.startswith("scans") and (
                            not cond or ("kind_subject" in index and "kind" not in cond)):
                        bad.append((index, sql[-300:]))
    assert not bad, bad


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for p in plan.get("Plans", []):
        yield from _nodes(p)


# ------------------------------------------------------------------------------ NUL


def test_nul_is_refused_alike_on_both_databases(db_url: str, tmp_path: Path) -> None:
    r = host_scan("nul-host")
    r.components[0].name = "libcudnn\x00evil"
    f = tmp_path / "nul.json"
    f.write_text(json.dumps(r.to_dict()))
    env = {**os.environ, "GPUSBOM_INVENTORY_BLOBS": str(tmp_path / "blobs")}
    p = subprocess.run([sys.executable, "-m", "gpusbom", "inventory", "ingest", "--db",
                        db_url, str(f)], capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 3, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "NUL character" in lines[0] and "Traceback" not in p.stderr
    assert lines[0] == ("gpusbom: error: scan of 'host:/': holds a NUL character (\\u0000) in "
                        "a name, version or property: the inventory does not store it "
                        "(PostgreSQL cannot)")
    with Store(db_url, blobs=str(tmp_path / "blobs")) as store:
        assert store.scans() == []
    # an escaped backslash before "u0000" is not a NUL
    r.components[0].name = "lib\\u0000-literal"
    with Store(db_url, blobs=str(tmp_path / "blobs")) as store:
        assert store.ingest(r)[1] is True


# ------------------------------------------------------------------------------ prune


def test_prune_keeps_answers_for_retained_scans(history: str) -> None:
    import datetime as dt

    now = dt.datetime(2026, 3, 16, 12, tzinfo=dt.timezone.utc).timestamp()
    with Store(history) as store:
        all_ids = {s.id for s in store.scans()}
        cutoff = (dt.datetime.fromtimestamp(now, dt.timezone.utc)
                  - dt.timedelta(days=20)).strftime("%Y-%m-%dT%H:%M:%S")
        latest_ids = {s.id for s in store.scans(all_scans=False)}
        keep = {s.id for s in store.scans() if s.ts >= cutoff} | latest_ids
        before = _answers(store, keep)
        r = store.prune(keep_days=20, now=now)
        assert r.scans == len(all_ids - keep) and r.scans > 300
        after = _answers(store)
        assert {s.id for s in store.scans()} == keep
        assert after == before
        counts = {s.subject: s.scans for s in store.subjects()}
        assert counts["node-00"] == len([s for s in store.scans() if s.subject == "node-00"])
        if store.dialect == "postgresql":
            # January had nothing left to keep: dropped whole; February keeps its last
            # days (and the image's latest scan is in March)
            assert r.partitions == ["scans_p202601"]
            with store.engine.connect() as conn:
                parts = set(conn.exec_driver_sql(
                    "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON "
                    "c.oid = i.inhrelid WHERE i.inhparent = 'scans'::regclass").scalars())
            assert parts == {"scans_p202602", "scans_p202603"}
        # sets no scan uses went with their blobs; what stays is whole
        assert r.sets > 0 and r.blobs > 0
        for sid in keep:
            store.document(sid)
        # keep-last: the newest 3 of each subject (and the latest always)
        r2 = store.prune(keep_last=3, now=now)
        assert {s.subject: s.scans for s in store.subjects()}["node-00"] == 3
        assert r2.scans > 0
        assert store.ingest(next(iter(_fleet(hosts=1, days=1, start="2026-03-20"))))[1]


def test_rematch_recomputes_findings_without_rescanning(db_url: str, tmp_path: Path,
                                                        h200_scan: ScanResult) -> None:
    from gpusbom.advisories.db import load_active

    stripped = ScanResult.from_dict(h200_scan.to_dict())
    stripped.findings = [f for f in stripped.findings if f.advisory is None] + [
        Finding(id="gpusbom-old", kind="advisory-stale", severity="low", title="kept")]
    with Store(db_url, blobs=str(tmp_path / "b")) as store:
        sid, _ = store.ingest(stripped)
        doc = store.document(sid)
        before = {s.subject: s.findings for s in store.subjects()}["vm"]
        v = store.change_count()
        r = store.rematch(load_active())
        assert r.scans == 1 and store.change_count() > v
        after = {s.subject: s.findings for s in store.subjects()}["vm"]
        assert sum(after.values()) > sum(before.values())
        assert store.document(sid) == doc  # the body stays as ingested
        # the same as what the scan itself found (its findings at ingest)
        with Store(db_url.replace("inventory.db", "ref.db") if db_url.startswith("sqlite")
                   else db_url, blobs=str(tmp_path / "c")) as ref:
            if ref.url != store.url:
                ref.ingest(h200_scan)
                want = {s.subject: s.findings for s in ref.subjects()}["vm"]
                assert {k: v for k, v in after.items() if k != "low"} == {
                    k: v for k, v in want.items() if k != "low"}
        assert store.rematch(load_active()).scans == 0  # nothing new the second time


# ------------------------------------------------------------------------------ S3


def _s3rver() -> str | None:
    for cand in (shutil.which("s3rver"), os.path.expanduser(
            "~/.cache/gpusbom/tools/node_modules/.bin/s3rver")):
        if cand and os.path.exists(cand):
            return cand
    return None


@pytest.fixture
def s3(tmp_path: Path) -> Iterator[str]:
    exe = _s3rver()
    if exe is None:
        pytest.skip("s3rver not installed (scripts/test installs it with npm)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([exe, "-d", str(tmp_path / "s3"), "-a", "127.0.0.1", "-p",
                             str(port), "--silent", "--configure-bucket", "inventory"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    env = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "S3RVER",
           "AWS_SECRET_ACCESS_KEY": "S3RVER", "AWS_DEFAULT_REGION": "us-east-1"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield endpoint
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        proc.terminate()
        proc.wait(10)


def test_s3_blob_store(s3: str, db_url: str, tmp_path: Path, h200_scan: ScanResult) -> None:
    from gpusbom.inventory.blobs import BlobMissing, S3Store

    spec = "s3://inventory/fleet-a"
    with Store(db_url, blobs=spec) as store:
        assert isinstance(store.blobs, S3Store)
        sid, created = store.ingest(h200_scan)
        assert created
        keys = sorted(store.blobs.keys())
        assert len(keys) == 2  # the component body and the finding body
        assert store.load([sid])[sid].to_dict() == h200_scan.to_dict()
        store.blobs.delete(keys[0])
        store._bodies.clear()  # what this process read is not asked of the store again
        with pytest.raises(BlobMissing, match="missing"):
            store.document(sid)
    with Store(db_url, blobs=spec) as store:  # a new process: no body cached
        assert store.ingest(h200_scan) == (sid, False)  # puts the lost body back
        assert sorted(store.blobs.keys()) == keys
        assert store.document(sid)


def test_prune_and_rematch_commands_and_the_serve_policy(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    from gpusbom.inventory.web.app import start_retention

    db = f"sqlite:///{tmp_path / 'inv.db'}"
    with Store(db) as store:
        for d in range(1, 6):
            store.ingest(host_scan("gpu-p", ts=f"2026-01-0{d}T00:00:00Z", cudnn="9.0.0"))
            store.ingest(host_scan("gpu-q", ts=f"2026-01-0{d}T00:00:00Z"))

    def cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "gpusbom", "inventory", *args, "--db", db],
                              capture_output=True, text=True, timeout=120,
                              env={**os.environ, **env})

    p = cli("prune")
    assert p.returncode == 2 and "--keep-days and/or --keep-last" in p.stderr, p.stderr
    p = cli("prune", "--keep-last", "3")
    assert p.returncode == 0 and p.stderr.startswith("pruned 4 scan(s)"), p.stderr
    p = cli("prune", GPUSBOM_INVENTORY_KEEP_LAST="2")  # the configured policy
    assert p.returncode == 0 and p.stderr.startswith("pruned 2 scan(s)"), p.stderr
    p = cli("rematch")
    assert p.returncode == 0 and p.stderr.startswith("rematched 2 distinct"), p.stderr
    # serve runs the policy (hourly; the first run at once)
    with Store(db) as store:
        assert {s.subject: s.scans for s in store.subjects()} == {"gpu-p": 2, "gpu-q": 2}
        monkeypatch.setenv("GPUSBOM_INVENTORY_KEEP_LAST", "1")
        stop = start_retention(store)
        assert stop is not None
        deadline = time.monotonic() + 60
        while len(store.scans()) > 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        stop.set()
        assert {s.subject: s.scans for s in store.subjects()} == {"gpu-p": 1, "gpu-q": 1}
    monkeypatch.delenv("GPUSBOM_INVENTORY_KEEP_LAST")
    with Store(db) as store:
        assert start_retention(store) is None  # no policy: no thread


# ------------------------------------------------------------------------------ pages


def test_pages_are_the_straightforward_answers(history: str) -> None:
    """``affected_rows`` and ``query_rows`` (each distinct set matched once, expanded to
    its scans as rows are taken) against the straightforward computation: every latest
    scan loaded whole and matched / searched on its own; a page's first rows, total,
    subjects and ``found`` against the whole list."""
    import itertools

    from gpusbom.advisories.db import load_active
    from gpusbom.advisories.matcher import match
    from gpusbom.inventory.normalize import name_key, scan_kind, subject_of

    adb = load_active()
    rng = parse_range("<9.2")  # the hosts' latest cuDNN: 9.1.0
    with Store(history) as store:
        latest = store.latest_scans()
        assert len(latest) == 7
        # affected: each scan on its own
        want = set()
        for r in latest:
            for f in match(r.components, adb, target_kind=scan_kind(r)):
                if f.advisory is not None and f.advisory.status == "affected":
                    want.add((subject_of(r), f.advisory.advisory, f.advisory.vulnerability,
                              f.advisory.installed_version))
        rows = store.affected(adb)
        got = {(x.subject, x.advisory, x.vulnerability, x.installed_version) for x in rows}
        assert want and got == want
        keys = [(x.advisory, x.vulnerability, x.kind, x.subject, x.component,
                 x.installed_version or "", x.scan_id) for x in rows]
        assert keys == sorted(keys)
        for n in (0, 1, 7, len(rows) + 5):
            page = store.affected_rows(adb)
            assert page.total == len(rows)
            assert page.found is True
            assert page.subjects == {(x.kind, x.subject) for x in rows
                                     if x.status == "affected"}
            assert list(itertools.islice(page, n)) == rows[:n]
        # where: each scan's components named cudnn (package or GPU product) below 9.2
        want_q = set()
        for r in latest:
            for c in r.components:
                prod = [p for p in c.products if p.name == "cudnn"]
                ver = (prod[0].version or c.version) if prod else c.version
                if (prod or name_key(c.name) == "cudnn") and rng.contains(
                        ver, c.ecosystem, bool(prod)):
                    want_q.add((subject_of(r), c.name, c.version))
        qrows = store.query("cudnn", rng)
        assert want_q and {(x.subject, x.component, x.version) for x in qrows} == want_q
        qkeys = [(x.kind, x.subject, x.ts, x.component, x.version or "", x.location or "",
                  x.scan_id) for x in qrows]
        assert qkeys == sorted(qkeys)
        page_q = store.query_rows("cudnn", rng, labels={"pool": "a"})
        a_rows = [x for x in qrows if x.labels.get("pool") == "a"]
        assert page_q.total == len(a_rows) and 0 < len(a_rows) < len(qrows)
        assert page_q.subjects == {(x.kind, x.subject) for x in a_rows}
        assert list(itertools.islice(page_q, 2)) == a_rows[:2]
        # the dashboard's search: the first ROW_LIMIT rows, the total and subjects of all
        from gpusbom.inventory.web import pages

        web = pages.search(store, {"component": "cudnn", "version": "<9.2"})
        assert web["total"] == len(qrows) and web["error"] is None
        assert web["subjects"] == len({(x.kind, x.subject) for x in qrows})
        assert [r["scan_id"] for r in web["rows"]] == [x.scan_id for x in qrows]
        # hosts: the first by name, and the count
        every = store.subjects("host")
        assert store.subjects("host", limit=2) == every[:2]
        assert store.count_subjects("host") == len(every) == 6
        assert store.count_subjects() == 7


def test_canonical_pieces_by_orjson_are_json_bytes(h200_scan: ScanResult) -> None:
    """The component set's canonical JSON is written by orjson where that gives the bytes
    ``json`` gives (the scan id is their hash: ids of stored scans stay as they are), and
    by ``json`` where it would not (floats, integers past 64 bits)."""
    from gpusbom.inventory.normalize import _dumps, _dumps_fast

    doc = h200_scan.to_document()
    for k in ("components", "relationships", "stacks", "unknowns", "findings", "target"):
        assert _dumps_fast(doc[k]) == _dumps(doc[k]), k
    odd = {"k\u00e9\U0001f600": ["\x00\x01\x1f\x7f\u2028\"\\/", -3, 0, True, None],
           "E": {"z": 1, "a": [1.5, 1e-05, 2.5e-07, 1e16, 123.0]}, "big": 2 ** 70,
           "s": "a:1.5,b", "\uffff": 1}
    assert _dumps_fast(odd) == _dumps(odd)
    for v in ([1e-05], {"x": 2.5e-07}, [0.1], 2 ** 64, [{"a": 1e16}]):
        assert _dumps_fast(v) == _dumps(v), v


def test_overview_counted_per_set_is_the_per_host_one(history: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The dashboard overview counted per distinct (kind, sets, stack) weighted by hosts,
    with the first ROW_LIMIT rows read by name, against the per-host computation it
    replaced (overview_ref.py), whole and with the lists cut at 2 rows."""
    import overview_ref

    from gpusbom.inventory.web import pages

    with Store(history) as store:
        want = overview_ref.overview_per_host(store)
        assert want["hosts"] == 6 and want["by_driver_branch"]
        assert pages._overview(store) == want
        monkeypatch.setattr(pages, "ROW_LIMIT", 2)
        monkeypatch.setattr(overview_ref, "ROW_LIMIT", 2)
        cut = overview_ref.overview_per_host(store)
        assert cut["truncated"] and len(cut["host_list"]) == 2
        assert pages._overview(store) == cut
