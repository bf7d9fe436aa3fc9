"""The inventory store on SQLite and on a real PostgreSQL server."""

from __future__ import annotations

import json
import multiprocessing
import multiprocessing.synchronize
import sys
from pathlib import Path

import pytest
from sqlalchemy import func, select

sys.path.insert(0, str(Path(__file__).resolve().parent))
from inv_scans import host_scan, image_scan

from gpusbom.advisories.db import load_records
from gpusbom.cli._common import exit_code
from gpusbom.inventory import InventoryError, Store, parse_range
from gpusbom.inventory.schema import metadata
from gpusbom.model import Finding, ScanResult

ADVISORIES = Path(__file__).resolve().parents[2] / "advisories"


def _counts(store: Store) -> dict[str, int]:
    with store.engine.connect() as conn:
        return {t.name: conn.execute(select(func.count()).select_from(t)).scalar_one()
                for t in metadata.sorted_tables}


def test_ingest_is_idempotent_and_round_trips(db_url: str, h200_scan: ScanResult) -> None:
    with Store(db_url) as store:
        sid, created = store.ingest(h200_scan)
        assert created and len(sid) == 64
        assert store.ingest(h200_scan) == (sid, False)
        # the same scan through its JSON (what `-o json` then `inventory ingest` does)
        again = ScanResult.from_dict(json.loads(json.dumps(h200_scan.to_dict())))
        assert store.ingest(again) == (sid, False)
        counts = _counts(store)
        assert counts["scans"] == 1
        assert counts["components"] == len(h200_scan.components)
        assert counts["devices"] == 2 and counts["findings"] == len(h200_scan.findings)
        [back] = store.latest_scans("host")
        assert back.to_dict() == h200_scan.to_dict()
        assert store.latest_scans("image") == []
        # labels given at ingest make it another scan
        sid2, created2 = store.ingest(h200_scan, labels={"cluster": "a"})
        assert created2 and sid2 != sid
        [hs] = store.subjects("host")
        assert hs.subject == "vm" and hs.scans == 2 and hs.latest.labels == {"cluster": "a"}
        assert [g.split(" (")[0] for g in hs.gpus] == ["NVIDIA H200", "NVIDIA H200"]
        assert hs.driver == "nvidia 580.159.04, nvidia-uvm 580.159.04"


def test_failed_ingest_leaves_nothing(db_url: str) -> None:
    bad = host_scan("node-bad", cudnn="9.0.0", torch="2.5.1")
    # a finding without a severity violates NOT NULL: the insert fails after the scan,
    # component and device rows of the same transaction were written
    bad.findings.append(Finding(id="x", kind="consistency", severity=None,  # type: ignore
                                title="broken"))
    with Store(db_url) as store:
        with pytest.raises(InventoryError) as ei:
            store.ingest(bad)
        assert "node-bad" in str(ei.value) or "host:/" in str(ei.value)
        # nothing in the index; a body written before the failed transaction (blobs go
        # first) may stay unreferenced: prune collects it
        assert all(n == 0 for k, n in _counts(store).items() if k != "blobs"), _counts(store)
        store.collect_blobs()
        assert list(store.blobs.keys()) == []
        # the store is still usable
        assert store.ingest(host_scan("node-ok"))[1] is True
        assert _counts(store)["scans"] == 1


def _pool_scan(i: int) -> ScanResult:
    """Scan number i of the concurrent-writer pool (deterministic: same i, same scan)."""
    return host_scan(f"node-{i % 300:03d}", ts=f"2026-01-{1 + i // 300:02d}T00:00:00Z",
                     cudnn=f"9.{i % 20}.0", driver=f"580.{i % 90}.01",
                     gpus=(f"0000:00:{i % 8:02x}.0",))


def _writer(url: str, indices: list[int], q: multiprocessing.Queue,  # type: ignore[type-arg]
            start: multiprocessing.synchronize.Barrier) -> None:
    try:
        created = 0
        scans = [_pool_scan(i) for i in indices]
        with Store(url) as store:
            start.wait(120)  # everyone at once: the shared scans race
            for r in scans:
                created += store.ingest(r)[1]
        q.put(("ok", created))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        q.put(("error", f"{type(exc).__name__}: {exc}"))


def test_twenty_concurrent_writers(db_url: str) -> None:
    """20 processes ingest 50 scans each into a new database (the schema is created by
    whichever opens it first); every writer starts with the same 10 scans, so duplicate
    ingests race, then 40 scans of its own."""
    writers, shared, own = 20, 10, 40
    plan = [list(range(shared)) + list(range(shared + w * own, shared + (w + 1) * own))
            for w in range(writers)]
    assert all(len(p) == 50 for p in plan)
    distinct = set().union(*map(set, plan))
    assert len(distinct) == shared + writers * own == 810
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    start = ctx.Barrier(writers)
    procs = [ctx.Process(target=_writer, args=(db_url, p, q, start)) for p in plan]
    for p in procs:
        p.start()
    answers = [q.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(60)
    errors = [a for a in answers if a[0] != "ok"]
    assert not errors, errors
    assert sum(a[1] for a in answers) == len(distinct)  # each scan created exactly once
    with Store(db_url) as store:
        counts = _counts(store)
        assert counts["scans"] == len(distinct)
        expected = {store_id(i) for i in distinct}
        assert {s.id for s in store.scans()} == expected
        # content-addressed: one component set per distinct content, stored once whatever
        # the race (the shared scans were ingested by all 20 writers at once)
        from gpusbom.inventory.normalize import split

        csets = {split(_pool_scan(i)).cset for i in distinct}
        per_scan = len(_pool_scan(0).components)
        assert counts["content_sets"] >= len(csets)
        assert counts["components"] == per_scan * len(csets)
        assert counts["devices"] == len(csets)
        # nothing duplicated inside a set either
        with store.engine.connect() as conn:
            from gpusbom.inventory.schema import components

            dup = conn.execute(select(components.c.set_id, func.count()).group_by(
                components.c.set_id).having(func.count() != per_scan)).all()
        assert dup == []
        assert store.change_count() == len(distinct)
        # the latest scan of every host (kept by racing upserts at ingest) is its newest
        assert {s.id for s in store.scans(all_scans=False)} == _newest(store)
        assert {s.id for s in store.scans(all_scans=False)} == {
            store_id(max(i for i in distinct if i % 300 == h)) for h in range(300)}


def _newest(store: Store) -> set[str]:
    """The latest scan of every subject, computed from every scan (ts, ingested_at, id)."""
    best: dict[tuple[str, str], tuple[str, str, str]] = {}
    for s in store.scans():
        best[(s.kind, s.subject)] = max(best.get((s.kind, s.subject), ("", "", "")),
                                        (s.ts, s.ingested_at, s.id))
    return {v[2] for v in best.values()}


def store_id(i: int) -> str:
    from gpusbom.inventory.normalize import scan_id

    return scan_id(_pool_scan(i))


def _fleet(store: Store) -> None:
    s = [
        host_scan("gpu-a1", cudnn="8.9.7", torch="2.5.1", driver="580.95.05",
                  labels={"cluster": "a"}),
        host_scan("gpu-a2", cudnn="9.0.0", torch="2.6.0", driver="580.126.09",
                  labels={"cluster": "a"}),
        host_scan("gpu-b1", cudnn="9.1.0", driver="570.211.01", labels={"cluster": "b"}),
        host_scan("gpu-b2", cudnn="9.14.0", torch="2.4.0", driver="535.100.01",
                  labels={"cluster": "b"}),
        # gpu-c1 had cuDNN 9.0.0, then was upgraded: only the latest scan counts
        host_scan("gpu-c1", cudnn="9.0.0", torch="2.5.0", driver="580.65.06",
                  ts="2026-01-01T00:00:00Z"),
        host_scan("gpu-c1", cudnn="9.10.2", torch="2.7.0", driver="580.126.09",
                  ts="2026-02-01T00:00:00Z"),
        image_scan("registry.local/ml/train", "25.01", cudnn="9.0.1", torch="2.6.0a0"),
        image_scan("registry.local/ml/serve", "1.4", cudnn="9.8.0", torch="2.5.1"),
        image_scan("registry.local/ml/base", "latest", torch="2.6.0"),
    ]
    for r in s:
        assert store.ingest(r)[1]


def test_query_by_range_host_image_label(db_url: str) -> None:
    with Store(db_url) as store:
        _fleet(store)
        rows = store.query("cudnn", parse_range("<9.1"))
        assert sorted((r.kind, r.subject, r.matched_version) for r in rows) == [
            ("host", "gpu-a1", "8.9.7"), ("host", "gpu-a2", "9.0.0"),
            ("image", "registry.local/ml/train:25.01", "9.0.1")]
        assert all(r.product == "cudnn" and r.component == "libcudnn9-cuda-12" for r in rows)
        # every scan kept: gpu-c1's January scan is there too
        hist = store.query("cudnn", parse_range("<9.1"), all_scans=True)
        assert {r.subject for r in hist} == {"gpu-a1", "gpu-a2", "gpu-c1",
                                             "registry.local/ml/train:25.01"}
        assert {r.subject for r in store.query("cudnn", parse_range(">=9.1,<9.11"))} == {
            "gpu-b1", "gpu-c1", "registry.local/ml/serve:1.4"}
        assert [r.subject for r in store.query("cudnn", parse_range("==9.14"))] == ["gpu-b2"]
        # filters
        assert {r.subject for r in store.query("cudnn", host="gpu-a*")} == {"gpu-a1", "gpu-a2"}
        assert {r.subject for r in store.query("torch", image="*ml/*")} == {
            "registry.local/ml/train:25.01", "registry.local/ml/serve:1.4",
            "registry.local/ml/base:latest"}
        assert {r.subject for r in store.query("cudnn", labels={"cluster": "b"})} == {
            "gpu-b1", "gpu-b2"}
        # a package name (PEP 440 order: 2.6.0a0 is before 2.6.0)
        assert {r.subject for r in store.query("torch", parse_range("<2.6.0"))} == {
            "gpu-a1", "gpu-b2", "registry.local/ml/train:25.01", "registry.local/ml/serve:1.4"}
        # the deb package name compares in Debian order
        assert {r.subject for r in store.query("libcudnn9-cuda-12",
                                               parse_range("<9.1.0-1"))} == {
            "gpu-a1", "gpu-a2", "registry.local/ml/train:25.01"}
        assert store.query("no-such-thing") == []


def test_affected_after_adding_an_advisory(db_url: str) -> None:
    """The stored scans are re-matched: no advisory, nothing affected; add the PyTorch
    and the NVIDIA driver advisory records and exactly the carriers are listed."""
    torch_rec = json.loads((ADVISORIES / "GHSA-53q9-r3pm-6pq6.json").read_text())
    driver_rec = json.loads((ADVISORIES / "NVIDIA-5747.json").read_text())
    with Store(db_url) as store:
        _fleet(store)
        assert store.affected(load_records([], source="test")) == []
        db = load_records([torch_rec, driver_rec], source="test")
        rows = store.affected(db)
        torch = {(r.kind, r.subject, r.installed_version) for r in rows
                 if r.advisory == "GHSA-53q9-r3pm-6pq6"}
        # torch < 2.6.0 (2.6.0a0, an NGC-style pre-release, is before 2.6.0)
        assert torch == {("host", "gpu-a1", "2.5.1"), ("host", "gpu-b2", "2.4.0"),
                         ("image", "registry.local/ml/serve:1.4", "2.5.1"),
                         ("image", "registry.local/ml/train:25.01", "2.6.0a0")}
        drivers = {(r.subject, r.installed_version) for r in rows
                   if r.advisory == "NVIDIA-5747"}
        # R580 fixed in 580.126.09, R570 in 570.211.01, R535 in 535.288.01; gpu-c1's
        # affected driver was replaced by its latest scan
        assert drivers == {("gpu-a1", "580.95.05"), ("gpu-b2", "535.100.01")}
        assert all(r.status == "affected" for r in rows)
        # one advisory, by id or CVE
        only = store.affected(db, "CVE-2025-32434")
        assert {r.subject for r in only} == {s for _, s, _ in torch}
        # every scan kept: gpu-c1's January scan carried torch 2.5.0 and driver 580.65.06
        hist = {(r.subject, r.advisory) for r in store.affected(db, all_scans=True)}
        assert ("gpu-c1", "GHSA-53q9-r3pm-6pq6") in hist and ("gpu-c1", "NVIDIA-5747") in hist
        from gpusbom.errors import UsageError

        with pytest.raises(UsageError):
            store.affected(db, "CVE-1999-0001")


def test_drift_between_scans(db_url: str) -> None:
    old = host_scan("gpu-d1", ts="2026-03-01T00:00:00Z", cudnn="9.0.0", driver="570.172.08",
                    gpus=("0000:00:06.0", "0000:00:07.0"),
                    probes={"0000:00:06.0": "pass", "0000:00:07.0": "pass"},
                    extra=(("openssl", "3.0.15-1"), ("curl", "7.88.1-10")))
    new = host_scan("gpu-d1", ts="2026-03-08T00:00:00Z", cudnn="9.1.0", driver="580.126.09",
                    gpus=("0000:00:06.0",), probes={"0000:00:06.0": "fail"},
                    extra=(("openssl", "3.0.17-1"), ("jq", "1.6-2.1")))
    with Store(db_url) as store:
        a, _ = store.ingest(old)
        b, _ = store.ingest(new)
        d = store.drift("gpu-d1")
        assert (d.old.id, d.new.id) == (a, b)
        comp = {(c.change, c.key, c.before, c.after) for c in d.section("components")}
        assert ("changed", "deb:openssl", "3.0.15-1", "3.0.17-1") in comp
        assert ("added", "jq" if False else "deb:jq", None, "1.6-2.1") in comp
        assert ("removed", "deb:curl", "7.88.1-10", None) in comp
        assert ("changed", "deb:libcudnn9-cuda-12", "9.0.0-1", "9.1.0-1") in comp
        assert not any(c.key == "deb:libc6" for c in d.changes)
        drv = {(c.key, c.before, c.after) for c in d.section("driver")}
        assert ("kernel module nvidia", "570.172.08", "580.126.09") in drv
        assert ("nvidia-driver libcuda", "570.172.08", "580.126.09") in drv
        dev = {(c.change, c.key) for c in d.section("devices")}
        assert dev == {("removed", "0000:00:07.0")}
        probes = {(c.change, c.key, c.before, c.after) for c in d.section("probes")}
        assert ("changed", "cuda:0 NVIDIA H200", "pass", "fail (wrong result)") in probes
        assert ("removed", "cuda:1 NVIDIA H200", "pass", None) in probes
        # explicit scans, by id prefix, reversed
        back = store.drift(from_scan=b[:10], to_scan=a[:10])
        assert ("added", "0000:00:07.0") in {(c.change, c.key) for c in back.changes}
        from gpusbom.errors import InputError

        store.ingest(host_scan("gpu-lonely"))
        with pytest.raises(InputError, match="one scan"):
            store.drift("gpu-lonely")
        with pytest.raises(InputError, match="no scans"):
            store.drift("gpu-unknown")


def test_metrics_exposition(db_url: str) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    with Store(db_url) as store:
        store.ingest(host_scan("gpu-m1", ts="2026-01-01T00:00:00Z",
                               gpus=("0000:00:06.0", "0000:00:07.0"),
                               probes={"0000:00:06.0": "pass", "0000:00:07.0": "fail"}))
        store.ingest(image_scan("registry.local/ml/serve", "1.4", torch="2.5.1"))
        now = 1767225600.0 + 3600
        text = store.metrics(now=now)
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    age = {s.labels["subject"]: s.value for s in fams["gpusbom_inventory_scan_age_seconds"]
           .samples}
    assert age == {"gpu-m1": 3600.0, "registry.local/ml/serve:1.4": 3600.0}
    sev = {(s.labels["subject"], s.labels["severity"]): s.value
           for s in fams["gpusbom_inventory_findings"].samples}
    assert sev[("gpu-m1", "info")] == 1 and sev[("gpu-m1", "critical")] == 0
    assert sev[("registry.local/ml/serve:1.4", "high")] == 0
    probe = {(s.labels["pci_address"], s.labels["outcome"]): s.value
             for s in fams["gpusbom_inventory_probe_outcome"].samples}
    assert probe[("0000:00:06.0", "pass")] == 1 and probe[("0000:00:06.0", "fail")] == 0
    assert probe[("0000:00:07.0", "fail")] == 1 and probe[("0000:00:07.0", "pass")] == 0
    gpus = [s.labels for s in fams["gpusbom_inventory_gpu_info"].samples]
    assert {g["pci_address"] for g in gpus} == {"0000:00:06.0", "0000:00:07.0"}
    assert all(g["driver_version"] == "580.95.05" and g["compute_capability"] == "9.0"
               for g in gpus)


def test_metrics_text_is_what_the_prometheus_writer_writes(db_url: str) -> None:
    """/metrics formats the exposition directly (fast); the prometheus writer (through
    prometheus_client's generate_latest) writes the same bytes, hostile label values
    included."""
    from gpusbom.inventory.metrics import collector, families, render
    from gpusbom.writers.prometheus import exposition

    with Store(db_url) as store:
        store.ingest(host_scan('gpu-"x"\\\n<script>', gpus=("0000:00:06.0", "0000:00:07.0"),
                               probes={"0000:00:06.0": "pass", "0000:00:07.0": "timeout"}))
        store.ingest(host_scan("gpu-m2", ts="2026-01-03T10:11:12Z"))
        store.ingest(image_scan("registry.local/ml/serve", "1.4", torch="2.5.1"))
        now = 1767225600.0 + 1234.5
        assert sum(len(f[3]) for f in families(store, now)) > 30
        text = render(store, now=now)
        assert text == exposition(collector(store, now=now))
    assert 'subject="gpu-\\"x\\"\\\\\\n<script>"' in text


def test_dashboard_keeps_overview_and_metrics_until_a_scan_is_stored(db_url: str) -> None:
    """The dashboard keeps the overview and the metrics text per inventory version (count
    and newest ingest of the stored scans): the same as computed fresh, until a scan is
    stored; the scan ages of /metrics follow the clock."""
    from gpusbom.inventory.metrics import Exposition, render
    from gpusbom.inventory.web import pages

    adb = load_records([], source="test")
    with Store(db_url) as store:
        store.ingest(host_scan("gpu-c1", gpus=("0000:00:06.0",)))
        store.ingest(image_scan("registry.local/ml/serve", "1.4", torch="2.5.1"))
        cache, exp = pages.Cache(), Exposition(store)
        v1 = pages.inventory_version(store)
        first = pages.overview(store, adb, cache)
        assert first == pages.overview(store, adb) and first["hosts"] == 1
        now = 1767225600.0 + 60
        assert exp.render(v1, now=now) == render(store, now=now)
        later = exp.render(v1, now=now + 3600)  # kept gauges, ages of now
        assert later == render(store, now=now + 3600) and later != render(store, now=now)
        store.ingest(host_scan("gpu-c2", ts="2026-01-02T00:00:00Z"))
        v2 = pages.inventory_version(store)
        assert v2 != v1
        assert pages.overview(store, adb, cache)["hosts"] == 2
        assert exp.render(v2, now=now) == render(store, now=now)
        assert 'subject="gpu-c2"' in exp.render(v2, now=now)


def test_metrics_read_only_the_latest_rows_written_since(db_url: str) -> None:
    """/metrics keeps the ``latest`` rows it read and reads only those written since
    (``latest.seq``): after each kind of write (a push, a late older scan, a rematch, a
    rebuild) the text is the one computed from scratch, and a push reads one row."""
    from gpusbom.inventory.metrics import Exposition, render
    from gpusbom.inventory.web import pages

    now = 1767225600.0 + 86400 * 3
    with Store(db_url) as store:
        for i in range(6):
            store.ingest(host_scan(f"gpu-s{i}", gpus=("0000:00:06.0",)))
        exp = Exposition(store)

        def same() -> int:
            assert exp.render(pages.inventory_version(store), now=now) == render(store,
                                                                                 now=now)
            return exp._latest.last_read

        assert same() == 6
        store.ingest(host_scan("gpu-s3", ts="2026-01-02T00:00:00Z", driver="580.126.09"))
        assert same() == 1
        assert 'driver_version="580.126.09"' in exp.render(
            pages.inventory_version(store), now=now)
        # a scan older than the host's latest: the row is counted again, its scan stays
        store.ingest(host_scan("gpu-s3", ts="2025-12-31T00:00:00Z", driver="570.172.08"))
        assert same() == 1
        exp._latest.last_read = -1
        assert same() == -1  # nothing written since: the kept text, nothing read
        store.ingest(image_scan("registry.local/ml/serve", "1.4", torch="2.5.1"))
        assert same() == 1
        store.rematch(load_records([], source="empty"))
        assert same() >= 1
        store.rebuild_latest()  # every row written again: all read again
        assert same() == 7


def test_migrated_schema_matches_the_tables(db_url: str) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    with Store(db_url) as store, store.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), metadata)
    assert diff == []


def test_bad_urls_are_input_errors(tmp_path: Path) -> None:
    for url, needle in [
        ("mysql://u:topsecret@h/x", "unsupported database"),
        ("postgresql://u:topsecret@h:port/x", "not a database URL"),
        ("sqlite://", "in-memory"),
        ("postgresql://u:topsecret@127.0.0.1:1/x", "inventory database"),
    ]:
        with pytest.raises(InventoryError) as ei:
            Store(url)
        msg = str(ei.value)
        assert needle in msg and "topsecret" not in msg and "\n" not in msg
        assert exit_code(ei.value) == 3
    with pytest.raises(InventoryError, match="cannot create its directory"):
        (tmp_path / "file").write_text("x")
        Store(f"sqlite:///{tmp_path}/file/sub/inv.db")


def test_postgresql_wrong_password_and_missing_db(pg) -> None:  # type: ignore[no-untyped-def]
    url = pg.create_db()
    dbname = url.rsplit("/", 1)[1]
    with pytest.raises(InventoryError) as ei:
        Store(pg.url(dbname, password="wrong-Pw-123"))
    msg = str(ei.value)
    assert "password authentication failed" in msg
    assert "wrong-Pw-123" not in msg and pg.password not in msg and "***" in msg
    with pytest.raises(InventoryError, match="does not exist"):
        Store(pg.url("no_such_db"))
