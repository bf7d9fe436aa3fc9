"""Synthetic scans for the inventory tests: the shapes real host and image scans have
(components as the collectors and fusion emit them: a deb with its GPU product, a PyPI
wheel, the driver's user-space library and kernel module, GPU devices, probe results),
with the versions each test needs."""

from __future__ import annotations

import hashlib

from gpusbom.model import (
    Component,
    ComponentType,
    Evidence,
    Finding,
    ProbeResult,
    Product,
    ScanResult,
    Target,
    ToolInfo,
)


def _cudnn(version: str) -> Component:
    deb = f"{version}-1"
    return Component(
        name="libcudnn9-cuda-12", version=deb, ecosystem="deb",
        purl=f"pkg:deb/ubuntu/libcudnn9-cuda-12@{deb}?arch=amd64",
        properties={"stack": "cuda", "product": "cudnn", "product-version": version},
        evidence=[Evidence("dpkg", "package-db", "/var/lib/dpkg/status"),
                  Evidence("cuda", "soname", f"/usr/lib/x86_64-linux-gnu/libcudnn.so.{version}")],
        products=[Product("cuda", "cudnn", version)],
        bom_ref=f"deb:libcudnn9-cuda-12@{deb}",
    )


def _torch(version: str) -> Component:
    return Component(
        name="torch", version=version, ecosystem="pypi", purl=f"pkg:pypi/torch@{version}",
        properties={"stack": "pytorch", "product": "torch",
                    "location": "/usr/local/lib/python3.11/site-packages"},
        evidence=[Evidence("python", "package-metadata",
                           f"/usr/local/lib/python3.11/site-packages/torch-{version}.dist-info/"
                           "METADATA")],
        products=[Product("pytorch", "torch", version)],
        bom_ref=f"pypi:torch@{version}",
    )


def _libcuda(version: str) -> Component:
    return Component(
        name="libcuda", version=version, ecosystem="generic",
        purl=f"pkg:generic/nvidia/libcuda@{version}",
        properties={"stack": "nvidia-driver", "product": "libcuda"},
        evidence=[Evidence("nvidia-driver", "soname",
                           f"/usr/lib/x86_64-linux-gnu/libcuda.so.{version}")],
        products=[Product("nvidia-driver", "libcuda", version)],
        bom_ref=f"generic:libcuda@{version}",
    )


def _module(version: str) -> Component:
    return Component(
        name="nvidia", version=version, type=ComponentType.DEVICE_DRIVER,
        ecosystem="kernel-module",
        properties={"kernel-module": "nvidia", "location": "/sys/module/nvidia",
                    "stack": "nvidia-driver", "product": "nvidia-kernel-module"},
        evidence=[Evidence("host", "device", "/sys/module/nvidia/version")],
        bom_ref=f"kernel-module:nvidia@{version}",
    )


def _gpu(pci: str, model: str = "NVIDIA H200", cc: str = "9.0") -> Component:
    return Component(
        name=model, version=None, type=ComponentType.DEVICE, ecosystem="device",
        properties={"pci:address": pci, "vendor": "nvidia", "driver": "nvidia",
                    "cuda:compute-capability": cc, "nvidia:uuid": f"GPU-{pci}"},
        evidence=[Evidence("host", "device", f"/sys/bus/pci/devices/{pci}")],
        bom_ref=f"device:{model}@{pci}",
    )


def _deb(name: str, version: str) -> Component:
    return Component(name=name, version=version, ecosystem="deb",
                     purl=f"pkg:deb/debian/{name}@{version}",
                     evidence=[Evidence("dpkg", "package-db", "/var/lib/dpkg/status")],
                     bom_ref=f"deb:{name}@{version}")


def host_scan(
    hostname: str,
    *,
    ts: str = "2026-01-01T00:00:00Z",
    driver: str | None = "580.95.05",
    cudnn: str | None = None,
    torch: str | None = None,
    gpus: tuple[str, ...] = ("0000:00:06.0",),
    probes: dict[str, str] | None = None,
    extra: tuple[tuple[str, str], ...] = (),
    labels: dict[str, str] | None = None,
) -> ScanResult:
    comps: list[Component] = [_deb("libc6", "2.36-9+deb12u9"), *(_deb(n, v) for n, v in extra)]
    if driver:
        comps += [_libcuda(driver), _module(driver)]
    if cudnn:
        comps.append(_cudnn(cudnn))
    if torch:
        comps.append(_torch(torch))
    comps += [_gpu(p) for p in gpus]
    results = []
    for i, (pci, outcome) in enumerate(sorted((probes or {}).items())):
        results.append(ProbeResult(
            backend="cuda", outcome=outcome, device="NVIDIA H200", device_id=str(i),
            kernel="matmul16", reason=None if outcome == "pass" else "wrong result",
            max_abs_error=0.0 if outcome == "pass" else 3.5, seconds=0.8,
            facts={"pci-bus-id": pci}, device_ref=f"device:NVIDIA H200@{pci}"))
    return ScanResult(
        target=Target(kind="host", reference="host:/", source="host", name=hostname,
                      platform="linux/amd64", labels=dict(labels or {})),
        components=comps, tool=ToolInfo(version="0.1.0"), timestamp=ts, probes=results,
        findings=[Finding(id="host/test-note", kind="consistency", severity="info",
                          title=f"note for {hostname}")],
    )


def image_scan(name: str, tag: str, *, ts: str = "2026-01-01T00:00:00Z",
               torch: str | None = None, cudnn: str | None = None,
               digest: str | None = None) -> ScanResult:
    comps = [_deb("libc6", "2.36-9+deb12u9")]
    if cudnn:
        comps.append(_cudnn(cudnn))
    if torch:
        comps.append(_torch(torch))
    return ScanResult(
        target=Target(kind="image", reference=f"{name}:{tag}", source="registry", name=name,
                      tags=[tag],
                      manifest_digest=digest or "sha256:" + hashlib.sha256(
                          f"{name}:{tag}@{ts}".encode()).hexdigest(),
                      platform="linux/amd64"),
        components=comps, tool=ToolInfo(version="0.1.0"), timestamp=ts,
    )
