"""The dashboard tests' inventory: real scans, a few variants, and a hostile image.

- ``vm``: the H200 host snapshot's scan (2 x H200, driver 580.159.04), plus an earlier scan
  of the same host with driver 580.95.05 (the drift timeline has something to show). The
  snapshot holds no probe results: both scans get one CUDA probe result each, shaped as the
  probe writes them (fail on the old driver, pass on the new).
- ``h200-old-driver``: the same host scan with driver 570.172.08 (CUDA 12.8).
- ``b300-node``: the same host scan with the GPUs as B300 (sm_103).
- ``nvidia-wheels``: the fixture image's scan (fixtures/build.py, real PyPI wheels with
  sm_90 SASS): ``runs`` on vm, ``will-fail`` on h200-old-driver (its CUDA 13 runtime needs a
  580 driver), ``runs-with-jit`` on b300-node (PTX only for sm_103).
- the hostile image (fixtures/hostile.py): package names, versions, file paths and labels
  hold script tags, attribute breakouts and SQL metacharacters; labelled gpusbom.node=vm (as scan --images labels).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from fixtures.hostile import IMG, SCRIPT, SQL, write_hostile_layout
from gpusbom.model import ProbeResult, ScanResult

HOSTILE_NAME = f"evil/{IMG}{SCRIPT}"
HOSTILE_SUBJECT = f"{HOSTILE_NAME}:{SQL}"

#: (image, host) -> the check verdict the matrix must show
EXPECTED = {
    ("nvidia-wheels", "vm"): "runs",
    ("nvidia-wheels", "h200-old-driver"): "will-fail",
    ("nvidia-wheels", "b300-node"): "runs-with-jit",
}


def _probe(outcome: str, pci: str) -> ProbeResult:
    return ProbeResult(backend="cuda", outcome=outcome, device="NVIDIA H200", device_id="0",
                       kernel="matmul16", reason=None if outcome == "pass" else
                       "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", seconds=0.9,
                       facts={"pci-bus-id": pci})


def host_variants(h200: ScanResult) -> list[ScanResult]:
    text = json.dumps(h200.to_dict())
    pci = next(c.properties["pci:address"] for c in h200.components
               if c.type.value == "device")

    def make(name: str, ts: str, repl: tuple[tuple[str, str], ...] = (),
             probe: str | None = None) -> ScanResult:
        t = text
        for a, b in repl:
            t = t.replace(a, b)
        r = ScanResult.from_dict(json.loads(t))
        r.target.name = name
        r.target.reference = f"host:{name}"
        r.timestamp = ts
        if probe:
            r.probes = [_probe(probe, pci)]
        return r

    return [
        make("vm", "2025-12-01T00:00:00Z", (("580.159.04", "580.95.05"),), "fail"),
        make("vm", "2026-01-01T00:00:00Z", (), "pass"),
        make("h200-old-driver", "2026-01-01T00:00:00Z", (("580.159.04", "570.172.08"),)),
        make("b300-node", "2026-01-01T00:00:00Z", (
            ('"NVIDIA H200"', '"NVIDIA B300"'),
            ('"cuda:compute-capability": "9.0"', '"cuda:compute-capability": "10.3"'))),
    ]


def hostile_image(tmp: Path) -> ScanResult:
    """The hostile fixture image (fixtures/hostile.py) scanned; its name and tag are set
    to hostile strings too, as a free-text SBOM name could be."""
    from gpusbom.scan import scan

    r = scan(write_hostile_layout(tmp))
    r.target.name = HOSTILE_NAME
    r.target.tags = [SQL]
    return r


def fill(url: str, h200: ScanResult, wheels: ScanResult) -> dict[str, Any]:
    from gpusbom.inventory import Store

    with Store(url) as store:
        for r in host_variants(h200):
            store.ingest(r)
        store.ingest(wheels)
        tmp = Path(tempfile.mkdtemp(prefix="gpusbom-hostile-"))
        try:
            store.ingest(hostile_image(tmp), labels={"gpusbom.node": "vm"})
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return {"hosts": ["vm", "h200-old-driver", "b300-node"]}


def no_driver_link(h200: ScanResult) -> ScanResult:
    """``h200-no-link``: the H200 host scan with its GPUs naming no kernel driver (a host
    whose /sys/bus/pci/devices/*/driver links could not be read): the driver is known only
    from the kernel module list and libcuda, as on the host's own page."""
    r = ScanResult.from_dict(json.loads(json.dumps(h200.to_dict())))
    for c in r.components:
        if c.type.value == "device":
            c.properties.pop("driver", None)
    r.target.name = "h200-no-link"
    r.target.reference = "host:h200-no-link"
    return r
