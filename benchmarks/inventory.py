"""Fleet inventory benchmark: ingest 10,000 scans, then ask "where is cuDNN < 9.1".

The scans are variants of a real one: the host scan of the committed H200 snapshot
(fixtures/hosts/h200), kept to its GPU stack, devices, drivers and firmware plus the first
packages up to --components, with each variant on its own host name, time, cuDNN version
(deb and wheel) and NVIDIA driver version. --hosts hosts get --scans scans each in all.

Runs on SQLite (a file) and on PostgreSQL (a private Debian cluster started here, default
settings: fsync on). Prints ingest throughput and query times (target: < 1 s each).

    .venv/bin/python benchmarks/inventory.py [--hosts 2000 --per-host 5] [--components 150]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

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


def variant(template: str, host: int, scan: int, hosts: int) -> object:
    from gpusbom.model import ScanResult

    full = CUDNN[(host * 7 + scan) % len(CUDNN)] if scan else CUDNN[host % len(CUDNN)]
    cudnn = ".".join(full.split(".")[:3])
    driver = DRIVERS[(host + scan * 3) % len(DRIVERS)]
    day = 1 + scan * 7
    text = (template.replace("@CUDNN_FULL@", full).replace("@CUDNN@", cudnn)
            .replace("@DRIVER@", driver).replace("@HOST@", f"gpu-node-{host:05d}")
            .replace("@TS@", f"2026-01-{day:02d}T{host % 24:02d}:00:00Z"))
    return ScanResult.from_dict(json.loads(text))


def expected_hits(hosts: int, per_host: int) -> int:
    """Hosts whose latest scan has cuDNN < 9.1 (each variant has one deb and one wheel)."""
    n = 0
    for h in range(hosts):
        s = per_host - 1
        full = CUDNN[(h * 7 + s) % len(CUDNN)] if s else CUDNN[h % len(CUDNN)]
        n += full.startswith(("8.", "9.0."))
    return n


def bench(url: str, label: str, template: str, hosts: int, per_host: int) -> dict[str, float]:
    from gpusbom.inventory import Store, parse_range

    total = hosts * per_host
    t0 = time.perf_counter()
    with Store(url) as store:
        for s in range(per_host):
            for h in range(hosts):
                store.ingest(variant(template, h, s, hosts))  # type: ignore[arg-type]
        ingest_s = time.perf_counter() - t0
        rng = parse_range("<9.1")
        times, all_times = [], []
        rows = all_rows = []
        for _ in range(5):
            t = time.perf_counter()
            rows = store.query("cudnn", rng)
            times.append(time.perf_counter() - t)
            t = time.perf_counter()
            all_rows = store.query("cudnn", rng, all_scans=True)
            all_times.append(time.perf_counter() - t)
        subjects = {r.subject for r in rows}
        assert len(subjects) == expected_hits(hosts, per_host), (len(subjects),)
        assert len(store.scans()) == total
    print(f"{label}: ingested {total} scans in {ingest_s:.1f} s ({total / ingest_s:.1f} scans/s)")
    print(f"{label}: 'cudnn <9.1' in the latest scan of each host: {len(rows)} components on "
          f"{len(subjects)} hosts: min {min(times) * 1000:.0f} ms, median "
          f"{statistics.median(times) * 1000:.0f} ms (5 runs)")
    print(f"{label}: 'cudnn <9.1' in all {total} scans: {len(all_rows)} components: min "
          f"{min(all_times) * 1000:.0f} ms, median {statistics.median(all_times) * 1000:.0f} ms")
    return {"ingest_s": ingest_s, "query_s": statistics.median(times),
            "query_all_s": statistics.median(all_times)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=2000)
    ap.add_argument("--per-host", type=int, default=5)
    ap.add_argument("--components", type=int, default=150)
    ap.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    a = ap.parse_args()
    template = base_scan(a.components)
    n_comp = len(json.loads(template)["components"])
    print(f"{a.hosts} hosts x {a.per_host} scans = {a.hosts * a.per_host} scans of "
          f"{n_comp} components each (variants of the H200 snapshot's host scan)")
    tmp = Path(tempfile.mkdtemp(prefix="gpusbom-bench-db-"))
    try:
        return _run(a, template, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _run(a: argparse.Namespace, template: str, tmp: Path) -> int:
    if a.backend in ("sqlite", "both"):
        db = tmp / "inventory.db"
        bench(f"sqlite:///{db}", "SQLite", template, a.hosts, a.per_host)
        print(f"SQLite: database file {db.stat().st_size / 1e6:.0f} MB")
    if a.backend in ("postgresql", "both"):
        from inv_pgserver import PgServer, find_bindir

        bindir = find_bindir()
        if bindir is None:
            print("PostgreSQL: server binaries not found (apt-get install postgresql)")
            return 1
        server = PgServer(bindir, fast=False).start()
        try:
            bench(server.create_db("bench"), f"PostgreSQL {bindir.parent.name}", template,
                  a.hosts, a.per_host)
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
