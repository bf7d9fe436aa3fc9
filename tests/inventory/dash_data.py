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
- ``HOSTILE``: an image scan whose name, labels, package names, versions and file paths
  hold script tags, attribute breakouts and SQL metacharacters.
"""

from __future__ import annotations

import json
from typing import Any

from gpusbom.model import (
    Component,
    Evidence,
    Finding,
    ProbeResult,
    ScanResult,
    Target,
    ToolInfo,
)

SCRIPT = "<script>alert('xss-script')</script>"
IMG = "\"><img src=x onerror=alert('xss-img')>"
SQL = "x' OR '1'='1'; DROP TABLE scans; --"
HOSTILE_STRINGS = (SCRIPT, IMG, SQL)
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


def hostile_image() -> ScanResult:
    comps = []
    for i, s in enumerate(HOSTILE_STRINGS):
        comps.append(Component(
            name=f"pkg{i}-{s}", version=f"1.{i}-{s}", ecosystem="deb",
            purl=f"pkg:deb/debian/pkg{i}@1.{i}",
            properties={"location": f"/opt/{s}/lib", "cuda:sass": "sm_90",
                        "stack": "cuda", "product": f"cudnn{s}"},
            evidence=[Evidence("dpkg", "package-db", f"/var/lib/{s}/status")],
            bom_ref=f"deb:pkg{i}@{s}"))
    return ScanResult(
        target=Target(kind="image", reference=HOSTILE_SUBJECT, source="registry",
                      name=HOSTILE_NAME, tags=[SQL],
                      manifest_digest="sha256:" + "ab" * 32, platform="linux/amd64",
                      labels={"node": "vm", SCRIPT: IMG, "org.opencontainers.image.title": SQL,
                              "description": SCRIPT + IMG}),
        components=comps, tool=ToolInfo(version="0.1.0"), timestamp="2026-01-01T00:00:00Z",
        findings=[Finding(id=f"image/{SCRIPT}", kind="consistency", severity="high",
                          title=f"{IMG} {SQL}")],
    )


def fill(url: str, h200: ScanResult, wheels: ScanResult) -> dict[str, Any]:
    from gpusbom.inventory import Store

    with Store(url) as store:
        for r in host_variants(h200):
            store.ingest(r)
        store.ingest(wheels)
        store.ingest(hostile_image())
    return {"hosts": ["vm", "h200-old-driver", "b300-node"]}
