"""Dashboard benchmark: every page of ``gpusbom inventory serve`` over 10,000 stored scans
on PostgreSQL; target: median server time under 300 ms per page.

The host scans are benchmarks/inventory.py's variants of the H200 snapshot's host scan
(--hosts, with differing cuDNN and driver versions; the --per-host - 1 later scans of each
host are the first one replicated in SQL, a month apart); --images image scans are
renamed copies of the nvidia-wheels fixture image's scan (fixtures/build.py), so the
matrix and image pages have real GPU code to judge. Scans are stored with the store's own
row builder (``normalize.rows``) in batches of 200 scans per transaction: the same rows
``Store.ingest`` writes, without its one-transaction-per-scan cost (the ``latest`` table
ingest keeps scan by scan is rebuilt once at the end, ``Store.rebuild_latest``).

The server is the real CLI (``gpusbom inventory serve``) in a child process; each page is
requested once cold (first request: caches empty), then --runs times; the server time is
the ``Server-Timing`` header it sets (the time from request to response start), the client
time includes HTTP on localhost. The server keeps the overview and the metrics text until
a scan is stored, so the first request is the one that computes them; the overview's data
and the metrics text are also timed computed afresh in this process (wall and CPU).

    .venv/bin/python benchmarks/dashboard.py [--hosts 2000 --per-host 5 --images 40]
    .venv/bin/python benchmarks/dashboard.py --db postgresql://...   # an inventory as it is
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "benchmarks"), str(REPO / "tests" / "inventory"),
                str(REPO / "fixtures" / "hosts")]

TARGET_MS = 300.0


def bulk_load(url: str, scans: Any, batch: int = 200) -> int:
    from gpusbom.inventory import Store, normalize
    from gpusbom.inventory.store import _INSERT_ORDER, _TABLES

    n = 0
    with Store(url) as store:
        pending: dict[str, list[dict[str, Any]]] = {t: [] for t in _INSERT_ORDER}

        def flush() -> None:
            with store.engine.begin() as conn:
                for name in _INSERT_ORDER:
                    if pending[name]:
                        conn.execute(_TABLES[name].insert(), pending[name])
                    pending[name] = []

        seen: set[str] = set()
        for result in scans:
            data = normalize.canonical_json(result)
            sid = normalize.scan_id_of_bytes(data)
            if sid in seen:
                continue
            seen.add(sid)
            rows = normalize.rows(result, sid)
            rows["scan_documents"] = [{"scan_id": sid, "encoding": "json+zlib",
                                       "data": normalize.compress(data)}]
            for name in _INSERT_ORDER:
                pending[name].extend(rows.get(name, []))
            n += 1
            if n % batch == 0:
                flush()
                print(f"  {n} scans stored", file=sys.stderr, flush=True)
        flush()
        store.rebuild_latest()
    return n


def host_scans(hosts: int, per_host: int, components: int) -> Any:
    from inventory import base_scan, variant  # benchmarks/inventory.py

    template = base_scan(components)
    for s in range(per_host):
        for h in range(hosts):
            yield variant(template, h, s, hosts)


def replicate(url: str, rounds: int) -> int:
    """Each stored host scan again ``rounds`` times, in SQL, each round one month later
    (new scan ids; same rows): the fast path to many scans per host."""
    from sqlalchemy import create_engine

    from gpusbom.inventory import normalize_url

    eng = create_engine(normalize_url(url))
    new_id = "substr(md5(scan_id || ':{r}') || md5(scan_id || ':{r}:b'), 1, 64)"
    cols = {
        "scan_documents": "scan_id, encoding, data",
        "components": "scan_id, idx, ref, name, name_key, version, type, ecosystem, purl, "
                      "stack, product, product_version, release, location, gpu_targets, "
                      "evidence_methods, properties",
        "products": "scan_id, comp_idx, n, stack, product, version",
        "devices": "scan_id, idx, ref, model, vendor, pci_address, compute_capability, "
                   "kernel_driver, driver_version, uuid, properties",
        "probes": "scan_id, idx, backend, device_id, device, device_ref, pci_address, outcome, "
                  "reason, error_name, max_abs_error, seconds",
        "findings": "scan_id, idx, rule_id, kind, severity, title, status, advisory, "
                    "component_ref, installed_version, fixed_version",
        "finding_counts": "scan_id, severity, n",
        "affected_advisories": "scan_id, advisory",
    }
    scan_cols = ("kind, subject, reference, name, digest, hostname, platform, labels, "
                 "ingested_at, tool_name, tool_version, advisory_db, components, stack_text")
    with eng.begin() as conn:
        base = conn.exec_driver_sql("SELECT count(*) FROM scans WHERE kind = 'host'").scalar()
        for r in range(1, rounds + 1):
            month = f"{1 + r:02d}"
            conn.exec_driver_sql(
                f"INSERT INTO scans (id, ts, {scan_cols}) SELECT "
                f"{new_id.format(r=r).replace('scan_id', 'id')}, "
                f"replace(ts, '2026-01-', '2026-{month}-'), {scan_cols} "
                "FROM scans WHERE kind = 'host' AND ts < '2026-02'")
            for table, c in cols.items():
                rest = c.split(", ", 1)[1]
                conn.exec_driver_sql(
                    f"INSERT INTO {table} ({c}) SELECT {new_id.format(r=r)}, {rest} "
                    f"FROM {table} WHERE scan_id IN (SELECT id FROM scans WHERE kind = 'host' "
                    "AND ts < '2026-02')")
            print(f"  round {r}: {base} more host scans", file=sys.stderr, flush=True)
    eng.dispose()
    from gpusbom.inventory import Store

    with Store(url) as store:
        store.rebuild_latest()
    return int(base or 0) * rounds


def image_scans(n: int) -> Any:
    from fixtures.build import ensure
    from gpusbom.model import ScanResult
    from gpusbom.scan import scan

    base = scan(ensure("nvidia-wheels").oci_ref).to_dict()
    for i in range(n):
        r = ScanResult.from_dict(json.loads(json.dumps(base)))
        r.target.name = f"registry.example/ml/train-{i:03d}"
        r.target.tags = ["v1"]
        r.target.labels = {**r.target.labels, "gpusbom.node": f"gpu-node-{i:05d}"}
        yield r


def timed(base: str, path: str, runs: int) -> dict[str, float]:
    import requests

    def one() -> tuple[float, float]:
        t = time.perf_counter()
        r = requests.get(base + path, timeout=600)
        wall = (time.perf_counter() - t) * 1000
        assert r.status_code == 200, (path, r.status_code, r.text[:300])
        server = float(r.headers["server-timing"].split("dur=")[1])
        return server, wall

    cold, _ = one()
    got = [one() for _ in range(runs)]
    return {"cold_ms": cold, "median_ms": statistics.median(s for s, _ in got),
            "min_ms": min(s for s, _ in got), "max_ms": max(s for s, _ in got),
            "client_median_ms": statistics.median(w for _, w in got)}


def uncached(url: str, runs: int) -> dict[str, dict[str, float]]:
    """The overview's data and the metrics text computed afresh in this process (the server
    keeps both until a scan is stored), and the search: wall and CPU time of ``runs``."""
    from gpusbom.inventory import Store
    from gpusbom.inventory.metrics import render
    from gpusbom.inventory.web import pages

    out = {}
    with Store(url) as store:
        for name, fn in (("overview data", lambda: pages._overview(store)),
                         ("metrics text", lambda: render(store)),
                         ("search cudnn <9.1", lambda: pages.search(store, {
                             "component": "cudnn", "version": "<9.1"}))):
            fn()
            wall, cpu = [], []
            for _ in range(runs):
                t, c = time.perf_counter(), time.process_time()
                fn()
                wall.append((time.perf_counter() - t) * 1000)
                cpu.append((time.process_time() - c) * 1000)
            out[name] = {"min_ms": min(wall), "median_ms": statistics.median(wall),
                         "cpu_median_ms": statistics.median(cpu)}
            print(f"{name + ', uncached, in process':46} {'':8} {min(wall):8.0f} "
                  f"{statistics.median(wall):8.0f} {max(wall):8.0f}   cpu {statistics.median(cpu):.0f}")
    return out


def main() -> int:
    # it writes the rows of the schema before 0004 (one copy per scan) and replicates them
    # in SQL by scan id: the content-addressed schema has no such rows. Its pages are
    # measured by benchmarks/inventory.py (/, /matrix, /metrics at 1,000 and 900,000 scans).
    print("benchmarks/dashboard.py: written for the inventory schema before 0004; use "
          "benchmarks/inventory.py (docs/performance.md, 'Fleet inventory')", file=sys.stderr)
    return 2
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=2000)
    ap.add_argument("--per-host", type=int, default=5)
    ap.add_argument("--images", type=int, default=40)
    ap.add_argument("--components", type=int, default=150)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--json", help="Write the figures to this file.")
    ap.add_argument("--db", help="Time the pages over this inventory (a database this "
                    "benchmark filled before, kept) instead of filling a new one.")
    a = ap.parse_args()
    from inv_pgserver import PgServer, find_bindir

    os.environ.setdefault("GPUSBOM_CACHE_DIR", tempfile.mkdtemp(prefix="gpusbom-bench-"))
    server = None
    proc = None
    try:
        if a.db:
            url = a.db
            from sqlalchemy import func, select

            from gpusbom.inventory import Store
            from gpusbom.inventory.schema import scans as scans_table

            with Store(url) as store, store.engine.connect() as conn:  # migrates it
                n = conn.execute(select(func.count()).select_from(scans_table)).scalar_one()
            print(f"{n} scans stored in {Store(url).display_url}")
        else:
            bindir = find_bindir()
            if bindir is None:
                print("PostgreSQL server binaries not found (apt-get install postgresql)")
                return 1
            server = PgServer(bindir, fast=False).start()
            url = server.create_db("dash")
            t = time.perf_counter()
            n = bulk_load(url, host_scans(a.hosts, 1, a.components))
            n += replicate(url, a.per_host - 1)
            n += bulk_load(url, image_scans(a.images))
            print(f"stored {n} scans ({a.hosts} hosts x {a.per_host} scans of ~{a.components} "
                  f"components, the 2nd to last scan of each host replicated in SQL; "
                  f"{a.images} images) in {time.perf_counter() - t:.0f} s")
            server.psql("ANALYZE", db="dash")
        port = 18000 + os.getpid() % 1000
        print(f"load average before the run: {os.getloadavg()[0]:.2f} (1 min)")
        proc = subprocess.Popen([sys.executable, "-m", "gpusbom", "inventory", "serve",
                                 "--db", url, "--bind", f"127.0.0.1:{port}"],
                                stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}/"
        import requests

        for _ in range(300):
            try:
                requests.get(base + "static/style.css", timeout=2)
                break
            except requests.ConnectionError:
                time.sleep(0.2)
        img = f"registry.example/ml/train-{min(a.images - 1, 7):03d}:v1"
        gpu = requests.get(base + "api/matrix", timeout=600).json()["columns"][0]["key"]
        pages = ["", "search?component=cudnn&version=%3C9.1", "advisories",
                 "advisory?id=NVIDIA-5821", "matrix", f"cell?image={quote(img)}&gpu={quote(gpu)}",
                 f"host?name=gpu-node-{min(a.hosts - 1, 42):05d}", f"image?name={quote(img)}", "api/overview",
                 "api/matrix", "metrics"]
        figures = {}
        print(f"{'page':46} {'cold':>8} {'min':>8} {'median':>8} {'max':>8} {'client':>8}  (ms, "
              f"server time, {a.runs} runs)")
        for p in pages:
            f = timed(base, p, a.runs)
            figures[p or "/"] = f
            mark = "" if f["median_ms"] < TARGET_MS or p == "metrics" else "  OVER TARGET"
            print(f"/{p[:45]:45} {f['cold_ms']:8.0f} {f['min_ms']:8.0f} {f['median_ms']:8.0f} "
                  f"{f['max_ms']:8.0f} "
                  f"{f['client_median_ms']:8.0f}{mark}")
        fresh = uncached(url, a.runs)
        load = os.getloadavg()
        print(f"load average after the run: {load[0]:.2f} (1 min), {load[1]:.2f} (5 min)")
        if a.json:
            Path(a.json).write_text(json.dumps({"scans": n, "pages": figures,
                                                "uncached": fresh, "loadavg": load},
                                               indent=2) + "\n")
        over = [p for p, f in figures.items() if f["median_ms"] >= TARGET_MS and p != "metrics"]
        return 1 if over else 0
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(10)
        if server is not None:
            server.stop()


if __name__ == "__main__":
    raise SystemExit(main())
