"""Migration 0004 (content-addressed scans) on a database made by the release before it.

The old database is written by the old code itself: ``git archive`` of the release commit's
``src/gpusbom`` into a temporary directory, run in a subprocess with that tree first on
``sys.path`` (no committed binary database). It stores a fleet (the real H200 host scan,
hosts scanned again with and without changes, labels, an image, a probe) and records what
every question answers. The current code then opens the database (migrating it) and must
answer the same: every scan kept with its id and exact bytes (export), the latest scan of
each subject, the hosts/images lists with their scan counts and finding counts, where
cuDNN is, who an advisory affects, drift.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from io import BytesIO
from pathlib import Path

import pytest
from inv_scans import host_scan, image_scan

from gpusbom.inventory import Store
from gpusbom.model import ProbeResult, ScanResult

REPO = Path(__file__).resolve().parents[2]
#: the release whose database is migrated: the last landed main before schemas 0003-0004
#: (analyses, content-addressed scans)
RELEASE = "4168d7f3cd14b46455e4204b5644615056e3e162"

# what the old code answers (run under the old tree), printed as JSON
_RECORD = r'''
import json, sys
import gpusbom
from gpusbom.inventory import Store, parse_range
from gpusbom.model import ScanResult
from gpusbom.advisories.db import load_active
url, files = sys.argv[1], sys.argv[2:]
assert gpusbom.__file__.startswith(__import__("os").environ["OLD_TREE"]), gpusbom.__file__
with Store(url) as store:
    for f in files:
        store.ingest(ScanResult.from_dict(json.load(open(f))))
print(json.dumps(__import__("answers").answers(Store(url), load_active())))
'''

# the questions, asked the same way of the old and the new code
_ANSWERS = r'''
import dataclasses, json
from gpusbom.inventory import parse_range

def answers(store, adb):
    out = {}
    out["scans"] = sorted((s.id, s.kind, s.subject, s.ts, s.ingested_at,
                           json.dumps(s.labels, sort_keys=True), s.components)
                          for s in store.scans())
    out["latest"] = sorted(s.id for s in store.scans(all_scans=False))
    out["docs"] = {s.id: store.document(s.id).decode() for s in store.scans()}
    out["subjects"] = [(s.kind, s.subject, s.scans, s.latest.id, list(s.gpus), s.driver,
                        sorted(s.findings.items())) for s in store.subjects()]
    out["query"] = [dataclasses.astuple(q) for q in store.query("cudnn")]
    out["query_range"] = [dataclasses.astuple(q) for q in
                          store.query("cudnn", parse_range("<9.1"), all_scans=True)]
    out["affected"] = [dataclasses.astuple(a) for a in store.affected(adb)]
    out["affected_all"] = [dataclasses.astuple(a) for a in store.affected(adb, all_scans=True)]
    out["drift"] = [dataclasses.astuple(c) for c in store.drift("gpu-b").changes]
    out["metrics"] = store.metrics(now=1767225600.0 + 86400 * 90)
    return json.loads(json.dumps(out, default=str))
'''


@pytest.fixture(scope="module")
def old_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``src/gpusbom`` of the release, from git (the repository's own history)."""
    out = tmp_path_factory.mktemp("release")
    p = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", RELEASE,
                        "src/gpusbom"], capture_output=True, timeout=120)
    assert p.returncode == 0, ("the release commit is needed (a full clone): "
                               + p.stderr.decode(errors="replace"))
    with tarfile.open(fileobj=BytesIO(p.stdout)) as tf:
        tf.extractall(out, filter="data")
    (out / "answers.py").write_text(_ANSWERS)
    return out


def _fleet(h200: ScanResult) -> list[ScanResult]:
    scans = [h200]
    for i, lab in enumerate(("a", "b")):  # the H200 host scanned again: same content
        again = ScanResult.from_dict(h200.to_dict())
        again.target.labels = {"cluster": lab}
        again.timestamp = f"2026-02-0{i + 1}T00:00:00Z"
        scans.append(again)
    b1 = host_scan("gpu-b", ts="2026-01-02T00:00:00Z")
    b2 = host_scan("gpu-b", ts="2026-01-03T00:00:00Z", cudnn="9.1.0")
    b2.probes.append(ProbeResult(backend="cuda", outcome="fail", device="NVIDIA H200",
                                 device_id="0", reason="launch failed", seconds=0.25))
    scans += [b1, b2, host_scan("gpu-c", ts="2026-03-05T00:00:00Z"),
              image_scan("registry.local/ml/serve", "1.4", torch="2.5.1"),
              image_scan("registry.local/ml/serve", "1.4", torch="2.5.1",
                         ts="2026-01-09T00:00:00Z")]
    return scans


def _answers(store: Store) -> dict[str, object]:
    sys.path.insert(0, str(_answers_dir))
    try:
        import answers  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    from gpusbom.advisories.db import load_active

    return answers.answers(store, load_active())  # type: ignore[no-any-return]


_answers_dir = Path()
#: answers that the matcher derives from the stored scans rather than the scans themselves
_DERIVED = {"affected", "affected_all", "subjects", "metrics"}


def test_migration_keeps_every_scan_of_the_release(db_url: str, old_tree: Path,
                                                   h200_scan: ScanResult,
                                                   tmp_path: Path) -> None:
    global _answers_dir
    files = []
    for i, r in enumerate(_fleet(h200_scan)):
        f = tmp_path / f"scan{i}.json"
        f.write_text(json.dumps(r.to_dict()))
        files.append(str(f))
    env = {**os.environ, "PYTHONPATH": f"{old_tree / 'src'}{os.pathsep}{old_tree}",
           "OLD_TREE": str(old_tree / "src")}
    if db_url.startswith("sqlite"):
        env["GPUSBOM_INVENTORY_BLOBS"] = str(tmp_path / "blobs")
    p = subprocess.run([sys.executable, "-c", _RECORD, db_url, *files], capture_output=True,
                       text=True, timeout=600, env=env, cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr[-3000:]
    before = json.loads(p.stdout)
    assert len(before["scans"]) == len(files) and before["affected"] and before["query"]

    _answers_dir = old_tree
    blobs = str(tmp_path / "blobs") if db_url.startswith("sqlite") else None
    with Store(db_url, blobs=blobs) as store:  # migrates to the head
        after = _answers(store)
        assert store.change_count() == len(files)
        # one component set per distinct content, not per scan: the H200 host's three
        # scans share theirs
        from sqlalchemy import func, select

        from gpusbom.inventory.schema import content_sets, scans
        with store.engine.connect() as conn:
            n_sets = conn.execute(select(func.count()).select_from(content_sets).where(
                content_sets.c.kind == "components")).scalar()
            n_scans = conn.execute(select(func.count()).select_from(scans)).scalar()
        assert n_scans == len(files) and n_sets is not None and n_sets < len(files)
    # what the stored data holds comes back as the release answered it; what the matcher
    # derives from it (findings) is what this code's matcher makes of the same scans in a
    # database it built itself (the release's matcher differs: issue #32's precision)
    fresh_url = f"sqlite:///{tmp_path / 'fresh.db'}"
    with Store(fresh_url, blobs=str(tmp_path / "fresh-blobs")) as fresh_store:
        for f in files:
            fresh_store.ingest(ScanResult.from_dict(json.loads(Path(f).read_text())))
        fresh = _answers(fresh_store)
    for key in before:
        if key in _DERIVED:
            assert after[key] == fresh[key], key
        else:
            assert after[key] == before[key], key
    assert fresh["affected"] and after["subjects"]
    # and a scan ingested now into the migrated database is the same scan as before
    with Store(db_url, blobs=blobs) as store:
        assert store.ingest(h200_scan)[1] is False
