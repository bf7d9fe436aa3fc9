"""``gpusbom advisories list|show`` and advisory findings in every output format."""

from __future__ import annotations

import io
import json

from gpusbom.advisories.db import load_bundled
from gpusbom.advisories.matcher import match
from gpusbom.cli.app import main
from gpusbom.model import Component, Evidence, ScanResult, Target
from gpusbom.writers import WriterOptions, get_writer


def test_list_and_show(capsys) -> None:
    assert main(["advisories", "list"]) == 0
    out = capsys.readouterr().out
    assert "NVIDIA-5582" in out and "GHSA-53q9-r3pm-6pq6" in out
    assert main(["advisories", "show", "CVE-2025-32434"]) == 0
    assert json.loads(capsys.readouterr().out)["id"] == "GHSA-53q9-r3pm-6pq6"
    assert main(["advisories", "show", "NOPE-1"]) == 2


def _result() -> ScanResult:
    path = "/usr/local/cuda-13.0/compat/libcuda.so.580.95.05"
    c = Component(name="cuda-compat", version="580.95.05", ecosystem="generic",
                  purl="pkg:generic/nvidia/cuda-compat@580.95.05",
                  properties={"stack": "nvidia-driver", "product": "cuda-compat"},
                  evidence=[Evidence("nvidia-driver", "soname", path)])
    c.assign_ref(set())
    r = ScanResult(target=Target(kind="image", reference="test:1"), components=[c],
                   timestamp="2026-01-01T00:00:00Z")
    r.findings = match(r.components, load_bundled())
    assert r.findings
    return r


def _render(fmt: str, r: ScanResult) -> str:
    out = io.StringIO()
    get_writer(fmt).write(r, out, WriterOptions())
    return out.getvalue()


def test_findings_in_all_formats() -> None:
    r = _result()
    table = _render("table", r)
    assert "CVE-2025-33219" in table and "580.126.09" in table and "affected" in table
    assert ScanResult.from_dict(json.loads(_render("json", r))).findings == r.findings
    cdx = json.loads(_render("cyclonedx-json", r))
    vulns = {v["id"]: v for v in cdx["vulnerabilities"]}
    v = vulns["CVE-2025-33219"]
    assert v["ratings"][0]["score"] == 7.8 and v["ratings"][0]["method"] == "CVSSv31"
    assert v["affects"][0]["ref"] == r.components[0].bom_ref
    # a plain version match is not an analysis: no analysis.state; the status per component
    assert "analysis" not in v
    assert v["affects"][0]["versions"][0] == {"version": "580.95.05", "status": "affected"}
    assert v["cwes"] == [190]  # CWE-190, from NVIDIA's CSAF record of 5747
    assert any("5747" in a["url"] for a in v["advisories"])
    spdx = json.loads(_render("spdx-json", r))
    pkg = [p for p in spdx["packages"] if p["name"] == "cuda-compat"][0]
    assert any(x["referenceType"] == "advisory" for x in pkg["externalRefs"])


def test_cyclonedx_with_vulnerabilities_validates() -> None:
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator
    from cyclonedx.validation.xml import XmlValidator

    r = _result()
    for ver, sv in (("1.6", SchemaVersion.V1_6), ("1.5", SchemaVersion.V1_5)):
        out = io.StringIO()
        get_writer("cyclonedx-json").write(r, out, WriterOptions(cyclonedx_version=ver))
        assert JsonStrictValidator(sv).validate_str(out.getvalue()) is None
        out = io.StringIO()
        get_writer("cyclonedx-xml").write(r, out, WriterOptions(cyclonedx_version=ver))
        assert XmlValidator(sv).validate_str(out.getvalue()) is None
