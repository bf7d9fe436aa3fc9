"""Replays of host snapshots recorded on a real H200 node and on a CPU-only machine."""

from __future__ import annotations

import io
import json
import re

from gpusbom.model import ComponentType, ScanResult

from .conftest import HOSTS


def _by(result: ScanResult, **kw: object) -> list:
    out = []
    for c in result.components:
        if all(getattr(c, k) == v for k, v in kw.items()):
            out.append(c)
    return out


def _deps(result: ScanResult, ref: str) -> set[str]:
    return {r.target for r in result.relationships if r.source == ref and r.type == "depends-on"}


def test_h200_devices(h200: ScanResult) -> None:
    gpus = _by(h200, type=ComponentType.DEVICE)
    assert len(gpus) == 2
    assert {g.properties["pci:address"] for g in gpus} == {"0000:00:06.0", "0000:00:07.0"}
    for g in gpus:
        p = g.properties
        assert g.name == "NVIDIA H200"
        assert (p["pci:vendor-id"], p["pci:device-id"]) == ("0x10de", "0x2335")
        assert p["pci:class"].startswith("0x03")
        assert p["driver"] == "nvidia"
        assert p["cuda:compute-capability"] == "9.0"
        assert p["nvidia:architecture"] == "Hopper"
        assert p["nvidia:vbios"] == "96.00.A5.00.1A"
        assert p["nvidia:gsp-firmware"] == "580.159.04"
        assert p["nvidia:mig-mode"] == "current=0 pending=0"
        assert p["nvidia:ecc-mode"] == "current=1 pending=1"
        assert p["nvidia:remapped-rows"].startswith("correctable=0 uncorrectable=0")
        assert p["nvidia:uuid"].startswith("GPU-")
        assert int(p["memory-total-bytes"]) == 143771 * 1024 * 1024
        assert "numa-node" in p


def test_h200_drivers_and_firmware_linked(h200: ScanResult) -> None:
    mods = {c.name: c for c in _by(h200, type=ComponentType.DEVICE_DRIVER)}
    assert set(mods) == {"nvidia", "nvidia-uvm"}
    assert mods["nvidia"].version == "580.159.04"
    assert mods["nvidia"].properties["nvidia:kernel-module-flavor"] == "open"
    assert mods["nvidia-uvm"].version == "580.159.04"
    assert mods["nvidia"].bom_ref in _deps(h200, mods["nvidia-uvm"].bom_ref)
    fw = _by(h200, type=ComponentType.FIRMWARE)
    assert sorted((f.name, f.version) for f in fw) == [
        ("nvidia-gsp-firmware", "580.159.04"), ("nvidia-gsp-firmware", "580.159.04"),
        ("nvidia-vbios", "96.00.A5.00.1A"), ("nvidia-vbios", "96.00.A5.00.1A")]
    for gpu in _by(h200, type=ComponentType.DEVICE):
        deps = _deps(h200, gpu.bom_ref)
        assert mods["nvidia"].bom_ref in deps
        mine = {f.bom_ref for f in fw if f.properties["pci:address"] == gpu.properties["pci:address"]}
        assert len(mine) == 2 and mine <= deps
    libcuda = [c for c in h200.components if c.product_name == "libcuda"]
    assert [c.version for c in libcuda] == ["580.159.04"]
    assert mods["nvidia"].bom_ref in _deps(h200, libcuda[0].bom_ref)


def test_h200_stack(h200: ScanResult) -> None:
    text = h200.stack_text()
    for part in ("CUDA 13.0", "cudart 13.0.96", "cuDNN 9.14.0 + 9.19.0.56", "NCCL 2.28.3 + 2.28.9",
                 "libcuda 580.159.04", "driver compat 580.95.05", "torch 2.11.0+cu130",
                 "Triton 3.6.0", "CuPy 14.2.0", "PoCL 5.0"):
        assert part in text, part
    names = {(c.name, c.version) for c in h200.components}
    assert ("linux-kernel", "6.18.44-fc-v657-gpu") in names
    assert ("cuda-compat-13-0", "580.95.05-0ubuntu1") in names
    assert h200.target.kind == "host" and h200.target.platform == "linux/amd64"
    assert h200.target.os_release["VERSION_ID"] == "24.04"
    assert not h200.unknowns


def test_h200_findings(h200: ScanResult) -> None:
    consistency = [f for f in h200.findings if f.kind == "consistency"]
    assert [f.id for f in consistency] == ["host/cuda-compat-unused"]
    # advisories are matched on host scans too: the image-style cuda-compat 580.95.05 libraries
    # are below the January/May 2026 R580 fixes; the host driver 580.159.04 is not flagged
    adv = [f for f in h200.findings if f.kind == "advisory"]
    assert {"CVE-2025-33219", "CVE-2026-24187"} <= {f.id for f in adv}
    affected = [f for f in adv if f.advisory and f.advisory.status == "affected"
                and f.advisory.product == "nvidia-driver"]
    assert affected
    assert {f.advisory.installed_version for f in affected if f.advisory} == {"580.95.05"}
    assert all(f.components == consistency[0].components for f in affected)
    # the CUDA 13.0 toolkit packages are matched against the CUDA Toolkit bulletins too
    assert {f.advisory.product for f in adv if f.advisory} >= {"nvidia-driver", "cuda-toolkit"}
    f = consistency[0]
    assert f.kind == "consistency" and f.severity == "info"
    assert "580.95.05" in f.title and "580.159.04" in f.title


def test_h200_cross_check(h200: ScanResult) -> None:
    """What the scan says agrees with nvidia-smi, dpkg -l and pip list recorded on that host."""
    cc = HOSTS / "h200-crosscheck"
    rows = (cc / "nvidia-smi.csv").read_text().splitlines()[1:]
    smi = {}
    for row in rows:
        f = [x.strip() for x in row.split(",")]
        smi["0000:" + f[1].split(":", 1)[1].lower()] = f
    gpus = {g.properties["pci:address"]: g for g in _by(h200, type=ComponentType.DEVICE)}
    assert set(gpus) == set(smi)
    mods = {c.name: c for c in _by(h200, type=ComponentType.DEVICE_DRIVER)}
    for addr, f in smi.items():
        p = gpus[addr].properties
        assert gpus[addr].name == f[0]
        assert f[2].lower() == "0x" + p["pci:device-id"][2:] + p["pci:vendor-id"][2:]
        assert p["cuda:compute-capability"] == f[3]
        assert mods["nvidia"].version == f[4]
        assert p["nvidia:vbios"] == f[5]
        assert p["nvidia:uuid"] == f[6]
    dpkg = {}
    for line in (cc / "dpkg-l.txt").read_text().splitlines():
        if line[:2] in ("ii", "hi"):
            f = line.split()
            dpkg[f[1].split(":")[0]] = f[2]
    debs = {c.name: c.version for c in h200.components if c.ecosystem == "deb"}
    assert debs and all(dpkg[n] == v for n, v in debs.items())
    gpu_debs = {n for n in dpkg if re.match(r"(cuda-|libcu|libnccl|libcudnn|libnpp|libnvjpeg|"
                                            r"libnvjitlink|nsight|ocl-icd|pocl)", n)}
    assert gpu_debs <= set(debs)
    pip = {}
    for line in (cc / "pip-list.txt").read_text().splitlines()[2:]:
        f = line.split()
        pip[f[0].lower().replace("_", "-").replace(".", "-")] = f[1]
    venv = {}
    for c in h200.components:
        paths = [e.path or "" for e in c.evidence]
        if c.ecosystem == "pypi" and any(p.startswith("/opt/torch/.venv/lib/python3.12/site-packages/")
                                         and "/_vendor/" not in p for p in paths):
            venv[c.name.lower().replace("_", "-").replace(".", "-")] = c.version
    assert len(venv) >= 190
    assert all(pip[n] == v for n, v in venv.items())


def test_h200_sboms_validate_and_link(h200: ScanResult) -> None:
    from cyclonedx.schema import OutputFormat, SchemaVersion
    from cyclonedx.validation import make_schemabased_validator

    from gpusbom.writers import WriterOptions, get_writer

    buf = io.StringIO()
    get_writer("cyclonedx-json").write(h200, buf, WriterOptions(cyclonedx_version="1.6"))
    text = buf.getvalue()
    assert make_schemabased_validator(OutputFormat.JSON, SchemaVersion.V1_6).validate_str(text) is None
    bom = json.loads(text)
    types = {c["bom-ref"]: c["type"] for c in bom["components"]}
    deps = {d["ref"]: set(d.get("dependsOn", [])) for d in bom["dependencies"]}
    gpus = [r for r, t in types.items() if t == "device"]
    assert len(gpus) == 2
    for g in gpus:
        assert {types[d] for d in deps[g]} == {"device-driver", "firmware"}
    assert any(p["name"] == "gpusbom:finding:1" for p in bom["metadata"]["properties"])

    buf = io.StringIO()
    get_writer("spdx-json").write(h200, buf, WriterOptions())  # validated by spdx-tools inside
    doc = json.loads(buf.getvalue())
    assert doc["spdxVersion"] == "SPDX-2.3"
    purpose = {p["SPDXID"]: p.get("primaryPackagePurpose") for p in doc["packages"]}
    dev_ids = [i for i, p in purpose.items() if p == "DEVICE"]
    assert len(dev_ids) == 2
    for d in dev_ids:
        targets = {r["relatedSpdxElement"] for r in doc["relationships"]
                   if r["spdxElementId"] == d and r["relationshipType"] == "DEPENDS_ON"}
        assert {purpose[t] for t in targets} == {"FIRMWARE", "LIBRARY"}


def test_h200_json_round_trip(h200: ScanResult) -> None:
    d = h200.to_dict()
    assert d["findings"][0]["id"] == "host/cuda-compat-unused"
    again = ScanResult.from_dict(json.loads(json.dumps(d)))
    assert again.findings == h200.findings
    assert again.to_dict() == d


def test_cpu_only(cpu_only: ScanResult) -> None:
    assert not _by(cpu_only, type=ComponentType.DEVICE)
    assert not _by(cpu_only, type=ComponentType.FIRMWARE)
    host = [(f.id, f.title) for f in cpu_only.findings if f.kind != "advisory"]
    assert host == [("host/no-gpu", "no GPU devices found")]
    # its CUDA 13.0 toolkit debs are judged against the CUDA Toolkit bulletins, as on GPU hosts
    assert all(f.advisory and f.advisory.product != "nvidia-driver"
               for f in cpu_only.findings if f.kind == "advisory")
    # the installed stack is still inventoried
    text = cpu_only.stack_text()
    assert "CUDA 13.0" in text and "PoCL 3.1" in text and "Mesa 22.3.6" in text
    assert any(c.ecosystem == "deb" and c.name == "pocl-opencl-icd" for c in cpu_only.components)
    assert cpu_only.target.os_release["ID"] == "debian"


def test_cpu_only_table_says_no_gpu(cpu_only: ScanResult) -> None:
    from gpusbom.writers import WriterOptions, get_writer

    buf = io.StringIO()
    get_writer("table").write(cpu_only, buf, WriterOptions())
    assert "[info] no GPU devices found (host/no-gpu)" in buf.getvalue()
