"""The curated advisory data: every record follows the JSON Schema, cites https sources,
parses in its version scheme, and the bundled snapshot equals the files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from gpusbom.advisories.db import AdvisoryError, load_bundled, load_directory, validate_record

ROOT = Path(__file__).resolve().parents[2]
ADV = ROOT / "advisories"
RECORDS = sorted(p for p in ADV.glob("*.json") if p.name != "schema.json")


@pytest.fixture(scope="module")
def schema() -> dict:
    s = json.loads((ADV / "schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(s)
    return s


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: p.stem)
def test_record_follows_schema(path: Path, schema: dict) -> None:
    rec = json.loads(path.read_text())
    jsonschema.validate(rec, schema)
    assert path.stem == rec["id"]
    adv = validate_record(rec)
    assert adv.sources and all(u.startswith("https://") for u in adv.sources)


def test_seed_covers_research_rows() -> None:
    db = load_directory(ADV)
    ids = {a.id for a in db}
    cves = {v.id for a in db for v in a.vulnerabilities}
    for want in ["INTEL-SA-01402", "INTEL-SA-01385", "INTEL-SA-01274", "INTEL-SA-01243",
                 "INTEL-SA-01094", "INTEL-SA-01259", "INTEL-SA-01253", "INTEL-SA-01072",
                 "AMD-SB-6019", "AMD-SB-6015", "GHSA-53q9-r3pm-6pq6", "NVIDIA-5582",
                 "NVIDIA-5747", "NVIDIA-5821"]:
        assert want in ids
    for cve in ["CVE-2024-0132", "CVE-2024-0133", "CVE-2024-0135", "CVE-2025-23359",
                "CVE-2025-23266", "CVE-2025-23267", "CVE-2024-0126", "CVE-2024-0150",
                "CVE-2025-23244", "CVE-2025-23277", "CVE-2025-23280", "CVE-2025-33219",
                "CVE-2026-24187", "CVE-2024-53870", "CVE-2025-23247", "CVE-2025-23310",
                "CVE-2025-23319", "CVE-2024-0087", "CVE-2025-32434", "CVE-2024-31580",
                "CVE-2025-3730", "CVE-2024-36353", "CVE-2024-21937", "CVE-2026-20794",
                "CVE-2026-20751", "CVE-2025-32453", "CVE-2024-31073", "CVE-2024-47795",
                "CVE-2025-20018", "CVE-2024-36292", "CVE-2024-45371", "CVE-2024-24580",
                "CVE-2024-21766"]:
        assert cve in cves, cve


def test_bundle_in_sync() -> None:
    rc = subprocess.run([sys.executable, str(ROOT / "scripts" / "build_advisory_bundle.py"),
                         "--check"]).returncode
    assert rc == 0, "run scripts/build_advisory_bundle.py"
    assert len(load_bundled()) == len(RECORDS)


def test_lookup_by_alias() -> None:
    db = load_bundled()
    assert db.get("cve-2024-0132").id == "NVIDIA-5582"
    assert db.get("INTEL-SA-01274").vendor == "Intel"


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda r: r.update(sources=[]), "source"),
        (lambda r: r.update(sources=["http://insecure"]), "https"),
        (lambda r: r["vulnerabilities"][0]["affected"][0].update(target="nope"), "unknown target"),
        (lambda r: r["vulnerabilities"][0]["affected"][0].update(ranges=[{"fixed": "x.y"}]), "not a"),
        (lambda r: r["vulnerabilities"][0]["affected"][0].pop("ranges"), "no_range"),
    ],
)
def test_invalid_records_rejected(mutate, message: str) -> None:
    rec = json.loads((ADV / "NVIDIA-5582.json").read_text())
    mutate(rec)
    with pytest.raises(AdvisoryError, match=message):
        validate_record(rec)
