"""CSAF 2.0 importer on documents written for these tests, mirroring the structure and
phrases of NVIDIA's bulletins (vendor -> product_family -> product_name; vendor ->
architecture "Linux(R580)" -> product_version with free-text names)."""

from __future__ import annotations

import dataclasses

import pytest

from gpusbom.advisories.db import load_records
from gpusbom.advisories.importers.csaf import import_csaf, parse_arch, parse_phrase, phrase_class
from gpusbom.advisories.matcher import match
from gpusbom.model import Component, Evidence


def _at(c: Component, version: str) -> Component:
    """``c`` at another version: its own product (named by the ``stack``/``product``
    properties at construction, so versioned as the component) moves with it."""
    return dataclasses.replace(c, version=version, products=[
        dataclasses.replace(p, version=version) for p in c.products])


def _pv(product: str, phrase: str, pid: str) -> dict:
    return {"category": "product_version", "name": product,
            "product": {"name": phrase, "product_id": pid}}


def _doc() -> dict:
    return {
        "document": {
            "category": "csaf_security_advisory", "csaf_version": "2.0",
            "title": "Security Bulletin: Test GPU Display Driver - Test 2099",
            "publisher": {"name": "NVIDIA Product Security", "category": "vendor",
                          "namespace": "https://www.nvidia.com/security"},
            "tracking": {"id": "9901", "initial_release_date": "2099-01-02T00:00:00Z",
                         "current_release_date": "2099-01-03T00:00:00Z"},
        },
        "product_tree": {"branches": [{"category": "vendor", "name": "NVIDIA", "branches": [
            {"category": "product_family", "name": "NVIDIA Product Family", "branches": [
                {"category": "product_name", "name": "Tesla",
                 "product": {"name": "Tesla", "product_id": "linuxr580_tesla"}},
                {"category": "product_name", "name": "NVIDIA Container Toolkit",
                 "product": {"name": "NVIDIA Container Toolkit", "product_id": "ctk",
                             "product_identification_helper": {
                                 "cpe": "cpe:2.3:a:nvidia:nvidia_container_toolkit:*:*:*:*:*:*:*:*"}}},
            ]},
            # nested one level deeper than NVIDIA usually does: depth must not matter
            {"category": "architecture", "name": "Linux(R580)", "branches": [
                {"category": "product_family", "name": "extra level", "branches": [
                    _pv("Tesla", "All driver versions prior to 580.159.03", "r580_aff"),
                    _pv("Tesla", "580.159.03", "r580_fix"),
                ]},
            ]},
            {"category": "architecture", "name": "Linux(R535)", "branches": [
                _pv("Tesla", "All driver versions prior to 535.309.01", "r535_aff"),
                _pv("Tesla", "535.309.01", "r535_fix"),
            ]},
            {"category": "architecture", "name": "Linux(R580 vGPU 19)", "branches": [
                _pv("Guest driver", "580.126.09(All versions prior to and including vGPU 19.4)", "vg_aff"),
                _pv("Guest driver", "580.159.03(vGPU software 19.5)", "vg_fix"),
            ]},
            {"category": "architecture", "name": "Linux", "branches": [
                _pv("NVIDIA Container Toolkit", "All versions up to and including v1.16.1", "ctk_aff"),
                _pv("NVIDIA Container Toolkit", "v1.16.2", "ctk_fix"),
                _pv("NVIDIA Container Toolkit", "Contact your NVIDIA Customer Program Manager", "ctk_odd"),
            ]},
        ]}]},
        "vulnerabilities": [
            {"cve": "CVE-2099-0001",
             "product_status": {"known_affected": ["r580_aff", "r535_aff", "vg_aff"],
                                "fixed": ["r580_fix", "r535_fix", "vg_fix"]},
             "scores": [{"cvss_v3": {"version": "3.1", "baseScore": 7.8,
                                     "vectorString": "CVSS:3.1/AV:L/AC:L/PR:L/UI:N/S:U/C:H/I:H/A:H"},
                         "products": ["r580_aff"]}]},
            {"cve": "CVE-2099-0002",
             "product_status": {"known_affected": ["ctk_aff", "ctk_odd"], "fixed": ["ctk_fix"]},
             "scores": [{"cvss_v3": {"version": "3.1", "baseScore": 9.0,
                                     "vectorString": "CVSS:3.1/AV:N/AC:L/PR:L/UI:R/S:C/C:H/I:H/A:H"}}]},
        ],
    }


@pytest.mark.parametrize(
    "text, want",
    [
        ("All driver versions prior to 580.159.03", {"fixed": "580.159.03"}),
        ("All versions up to and including v1.16.1", {"last_affected": "1.16.1"}),
        ("580.126.09(All versions prior to and including vGPU 19.4)", {"last_affected": "580.126.09"}),
        ("580.126.09(vGPU software 19.4)", {"version": "580.126.09"}),
        ("595.58.03(All versions up to and including the March 2026 release)", {"last_affected": "595.58.03"}),
        ("v1.16.2", {"version": "1.16.2"}),
        ("All versions up to CUDA Toolkit 12.8", {"last_affected": "12.8"}),
        ("CUDA Toolkit 12.4 Update 1", {"version": "12.4.1"}),
        ("All versions prior to 25.07", {"fixed": "25.07"}),
        ("22.09 to 24.03", {"introduced": "22.09", "last_affected": "24.03"}),
        ("35.6.2 and earlier", {"last_affected": "35.6.2"}),
        ("46.3008 or newer", {"introduced": "46.3008"}),
    ],
)
def test_phrases(text: str, want: dict) -> None:
    ph = parse_phrase(text)
    assert ph is not None
    got = {k: getattr(ph, k) for k in ("version", "fixed", "last_affected", "introduced")
           if getattr(ph, k)}
    assert {k: v.lstrip("v") for k, v in got.items()} == want


@pytest.mark.parametrize("text", ["Contact your NVIDIA Customer Program Manager",
                                  "All versions that do not include code commit 9e95f50",
                                  "6.15.x, 6.16.x, 6.17.x"])
def test_unparsable_phrases(text: str) -> None:
    assert parse_phrase(text) is None


def test_arch() -> None:
    assert parse_arch("Linux(R580)") == ("linux", "580", None)
    assert parse_arch("Linux(R580 vGPU 19)") == ("linux", "580", "vGPU 19")
    assert parse_arch("Linux(Gaming)") == ("linux", None, "Gaming")
    assert parse_arch("Windows, Linux") == (None, None, None)
    assert parse_arch("All") == (None, None, None)


def test_phrase_class() -> None:
    assert phrase_class("580.126.09(All versions prior to and including vGPU 19.4)") == \
        "V(All versions prior to and including vGPU V)"
    assert phrase_class("up to and including the March 2026 release") == \
        "up to and including the MONTH YEAR release"


def test_import_document() -> None:
    imp = import_csaf(_doc(), source_url="https://example.com/9901.json")
    rec = imp.record
    assert rec["id"] == "NVIDIA-9901" and rec["published"] == "2099-01-02"
    assert imp.phrases == 9 and imp.parsed == 8
    assert imp.unparsed == [("ctk_odd", "Contact your NVIDIA Customer Program Manager")]
    v1, v2 = rec["vulnerabilities"]
    drivers = {(a.get("branch"), a.get("variant")): a for a in v1["affected"]}
    assert drivers[("580", None)]["ranges"] == [{"fixed": "580.159.03"}]
    assert drivers[("580", None)]["fixed"] == ["580.159.03"]
    assert drivers[("535", None)]["ranges"] == [{"fixed": "535.309.01"}]
    assert drivers[("580", "vGPU 19")]["ranges"] == [{"last_affected": "580.126.09"}]
    assert v1["severity"][0] == {"type": "CVSS_V3_1", "score": 7.8,
                                 "vector": "CVSS:3.1/AV:L/AC:L/PR:L/UI:N/S:U/C:H/I:H/A:H"}
    ctk, odd = sorted(v2["affected"], key=lambda a: "no_range" in a)
    assert ctk["target"] == "nvidia-container-toolkit"
    assert ctk["ranges"] == [{"last_affected": "1.16.1"}] and ctk["fixed"] == ["1.16.2"]
    assert "Contact your NVIDIA" in ctk["note"]
    # no silent outcome: the affected phrase not understood is its own review entry
    assert odd["target"] == "nvidia-container-toolkit" and "ranges" not in odd
    assert "Contact your NVIDIA" in odd["no_range"]
    assert odd["vendor_phrases"] == ["Contact your NVIDIA Customer Program Manager"]
    # the record loads and matches
    db = load_records([rec], source="test")
    lib = Component(name="libcuda", version="580.126.09", ecosystem="generic",
                    properties={"stack": "nvidia-driver", "product": "libcuda"},
                    evidence=[Evidence("nvidia-driver", "soname", "/usr/lib/libcuda.so.580.126.09")],
                    bom_ref="l")
    (f,) = match([lib], db)
    assert f.advisory and (f.advisory.status, f.advisory.fixed_version) == ("affected", "580.159.03")
    lib = _at(lib, "550.100.01")  # R550: not in the bulletin, older than R580 -> no fix
    (f,) = match([lib], db)
    assert f.advisory and f.advisory.status == "unsupported-branch"
    assert f.advisory.fixed_version is None and f.advisory.rule == "unsupported-branch"


def test_only_unparsable_phrase_becomes_review() -> None:
    doc = _doc()
    doc["vulnerabilities"][1]["product_status"]["known_affected"] = ["ctk_odd"]
    rec = import_csaf(doc, source_url="https://example.com/x.json").record
    (ctk,) = rec["vulnerabilities"][1]["affected"]
    assert "no_range" in ctk
    db = load_records([rec], source="test")
    c = Component(name="nvidia-container-toolkit", version="1.17.0", ecosystem="generic",
                  properties={"stack": "nvidia-container-toolkit",
                              "product": "nvidia-container-toolkit"}, bom_ref="c")
    (f,) = match([c], db)
    assert f.advisory and f.advisory.status == "review"
