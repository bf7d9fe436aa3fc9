"""Faults during ingest: a writer killed mid-transaction, a PostgreSQL restart during a push.

- SIGKILL: a process ingesting big scans in a loop is killed at random moments; the
  database holds only whole scans (every scan's component, finding and probe sets are
  stored whole, its body blobs are there and join back to the scan's exact bytes, no set
  row is orphaned) and takes the next ingest, on SQLite and PostgreSQL.
- a blob store missing an object: export is one error line (exit 3), the index still
  answers, ingesting the scan again puts the object back.
- restart: ``scan --push`` while the server is down and then comes back is retried (one
  warning line per retry) and stores the scan; a server that stays down is one error line,
  exit 3, no traceback, no password.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from inv_pgserver import PgServer, find_bindir
from inv_scans import host_scan
from sqlalchemy import func, select

from fixtures import imagetools as it
from gpusbom.inventory import normalize
from gpusbom.inventory.schema import SET_TABLES, content_sets, scans
from gpusbom.inventory.store import Store


def _big(i: int):  # type: ignore[no-untyped-def]
    r = host_scan(f"kill-{i:04d}", cudnn="9.1.0", driver="580.65.06")
    extra = [type(r.components[0])(name=f"pkg-{i}-{k}", version="1.0", ecosystem="deb",
                                    purl=f"pkg:deb/debian/pkg-{i}-{k}@1.0")
             for k in range(1500)]
    r.components.extend(extra)
    return r


def _ingest_forever(url: str, ready: multiprocessing.synchronize.Event) -> None:
    with Store(url) as store:
        ready.set()
        i = 0
        while True:
            store.ingest(_big(i))
            i += 1


def _consistent(store: Store) -> int:
    with store.engine.connect() as conn:
        rows = conn.execute(select(scans.c.id, scans.c.cset, scans.c.fset, scans.c.pset)).all()
        sets = {i: (k, n) for i, k, n in conn.execute(
            select(content_sets.c.id, content_sets.c.kind, content_sets.c.n))}
        per: dict[str, dict[str, int]] = {}
        for col, tables in SET_TABLES.items():
            for t in tables:
                per[t.name] = dict(conn.execute(select(t.c.set_id, func.count()).group_by(
                    t.c.set_id)).all())
    ids = {r.id for r in rows}
    for r in rows:
        assert r.cset in sets and r.fset in sets and r.pset in sets, r
    for name, counts in per.items():
        assert set(counts) <= set(sets), (name, set(counts) - set(sets))  # no orphans
    for sid, (kind, n) in sets.items():
        first = {"components": "components", "findings": "findings", "probes": "probes"}[kind]
        assert per[first].get(sid, 0) == n, (sid, kind, n)
    want = len(_big(0).components)
    for r in rows:
        assert sets[r.cset][1] == want
    for sid in ids:  # every body is there and joins back to the scan's bytes
        assert normalize.scan_id_of_bytes(store.document(sid)) == sid
    return len(ids)


def test_sigkill_mid_ingest_leaves_whole_scans(db_url: str) -> None:
    ctx = multiprocessing.get_context("fork")
    with Store(db_url):
        pass  # schema first: the kills aim at ingests, not at the migration
    total_kills = 0
    for round_ in range(4):
        ready = ctx.Event()
        p = ctx.Process(target=_ingest_forever, args=(db_url, ready))
        p.start()
        assert ready.wait(60)
        time.sleep(0.7 + 0.6 * round_)  # somewhere inside an ingest's transaction
        os.kill(p.pid, signal.SIGKILL)
        p.join(30)
        assert p.exitcode == -signal.SIGKILL
        total_kills += 1
    with Store(db_url) as store:
        before = _consistent(store)
        assert store.ingest(_big(9999))[1] is True  # still usable, nothing left locked
        assert _consistent(store) == before + 1
    assert total_kills == 4


def test_missing_blob_is_one_error_and_nothing_is_lost(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'inv.db'}"
    r = host_scan("blob-gone", cudnn="9.1.0")
    with Store(db) as store:
        sid, _ = store.ingest(r)
    cset = normalize.split(r).cset
    blob = tmp_path / "inv.blobs" / cset[:2] / cset[2:]
    assert blob.is_file()
    blob.unlink()
    p = subprocess.run([sys.executable, "-m", "gpusbom", "inventory", "export", "blob-gone",
                        "--db", db], capture_output=True, text=True, timeout=120)
    assert p.returncode == 3, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert cset in lines[0] and "missing" in lines[0], lines
    with Store(db) as store:  # the index still answers
        assert [q.subject for q in store.query("cudnn")] == ["blob-gone"] * len(
            store.query("cudnn"))
        assert store.subjects()[0].subject == "blob-gone"
        assert store.ingest(r) == (sid, False)  # the scan is stored: the blob comes back
        assert blob.is_file()
        assert normalize.scan_id_of_bytes(store.document(sid)) == sid


# --------------------------------------------------------------------------- restart


@pytest.fixture
def own_pg() -> PgServer:
    bindir = find_bindir()
    assert bindir is not None, "PostgreSQL is missing (scripts/test installs postgresql)"
    server = PgServer(bindir).start()
    yield server  # type: ignore[misc]
    server.stop()


def _layout(tmp: Path) -> Path:
    image = it.build_image([[("/etc/os-release", b'ID=debian\nVERSION_ID="12"\n')]])
    return it.write_oci_layout(tmp / "layout", image, tag="t")


def _pg_ctl(server: PgServer, *args: str) -> None:
    server._cmd(str(server.bindir / "pg_ctl"), "-D", str(server.data), *args)


def test_push_survives_postgresql_restart(own_pg: PgServer, tmp_path: Path) -> None:
    url = own_pg.create_db()
    layout = _layout(tmp_path)
    with Store(url):
        pass
    _pg_ctl(own_pg, "-m", "fast", "-w", "stop")
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpusbom", "scan", "--image", f"oci:{layout}:t", "-q",
         "--push", url, "-o", "json=/dev/null"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "GPUSBOM_PUSH_RETRY_SECONDS": "60"})
    # restart the server only once the push has said it is retrying (a fixed sleep was
    # shorter than the scan itself on a loaded 2-core CI machine: the server was back before
    # the first try and nothing was retried)
    assert proc.stderr is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)  # type: ignore[arg-type]
    reader.start()
    deadline = time.monotonic() + 90
    while not any("retrying" in ln for ln in lines) and time.monotonic() < deadline \
            and proc.poll() is None:
        time.sleep(0.1)
    log = own_pg.dir / "log"
    _pg_ctl(own_pg, "-l", str(log), "-o",
            f"-k {own_pg.sock} -h 127.0.0.1 -p {own_pg.port} -c fsync=off", "-w", "start")
    out = proc.stdout.read() if proc.stdout else ""
    proc.wait(timeout=120)
    reader.join(timeout=30)
    err = "".join(lines)
    assert proc.returncode == 0, err
    assert "retrying" in err and "Traceback" not in err
    assert own_pg.password not in out + err
    assert all(ln.startswith("gpusbom: warning: ") for ln in err.splitlines() if ln), err
    with Store(url) as store:
        assert len(store.scans()) == 1


def test_push_to_a_server_that_stays_down(own_pg: PgServer, tmp_path: Path) -> None:
    url = own_pg.create_db()
    layout = _layout(tmp_path)
    _pg_ctl(own_pg, "-m", "immediate", "-w", "stop")
    p = subprocess.run(
        [sys.executable, "-m", "gpusbom", "scan", "--image", f"oci:{layout}:t", "-q",
         "--push", url, "-o", "json=/dev/null"], capture_output=True, text=True, timeout=120,
        env={**os.environ, "GPUSBOM_PUSH_RETRY_SECONDS": "3"})
    assert p.returncode == 3, p.stderr
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("gpusbom: error: ")]
    assert len(errors) == 1 and "Traceback" not in p.stderr, p.stderr
    assert "retrying" in p.stderr and own_pg.password not in p.stderr
