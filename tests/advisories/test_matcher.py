"""The acceptance table: exact cases, checked against the bundled data (vendor facts from
NVIDIA's CSAF bulletins 5582 and 5747 and GHSA-53q9-r3pm-6pq6)."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import pytest

from gpusbom.advisories.db import load_bundled, load_records
from gpusbom.advisories.matcher import match, severity_of
from gpusbom.model import Component, Evidence, Product

ROOT = Path(__file__).resolve().parents[2]
DB = load_bundled()



def _at(c: Component, version: str) -> Component:
    """``c`` at another version: its own product (named by the ``stack``/``product``
    properties at construction, so versioned as the component) moves with it."""
    return dataclasses.replace(c, version=version, products=[
        dataclasses.replace(p, version=version) for p in c.products])


def _status(c: Component, vuln: str, db=DB) -> tuple[str, str | None] | None:
    for f in match([c], db):
        if f.id == vuln:
            assert f.advisory is not None
            return f.advisory.status, f.advisory.fixed_version
    return None


def driver(version: str, name: str = "libcuda", path: str | None = None) -> Component:
    path = path or f"/usr/lib/x86_64-linux-gnu/{name}.so.{version}"
    return Component(
        name=name, version=version, ecosystem="generic",
        purl=f"pkg:generic/nvidia/{name}@{version}",
        properties={"stack": "nvidia-driver", "product": name},
        evidence=[Evidence("nvidia-driver", "soname", path, None, path.rsplit("/", 1)[1])],
        bom_ref=f"generic:{name}@{version}",
    )


def toolkit(version: str) -> Component:
    return Component(
        name="nvidia-container-toolkit", version=version, ecosystem="generic",
        properties={"stack": "nvidia-container-toolkit", "product": "nvidia-container-toolkit"},
        evidence=[Evidence("nvidia-container-toolkit", "filename", "/usr/bin/nvidia-ctk")],
        bom_ref=f"generic:nvidia-container-toolkit@{version}",
    )


def torch(version: str) -> Component:
    return Component(
        name="torch", version=version, ecosystem="pypi", purl=f"pkg:pypi/torch@{version}",
        evidence=[Evidence("python", "package-metadata",
                           f"/usr/lib/python3/site-packages/torch-{version}.dist-info/METADATA")],
        bom_ref=f"pypi:torch@{version}",
    )


def test_container_toolkit_cve_2024_0132() -> None:
    assert _status(toolkit("1.16.1"), "CVE-2024-0132") == ("affected", "1.16.2")
    assert _status(toolkit("1.16.2"), "CVE-2024-0132") is None
    assert _status(toolkit("v1.16.1"), "CVE-2024-0132") == ("affected", "1.16.2")


def test_driver_branch_rule_january_2026() -> None:
    # 5747 (January 2026): R535 fixed in 535.288.01, R570 in 570.211.01
    assert _status(driver("535.288.01"), "CVE-2025-33219") is None
    assert _status(driver("535.274.02"), "CVE-2025-33219") == ("affected", "535.288.01")
    assert _status(driver("570.195.03"), "CVE-2025-33219") == ("affected", "570.211.01")
    assert _status(driver("570.211.01"), "CVE-2025-33219") is None


def test_branch_missing_from_bulletin_is_unsupported() -> None:
    # 5747 lists R590, R580, R570, R535: R550 has no fix there, whatever its number; the
    # vendor: "earlier branch releases ... may also be affected ... upgrade to the latest
    # branch release" -> its own status, not plain "affected"
    status, fixed = _status(driver("550.163.01"), "CVE-2025-33219")
    assert (status, fixed) == ("unsupported-branch", None)
    f = [x for x in match([driver("550.999.99")], DB) if x.id == "CVE-2025-33219"][0]
    assert "R550" in (f.detail or "") and "R570 570.211.01" in (f.detail or "")
    # a branch newer than every listed branch is not reported
    assert _status(driver("600.10.01"), "CVE-2025-33219") is None


def test_zero_padded_patch() -> None:
    assert _status(driver("580.126.9"), "CVE-2025-33219") is None  # == 580.126.09
    assert _status(driver("580.126.08"), "CVE-2025-33219") == ("affected", "580.126.09")


def test_torch_cve_2025_32434() -> None:
    assert _status(torch("2.5.1"), "CVE-2025-32434") == ("affected", "2.6.0")
    assert _status(torch("2.6.0+cu124"), "CVE-2025-32434") is None
    # NGC pre-release of 2.6.0: cannot tell whether it carries the fix
    assert _status(torch("2.6.0a0+ecf3bae40a.nv25.01"), "CVE-2025-32434") == ("review", "2.6.0")


def test_cuda_compat_matched_as_driver() -> None:
    path = "/usr/local/cuda-13.0/compat/libcuda.so.580.95.05"
    c = driver("580.95.05", name="cuda-compat", path=path)
    c.properties["location"] = "/usr/local/cuda-13.0/compat"
    found = [f for f in match([c], DB) if f.id == "CVE-2025-33219"]
    assert len(found) == 1
    f = found[0]
    assert f.advisory and f.advisory.status == "affected"
    assert f.advisory.fixed_version == "580.126.09"
    assert f.advisory.product == "nvidia-driver"
    assert f.evidence == (path,)
    assert f.severity == "high"  # CVSS 3.1 7.8


def test_fused_deb_package_matched_through_its_products() -> None:
    # a distro package owning libcuda: fusion put the driver product on it
    c = Component(
        name="libnvidia-compute-580", version="580.95.05-0ubuntu1", ecosystem="deb",
        products=[Product("nvidia-driver", "libcuda", "580.95.05")],
        evidence=[Evidence("dpkg", "package-db", "/var/lib/dpkg/status"),
                  Evidence("nvidia-driver", "soname", "/usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05")],
        bom_ref="deb:libnvidia-compute-580",
    )
    f = [x for x in match([c], DB) if x.id == "CVE-2025-33219"][0]
    assert f.advisory and f.advisory.installed_version == "580.95.05"
    assert f.evidence == ("/usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05",)


def test_no_range_gives_review() -> None:
    c = Component(name="libze1", version="1.8.12-1", ecosystem="deb",
                  products=[Product("level-zero", "level-zero-loader", "1.8.12")], bom_ref="z")
    assert _status(c, "CVE-2024-31073") == ("review", None)


def test_env_only_version_is_review() -> None:
    c = Component(name="cuda-toolkit", version="12.4.1", ecosystem="generic",
                  properties={"stack": "cuda", "product": "cuda-toolkit"},
                  evidence=[Evidence("cuda", "env", None, None, "CUDA_VERSION=12.4.1")], bom_ref="t")
    assert _status(c, "CVE-2024-53870") == ("review", "12.8")
    c.evidence = [Evidence("cuda", "version-file", "/usr/local/cuda-12.4/version.json")]
    assert _status(c, "CVE-2024-53870") == ("affected", "12.8")
    c = _at(c, "12.8.0")
    assert _status(c, "CVE-2024-53870") is None


def test_triton_compares_container_release() -> None:
    c = Component(name="triton-inference-server", version="2.58.0", ecosystem="generic",
                  properties={"stack": "triton-inference-server",
                              "product": "triton-inference-server", "container-release": "25.06"},
                  evidence=[Evidence("triton-server", "version-file", "/opt/tritonserver/TRITON_VERSION")],
                  bom_ref="t")
    assert _status(c, "CVE-2025-23310") == ("affected", "25.07")
    c.properties["container-release"] = "25.07"
    assert _status(c, "CVE-2025-23310") is None
    del c.properties["container-release"]
    # no label: the server version decides through NVIDIA's release table
    # (r25.05/TRITON_VERSION of triton-inference-server/server is 2.58.0)
    assert _status(c, "CVE-2025-23310") == ("affected", "25.07")
    c = _at(c, "2.59.1")  # r25.07: the fixed release
    assert _status(c, "CVE-2025-23310") is None
    c = _at(c, "2.99.0dev")  # not a release of the table: undecidable
    assert _status(c, "CVE-2025-23310")[0] == "review"


def _deb_db():
    rec = json.loads((ROOT / "advisories" / "NVIDIA-5582.json").read_text())
    rec = copy.deepcopy(rec)
    rec["id"] = "TEST-DEB"
    for v in rec["vulnerabilities"]:
        for a in v["affected"]:
            if a["target"] == "nvidia-container-toolkit":
                a.update(scheme="deb", ranges=[{"fixed": "1:1.16.2-1"}], fixed=["1:1.16.2-1"])
    return load_records([rec], source="test")


@pytest.mark.parametrize(
    "version, affected",
    [
        ("1:1.16.1-1", True),
        ("1:1.16.2-1~rc1", True),  # tilde: before the release
        ("1:1.16.2-1", False),
        ("1:1.16.2-1+deb12u1", False),
        ("2:0.1-1", False),  # a higher epoch wins over any version
        ("1.99-1", True),  # epoch 0 < epoch 1
    ],
)
def test_debian_epoch_and_tilde(version: str, affected: bool) -> None:
    c = Component(name="nvidia-container-toolkit", version=version, ecosystem="deb",
                  products=[Product("nvidia-container-toolkit", "nvidia-container-toolkit", version)],
                  bom_ref="d")
    got = _status(c, "CVE-2024-0132", db=_deb_db())
    assert (got is not None and got[0] == "affected") == affected


def test_severity_bands() -> None:
    assert [severity_of(x) for x in (None, 0, 3.9, 4.0, 6.9, 7.0, 8.9, 9.0, 10)] == [
        "unknown", "none", "low", "medium", "medium", "high", "high", "critical", "critical"]
