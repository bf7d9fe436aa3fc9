"""``gpusbom inventory ...`` as a person runs it: every command, every format, the errors."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from inv_scans import host_scan, image_scan

from gpusbom.inventory import Store

REPO = Path(__file__).resolve().parents[2]


def gpusbom(*args: str, stdin: str | None = None, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpusbom", *args], input=stdin,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})


def _write(path: Path, result) -> Path:  # type: ignore[no-untyped-def]
    path.write_text(json.dumps(result.to_document()))
    return path


@pytest.fixture
def fleet_files(tmp_path: Path) -> list[Path]:
    return [
        _write(tmp_path / "a1-old.json", host_scan("gpu-a1", ts="2026-01-01T00:00:00Z",
                                                    cudnn="9.0.0", driver="570.172.08",
                                                    probes={"0000:00:06.0": "pass"})),
        _write(tmp_path / "a1.json", host_scan("gpu-a1", ts="2026-01-08T00:00:00Z",
                                                cudnn="9.1.0", driver="580.95.05",
                                                probes={"0000:00:06.0": "fail"})),
        _write(tmp_path / "b1.json", host_scan("gpu-b1", cudnn="8.9.7", driver="580.159.04")),
        _write(tmp_path / "img.json", image_scan("registry.local/ml/serve", "1.4",
                                                 cudnn="9.0.1", torch="2.5.1")),
    ]


def test_cli_end_to_end(db_url: str, fleet_files: list[Path], tmp_path: Path) -> None:
    env = {"GPUSBOM_INVENTORY_DB": db_url}
    p = gpusbom("inventory", "ingest", *map(str, fleet_files[:3]), env=env)
    assert p.returncode == 0, p.stderr
    assert p.stderr.count(": stored ") == 3
    # stdin, and the same file again: stored once
    p = gpusbom("inventory", "ingest", "-", str(fleet_files[2]), "--label", "team=ml",
                stdin=fleet_files[3].read_text(), env=env)
    assert p.returncode == 0, p.stderr
    assert "stdin: stored" in p.stderr and "(image registry.local/ml/serve:1.4)" in p.stderr
    # b1 with a label was a new scan of gpu-b1; without, it is the first one again
    p = gpusbom("inventory", "ingest", str(fleet_files[2]), env=env)
    assert "already stored" in p.stderr

    # query: table for people, CSV and JSON for machines
    p = gpusbom("inventory", "query", "cudnn", "--version", "<9.1", env=env)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].split()[:4] == ["KIND", "SUBJECT", "COMPONENT", "VERSION"]
    # the latest scan of each: gpu-b1's labelled scan replaced its first one
    assert sorted(ln.split()[1] for ln in lines[1:]) == ["gpu-b1",
                                                        "registry.local/ml/serve:1.4"]
    assert "component(s) on 2 host(s)/image(s)" in p.stderr
    out = tmp_path / "q.csv"
    p = gpusbom("inventory", "query", "cudnn", "-V", "<9.1", "--host", "gpu-*", "-f", "csv",
                "-o", str(out), env=env)
    assert p.returncode == 0 and p.stdout == ""
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert {(r["subject"], r["matched_version"]) for r in rows} == {("gpu-b1", "8.9.7")}
    p = gpusbom("inventory", "query", "cudnn", "--label", "team=ml", "-f", "json", env=env)
    assert {r["subject"] for r in json.loads(p.stdout)} == {"gpu-b1",
                                                           "registry.local/ml/serve:1.4"}

    # hosts / images
    p = gpusbom("inventory", "hosts", "-f", "json", env=env)
    hosts = {h["subject"]: h for h in json.loads(p.stdout)}
    assert set(hosts) == {"gpu-a1", "gpu-b1"}
    assert hosts["gpu-a1"]["scans"] == 2 and hosts["gpu-a1"]["driver"] == "nvidia 580.95.05"
    assert hosts["gpu-b1"]["labels"] == {"team": "ml"}
    p = gpusbom("inventory", "images", env=env)
    assert "registry.local/ml/serve:1.4" in p.stdout and p.returncode == 0

    # affected, against the bundled advisory database: the R580 driver below 580.126.09
    # and torch 2.5.1
    p = gpusbom("inventory", "affected", "--all", "-f", "json", env=env)
    assert p.returncode == 0, p.stderr
    got = {(r["subject"], r["advisory"]) for r in json.loads(p.stdout)}
    assert ("gpu-a1", "NVIDIA-5747") in got
    assert ("registry.local/ml/serve:1.4", "GHSA-53q9-r3pm-6pq6") in got
    assert not any(s == "gpu-b1" for s, _ in got)
    p = gpusbom("inventory", "affected", "CVE-2025-32434", "--fail", env=env)
    assert p.returncode == 1 and "registry.local/ml/serve:1.4" in p.stdout
    p = gpusbom("inventory", "affected", env=env)
    assert p.returncode == 2 and "--all" in p.stderr

    # drift of gpu-a1: driver, probe and cuDNN changed
    p = gpusbom("inventory", "drift", "gpu-a1", env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("host gpu-a1: ")
    assert "kernel module nvidia" in p.stdout and "570.172.08" in p.stdout
    p = gpusbom("inventory", "drift", "gpu-a1", "-f", "json", env=env)
    changes = {(c["section"], c["key"]): c for c in json.loads(p.stdout)["changes"]}
    assert changes[("probes", "cuda:0 NVIDIA H200")]["after"] == "fail (wrong result)"
    assert changes[("components", "deb:libcudnn9-cuda-12")]["after"] == "9.1.0-1"

    # metrics for node-exporter's textfile collector
    prom = tmp_path / "gpusbom.prom"
    p = gpusbom("inventory", "metrics", "-o", str(prom), env=env)
    assert p.returncode == 0, p.stderr
    from prometheus_client.parser import text_string_to_metric_families

    fams = {f.name: f for f in text_string_to_metric_families(prom.read_text())}
    probe = {(s.labels["subject"], s.labels["outcome"]): s.value
             for s in fams["gpusbom_inventory_probe_outcome"].samples}
    assert probe[("gpu-a1", "fail")] == 1 and probe[("gpu-a1", "pass")] == 0

    # export: the stored scan back, exactly
    p = gpusbom("inventory", "export", "registry.local/ml/serve:1.4", env=env)
    back = json.loads(p.stdout)
    assert back["target"]["labels"] == {"team": "ml"}
    want = json.loads(fleet_files[3].read_text())
    want["target"]["labels"] = {"team": "ml"}
    assert back == want


def test_cli_bad_input_stops_there(tmp_path: Path, fleet_files: list[Path]) -> None:
    """Files are stored as they are read (one scan in memory at a time): a bad file is one
    error line (exit 3) and stores nothing of its own; the files before it stay stored."""
    db = f"sqlite:///{tmp_path / 'inv.db'}"
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "gpusbom/scan/1", "target": {"kind": "host"')  # truncated
    p = gpusbom("inventory", "ingest", "--db", db, str(fleet_files[0]), str(bad),
                str(fleet_files[1]))
    assert p.returncode == 3
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 2 and "stored" in lines[0] and str(fleet_files[0]) in lines[0]
    assert lines[1].startswith("gpusbom: error: ") and "bad.json" in lines[1]
    with Store(db) as store:
        assert len(store.scans()) == 1  # the first file; the bad one and those after: none
    p = gpusbom("inventory", "ingest", "--db", db, str(tmp_path / "missing.json"))
    assert p.returncode == 3 and p.stderr.strip() == \
        f"gpusbom: error: {tmp_path / 'missing.json'}: no such file"
    with Store(db) as store:
        assert len(store.scans()) == 1
    p = gpusbom("inventory", "query", "cudnn", "--version", "<<9", "--db", db)
    assert p.returncode == 2 and "version range" in p.stderr


def test_cli_database_errors_hide_the_password(pg, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    url = pg.create_db()
    for bad_url in (
        pg.url(url.rsplit("/", 1)[1], password="Wr0ng-secret"),
        "postgresql://gpusbom:Wr0ng-secret@127.0.0.1:1/inventory",
        "mysql://gpusbom:Wr0ng-secret@localhost/inventory",
        "postgresql://gpusbom:Wr0ng-secret@127.0.0.1:notaport/inventory",
    ):
        p = gpusbom("inventory", "hosts", "--db", bad_url)
        assert p.returncode == 3, (bad_url, p.stderr)
        assert len(p.stderr.strip().splitlines()) == 1, p.stderr
        assert "Wr0ng-secret" not in p.stderr + p.stdout
        assert p.stderr.startswith("gpusbom: error: inventory database")
    # the environment variable is the same as --db
    p = gpusbom("inventory", "hosts", env={"GPUSBOM_INVENTORY_DB": url})
    assert p.returncode == 0, p.stderr


def test_scan_push_and_sbom_ingest(pg, h200_root: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """scan --root --push stores the host; its CycloneDX and SPDX SBOMs ingest too (through
    gpusbom.sbomin): gpusbom's SBOMs say they describe host "vm", so they are two more
    scans of that host, with the same GPU products."""
    url = pg.create_db()
    env = {"SOURCE_DATE_EPOCH": "1767225600"}
    cdx, spdx = tmp_path / "h.cdx.json", tmp_path / "h.spdx.json"
    p = gpusbom("scan", "--root", str(h200_root), "--push", url, "-q",
                "-o", f"cyclonedx-json={cdx}", "-o", f"spdx-json={spdx}", env=env)
    assert p.returncode == 0, p.stderr
    with Store(url) as store:
        [pushed] = store.scans()
        assert (pushed.kind, pushed.subject) == ("host", "vm")
    p = gpusbom("inventory", "ingest", "--db", url, str(cdx), str(spdx))
    assert p.returncode == 0, p.stderr
    assert p.stderr.count(": stored ") == 2
    with Store(url) as store:
        scans = store.scans()
        assert [(s.kind, s.subject) for s in scans] == [("host", "vm")] * 3
        for s in scans:
            got = {r.matched_version for r in store.query("cudnn", all_scans=True)
                   if r.scan_id == s.id}
            assert got == {"9.14.0", "9.19.0.56"}, s.reference


def test_ingest_cyclonedx_from_another_tool(tmp_path: Path) -> None:
    """An SBOM made by cyclonedx-py (a real tool, from the sbomin tests' cache) of this
    very environment."""
    sys.path.insert(0, str(REPO / "tests" / "sbomin"))
    import sbom_tools

    tool = sbom_tools.cyclonedx_py()
    sbom = tmp_path / "env.cdx.json"
    p = subprocess.run([str(tool), "environment", "--output-reproducible", "-o", str(sbom),
                        sys.executable], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    db = f"sqlite:///{tmp_path / 'inv.db'}"
    p = gpusbom("inventory", "ingest", "--db", db, str(sbom))
    assert p.returncode == 0, p.stderr
    import sqlalchemy

    with Store(db) as store:
        rows = store.query("sqlalchemy")
        assert [r.version for r in rows] == [sqlalchemy.__version__]
        assert rows[0].ecosystem == "pypi"


def test_cli_limit_shows_the_first_rows_and_counts_all(fleet_files: list[Path],
                                                       tmp_path: Path) -> None:
    """--limit: a table shows the first N rows and a summary counting all; JSON writes
    every row unless --limit is given; --limit 0 is every row; --fail judges every row."""
    env = {"GPUSBOM_INVENTORY_DB": f"sqlite:///{tmp_path / 'inv.db'}"}
    assert gpusbom("inventory", "ingest", *map(str, fleet_files), env=env).returncode == 0
    full = json.loads(gpusbom("inventory", "affected", "--all", "-f", "json", env=env).stdout)
    assert len(full) >= 3
    p = gpusbom("inventory", "affected", "--all", "--limit", "2", "--fail", env=env)
    assert p.returncode == 1, p.stderr  # affected rows exist beyond the two shown
    body = [ln for ln in p.stdout.splitlines()[1:] if ln.strip()]
    assert len(body) == 2
    assert f"showing the first 2 of {len(full)} rows" in p.stderr
    got = json.loads(gpusbom("inventory", "affected", "--all", "-f", "json", "--limit", "2",
                             env=env).stdout)
    assert got == full[:2]
    every = gpusbom("inventory", "affected", "--all", "--limit", "0", env=env)
    assert len([ln for ln in every.stdout.splitlines()[1:] if ln.strip()]) == len(full)
    assert "showing" not in every.stderr
    p = gpusbom("inventory", "hosts", "--limit", "1", env=env)
    assert p.returncode == 0, p.stderr
    assert [ln.split()[0] for ln in p.stdout.splitlines()[1:] if ln.strip()] == ["gpu-a1"]
    assert "2 host(s); showing the first 1 of 2 hosts" in p.stderr
    hosts = json.loads(gpusbom("inventory", "hosts", "-f", "json", env=env).stdout)
    assert [h["subject"] for h in hosts] == ["gpu-a1", "gpu-b1"]
    q = gpusbom("inventory", "query", "cudnn", "--limit", "1", env=env)
    assert len([ln for ln in q.stdout.splitlines()[1:] if ln.strip()]) == 1
    assert "showing the first 1 of " in q.stderr
    assert gpusbom("inventory", "query", "cudnn", "--limit", "-1", env=env).returncode == 2
