"""OSV and CVE JSON 5 importers, on documents written for these tests in the shapes the
real feeds use (GHSA/PYSEC entries for PyPI with ECOSYSTEM + GIT ranges and version lists,
Debian/Ubuntu entries naming source packages, NVIDIA CVE files with branch platforms and
free-text versions, structured lessThan ranges, AMD-style unaffected lists)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from gpusbom.advisories.db import load_records, validate_record
from gpusbom.advisories.importers.cve5 import import_cve5
from gpusbom.advisories.importers.osv import ecosystem_info, gpu_relevant, import_osv
from gpusbom.advisories.matcher import match
from gpusbom.model import Component, Evidence, Product


def _at(c: Component, version: str) -> Component:
    """``c`` at another version: its own product (named by the ``stack``/``product``
    properties at construction, so versioned as the component) moves with it."""
    return dataclasses.replace(c, version=version, products=[
        dataclasses.replace(p, version=version) for p in c.products])


def _pypi(name: str, version: str) -> Component:
    return Component(name=name, version=version, ecosystem="pypi",
                     purl=f"pkg:pypi/{name}@{version}", bom_ref=f"pypi:{name}@{version}",
                     evidence=[Evidence("python", "package-metadata", f"/site/{name}/METADATA")])


def _deb(name: str, version: str, source: str, distro: str | None) -> Component:
    q = f"?arch=amd64&distro={distro}" if distro else "?arch=amd64"
    return Component(name=name, version=version, ecosystem="deb",
                     purl=f"pkg:deb/debian/{name}@{version}{q}",
                     properties={"source-package": source}, bom_ref=f"deb:{name}@{version}",
                     evidence=[Evidence("dpkg", "package-db", "/var/lib/dpkg/status")])


def _status(c: Component, db, vuln: str) -> tuple[str, str | None] | None:
    for f in match([c], db):
        if f.id == vuln:
            assert f.advisory is not None
            return f.advisory.status, f.advisory.fixed_version
    return None


# --------------------------------------------------------------------------- OSV


def ghsa_transformers() -> dict:
    return {
        "schema_version": "1.4.0", "id": "GHSA-test-tf01-0001",
        "modified": "2099-03-02T10:00:00Z", "published": "2099-03-01T00:00:00Z",
        "aliases": ["CVE-2099-3001"],
        "summary": "Test: deserialization of untrusted data in transformers",
        "details": "Longer text.",
        "severity": [{"type": "CVSS_V3", "score": "CVSS:3.1/AV:N/AC:H/PR:N/UI:R/S:U/C:H/I:H/A:H"},
                     {"type": "CVSS_V4",
                      "score": "CVSS:4.0/AV:N/AC:L/AT:N/PR:N/UI:N/VC:H/VI:H/VA:H/SC:N/SI:N/SA:N"}],
        "affected": [{
            "package": {"ecosystem": "PyPI", "name": "Transformers",
                        "purl": "pkg:pypi/transformers"},
            "ranges": [{"type": "ECOSYSTEM", "events": [
                {"introduced": "0"}, {"fixed": "4.36.0"},
                {"introduced": "4.40.0"}, {"last_affected": "4.41.2"}]}],
            "database_specific": {"last_known_affected_version_range": "<= 4.41.2"},
        }],
        "references": [{"type": "ADVISORY", "url": "https://nvd.nist.gov/vuln/detail/CVE-2099-3001"},
                       {"type": "WEB", "url": "https://github.com/huggingface/transformers"}],
        "database_specific": {"severity": "HIGH", "github_reviewed": True},
    }


def pysec_git_only() -> dict:
    # PYSEC entries carry a GIT range and the enumerated versions
    return {
        "id": "PYSEC-2099-1", "modified": "2099-01-02T00:00:00Z",
        "published": "2099-01-01T00:00:00Z", "aliases": ["CVE-2099-3002", "GHSA-test-x"],
        "details": "In torch before a fix commit, something unsafe happens.",
        "affected": [{"package": {"name": "torch", "ecosystem": "PyPI"},
                      "ranges": [{"type": "GIT", "repo": "https://github.com/pytorch/pytorch",
                                  "events": [{"introduced": "0"}, {"fixed": "767f6aa"}]}],
                      "versions": ["1.12.0", "1.12.1", "1.13.0"]}],
    }


def debian_driver() -> dict:
    return {
        "id": "DSA-9999-1", "modified": "2099-04-02T00:00:00Z",
        "published": "2099-04-01T00:00:00Z", "aliases": ["CVE-2099-3003"],
        "summary": "nvidia-graphics-drivers - security update",
        "affected": [
            {"package": {"ecosystem": "Debian:12", "name": "nvidia-graphics-drivers"},
             "ranges": [{"type": "ECOSYSTEM",
                         "events": [{"introduced": "0"}, {"fixed": "535.216.01-1~deb12u1"}]}]},
            {"package": {"ecosystem": "Debian:11", "name": "nvidia-graphics-drivers"},
             "ranges": [{"type": "ECOSYSTEM",
                         "events": [{"introduced": "0"}, {"fixed": "470.256.02-1~deb11u1"}]}]},
            {"package": {"ecosystem": "Debian:12", "name": "openssl"},
             "ranges": [{"type": "ECOSYSTEM",
                         "events": [{"introduced": "0"}, {"fixed": "3.0.15-1~deb12u1"}]}]},
        ],
    }


def test_osv_pypi_ranges_and_scores() -> None:
    imp = import_osv(ghsa_transformers())
    rec = imp.record
    assert imp.unparsed == [] and rec is not None
    assert rec["id"] == "GHSA-test-tf01-0001" and rec["vendor"] == "GitHub"
    assert rec["sources"][0] == "https://osv.dev/vulnerability/GHSA-test-tf01-0001"
    (v,) = rec["vulnerabilities"]
    assert v["id"] == "CVE-2099-3001" and v["aliases"] == ["GHSA-test-tf01-0001"]
    assert {(s["type"], s["score"]) for s in v["severity"]} == {("CVSS_V3_1", 7.5),
                                                                 ("CVSS_V4_0", 9.3)}
    (a,) = v["affected"]
    assert a["target"] == "pkg:pypi/transformers" and a["scheme"] == "pep440"
    assert a["ranges"] == [{"introduced": "0", "fixed": "4.36.0"},
                           {"introduced": "4.40.0", "last_affected": "4.41.2"}]
    assert a["fixed"] == ["4.36.0"]
    db = load_records([rec], source="test")
    assert _status(_pypi("transformers", "4.35.2"), db, "CVE-2099-3001") == ("affected", "4.36.0")
    assert _status(_pypi("transformers", "4.36.0"), db, "CVE-2099-3001") is None
    assert _status(_pypi("transformers", "4.41.2"), db, "CVE-2099-3001") == ("affected", None)
    assert _status(_pypi("transformers", "4.42.0"), db, "CVE-2099-3001") is None
    assert _status(_pypi("Transformers", "4.35.2+cpu"), db, "CVE-2099-3001")[0] == "affected"


def test_osv_git_only_uses_version_list() -> None:
    imp = import_osv(pysec_git_only())
    rec = imp.record
    assert rec is not None and rec["vendor"] == "PyPA"
    (a,) = rec["vulnerabilities"][0]["affected"]
    assert "ranges" not in a and a["versions"] == ["1.12.0", "1.12.1", "1.13.0"]
    db = load_records([rec], source="test")
    assert _status(_pypi("torch", "1.13.0+cu117"), db, "CVE-2099-3002") == ("affected", None)
    assert _status(_pypi("torch", "1.13.1"), db, "CVE-2099-3002") is None


def test_osv_git_only_without_versions_is_review_and_reported() -> None:
    doc = pysec_git_only()
    del doc["affected"][0]["versions"]
    imp = import_osv(doc)
    assert imp.unparsed == ["PyPI/torch: only GIT ranges and no version list"]
    (a,) = imp.record["vulnerabilities"][0]["affected"]
    assert a["no_range"] == "only git commit ranges"
    db = load_records([imp.record], source="test")
    assert _status(_pypi("torch", "2.0.0"), db, "CVE-2099-3002") == ("review", None)


def test_osv_unparsable_version_is_reported_not_dropped() -> None:
    doc = ghsa_transformers()
    doc["affected"][0]["ranges"][0]["events"] = [{"introduced": "0"}, {"fixed": "4.x-final"}]
    imp = import_osv(doc)
    assert imp.unparsed and "4.x-final" in imp.unparsed[0]
    (a,) = imp.record["vulnerabilities"][0]["affected"]
    assert "no_range" in a
    assert imp.record["verification"]["status"] == "partial"
    validate_record(imp.record)


def test_osv_debian_source_package_and_release() -> None:
    imp = import_osv(debian_driver(), keep=gpu_relevant)
    rec = imp.record
    assert rec is not None and rec["vendor"] == "Debian"
    aff = rec["vulnerabilities"][0]["affected"]
    assert [(a["target"], a["distro"]) for a in aff] == [
        ("pkg:deb/debian/nvidia-graphics-drivers", "debian-12"),
        ("pkg:deb/debian/nvidia-graphics-drivers", "debian-11"),
    ]  # openssl is not a GPU package: left out by keep=
    db = load_records([rec], source="test")
    # a binary package of the source package, on Debian 12
    c = _deb("libcuda1", "535.183.01-1~deb12u1", "nvidia-graphics-drivers", "debian-12")
    assert _status(c, db, "CVE-2099-3003") == ("affected", "535.216.01-1~deb12u1")
    c = _deb("libcuda1", "535.216.01-1~deb12u1", "nvidia-graphics-drivers", "debian-12")
    assert _status(c, db, "CVE-2099-3003") is None
    # the Debian 11 entry judges Debian 11 packages only
    c = _deb("libcuda1", "470.256.02-1~deb11u1", "nvidia-graphics-drivers", "debian-11")
    assert _status(c, db, "CVE-2099-3003") is None
    c = _deb("libcuda1", "470.239.06-1~deb11u1", "nvidia-graphics-drivers", "debian-11")
    assert _status(c, db, "CVE-2099-3003") == ("affected", "470.256.02-1~deb11u1")
    # another distribution's package of the same name: not judged by Debian's entry
    c = _deb("libcuda1", "535.183.01-0ubuntu1", "nvidia-graphics-drivers", "ubuntu-22.04")
    assert _status(c, db, "CVE-2099-3003") is None
    # release unknown (an SBOM without distro): review, not certainty
    c = _deb("libcuda1", "535.183.01-1", "nvidia-graphics-drivers", None)
    assert _status(c, db, "CVE-2099-3003")[0] == "review"


@pytest.mark.parametrize("eco, want", [
    ("PyPI", ("pypi", None, "pep440", None)),
    ("Debian:12", ("deb", "debian", "deb", "debian-12")),
    ("Ubuntu:22.04:LTS", ("deb", "ubuntu", "deb", "ubuntu-22.04")),
    ("Ubuntu:Pro:18.04:LTS", ("deb", "ubuntu", "deb", "ubuntu-18.04")),
    ("Ubuntu:24.10", ("deb", "ubuntu", "deb", "ubuntu-24.10")),
    ("Go", ("golang", None, "semver", None)),
])
def test_ecosystems(eco: str, want: tuple) -> None:
    info = ecosystem_info(eco)
    assert info is not None
    assert (info.purl_type, info.namespace, info.scheme, info.distro) == want


def test_unsupported_ecosystem_reported() -> None:
    doc = ghsa_transformers()
    doc["affected"][0]["package"]["ecosystem"] = "Hackage"
    imp = import_osv(doc)
    assert imp.record is None and "no version scheme" in imp.unparsed[0]


def test_withdrawn_skipped() -> None:
    doc = ghsa_transformers()
    doc["withdrawn"] = "2099-03-03T00:00:00Z"
    assert import_osv(doc).record is None


def test_gpu_relevant() -> None:
    assert gpu_relevant("PyPI", "vLLM") and gpu_relevant("PyPI", "nvidia-cudnn-cu12")
    assert gpu_relevant("PyPI", "onnxruntime_gpu") and gpu_relevant("PyPI", "tritonclient")
    assert not gpu_relevant("PyPI", "requests")
    assert gpu_relevant("Debian:12", "nvidia-graphics-drivers-tesla-535")
    assert gpu_relevant("Ubuntu:22.04:LTS", "mesa") and not gpu_relevant("Debian:12", "openssl")


# --------------------------------------------------------------------------- CVE JSON 5


def nvidia_cve() -> dict:
    """Shaped like the CVE files NVIDIA publishes beside each CSAF bulletin (no dates)."""
    def drv(product: str, branch: str, phrase: str) -> dict:
        return {"defaultStatus": "unaffected", "product": product, "vendor": "NVIDIA",
                "platforms": [f"Linux({branch})"],
                "versions": [{"status": "affected", "version": phrase}]}
    return {
        "dataType": "CVE_RECORD", "dataVersion": "5.1",
        "cveMetadata": {"cveId": "CVE-2099-4001", "assignerShortName": "nvidia",
                        "state": "PUBLISHED"},
        "containers": {"cna": {
            "affected": [
                drv("GeForce", "R580", "All driver versions prior to 580.126.09"),
                drv("Tesla", "R535", "All driver versions prior to 535.288.01"),
                {"defaultStatus": "unaffected", "product": "NVIDIA Container Toolkit",
                 "vendor": "NVIDIA", "platforms": ["Linux"],
                 "versions": [{"status": "affected",
                               "version": "All versions up to and including v1.16.1"}]},
                {"defaultStatus": "unaffected", "product": "DGX H100", "vendor": "NVIDIA",
                 "versions": [{"status": "affected", "version": "All versions"}]},
            ],
            "descriptions": [{"lang": "en", "value": "NVIDIA GPU Display Driver for Linux "
                              "contains a test vulnerability. A successful exploit..."}],
            "metrics": [{"cvssV3_1": {"baseScore": 7.8, "baseSeverity": "HIGH", "version": "3.1",
                                      "vectorString": "CVSS:3.1/AV:L/AC:L/PR:L/UI:N/S:U/C:H/I:H/A:H"}}],
            "references": [{"url": "https://nvidia.custhelp.com/app/answers/detail/a_id/9999"}],
            "providerMetadata": {"orgId": "x", "shortName": "nvidia"},
        }},
    }


def test_cve5_nvidia_shape() -> None:
    imp = import_cve5(nvidia_cve(), published="2099-05-01")
    rec = imp.record
    assert rec is not None and rec["vendor"] == "NVIDIA" and rec["published"] == "2099-05-01"
    assert imp.unmapped == ["DGX H100"]
    aff = rec["vulnerabilities"][0]["affected"]
    by = {(a["target"], a.get("branch")): a for a in aff}
    assert by[("nvidia-driver", "580")]["ranges"] == [{"fixed": "580.126.09"}]
    assert by[("nvidia-driver", "535")]["ranges"] == [{"fixed": "535.288.01"}]
    assert by[("nvidia-container-toolkit", None)]["ranges"] == [{"last_affected": "1.16.1"}]
    assert rec["vulnerabilities"][0]["severity"][0]["score"] == 7.8
    db = load_records([rec], source="test")
    drv = Component(name="libcuda", version="535.274.02", ecosystem="generic",
                    properties={"stack": "nvidia-driver", "product": "libcuda"}, bom_ref="d")
    assert _status(drv, db, "CVE-2099-4001") == ("affected", "535.288.01")
    drv = _at(drv, "535.288.01")  # fixed in its branch though below the R580 fix
    assert _status(drv, db, "CVE-2099-4001") is None
    drv = _at(drv, "550.163.01")  # R550 omitted, older than listed: the vendor's own status
    assert _status(drv, db, "CVE-2099-4001") == ("unsupported-branch", None)


def test_cve5_without_any_date_is_skipped() -> None:
    imp = import_cve5(nvidia_cve())
    assert imp.record is None and "no publication date" in (imp.skipped or "")


def test_cve5_structured_ranges_and_intel_phrases() -> None:
    doc = {
        "cveMetadata": {"cveId": "CVE-2099-4002", "assignerShortName": "intel",
                        "datePublished": "2099-05-13T20:00:00.000Z", "state": "PUBLISHED"},
        "containers": {
            "cna": {"title": "Test Level Zero", "affected": [
                {"vendor": "n/a", "product": "Intel(R) oneAPI Level Zero software",
                 "versions": [{"status": "affected", "version": "See references"}]},
                {"vendor": "n/a", "product": "Intel(R) oneAPI DPC++/C++ Compiler",
                 "versions": [{"status": "affected", "version": "before version 2025.0.0"}]},
            ]},
            "adp": [{"metrics": [{"cvssV3_1": {"baseScore": 6.7, "vectorString":
                                               "CVSS:3.1/AV:L/AC:L/PR:H/UI:N/S:U/C:H/I:H/A:H"}}],
                     "affected": []}],
        },
    }
    imp = import_cve5(doc)
    rec = imp.record
    assert rec["vendor"] == "Intel" and rec["published"] == "2099-05-13"
    by = {a["target"]: a for a in rec["vulnerabilities"][0]["affected"]}
    assert by["level-zero"]["no_range"].endswith("See references")
    assert imp.unparsed == ["Intel(R) oneAPI Level Zero software: See references"]
    assert by["intel-dpcpp-compiler"]["ranges"] == [{"fixed": "2025.0.0"}]
    assert rec["vulnerabilities"][0]["severity"][0]["score"] == 6.7  # from the ADP container
    validate_record(rec)


def test_cve5_less_than_and_unaffected_lists() -> None:
    doc = {
        "cveMetadata": {"cveId": "CVE-2099-4003", "assignerShortName": "GitHub_M",
                        "datePublished": "2099-04-18T00:00:00Z"},
        "containers": {"cna": {"descriptions": [{"lang": "en", "value": "PyTorch test."}],
                               "affected": [
            {"vendor": "pytorch", "product": "pytorch", "versions": [
                {"version": "0", "lessThan": "2.6.0", "status": "affected",
                 "versionType": "custom"}]},
            {"vendor": "NVIDIA", "product": "Triton Inference Server", "defaultStatus": "affected",
             "versions": [{"version": "25.07", "status": "unaffected"}]},
        ]}},
    }
    rec = import_cve5(doc).record
    by = {a["target"]: a for a in rec["vulnerabilities"][0]["affected"]}
    assert by["torch"]["ranges"] == [{"fixed": "2.6.0"}] and by["torch"]["scheme"] == "pep440"
    tri = by["triton-inference-server"]
    assert tri["fixed"] == ["25.07"] and "affected versions not stated" in tri["no_range"]
    db = load_records([rec], source="test")
    assert _status(_pypi("torch", "2.5.1"), db, "CVE-2099-4003") == ("affected", "2.6.0")
    assert _status(_pypi("torch", "2.6.0+cu124"), db, "CVE-2099-4003") is None


def test_cve5_rejected() -> None:
    doc = nvidia_cve()
    doc["cveMetadata"]["state"] = "REJECTED"
    assert import_cve5(doc, published="2099-01-01").record is None


def test_package_target_via_products_too() -> None:
    # a deb package whose fused products say torch is also judged as torch
    c = Component(name="python3-torch", version="2.5.1-1", ecosystem="deb",
                  products=[Product("pytorch", "torch", "2.5.1")], bom_ref="x")
    from gpusbom.advisories.db import load_bundled

    assert _status(c, load_bundled(), "CVE-2025-32434") == ("affected", "2.6.0")


def test_cve5_intel_phrase_forms_and_marks() -> None:
    # the forms Intel's records use (cisagov/vulnrichment copies of Intel's CVE records):
    # "before versions 2024.1" (plural), "before version v3.0", "versions 15.40 and 15.45",
    # an HTML entity and (R)/(TM) marks in the product name
    def one(product: str, version: str) -> dict[str, Any]:
        doc = {"cveMetadata": {"cveId": "CVE-2099-4010", "assignerShortName": "intel",
                               "datePublished": "2099-01-01T00:00:00Z"},
               "containers": {"cna": {"affected": [
                   {"vendor": "n/a", "product": product,
                    "versions": [{"status": "affected", "version": version}]}]}}}
        imp = import_cve5(doc)
        assert imp.record is not None, (product, imp.unmapped)
        assert imp.phrases == 1
        return dict(imp.record["vulnerabilities"][0]["affected"][0])

    assert one("Intel(R) VTune(TM) Profiler software", "before versions 2024.1")["ranges"] == [
        {"fixed": "2024.1"}]
    assert one("Intel(R) Neural Compressor software", "before version v3.0")["ranges"] == [
        {"fixed": "3.0"}]
    got = one("Intel(R) Graphics Driver installers", "versions 15.40 and 15.45")
    assert got["versions"] == ["15.40", "15.45"] and "ranges" not in got
    win = one("Intel(R) Arc\u2122 &amp; Iris(R) Xe graphics software", "before version 32.0.101.6077")
    assert (win["target"], win["platform"]) == ("intel-graphics-windows-driver", "windows")
    assert win["vendor_product"] == "Intel(R) Arc\u2122 &amp; Iris(R) Xe graphics software"
    # "See references": no versions in the record -> no range, never a guess
    see = one("Intel(R) Graphics Drivers", "See references")
    assert "ranges" not in see and "See references" in see["no_range"]
