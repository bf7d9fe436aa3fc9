"""Fixture images for the registry tests (built with fixtures.imagetools)."""

from __future__ import annotations

import os
from typing import Any

from fixtures import imagetools as it

SITE = "/usr/local/lib/python3.11/site-packages"


def dpkg_status(pkgs: list[tuple[str, str, str]]) -> bytes:
    out = []
    for name, version, arch in pkgs:
        out.append(
            f"Package: {name}\nStatus: install ok installed\nPriority: optional\n"
            f"Section: libs\nInstalled-Size: 10\nMaintainer: Test <t@example.org>\n"
            f"Architecture: {arch}\nVersion: {version}\nDescription: {name} test package\n"
        )
    return "\n".join(out).encode()


def dist_info(name: str, version: str) -> list[Any]:
    d = f"{SITE}/{name}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
    return [(f"{d}/METADATA", meta), (f"{d}/INSTALLER", b"pip\n")]


def app_image(
    arch: str = "amd64", *, big: int = 0, docker_media_types: bool = False, seed: int = 0
) -> it.Image:
    """Debian-ish base (os-release + dpkg), a Python layer, and an uncompressed data layer.

    ``big``: bytes of incompressible data in layer 1 (for dropped-connection tests).
    """
    libc = "2.36-9+deb12u4" if arch == "amd64" else "2.36-9+deb12u7"
    base = [
        ("/etc/os-release", b'ID=debian\nVERSION_ID="12"\nPRETTY_NAME="Debian 12"\n'),
        (
            "/var/lib/dpkg/status",
            dpkg_status([("libc6", libc, arch), ("zlib1g", "1:1.2.13.dfsg-1", arch)]),
        ),
    ]
    py = dist_info("requests", "2.31.0") + dist_info(
        "urllib3", "2.0.7" if arch == "amd64" else "2.1.0"
    )
    if big:
        rnd = __import__("random").Random(seed)
        py.append(("/opt/big.bin", rnd.randbytes(big)))
    data = [("/opt/data/readme.txt", f"plain layer {arch} {seed}\n".encode() * 64)]
    img = it.build_image(
        [base, py, data],
        platform=f"linux/{arch}",
        env={"PATH": "/usr/local/bin:/usr/bin", "ARCH": arch},
        labels={"org.opencontainers.image.title": f"app-{arch}"},
        docker_media_types=docker_media_types,
    )
    img.layers[2] = it.Layer(img.layers[2].tar, "none", docker_media_types)
    return img


def write_layout(directory: str | os.PathLike[str], images: Any, tag: str) -> str:
    it.write_oci_layout(directory, images, tag=tag)
    return str(directory)
