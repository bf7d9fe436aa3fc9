"""Python core-metadata parser tests on real data:

* two real wheels from PyPI (downloaded once with ``pip download``, cached
  under ~/.cache/gpusbom-test/, sha256-pinned and checked), and
* every dist-info of the running interpreter's environment, with
  ``importlib.metadata`` as the oracle.
"""

from __future__ import annotations

import importlib.metadata
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from gpusbom.collectors.python import parse_core_metadata, pypi_purl, requirement_name
from pinned_wheels import LINUX_311, pinned_wheel  # tests/pinned_wheels.py

WHEELS = {
    "nvidia_cuda_runtime_cu12-12.4.127-py3-none-manylinux2014_x86_64.whl": (
        "nvidia-cuda-runtime-cu12==12.4.127",
        "64403288fa2136ee8e467cdc9c9427e0434110899d07c779f25b5c068934faa5",
    ),
    "six-1.16.0-py2.py3-none-any.whl": (
        "six==1.16.0",
        "8abb2f1d86890a2dfb989f9a77cfcfd3e47c2a354b01111771326f8aa26e0254",
    ),
}


def real_wheel(filename: str) -> Path:
    """The pinned wheel from the cache, downloading it when missing; skips without network."""
    req, sha = WHEELS[filename]
    return pinned_wheel(filename, req, sha, pip_args=LINUX_311)


def wheel_dist_info(filename: str) -> dict[str, bytes]:
    """The wheel's .dist-info files: name inside the dist-info dir -> content."""
    with zipfile.ZipFile(real_wheel(filename)) as z:
        out = {}
        for n in z.namelist():
            parts = n.split("/")
            if len(parts) == 2 and parts[0].endswith(".dist-info"):
                out[n] = z.read(n)
        return out


def test_nvidia_cuda_runtime_wheel() -> None:
    files = wheel_dist_info("nvidia_cuda_runtime_cu12-12.4.127-py3-none-manylinux2014_x86_64.whl")
    meta = files["nvidia_cuda_runtime_cu12-12.4.127.dist-info/METADATA"].decode()
    d = parse_core_metadata(meta)
    assert d.name == "nvidia-cuda-runtime-cu12"
    assert d.version == "12.4.127"
    assert d.licenses == ["NVIDIA Proprietary Software"]
    assert d.author == "Nvidia CUDA Installer Team"
    assert d.summary == "CUDA Runtime native Libraries"
    assert d.requires == []
    assert pypi_purl(d) == "pkg:pypi/nvidia-cuda-runtime-cu12@12.4.127"


def test_six_wheel() -> None:
    files = wheel_dist_info("six-1.16.0-py2.py3-none-any.whl")
    d = parse_core_metadata(files["six-1.16.0.dist-info/METADATA"].decode())
    assert (d.name, d.version, d.licenses) == ("six", "1.16.0", ["MIT"])
    assert d.metadata_version == "2.1"


def test_environment_dist_infos_match_importlib_metadata() -> None:
    n = 0
    for dist in importlib.metadata.distributions():
        path = getattr(dist, "_path", None)
        if path is None or not str(path).endswith(".dist-info"):
            continue
        meta_file = Path(path) / "METADATA"
        if not meta_file.is_file():
            continue
        d = parse_core_metadata(meta_file.read_text(encoding="utf-8", errors="replace"))
        md = dist.metadata
        assert d.name == md["Name"]
        assert d.version == md["Version"]
        want = []
        for r in dist.requires or []:
            req = Requirement(r)  # packaging's full PEP 508 parser is the oracle here
            if req.marker is not None and "extra" in str(req.marker):
                continue
            name = str(canonicalize_name(req.name))
            if name != str(canonicalize_name(d.name)) and name not in want:
                want.append(name)
        assert d.requires == want, d.name
        n += 1
    assert n >= 10


def test_requirement_name() -> None:
    assert requirement_name("numpy>=1.20") == "numpy"
    assert requirement_name("Typing_Extensions (>=4.0) ; python_version < '3.11'") == (
        "typing-extensions"
    )
    assert requirement_name("pytest; extra == 'test'") is None
    assert requirement_name('jsonschema[format]>=4; extra == "validation"') is None
    assert requirement_name("zope.interface") == "zope-interface"
    assert requirement_name("nvidia-cublas-cu12==12.4.5.8; platform_system == 'Linux'") == (
        "nvidia-cublas-cu12"
    )
    assert requirement_name("  ") is None


def test_license_rules() -> None:
    base = "Metadata-Version: 2.4\nName: X_Y\nVersion: 1.0rc1\n"
    assert parse_core_metadata(base + "License-Expression: MIT OR Apache-2.0\nLicense: junk\n"
                               ).licenses == ["MIT OR Apache-2.0"]
    long_text = "License: Copyright (c) 2020\n        Permission is hereby granted\n"
    assert parse_core_metadata(
        base + long_text + "Classifier: License :: OSI Approved :: BSD License\n"
    ).licenses == ["BSD License"]
    assert parse_core_metadata(base + "License: UNKNOWN\n").licenses == []
    d = parse_core_metadata(base + "Author-email: Jane Doe <jane@example.com>\n\nBody: not a header\n")
    assert d.author == "Jane Doe"
    assert d.version == "1.0rc1"
    assert pypi_purl(d) == "pkg:pypi/x-y@1.0rc1"


def test_missing_name_or_version() -> None:
    with pytest.raises(ValueError):
        parse_core_metadata("Metadata-Version: 2.1\nName: x\n")
    with pytest.raises(ValueError):
        parse_core_metadata("")
