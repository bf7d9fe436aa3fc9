"""PEP 770: SBOMs that wheels ship in ``.dist-info/sboms/`` are reported on their Python
component and readable as declared SBOMs (``gpusbom.declared``, for reconcile).

Two real PyPI wheels that ship one, pinned: rpds-py 2026.9.1 (built by maturin; its
``rpds-py.cyclonedx.json`` is cargo-cyclonedx's list of the Rust crates compiled in) and
psycopg-binary 3.3.9 (repaired by auditwheel 6.7.0; ``auditwheel.cdx.json`` lists the
CentOS 7 packages of the libraries it grafted into the wheel). Each is unpacked into a root filesystem as
pip installs it (a wheel is a zip of the installed tree) and scanned as ``dir:ROOT``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from pinned_wheels import LINUX_311, pinned_wheel  # tests/pinned_wheels.py

from gpusbom.declared import declared_sboms, scan_declared
from gpusbom.pipeline import ScanRequest, scan_open

SITE = "usr/local/lib/python3.11/site-packages"
WHEELS = {
    "rpds-py": ("rpds_py-2026.9.1-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
                "rpds-py==2026.9.1",
                "136a1c3fe4402b7008bc81cb62ee538481795b61a7e83df88dff3b3f02b726ff"),
    "psycopg-binary": (
        "psycopg_binary-3.3.9-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
        "psycopg-binary==3.3.9",
        "0953c1b94c73f97efce5b8fb1dad85cf5e4085b94902e439e27e6805ebc8be99"),
}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    top = tmp_path_factory.mktemp("pep770")
    site = top / SITE
    site.mkdir(parents=True)
    for filename, req, sha in WHEELS.values():
        with zipfile.ZipFile(pinned_wheel(filename, req, sha, pip_args=LINUX_311)) as z:
            z.extractall(site)
    # a package whose declared SBOM is garbage: reported, never fatal
    bad = site / "broken-1.0.dist-info"
    (bad / "sboms").mkdir(parents=True)
    (bad / "METADATA").write_text("Metadata-Version: 2.4\nName: broken\nVersion: 1.0\n")
    (bad / "sboms" / "broken.cdx.json").write_text('{"bomFormat": "CycloneDX", "compo')
    return top


def _by_name(result_components: list[dict[str, object]], name: str) -> dict[str, object]:
    [c] = [c for c in result_components if c["name"] == name and c["ecosystem"] == "pypi"]
    return c


def test_scan_reports_declared_sboms_on_the_python_component(root: Path, tmp_path: Path) -> None:
    out = tmp_path / "scan.cdx.json"
    got = subprocess.run([str(Path(sys.executable).parent / "gpusbom"), "scan", f"dir:{root}",
                          "--offline", "-q", "-o", f"json={tmp_path / 'scan.json'}",
                          "-o", f"cyclonedx-json={out}"],
                         capture_output=True, text=True, timeout=300, check=False)
    assert got.returncode == 0, got.stderr
    comps = json.loads((tmp_path / "scan.json").read_text())["components"]
    for name, sbom in (("rpds-py", "rpds-py.cyclonedx.json"),
                       ("psycopg-binary", "auditwheel.cdx.json")):
        c = _by_name(comps, name)
        assert c["properties"]["declared-sboms"] == sbom  # type: ignore[index]
        ev = [e for e in c["evidence"] if e["method"] == "sbom-declared"]  # type: ignore[attr-defined]
        assert len(ev) == 1 and ev[0]["detail"] == "PEP 770"
        assert ev[0]["path"].endswith(f".dist-info/sboms/{sbom}")
        # the wheel's RECORD lists the SBOM file: its declared digest comes along
        assert ev[0]["declared_digest"].startswith("sha256:")
    assert _by_name(comps, "broken")["properties"]["declared-sboms"] == "broken.cdx.json"  # type: ignore[index]
    cdx = json.loads(out.read_text())
    [rpds] = [c for c in cdx["components"] if c["name"] == "rpds-py"]
    props = {p["name"]: p["value"] for p in rpds["properties"]}
    assert props["gpusbom:declared-sboms"] == "rpds-py.cyclonedx.json"


def test_declared_sboms_are_parsed_for_reconcile(root: Path) -> None:
    result, declared = scan_declared(ScanRequest(reference=f"dir:{root}", advisories=False))
    by_ref = {c.bom_ref: c for c in result.components}
    got = {by_ref[d.component].name: d for d in declared}
    assert set(got) == {"rpds-py", "psycopg-binary", "broken"}
    rpds = got["rpds-py"].document
    assert rpds is not None and got["rpds-py"].error is None
    crates = {(c.name, c.ecosystem) for c in rpds.components}
    assert ("rpds", "cargo") in crates and ("pyo3", "cargo") in crates  # the Rust build
    grafted = got["psycopg-binary"].document
    assert grafted is not None
    assert {"keyutils-libs", "cyrus-sasl-lib", "libcom_err"} <= {c.name for c in grafted.components}
    assert any(c.ecosystem == "rpm" for c in grafted.components)  # CentOS 7 libraries
    broken = got["broken"]
    assert broken.document is None and broken.error and "broken.cdx.json" in broken.error
    assert "\n" not in broken.error


def test_declared_sboms_from_an_open_scan(root: Path) -> None:
    with scan_open(ScanRequest(reference=f"dir:{root}", advisories=False)) as scanned:
        assert scanned.view.fs is not None
        found = declared_sboms(scanned.result, scanned.view.fs)
    assert sorted(Path(d.path).name for d in found) == [
        "auditwheel.cdx.json", "broken.cdx.json", "rpds-py.cyclonedx.json"]
