"""KEV parsing and description extraction (``advisories/enrich.py``) on documents written
for the tests in CISA's KEV format and the CSAF/OSV shapes the updater reads."""

from __future__ import annotations

import pytest

from gpusbom.advisories.db import AdvisoryError, bundle, load_bundle_text
from gpusbom.advisories.enrich import (
    KevError,
    clean_text,
    csaf_descriptions,
    osv_description,
    parse_kev,
)


def _entry(cve: str, **kw: str) -> dict:
    return {"cveID": cve, "vendorProject": "Test", "product": "Test",
            "vulnerabilityName": "Test", "dateAdded": "2024-05-01",
            "shortDescription": "Test.", "requiredAction": "Apply updates.",
            "dueDate": "2024-05-22", "knownRansomwareCampaignUse": "Known", **kw}


def test_parse_kev_keeps_ids_dates_and_ransomware_flag_only() -> None:
    got = parse_kev({"catalogVersion": "2024.05.01", "dateReleased": "2024-05-01T00:00:00Z",
                     "count": 2, "vulnerabilities": [_entry("CVE-2024-0002"),
                                                     _entry("CVE-2024-00001")]})
    assert got["catalogVersion"] == "2024.05.01"
    assert list(got["entries"]) == ["CVE-2024-00001", "CVE-2024-0002"]  # sorted
    assert got["entries"]["CVE-2024-0002"] == {
        "dateAdded": "2024-05-01", "dueDate": "2024-05-22",
        "knownRansomwareCampaignUse": "Known"}  # no CISA prose kept


@pytest.mark.parametrize(("doc", "msg"), [
    ({"count": 0}, "no 'vulnerabilities' list"),
    ({"count": 3, "vulnerabilities": [_entry("CVE-2024-0002")]}, "'count' is 3"),
    ({"vulnerabilities": [_entry("CVE-2024-0002")]}, "'count' is None"),
    ({"count": 1, "vulnerabilities": [_entry("CVE-2024-0002", dateAdded="05/01/2024")]},
     "'dateAdded' is not a date"),
    ({"count": 1, "vulnerabilities": [_entry("GHSA-xxxx")]}, "not a CVE id"),
])
def test_parse_kev_refuses_what_is_not_the_catalog(doc: dict, msg: str) -> None:
    with pytest.raises(KevError, match=msg):
        parse_kev(doc)


def test_clean_text_one_line_no_controls_bounded() -> None:
    assert clean_text("a\n\tb \x1b]0;title\x07 c\u202e") == "a b ]0;title c"
    long = clean_text("x" * 10_000)
    assert len(long) == 4000 and long.endswith("...")


def test_csaf_description_notes_else_summary_keyed_by_cve() -> None:
    doc = {"vulnerabilities": [
        {"cve": "CVE-2099-0001", "notes": [
            {"category": "summary", "text": "short"},
            {"category": "description", "text": "long  text"}]},
        {"cve": "CVE-2099-0002", "notes": [{"category": "summary", "text": "only summary"}]},
        {"cve": "CVE-2099-0003", "notes": [{"category": "general", "text": "not this"}]},
        {"notes": [{"category": "description", "text": "no CVE id"}]},
    ]}
    assert csaf_descriptions(doc) == {"CVE-2099-0001": "long text",
                                      "CVE-2099-0002": "only summary"}
    assert osv_description({"summary": "s", "details": "d\n\nmore"}) == "d more"
    assert osv_description({"summary": "s"}) == "s"
    assert osv_description({}) is None


def test_stored_bundle_with_a_broken_kev_copy_is_refused() -> None:
    import json

    good = bundle([], "2099-01-01T00:00:00Z", kev={"entries": {
        "CVE-2099-0001": {"dateAdded": "2099-01-01"}}}, descriptions={"CVE-2099-0001": "t"})
    db = load_bundle_text(json.dumps(good), source="test")
    assert db.kev == {"CVE-2099-0001": {"dateAdded": "2099-01-01"}}
    assert db.descriptions == {"CVE-2099-0001": "t"}
    bad = dict(good, kev={"entries": {"CVE-2099-0001": {"dateAdded": "soon"}}})
    with pytest.raises(AdvisoryError, match="'kev' entry 'CVE-2099-0001' is malformed"):
        load_bundle_text(json.dumps(bad), source="test")
