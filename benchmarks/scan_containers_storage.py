#!/usr/bin/env python3
"""containers-storage overlay directories vs the same image's tarballs, in one run.

``podman load`` (rootful, overlay driver, a private store under /tmp) the docker-archive of a
fixture image (default ``torch-cpu``: 0.7 GB unpacked, the largest fixture), then time
``gpusbom scan`` as a child process, best of ``--runs``, of:

* ``containers-storage:IMAGE?dir=STORE``: the overlay ``diff`` directories, read as
  directories (no tar, no decompression);
* ``oci-archive:`` of the same image (gzip layers: inflate + tar walk);
* ``docker-archive:`` of the same image (uncompressed layer tars: tar walk only).

Every run must give the same components (checked). The page cache is warm for all three
(each is read once before timing), so the numbers compare the work, not the disk.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fixtures.build import ensure


def _scan(ref: str, out: Path) -> tuple[float, list[tuple[str, str]]]:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "gpusbom", "scan", "-q", ref, "-o", f"json={out}"],
                   check=True)
    dt = time.perf_counter() - t0
    doc = json.loads(out.read_text())
    return dt, sorted((c["name"], c.get("version") or "") for c in doc["components"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fixture", default="torch-cpu")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    paths = ensure(args.fixture)
    tmp = Path(tempfile.mkdtemp(prefix="gp-bench-cs-", dir="/tmp"))
    try:
        store, run = tmp / "s", tmp / "r"
        t0 = time.perf_counter()
        out = subprocess.run(
            ["podman", "--root", str(store), "--runroot", str(run), "--storage-driver", "overlay",
             "load", "-i", str(paths.docker_archive)],
            check=True, capture_output=True, text=True,
        ).stdout
        load_s = time.perf_counter() - t0
        name = out.strip().splitlines()[-1].split("Loaded image: ", 1)[-1].strip()
        refs = {
            "containers-storage (overlay dirs)": f"containers-storage:{name}?dir={store}",
            "oci-archive (gzip layers)": f"oci-archive:{paths.oci_archive}",
            "docker-archive (plain tar layers)": f"docker-archive:{paths.docker_archive}",
        }
        results: dict[str, float] = {}
        comps: dict[str, list[tuple[str, str]]] = {}
        for label, ref in refs.items():
            _scan(ref, tmp / "warm.json")  # warm the page cache
            best = min(_scan(ref, tmp / "o.json")[0] for _ in range(args.runs))
            results[label] = best
            comps[label] = _scan(ref, tmp / "o.json")[1]
        same = len({json.dumps(c) for c in comps.values()}) == 1
        print(f"fixture {args.fixture}: podman load {load_s:.1f} s; "
              f"{len(next(iter(comps.values())))} components; same components: {same}")
        base = results["oci-archive (gzip layers)"]
        for label, s in results.items():
            print(f"  {label:36s} {s:6.2f} s  ({s / base:.2f}x the oci-archive time)")
        return 0 if same else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # podman load mounts nothing


if __name__ == "__main__":
    raise SystemExit(main())
