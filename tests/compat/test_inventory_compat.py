"""`gpusbom inventory compat`: which stored images will fail on which stored hosts (issue 10:
the inventory gains the compatibility matrix), on a real SQLite store with the real H200 host
snapshot scan and the real nvidia-wheels image scan."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from pathlib import Path

from gpusbom.cli.app import main
from gpusbom.inventory import push_scan
from gpusbom.model import ScanResult


def _older_driver(h200: dict, name: str, driver: str) -> ScanResult:  # type: ignore[type-arg]
    """The same H200 node as if it ran an older R570 driver (kernel module and libcuda)."""
    r = ScanResult.from_dict(json.loads(json.dumps(h200)))
    r.target.name = name
    old = "580.159.04"
    for c in r.components:
        if c.version == old and (c.properties.get("kernel-module") == "nvidia"
                                 or c.product_name == "libcuda"):
            c.version = driver
            c.products = [dataclasses.replace(p, version=driver) if p.version == old else p
                          for p in c.products]
    return r


def test_matrix_of_images_and_hosts(wheels_scan: Path, h200_json: Path, tmp_path: Path,
                                    capsys) -> None:  # type: ignore[no-untyped-def]
    url = f"sqlite:///{tmp_path}/fleet.db"
    h200 = json.loads(h200_json.read_text())
    push_scan(ScanResult.from_dict(h200), url)
    push_scan(_older_driver(h200, "old-node", "570.86.15"), url)
    push_scan(ScanResult.from_dict(json.loads(wheels_scan.read_text())), url)

    out = tmp_path / "m.csv"
    assert main(["inventory", "compat", "--db", url, "-f", "csv", "-o", str(out)]) == 0
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    by_host = {r["host"]: r for r in rows}
    host = ScanResult.from_dict(h200).target.name
    assert set(by_host) == {host, "old-node"} and len(rows) == 2
    assert by_host[host]["verdict"] == "runs" and by_host[host]["driver"] == "580.159.04"
    bad = by_host["old-node"]
    # the image's CUDA 13 runtime (cudart 13.0.96) needs an R580 driver
    assert bad["verdict"] == "will-fail" and bad["driver"] == "570.86.15"
    assert "580" in bad["reason"] and "13.0" in bad["reason"]

    # --fail turns a predicted failure into exit 1; --failing keeps only those pairs
    assert main(["inventory", "compat", "--db", url, "--failing", "--fail", "-f", "json",
                 "-o", str(tmp_path / "f.json")]) == 1
    failing = json.loads((tmp_path / "f.json").read_text())
    assert [(r["host"], r["verdict"]) for r in failing] == [("old-node", "will-fail")]
    assert failing[0]["evidence"]
    # a host filter that matches nothing: no pairs, nothing fails
    assert main(["inventory", "compat", "--db", url, "--host", "nope*", "--fail"]) == 0
