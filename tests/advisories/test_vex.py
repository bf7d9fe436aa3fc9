"""VEX (CycloneDX VEX and OpenVEX) applied to advisory findings: matching by vulnerability
id/alias and by purl / bom-ref / name@version, rendering in every format, malformed files
(exit 3, one line), and the whole path through ``gpusbom scan DIR --vex``."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from gpusbom.advisories.db import describe, load_bundled
from gpusbom.advisories.matcher import match
from gpusbom.advisories.vex import apply_vex, cyclonedx_justification, read_vex
from gpusbom.cli.app import main
from gpusbom.errors import InputError
from gpusbom.model import Component, Evidence, ScanResult, Target
from gpusbom.writers import WriterOptions, get_writer

TORCH_META = "/usr/lib/python3/dist-packages/torch-2.5.1.dist-info/METADATA"
COMPAT = "/usr/local/cuda-13.0/compat/libcuda.so.580.95.05"


def _result() -> ScanResult:
    torch = Component(name="torch", version="2.5.1", ecosystem="pypi",
                      purl="pkg:pypi/torch@2.5.1",
                      evidence=[Evidence("python", "package-metadata", TORCH_META)])
    compat = Component(name="cuda-compat", version="580.95.05", ecosystem="generic",
                       purl="pkg:generic/nvidia/cuda-compat@580.95.05",
                       properties={"stack": "nvidia-driver", "product": "cuda-compat"},
                       evidence=[Evidence("nvidia-driver", "soname", COMPAT)])
    taken: set[str] = set()
    for c in (torch, compat):
        c.assign_ref(taken)
    r = ScanResult(target=Target(kind="image", reference="example/app:1",
                                 manifest_digest="sha256:" + "ab" * 32),
                   components=[torch, compat], timestamp="2026-06-01T00:00:00Z")
    db = load_bundled()
    r.findings = match(r.components, db)
    r.advisory_db = describe(db, r.timestamp)
    return r


def _status(r: ScanResult, vuln: str, comp: str) -> tuple[str, str | None]:
    refs = {c.bom_ref for c in r.components if c.name == comp}
    for f in r.findings:
        if f.id == vuln and set(f.components) & refs:
            assert f.advisory is not None
            return f.advisory.status, f.advisory.justification
    raise AssertionError(f"no finding {vuln} on {comp}")


def _write(tmp_path: Path, name: str, doc: object) -> str:
    p = tmp_path / name
    p.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return str(p)


def _openvex(*statements: dict) -> dict:
    return {"@context": "https://openvex.dev/ns/v0.2.0",
            "@id": "https://example.com/vex/1", "author": "Platform team",
            "timestamp": "2026-05-01T00:00:00Z", "version": 1, "statements": list(statements)}


def test_openvex_not_affected_by_purl(tmp_path: Path) -> None:
    r = _result()
    before = _status(r, "CVE-2025-33219", "cuda-compat")
    vex = _write(tmp_path, "torch.openvex.json", _openvex({
        "vulnerability": {"name": "CVE-2025-32434"},
        "products": [{"@id": "pkg:pypi/torch@2.5.1"}],
        "status": "not_affected",
        "justification": "vulnerable_code_not_in_execute_path",
        "impact_statement": "torch.load is never called with weights_only=True on untrusted files",
    }))
    apply_vex(r, [vex])
    status, just = _status(r, "CVE-2025-32434", "torch")
    assert status == "not-affected"
    assert just == ("vulnerable_code_not_in_execute_path: torch.load is never called with "
                    "weights_only=True on untrusted files (VEX torch.openvex.json)")
    assert _status(r, "CVE-2025-33219", "cuda-compat") == before  # untouched


def test_openvex_alias_and_image_subcomponents(tmp_path: Path) -> None:
    r = _result()
    # named by its GHSA id; the product is the image (by digest) with torch inside it
    vex = _write(tmp_path, "v.json", _openvex({
        "vulnerability": {"name": "GHSA-53q9-r3pm-6pq6"},
        "products": [{"@id": "pkg:oci/app@sha256%3A" + "ab" * 32,
                      "subcomponents": [{"@id": "pkg:pypi/torch"}]}],
        "status": "not_affected", "justification": "component_not_present",
    }))
    apply_vex(r, [vex])
    assert _status(r, "CVE-2025-32434", "torch")[0] == "not-affected"


def test_openvex_image_without_subcomponents_covers_every_component(tmp_path: Path) -> None:
    r = _result()
    vex = _write(tmp_path, "v.json", _openvex({
        "vulnerability": "CVE-2025-33219", "products": ["example/app:1"],
        "status": "fixed", "status_notes": "the host driver is used, compat is never loaded",
    }))
    apply_vex(r, [vex])
    status, just = _status(r, "CVE-2025-33219", "cuda-compat")
    assert status == "not-affected" and just.startswith("fixed: the host driver")


@pytest.mark.parametrize("status", ["affected", "under_investigation"])
def test_other_statuses_change_nothing(tmp_path: Path, status: str) -> None:
    r = _result()
    vex = _write(tmp_path, "v.json", _openvex({
        "vulnerability": {"name": "CVE-2025-32434"}, "products": ["pkg:pypi/torch@2.5.1"],
        "status": status}))
    apply_vex(r, [vex])
    assert _status(r, "CVE-2025-32434", "torch")[0] == "affected"


@pytest.mark.parametrize("product", ["pkg:pypi/torch@2.6.0", "pkg:npm/torch@2.5.1",
                                     "torch@2.4.0", "pkg:pypi/torchvision"])
def test_statement_for_another_component_changes_nothing(tmp_path: Path, product: str) -> None:
    r = _result()
    vex = _write(tmp_path, "v.json", _openvex({
        "vulnerability": {"name": "CVE-2025-32434"}, "products": [product],
        "status": "not_affected", "justification": "component_not_present"}))
    apply_vex(r, [vex])
    assert _status(r, "CVE-2025-32434", "torch")[0] == "affected"


def test_last_statement_decides(tmp_path: Path) -> None:
    r = _result()
    a = _write(tmp_path, "a.json", _openvex({
        "vulnerability": "CVE-2025-32434", "products": ["torch@2.5.1"],
        "status": "not_affected", "justification": "component_not_present"}))
    b = _write(tmp_path, "b.json", _openvex({
        "vulnerability": "CVE-2025-32434", "products": ["torch@2.5.1"], "status": "affected"}))
    apply_vex(r, [a, b])
    assert _status(r, "CVE-2025-32434", "torch")[0] == "affected"
    r = _result()
    apply_vex(r, [b, a])
    assert _status(r, "CVE-2025-32434", "torch")[0] == "not-affected"


def _cdx_vex() -> dict:
    return {
        "bomFormat": "CycloneDX", "specVersion": "1.6", "version": 1,
        "components": [{"type": "library", "bom-ref": "torch-lib", "name": "torch",
                        "version": "2.5.1", "purl": "pkg:pypi/torch@2.5.1"}],
        "vulnerabilities": [{
            "id": "CVE-2025-32434",
            "references": [{"id": "GHSA-53q9-r3pm-6pq6",
                            "source": {"name": "GitHub", "url": "https://github.com/advisories"}}],
            "analysis": {"state": "not_affected", "justification": "code_not_reachable",
                         "detail": "models are loaded with safetensors only"},
            "affects": [{"ref": "torch-lib"}],
        }],
    }


def test_cyclonedx_vex_by_own_component_ref(tmp_path: Path) -> None:
    r = _result()
    apply_vex(r, [_write(tmp_path, "vex.cdx.json", _cdx_vex())])
    status, just = _status(r, "CVE-2025-32434", "torch")
    assert status == "not-affected"
    assert just == "code_not_reachable: models are loaded with safetensors only (VEX vex.cdx.json)"


def test_cyclonedx_vex_by_bom_link_to_our_ref(tmp_path: Path) -> None:
    r = _result()
    torch_ref = next(c.bom_ref for c in r.components if c.name == "torch")
    doc = _cdx_vex()
    doc["components"] = []
    doc["vulnerabilities"][0]["affects"] = [{"ref": f"urn:cdx:1234/1#{torch_ref}"}]
    apply_vex(r, [_write(tmp_path, "vex.json", doc)])
    assert _status(r, "CVE-2025-32434", "torch")[0] == "not-affected"


def test_cyclonedx_in_triage_changes_nothing(tmp_path: Path) -> None:
    r = _result()
    doc = _cdx_vex()
    doc["vulnerabilities"][0]["analysis"] = {"state": "in_triage"}
    apply_vex(r, [_write(tmp_path, "vex.json", doc)])
    assert _status(r, "CVE-2025-32434", "torch")[0] == "affected"


def test_justification_mapping() -> None:
    assert cyclonedx_justification("code_not_reachable: x (VEX a.json)")[0] == "code_not_reachable"
    assert cyclonedx_justification("vulnerable_code_not_in_execute_path: y")[0] == \
        "code_not_reachable"
    assert cyclonedx_justification("component_not_present (VEX a.json)")[0] == "code_not_present"
    assert cyclonedx_justification("fixed: z")[0] is None


def _render(fmt: str, r: ScanResult) -> str:
    out = io.StringIO()
    get_writer(fmt).write(r, out, WriterOptions(width=200))
    return out.getvalue()


def test_suppressed_findings_in_every_format(tmp_path: Path) -> None:
    r = _result()
    apply_vex(r, [_write(tmp_path, "vex.cdx.json", _cdx_vex())])
    table = _render("table", r)
    main_table, _, below = table.partition("advisories:")
    assert "CVE-2025-32434" not in main_table  # hidden from the main list
    assert "CVE-2025-33219" in main_table
    # raw matches, then what remains after analysis; the windows-only ones of 5747/5821
    # (CVEs the vendor lists for Windows only) are gpusbom's analysis, the torch one the VEX's
    head = below.splitlines()[0]
    n_vex = sum(1 for f in r.findings if f.advisory and f.advisory.status == "not-affected")
    n_auto = sum(1 for f in r.findings if f.advisory and f.advisory.rule == "windows-only")
    assert n_auto >= 1 and n_vex == n_auto + 1
    assert f"; {n_auto} not affected by gpusbom analysis, 1 by VEX)" in head
    assert f"{n_vex} not-affected" in head
    assert ("CVE-2025-32434 (GHSA-53q9-r3pm-6pq6) on torch: code_not_reachable: models are "
            "loaded with safetensors only") in below
    assert "advisory database: bundled, built " in below

    doc = json.loads(_render("json", r))
    assert ScanResult.from_dict(doc).findings == r.findings
    f = next(x for x in doc["findings"] if x["id"] == "CVE-2025-32434")
    assert f["advisory"]["status"] == "not-affected"

    cdx_text = _render("cyclonedx-json", r)
    cdx = json.loads(cdx_text)
    v = next(x for x in cdx["vulnerabilities"] if x["id"] == "CVE-2025-32434")
    assert v["analysis"]["state"] == "not_affected"
    assert v["analysis"]["justification"] == "code_not_reachable"
    assert "safetensors" in v["analysis"]["detail"]
    assert v["affects"][0]["versions"][0]["status"] == "unaffected"
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(cdx_text) is None

    spdx = _render("spdx-json", r)
    assert "not-affected" in spdx and "code_not_reachable" in spdx
    tv = _render("spdx-tag-value", r)
    assert "justification=code_not_reachable" in tv


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "not valid JSON"),
        ("[]", "top level is not an object"),
        ({"hello": 1}, "neither CycloneDX"),
        ({"@context": "https://openvex.dev/ns/v0.2.0", "statements": [
            {"vulnerability": "CVE-1", "products": ["x"], "status": "maybe"}]}, "status"),
        ({"@context": "https://openvex.dev/ns/v0.2.0", "statements": [
            {"vulnerability": "CVE-1", "status": "not_affected"}]}, "products"),
        ({"@context": "https://openvex.dev/ns/v0.2.0", "statements": [
            {"products": ["x"], "status": "not_affected"}]}, "no vulnerability"),
        ({"@context": "https://openvex.dev/ns/v0.2.0", "statements": [
            {"vulnerability": "CVE-1", "products": ["x"], "status": "not_affected",
             "justification": "trust me"}]}, "justification"),
        ({"bomFormat": "CycloneDX", "vulnerabilities": [
            {"id": "CVE-1", "analysis": {"state": "fine"}, "affects": [{"ref": "x"}]}]}, "state"),
        ({"bomFormat": "CycloneDX", "vulnerabilities": [
            {"id": "CVE-1", "analysis": {"state": "not_affected"}}]}, "affects"),
        ({"bomFormat": "CycloneDX", "vulnerabilities": "x"}, "not a list"),
    ],
)
def test_malformed_vex(tmp_path: Path, content: object, message: str) -> None:
    p = _write(tmp_path, "bad.json", content)
    with pytest.raises(InputError, match=message) as exc:
        read_vex(p)
    assert p in str(exc.value)
    r = _result()
    before = list(r.findings)
    good = _write(tmp_path, "good.json", _cdx_vex())
    with pytest.raises(InputError):
        apply_vex(r, [good, p])  # nothing is applied when any file is bad
    assert r.findings == before


def test_missing_vex_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        read_vex(str(tmp_path / "nope.json"))


# --------------------------------------------------------------------------- CLI


def _rootfs(tmp_path: Path) -> Path:
    """A directory with a torch 2.5.1 wheel installed (METADATA + RECORD)."""
    root = tmp_path / "rootfs"
    site = root / "usr/lib/python3/dist-packages"
    info = site / "torch-2.5.1.dist-info"
    info.mkdir(parents=True)
    (site / "torch").mkdir()
    (site / "torch/__init__.py").write_text("")
    (site / "torch/version.py").write_text("__version__ = '2.5.1'\n")
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.5.1\n")
    (info / "RECORD").write_text("torch/__init__.py,,\ntorch/version.py,,\n"
                                 "torch-2.5.1.dist-info/METADATA,,\n"
                                 "torch-2.5.1.dist-info/RECORD,,\n")
    return root


@pytest.fixture()
def isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("GPUSBOM_CACHE_DIR", str(cache))
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1780272000")  # 2026-06-01
    return cache


def test_cli_scan_with_vex(tmp_path: Path, isolated_cache: Path, capsys) -> None:
    root = _rootfs(tmp_path)
    out = tmp_path / "out.json"
    cdx = tmp_path / "out.cdx.json"
    vex = _write(tmp_path, "torch.vex.json", _openvex({
        "vulnerability": {"name": "CVE-2025-32434"}, "products": ["pkg:pypi/torch@2.5.1"],
        "status": "not_affected", "justification": "vulnerable_code_not_present",
        "impact_statement": "patched build"}))
    rc = main(["scan", f"dir:{root}", "-q", "--vex", vex, "-o", "table",
               "-o", f"json={out}", "-o", f"cyclonedx-json={cdx}"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "1 not-affected" in text and "vulnerable_code_not_present: patched build" in text
    doc = json.loads(out.read_text())
    (f,) = [x for x in doc["findings"] if x["id"] == "CVE-2025-32434"]
    assert f["advisory"]["status"] == "not-affected"
    assert doc["advisory_db"]["source"] == "bundled"
    v = json.loads(cdx.read_text())["vulnerabilities"][0]
    assert v["analysis"] == {"state": "not_affected", "justification": "code_not_present",
                             "detail": "vulnerable_code_not_present: patched build "
                                       "(VEX torch.vex.json)"}


def test_cli_malformed_vex_exits_3(tmp_path: Path, isolated_cache: Path, capsys) -> None:
    root = _rootfs(tmp_path)
    bad = _write(tmp_path, "bad.vex.json", "{oops")
    out = tmp_path / "out.json"
    rc = main(["scan", f"dir:{root}", "-q", "--vex", bad, "-o", f"json={out}"])
    assert rc == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad.vex.json" in err[0]
    assert not out.exists()  # no partial output
