"""Fleet inventory benchmark: 10,000 GPU hosts x 90 days of daily scans (900,000 scans) in a
PostgreSQL the benchmark starts (a private Debian cluster, default settings: fsync on).

The scans are variants of a real one: the host scan of the committed H200 snapshot
(fixtures/hosts/h200: 666 components and 97 findings, or the first --components), each
variant with its own cuDNN (deb and wheel) and NVIDIA driver version. Real image scans are
not in the committed fixtures at this size; the fleet is hosts only.

1. The distinct contents (a host's variant on a day) are ingested through ``Store.ingest``,
   so their component, finding and probe sets and body blobs are the real ones.
2. History is generated in bulk through the same schema: one ``INSERT ... SELECT`` over
   ``generate_series`` (host x day) per month partition, each scan row naming the set of
   the variant its host runs that day (drift: every host upgrades its driver on one day
   and its cuDNN on another, at its own offsets), its envelope the real envelope of a
   stored scan of that variant (one per variant: the bulk hosts share them, where real
   hosts have one each: 10,000 more envelope rows of ~0.8 KB, not per scan); ``latest`` is then rebuilt. Bulk rows are index rows: their
   ids are not hashes of a document (``export`` of one is not what this measures).
3. Measured: bytes per unchanged scan (the database's growth over 1,000 daily scans that
   changed nothing, ingested through ``Store.ingest``); ingest scans/s through
   ``Store.ingest`` with 1 and 4 writer processes (the ``scan --push`` path: a
   ``ScanResult`` in, one transaction per scan); p50/p95 of ``affected --all``, ``query
   cudnn <9.1`` (where), ``hosts`` as a table shows them (the first 1,000 rows and the
   totals: the commands' default) and with every row (``--format json``), ``drift``,
   and the dashboard's ``/``, ``/matrix``,
   ``/metrics`` (in process: the ASGI app called directly; the garbage collector set as the
   commands set it), each asked 10 times: "warm" as
   asked again, "cold" with one scan ingested before each request (every push changes
   the counter that keys the dashboard's caches) -- at 1,000 scans (100 hosts x 10 days),
   at 20,000 scans (the 10,000 hosts, two days) and at 900,000 (the same hosts, 90 days).

    .venv/bin/python benchmarks/inventory.py                     # 10,000 x 90
    .venv/bin/python benchmarks/inventory.py --hosts 200 --days 5 # a quick run
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "inventory"))
sys.path.insert(0, str(REPO / "fixtures" / "hosts"))

CUDNN = ["8.9.7.29", "9.0.0.312", "9.1.0.70", "9.1.1.17", "9.3.0.75", "9.5.1.17", "9.8.0.87",
         "9.10.2.21", "9.14.0.64"]
DRIVERS = ["535.247.01", "550.163.01", "570.172.08", "575.64.05", "580.95.05", "580.126.09",
           "580.159.04"]
def base_scan(components: int) -> str:
    """The H200 host scan as JSON text with placeholders for what the variants change."""
    from placeholders import materialize

    from gpusbom.host import scan_host

    os.environ.setdefault("SOURCE_DATE_EPOCH", "1767225600")
    tmp = Path(tempfile.mkdtemp(prefix="gpusbom-bench-"))
    try:
        materialize(REPO / "fixtures" / "hosts" / "h200", tmp / "h200")
        r = scan_host(str(tmp / "h200"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    keep = [c for c in r.components if c.properties.get("stack") or c.products
            or c.type.value in ("device", "device-driver", "firmware", "operating-system")]
    rest = [c for c in r.components if c not in keep]
    r.components = keep + rest[:max(0, components - len(keep))]
    refs = {c.bom_ref for c in r.components}
    r.relationships = [x for x in r.relationships if x.source in refs and x.target in refs]
    r.findings = [f for f in r.findings if not f.components or f.components[0] in refs]
    text = json.dumps(r.to_dict())
    # the snapshot's cuDNN is 9.14.0.64 (deb, product version 9.14.0) and 9.19.0.56 (wheel);
    # its driver 580.159.04
    for old, token in (("9.14.0.64", "@CUDNN_FULL@"), ("9.14.0", "@CUDNN@"),
                       ("9.19.0.56", "@CUDNN_FULL@"), ("580.159.04", "@DRIVER@")):
        text = text.replace(old, token)
    text = text.replace('"name": "vm"', '"name": "@HOST@"')
    return text.replace('"timestamp": "2026-01-01T00:00:00Z"', '"timestamp": "@TS@"')


def variant(template: str, host: int, day: int, *, cudnn: int, driver: int,
            t0: str = "2026-01-01") -> Any:
    """The scan of ``host`` on ``day`` running cuDNN ``CUDNN[cudnn]`` and driver
    ``DRIVERS[driver]``."""
    import datetime as dt

    from gpusbom.model import ScanResult

    full = CUDNN[cudnn]
    ts = (dt.datetime.fromisoformat(t0 + "T00:00:00+00:00")
          + dt.timedelta(days=day, seconds=host * 7 % 86400)).strftime("%Y-%m-%dT%H:%M:%SZ")
    text = (template.replace("@CUDNN_FULL@", full).replace("@CUDNN@", ".".join(
        full.split(".")[:3])).replace("@DRIVER@", DRIVERS[driver])
        .replace("@HOST@", f"gpu-node-{host:05d}").replace("@TS@", ts))
    return ScanResult.from_dict(json.loads(text))


def drift(host: int, day: int) -> tuple[int, int]:
    """(cuDNN index, driver index) of ``host`` on ``day``: each host starts on one of
    three (cuDNN, driver) pairs and upgrades its driver on day 20 + host % 40 and its
    cuDNN on day 50 + host % 30."""
    base = host % 3
    cudnn, driver = 1 + base, 3 + base
    if day >= 20 + host % 40:
        driver = 6
    if day >= 50 + host % 30:
        cudnn = 8
    return cudnn, driver


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def generate(url: str, template: str, hosts: int, days: int) -> dict[str, Any]:
    """The fleet's history in the database at ``url``: distinct contents ingested, the
    rest bulk-generated (see the module docstring)."""
    from sqlalchemy import text

    from gpusbom.inventory import Store
    from gpusbom.inventory.normalize import month_of
    from gpusbom.inventory.writer import ensure_partition

    t0 = time.perf_counter()
    pairs = sorted({drift(h, d) for h in range(min(hosts, 120)) for d in range(days)})
    with Store(url) as store:
        for k, (c, d) in enumerate(pairs):  # one real scan of each content
            store.ingest(variant(template, 100000 + k, 0, cudnn=c, driver=d))
        with store.engine.connect() as conn:
            got = conn.execute(text(
                "SELECT cset, fset, pset, env, NULL AS stack_text, components FROM scans "
                "ORDER BY subject")).all()
            conn.execute(text("DELETE FROM latest"))
            conn.execute(text("DELETE FROM scans"))
            conn.execute(text("CREATE TEMP TABLE variants (k int, cudnn int, driver int, "
                              "cset text, fset text, pset text, env text, "
                              "stack_text text, components int)"))
            for k, ((c, d), r) in enumerate(zip(pairs, got)):
                conn.execute(text("INSERT INTO variants VALUES (:k, :c, :d, :cs, :fs, :ps, "
                                  ":e, :st, :n)"), {"k": k, "c": c, "d": d, "cs": r.cset,
                                                    "fs": r.fset, "ps": r.pset,
                                                    "e": r.env, "st": r.stack_text,
                                                    "n": r.components})
            import datetime as dt

            start = dt.date(2026, 1, 1)
            months = sorted({month_of((start + dt.timedelta(days=x)).isoformat())
                             for x in range(days)})
            for m in months:
                ensure_partition(conn, m)
            conn.commit()
            # the drift function in SQL (the same as drift() above)
            sql = text("""
INSERT INTO scans (id, month, kind, subject, reference, name, digest, hostname, platform,
                   labels, ts, ingested_at, tool_name, tool_version, advisory_db, components,
                   cset, fset, pset, env, stamp)
SELECT md5(h::text || '/' || d::text) || md5(d::text || '/' || h::text),
       (extract(year from t)::int * 100 + extract(month from t)::int),
       'host', 'gpu-node-' || lpad(h::text, 5, '0'), 'host:/', 'gpu-node-' || lpad(h::text, 5, '0'),
       NULL, 'gpu-node-' || lpad(h::text, 5, '0'), 'linux/amd64',
       ('{"pool": "p' || (h % 16)::text || '", "cluster": "c' || (h % 4)::text || '"}')::json,
       to_char(t, 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), to_char(t, 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
       'gpusbom', '0.1.0', 'bundled@2026-08-18', v.components,
       v.cset, v.fset, v.pset, v.env, ('"' || to_char(t, 'YYYY-MM-DD"T"HH24:MI:SS"Z"') || '"')
FROM generate_series(0, CAST(:hosts AS int) - 1) AS h,
     generate_series(CAST(:d0 AS int), CAST(:d1 AS int)) AS d,
     LATERAL (SELECT timestamp '2026-01-01' + d * interval '1 day' + (h * 7 % 86400) * interval '1 second' AS t) tt,
     LATERAL (SELECT 1 + h % 3 + CASE WHEN d >= 50 + h % 30 THEN 8 - (1 + h % 3) ELSE 0 END AS c,
                     CASE WHEN d >= 20 + h % 40 THEN 6 ELSE 3 + h % 3 END AS dr) x
JOIN variants v ON v.cudnn = x.c AND v.driver = x.dr
""")
            for d0 in range(0, days, 10):
                conn.execute(sql, {"hosts": hosts, "d0": d0, "d1": min(days, d0 + 10) - 1})
                conn.commit()
        store.rebuild_latest()
        with store.engine.connect() as conn:
            conn.execute(text("UPDATE changes SET value = value + 1"))
            conn.commit()
            conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql(
                "VACUUM ANALYZE")
            n = conn.execute(text("SELECT count(*) FROM scans")).scalar()
    return {"scans": n, "seconds": time.perf_counter() - t0, "contents": len(pairs)}


def _sizes(conn: Any) -> int:
    from sqlalchemy import text

    return int(conn.execute(text("SELECT pg_database_size(current_database())")).scalar())


def bytes_per_unchanged(url: str, template: str, hosts: int, days: int, n: int = 1000
                        ) -> tuple[float, float]:
    """The database's growth per daily scan that changed nothing, ingested through
    Store.ingest: ``n`` hosts scanned on day D+1 (their first real scans: each host's
    envelope row is new, its latest row rewritten), VACUUM, then the same hosts on D+2,
    measured (database size after VACUUM, and the growth of the scans partitions alone)."""
    from sqlalchemy import text

    from gpusbom.inventory import Store

    def size(conn: Any) -> tuple[int, int]:
        conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("VACUUM")
        hist = conn.execute(text(
            "SELECT coalesce(sum(pg_total_relation_size(i.inhrelid)), 0) FROM pg_inherits i "
            "WHERE i.inhparent = 'scans'::regclass")).scalar()
        return _sizes(conn), int(hist)

    with Store(url) as store:
        for rnd in (1, 2):
            if rnd == 2:
                with store.engine.connect() as conn:
                    before = size(conn)
            for h in range(n):
                c, d = drift(h % hosts, days - 1)
                store.ingest(variant(template, h % hosts, days - 1 + rnd, cudnn=c, driver=d))
        with store.engine.connect() as conn:
            after = size(conn)
    return (after[0] - before[0]) / n, (after[1] - before[1]) / n


def _writer(url: str, template: str, jobs: list[tuple[int, int]], hosts: int, days: int,
            q: Any, go: Any) -> None:
    from gpusbom.inventory import Store

    scans = []
    for h, day in jobs:
        c, d = drift(h, days - 1)
        scans.append(variant(template, h, day, cudnn=c, driver=d))
    with Store(url) as store:
        go.wait()
        t = time.perf_counter()
        for r in scans:
            store.ingest(r)
        q.put(time.perf_counter() - t)


def ingest_rate(url: str, template: str, hosts: int, days: int, writers: int, n: int,
                day: int) -> float:
    """Scans/s through Store.ingest with ``writers`` processes (the scans built before the
    clock starts: what is timed is the store's work)."""
    ctx = multiprocessing.get_context("fork")
    q, go = ctx.Queue(), ctx.Barrier(writers + 1)
    jobs = [(h % hosts, day + h // hosts) for h in range(n)]
    procs = [ctx.Process(target=_writer, args=(url, template, jobs[w::writers], hosts, days,
                                               q, go)) for w in range(writers)]
    for p in procs:
        p.start()
    go.wait()
    t = time.perf_counter()
    for p in procs:
        p.join()
    wall = time.perf_counter() - t
    return n / wall


def latencies(url: str, template: str, hosts: int, days: int, reps: int = 10
              ) -> dict[str, dict[str, float]]:
    """p50/p95 milliseconds of each question, warm and cold (see the module docstring)."""
    from inv_asgi import asgi_get

    from gpusbom.advisories.db import load_active
    from gpusbom.inventory import Store, parse_range
    from gpusbom.inventory.reports import TABLE_LIMIT
    from gpusbom.inventory.web.app import create_app

    import gc

    from gpusbom.cli.app import GC_THRESHOLD

    adb = load_active()
    # the collector as the commands run it: the CLI's cadence (cli.app._tune_gc) and what
    # is loaded frozen (the dashboard on creation, `inventory affected` after loading the
    # advisory database: gpusbom._gc.freeze_loaded)
    gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])
    app = create_app(url, adb=adb)
    out: dict[str, dict[str, float]] = {}
    feeder = Store(url)
    bump = [0]

    def push() -> None:  # one more daily scan of some host: the dashboard's caches go cold
        h = bump[0] % hosts
        bump[0] += 1
        c, d = drift(h, days - 1)
        feeder.ingest(variant(template, h, days + 5 + bump[0] // hosts, cudnn=c, driver=d))

    with Store(url) as store:
        host = "gpu-node-00007"
        def first(page: Any) -> list[Any]:  # a table's rows: the first TABLE_LIMIT
            return list(itertools.islice(page, TABLE_LIMIT)) + [page.total]

        def hosts_table() -> Any:
            return store.subjects("host", limit=TABLE_LIMIT), store.count_subjects("host")

        asks = {
            # what the commands print in a table (the first 1,000 rows and the totals)...
            "affected --all": lambda: first(store.affected_rows(adb)),
            "where cudnn <9.1": lambda: first(store.query_rows("cudnn", parse_range("<9.1"))),
            "drift": lambda: store.drift(host),
            "hosts": hosts_table,
            # ... and with --format json / --limit 0: every row
            "affected --all, every row": lambda: store.affected(adb),
            "where cudnn <9.1, every row": lambda: store.query("cudnn", parse_range("<9.1")),
            "hosts, every row": lambda: store.subjects("host"),
            "/": lambda: asgi_get(app, "/"),
            "/matrix": lambda: asgi_get(app, "/matrix"),
            "/metrics": lambda: asgi_get(app, "/metrics"),
        }
        for name, fn in asks.items():
            # the CLI's questions keep no cache: one mode; the dashboard's cold and warm
            for mode in (("cold", "warm") if name.startswith("/") else ("cli",)):
                times = []
                fn()
                # every row of a 10,000-host answer takes seconds: 5 samples
                for _ in range(5 if "every row" in name else reps):
                    if mode == "cold":
                        push()
                    t = time.perf_counter()
                    r = fn()
                    times.append((time.perf_counter() - t) * 1000)
                    if name.startswith("/"):
                        assert r[0] == 200, (name, r[0])
                out[f"{name} ({mode})"] = {"p50": _pct(times, 0.5), "p95": _pct(times, 0.95)}
    feeder.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=10000)
    ap.add_argument("--days", type=int, default=90)
    ap.add_argument("--small-hosts", type=int, default=100, help="the 1,000-scan fleet")
    ap.add_argument("--small-days", type=int, default=10)
    ap.add_argument("--components", type=int, default=10000)
    ap.add_argument("--ingest", type=int, default=400, help="scans per ingest-rate run")
    ap.add_argument("--json", help="write the figures here too")
    a = ap.parse_args()
    from inv_pgserver import PgServer, find_bindir

    template = base_scan(a.components)
    doc = json.loads(template)
    print(f"base scan: {len(doc['components'])} components, {len(doc['findings'])} findings "
          f"(the H200 snapshot's host scan); {os.cpu_count()} CPUs")
    bindir = find_bindir()
    if bindir is None:
        print("PostgreSQL: server binaries not found (apt-get install postgresql)")
        return 1
    figures: dict[str, Any] = {"cpus": os.cpu_count(), "postgresql": bindir.parent.name}
    server = PgServer(bindir, fast=False).start()
    try:
        # 1,000 scans (a small fleet); the large fleet with two days of history; and with
        # --days of it: history grows 90x between the last two, the fleet not at all
        for label, hosts, days in (("small", a.small_hosts, a.small_days),
                                   ("days2", a.hosts, 2), ("large", a.hosts, a.days)):
            url = server.create_db(f"bench_{label}")
            g = generate(url, template, hosts, days)
            print(f"[{label}] {g['scans']:,} scans ({hosts:,} hosts x {days} days, "
                  f"{g['contents']} distinct contents) generated in {g['seconds']:.0f} s")
            from gpusbom.inventory import Store

            with Store(url) as store, store.engine.connect() as conn:
                size = _sizes(conn)
            print(f"[{label}] database {size / 1e6:,.0f} MB = "
                  f"{size / g['scans']:,.0f} bytes per stored scan")
            lat = latencies(url, template, hosts, days)
            for k, v in lat.items():
                print(f"[{label}] {k:28s} p50 {v['p50']:8.1f} ms   p95 {v['p95']:8.1f} ms")
            figures[label] = {"scans": g["scans"], "db_bytes": size, "latency_ms": lat}
            if label == "large":
                b, hist = bytes_per_unchanged(url, template, hosts, days)
                print(f"[{label}] bytes per unchanged daily scan: {b:,.0f} (database), "
                      f"{hist:,.0f} (scans partitions with their indexes)")
                figures["bytes_per_unchanged_scan"] = b
                figures["history_bytes_per_unchanged_scan"] = hist
                for w in (1, 4):
                    rate = ingest_rate(url, template, hosts, days, w, a.ingest,
                                       days + 20 + w)
                    print(f"[{label}] ingest, {w} writer(s): {rate:.1f} scans/s")
                    figures[f"ingest_{w}_writers_per_s"] = rate
    finally:
        server.stop()
    if a.json:
        Path(a.json).write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
