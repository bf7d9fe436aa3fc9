"""conda-meta parser tests.

No conda channel is reachable from the test environment, so the records
below are HAND-WRITTEN in the documented conda-meta format (the
``PrefixRecord`` JSON conda writes to ``<prefix>/conda-meta/<name>-<version>-
<build>.json``: name, version, build, build_number, channel, url, fn, subdir,
license, depends, md5, sha256, files, ...). Values imitate real records.
"""

from __future__ import annotations

import json

import pytest

from gpusbom.collectors.conda import channel_name, conda_purl, parse_conda_meta

CUDART = {
    "build": "h95ffa78_0",
    "build_number": 0,
    "channel": "https://conda.anaconda.org/nvidia/label/cuda-12.4.1/linux-64",
    "constrains": [],
    "depends": ["cuda-version >=12.4,<12.5.0a0", "libgcc-ng >=11.2.0", "libstdcxx-ng >=11.2.0"],
    "extracted_package_dir": "/opt/conda/pkgs/cuda-cudart-12.4.127-h95ffa78_0",
    "features": "",
    "files": ["lib/libcudart.so.12", "lib/libcudart.so.12.4.127"],
    "fn": "cuda-cudart-12.4.127-h95ffa78_0.conda",
    "license": "LicenseRef-NVIDIA-End-User-License-Agreement",
    "link": {"source": "/opt/conda/pkgs/cuda-cudart-12.4.127-h95ffa78_0", "type": 1},
    "md5": "2ac0bc1c86e4dd0b74ac33b3e7e34c3f",
    "name": "cuda-cudart",
    "package_tarball_full_path": "/opt/conda/pkgs/cuda-cudart-12.4.127-h95ffa78_0.conda",
    "paths_data": {"paths": [], "paths_version": 1},
    "requested_spec": "None",
    "sha256": "8d6b0a5ff5d4d1b0e3b0a4b4c5b7f5b4f6e2f3fdfa5ab2b2fd37b4d48e8e2c10",
    "size": 172636,
    "subdir": "linux-64",
    "timestamp": 1712108513000,
    "track_features": "",
    "url": "https://conda.anaconda.org/nvidia/label/cuda-12.4.1/linux-64/cuda-cudart-12.4.127-h95ffa78_0.conda",
    "version": "12.4.127",
}

NUMPY_OLD_STYLE = {
    "name": "numpy",
    "version": "1.26.4",
    "build": "py311h64a7726_0",
    "build_number": 0,
    "channel": "conda-forge",
    "depends": ["libblas >=3.9.0,<4.0a0", "python >=3.11,<3.12.0a0", "python_abi 3.11.* *_cp311"],
    "license": "BSD-3-Clause",
    "url": "https://conda.anaconda.org/conda-forge/linux-64/numpy-1.26.4-py311h64a7726_0.tar.bz2",
}


def test_parse_record() -> None:
    p = parse_conda_meta(json.dumps(CUDART).encode())
    assert (p.name, p.version, p.build, p.build_number) == (
        "cuda-cudart", "12.4.127", "h95ffa78_0", 0,
    )
    assert p.channel == "nvidia/label/cuda-12.4.1"
    assert p.channel_url == CUDART["channel"]
    assert p.subdir == "linux-64"
    assert p.license == "LicenseRef-NVIDIA-End-User-License-Agreement"
    assert p.depends == ["cuda-version", "libgcc-ng", "libstdcxx-ng"]
    assert p.package_type == "conda"
    assert conda_purl(p) == (
        "pkg:conda/cuda-cudart@12.4.127?build=h95ffa78_0&channel=nvidia/label/cuda-12.4.1"
        "&subdir=linux-64&type=conda"
    )


def test_subdir_from_url_and_short_channel() -> None:
    p = parse_conda_meta(json.dumps(NUMPY_OLD_STYLE))
    assert p.subdir == "linux-64"
    assert p.channel == "conda-forge"
    assert p.channel_url is None
    assert p.package_type == "tar.bz2"
    assert p.depends == ["libblas", "python", "python_abi"]
    assert conda_purl(p) == (
        "pkg:conda/numpy@1.26.4?build=py311h64a7726_0&channel=conda-forge&subdir=linux-64"
        "&type=tar.bz2"
    )


@pytest.mark.parametrize(
    ("channel", "url", "want"),
    [
        ("https://conda.anaconda.org/conda-forge/linux-64", None, "conda-forge"),
        ("https://conda.anaconda.org/conda-forge", None, "conda-forge"),
        (None, "https://repo.anaconda.com/pkgs/main/linux-64/zlib-1.2.13-h5eee18b_1.conda",
         "main"),
        ("pkgs/main", None, "main"),
        ("defaults", None, "defaults"),
        (None, None, None),
    ],
)
def test_channel_name(channel: str | None, url: str | None, want: str | None) -> None:
    assert channel_name(channel, url) == want


@pytest.mark.parametrize(
    "data",
    [b"", b"not json", b"[]", b'{"name": "x"}', b'{"version": "1"}', b"\xff\xfe"],
)
def test_bad_records(data: bytes) -> None:
    with pytest.raises(ValueError):
        parse_conda_meta(data)
