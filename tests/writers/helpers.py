"""A realistic, fully deterministic ScanResult for writer tests."""

from __future__ import annotations

from gpusbom.model import (
    Component,
    ComponentType,
    Evidence,
    LayerRef,
    Relationship,
    ScanResult,
    Target,
    ToolInfo,
    Unknown,
)

BASE_LAYER = "sha256:" + "1f" * 32
CUDA_LAYER = "sha256:" + "a7" * 32
PIP_LAYER = "sha256:" + "c3" * 32
MANIFEST_DIGEST = "sha256:" + "9e" * 32
IMAGE_ID = "sha256:" + "4b" * 32


def _deb(name: str, version: str, *, arch: str = "amd64", licenses: list[str] | None = None,
         supplier: str | None = "Debian Developers <debian-devel@lists.debian.org>",
         source: str | None = None, depends: list[str] | None = None) -> Component:
    purl_version = version.replace("+", "%2B").replace(":", "%3A")
    c = Component(
        name=name,
        version=version,
        type=ComponentType.LIBRARY if name.startswith("lib") else ComponentType.APPLICATION,
        purl=f"pkg:deb/debian/{name}@{purl_version}?arch={arch}&distro=debian-12",
        supplier=supplier,
        licenses=licenses or [],
        ecosystem="deb",
        properties={"deb:arch": arch, **({"deb:source": source} if source else {})},
        evidence=[Evidence("dpkg", "package-db", "/var/lib/dpkg/status", BASE_LAYER,
                           f"Package: {name}")],
        depends_on=depends or [],
    )
    return c


def make_result() -> ScanResult:
    target = Target(
        kind="image",
        reference="nvcr.io/nvidia/cuda:12.4.1-runtime-debian12",
        source="registry",
        name="nvcr.io/nvidia/cuda",
        tags=["12.4.1-runtime-debian12"],
        manifest_digest=MANIFEST_DIGEST,
        image_id=IMAGE_ID,
        platform="linux/amd64",
        env={
            "PATH": "/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "CUDA_VERSION": "12.4.1",
            "NVIDIA_REQUIRE_CUDA": "cuda>=12.4 brand=tesla,driver>=470,driver<471",
            "NVARCH": "x86_64",
        },
        labels={
            "maintainer": "NVIDIA CORPORATION <cudatools@nvidia.com>",
            "com.nvidia.cudnn.version": "",
            "org.opencontainers.image.ref.name": "debian",
        },
        os_release={"ID": "debian", "VERSION_ID": "12", "PRETTY_NAME": "Debian GNU/Linux 12 (bookworm)",
                    "VERSION_CODENAME": "bookworm"},
        layers=[
            LayerRef(0, BASE_LAYER, "sha256:" + "01" * 32,
                     "application/vnd.oci.image.layer.v1.tar+gzip", 29_123_456,
                     "/bin/sh -c #(nop) ADD file:abc in / "),
            LayerRef(1, CUDA_LAYER, "sha256:" + "02" * 32,
                     "application/vnd.oci.image.layer.v1.tar+gzip", 512_000_000,
                     "RUN apt-get install -y cuda-cudart-12-4"),
            LayerRef(2, PIP_LAYER, None, "application/vnd.oci.image.layer.v1.tar", 2048, None),
        ],
        created="2024-04-10T12:00:00Z",
    )
    comps: list[Component] = [
        _deb("libc6", "2.36-9+deb12u10", licenses=["LGPL-2.1-or-later", "GPL-2.0-only"],
             supplier="GNU Libc Maintainers <debian-glibc@lists.debian.org>", source="glibc"),
        _deb("libgcc-s1", "12.2.0-14", licenses=["GPL-3.0-or-later WITH GCC-exception-3.1"],
             source="gcc-12", depends=["libc6"]),
        _deb("libstdc++6", "12.2.0-14", licenses=["GPL-3.0-or-later WITH GCC-exception-3.1"],
             source="gcc-12", depends=["libc6", "libgcc-s1"]),
        _deb("bash", "5.2.15-2+b7", licenses=["GPL-3.0-or-later"], depends=["libc6"]),
        _deb("tzdata", "2024a-0+deb12u1", arch="all", licenses=["public-domain"], supplier=None),
        _deb("base-files", "12.4+deb12u5", licenses=[]),
    ]
    cudart = Component(
        name="cuda-cudart-12-4",
        version="12.4.127-1",
        type=ComponentType.LIBRARY,
        purl="pkg:deb/nvidia/cuda-cudart-12-4@12.4.127-1?arch=amd64&distro=debian-12",
        cpe="cpe:2.3:a:nvidia:cuda_toolkit:12.4.127:*:*:*:*:*:*:*",
        supplier="NVIDIA Corporation",
        description="CUDA Runtime native Libraries",
        licenses=["NVIDIA Software License Agreement"],
        ecosystem="deb",
        properties={"deb:arch": "amd64", "cuda:major": "12", "cuda:component": "cudart"},
        evidence=[
            Evidence("dpkg", "package-db", "/var/lib/dpkg/status", CUDA_LAYER, "Package: cuda-cudart-12-4"),
            Evidence("cuda", "soname", "/usr/local/cuda-12.4/targets/x86_64-linux/lib/libcudart.so.12.4.127",
                     CUDA_LAYER, None),
            Evidence("cuda", "version-file", "/usr/local/cuda-12.4/version.json", CUDA_LAYER,
                     '"cuda_cudart": {"version": "12.4.127"}'),
        ],
        depends_on=["libc6", "libstdc++6"],
    )
    cuda_env = Component(
        name="cuda",
        version="12.4.1",
        type=ComponentType.FRAMEWORK,
        supplier="NVIDIA Corporation",
        description="CUDA toolkit version declared by the image",
        ecosystem=None,
        evidence=[Evidence("cuda", "env", None, None, "CUDA_VERSION=12.4.1")],
    )
    pypi = Component(
        name="nvidia-cuda-runtime-cu12",
        version="12.4.127",
        type=ComponentType.LIBRARY,
        purl="pkg:pypi/nvidia-cuda-runtime-cu12@12.4.127",
        supplier="Nvidia CUDA Installer Team",
        description="CUDA Runtime native Libraries",
        licenses=["LicenseRef-NVIDIA-Proprietary"],
        ecosystem="pypi",
        properties={"python:installer": "pip"},
        evidence=[Evidence("python", "package-metadata",
                           "/usr/local/lib/python3.11/dist-packages/"
                           "nvidia_cuda_runtime_cu12-12.4.127.dist-info/METADATA",
                           PIP_LAYER, None)],
    )
    weird = Component(
        name="libnvidia-ml.so",
        version=None,
        type=ComponentType.DEVICE_DRIVER,
        purl="not a purl at all",
        licenses=["Apache-2.0 OR MIT", "Proprietary & confidential (see EULA)"],
        evidence=[Evidence("nvml", "elf", "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", BASE_LAYER,
                           "no version symbol"),
                  Evidence("nvml", "filename", "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", BASE_LAYER,
                           None)],
    )
    comps += [cudart, cuda_env, pypi, weird]

    taken: set[str] = set()
    for c in comps:
        c.assign_ref(taken)
    by_name = {c.name: c for c in comps}
    rels: list[Relationship] = []
    for c in comps:
        for dep in c.depends_on:
            rels.append(Relationship(c.bom_ref, "depends-on", by_name[dep].bom_ref))
    # the python wheel ships its own copy of the runtime: a "contains" edge between components
    rels.append(Relationship(pypi.bom_ref, "contains", cudart.bom_ref))

    return ScanResult(
        target=target,
        components=comps,
        relationships=rels,
        unknowns=[
            Unknown("rpm", "rpmdb not found; skipped", None),
            Unknown("python", "METADATA is not valid UTF-8",
                    "/usr/lib/python3/dist-packages/broken-1.0.dist-info/METADATA"),
        ],
        tool=ToolInfo(name="gpusbom", version="0.1.0",
                      collectors={"dpkg": "1", "cuda": "2", "python": "1", "nvml": "1", "rpm": "1"}),
        timestamp="2024-05-01T00:00:00Z",
    )


def make_directory_result() -> ScanResult:
    """A minimal directory scan: no digest, no layers, no unknowns."""
    comp = Component(name="numpy", version="1.26.4", purl="pkg:pypi/numpy@1.26.4",
                     licenses=["BSD-3-Clause"], ecosystem="pypi",
                     evidence=[Evidence("python", "package-metadata",
                                        "/site-packages/numpy-1.26.4.dist-info/METADATA")])
    comp.assign_ref(set())
    return ScanResult(target=Target(kind="directory", reference="./rootfs", source="dir"),
                      components=[comp], tool=ToolInfo(version="0.1.0"),
                      timestamp="2024-05-01T00:00:00+00:00")


def golden_results() -> list[tuple[str, ScanResult]]:
    """Every golden case's scan result (``tests/golden/data/CASE/json``, read back), its
    redacted timestamp replaced: the fixtures' scans, as writers' inputs."""
    import json
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    try:
        from golden_files import goldens, read
    finally:
        sys.path.pop(0)
    out = []
    for path in goldens("json"):
        doc = json.loads(read(path))
        if "components" not in doc:
            continue  # not a scan result
        r = ScanResult.from_dict(doc)
        if r.timestamp and r.timestamp.startswith("<"):  # redacted in the golden
            r.timestamp = "2026-12-01T00:00:00Z"
        out.append((path.parent.name, r))
    return out
