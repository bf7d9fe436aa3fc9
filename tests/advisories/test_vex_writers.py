"""``-o openvex=PATH`` and ``-o cyclonedx-vex=PATH``: gpusbom's proven "not affected"
findings (auto-VEX) as VEX documents that validate against the OpenVEX JSON schema
(schemas/openvex_json_schema.json, CC0) and the CycloneDX 1.6 schema, and that suppress
exactly those findings when fed back with ``scan --vex``.

Facts: NVIDIA bulletin 5747 (CVE-2025-33219: "NVIDIA Display Driver for Linux contains a
vulnerability in the NVIDIA kernel module", R580 fixed in 580.126.09; CVE-2025-33217:
"NVIDIA Display Driver for Windows"), from the bundled records."""

from __future__ import annotations

import io
import json
from pathlib import Path

import jsonschema

from gpusbom.advisories.db import load_bundled
from gpusbom.advisories.matcher import match
from gpusbom.advisories.vex import apply_vex
from gpusbom.model import Component, Evidence, ScanResult, Target, ToolInfo
from gpusbom.writers import WriterOptions, get_writer

SCHEMA = Path(__file__).with_name("schemas") / "openvex_json_schema.json"


def _components() -> list[Component]:
    lib = "/usr/local/cuda-13.0/compat/libcuda.so.580.95.05"
    return [
        Component(name="cuda-compat-13-0", version="580.95.05", ecosystem="deb",
                  purl="pkg:deb/ubuntu/cuda-compat-13-0@580.95.05-0ubuntu1?arch=amd64",
                  properties={"stack": "nvidia-driver", "product": "cuda-compat"},
                  evidence=[Evidence("nvidia-driver", "soname", lib)],
                  bom_ref="deb:cuda-compat-13-0@580.95.05"),
        Component(name="torch", version="2.5.1", ecosystem="pypi", purl="pkg:pypi/torch@2.5.1",
                  evidence=[Evidence("python", "package-db", "/usr/lib/python3/dist-packages/"
                                     "torch-2.5.1.dist-info/METADATA")],
                  bom_ref="pypi:torch@2.5.1"),
    ]


def _result(kind: str | None) -> ScanResult:
    comps = _components()
    return ScanResult(target=Target(kind="image", reference="example/app:1"), components=comps,
                      tool=ToolInfo(name="gpusbom", version="test"),
                      timestamp="2026-12-01T00:00:00Z",
                      findings=match(comps, load_bundled(), target_kind=kind))


def _render(fmt: str, r: ScanResult) -> str:
    out = io.StringIO()
    get_writer(fmt).write(r, out, WriterOptions())
    return out.getvalue()


def _not_affected(r: ScanResult) -> set[tuple[str, str]]:
    return {(f.id, f.components[0]) for f in r.findings
            if f.advisory and f.advisory.status == "not-affected"}


def test_auto_vex_findings_name_their_evidence() -> None:
    r = _result("image")
    by = {(f.id, f.advisory.rule): f.advisory for f in r.findings if f.advisory}
    k = by[("CVE-2025-33219", "kernel-mode-on-image")]
    assert k.status == "not-affected"
    assert k.justification is not None and k.justification.startswith("component_not_present:")
    assert "/usr/local/cuda-13.0/compat/libcuda.so.580.95.05" in k.justification
    w = by[("CVE-2025-33217", "windows-only")]
    assert w.status == "not-affected" and "only on windows" in (w.justification or "")
    # an SBOM (target kind unknown) proves nothing about kernel modules
    raw = {(f.id, f.advisory.status) for f in _result(None).findings if f.advisory}
    assert ("CVE-2025-33219", "affected") in raw


def test_openvex_validates_and_round_trips(tmp_path: Path) -> None:
    r = _result("image")
    text = _render("openvex", r)
    doc = json.loads(text)
    jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text())).validate(doc)
    sts = {(s["vulnerability"]["name"], s["status"]) for s in doc["statements"]}
    assert ("CVE-2025-33219", "not_affected") in sts and ("CVE-2025-32434", "affected") in sts
    k = next(s for s in doc["statements"] if s["vulnerability"]["name"] == "CVE-2025-33219")
    assert k["justification"] == "component_not_present"
    assert k["products"][0]["identifiers"]["purl"].startswith("pkg:deb/ubuntu/cuda-compat-13-0")
    # fed back to a scan that could not prove it: exactly those findings are suppressed
    path = tmp_path / "gpusbom.openvex.json"
    path.write_text(text)
    raw = _result(None)
    before = _not_affected(raw)
    apply_vex(raw, [str(path)])
    assert _not_affected(raw) == _not_affected(r)
    assert ("CVE-2025-33219", "deb:cuda-compat-13-0@580.95.05") in _not_affected(raw) - before


def test_cyclonedx_vex_validates_and_round_trips(tmp_path: Path) -> None:
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    r = _result("image")
    text = _render("cyclonedx-vex", r)
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    doc = json.loads(text)
    na = [v for v in doc["vulnerabilities"] if v["id"] == "CVE-2025-33219"]
    assert na[0]["analysis"]["state"] == "not_affected"
    assert na[0]["analysis"]["justification"] == "code_not_present"
    affected = [v for v in doc["vulnerabilities"] if v["id"] == "CVE-2025-32434"]
    assert "analysis" not in affected[0]  # a version match is not an analysis
    path = tmp_path / "gpusbom.vex.cdx.json"
    path.write_text(text)
    raw = _result(None)
    apply_vex(raw, [str(path)])
    assert _not_affected(raw) == _not_affected(r)


def test_writers_are_registered_like_the_other_formats() -> None:
    from gpusbom.writers import all_writers

    names = set(all_writers())
    assert {"openvex", "cyclonedx-vex"} <= names
