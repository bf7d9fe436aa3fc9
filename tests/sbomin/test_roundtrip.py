"""gpusbom's own SBOMs read back: every output format of real scans (fixture images and
the committed H200 host snapshot) gives back the same components, GPU facts, target,
relationships and, through ``scan --sbom``, the same advisory findings."""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from fixtures.build import ensure
from gpusbom.cli.app import main
from gpusbom.model import Component, ScanResult
from gpusbom.sbomin import load_sbom
from gpusbom.writers import WriterOptions, get_writer

ROOT = Path(__file__).resolve().parents[2]
FORMATS = ("json", "cyclonedx-json", "cyclonedx-xml", "spdx-json", "spdx-tag-value")
#: GPU facts the gate, inventory and check read, by property key
GPU_KEYS = ("stack", "product", "product-version", "release", "cuda:compute-capability",
            "pci:address", "driver", "nvidia:gsp-firmware", "cuda:sass", "cuda:ptx",
            "hip:targets", "built-for", "torch:cuda", "driver-branches", "require-cuda")


def _host_root() -> Path:
    sys.path.insert(0, str(ROOT / "fixtures" / "hosts"))
    from placeholders import materialize

    tmp = Path(tempfile.mkdtemp(prefix="gpusbom-sbomin-host-"))
    materialize(ROOT / "fixtures" / "hosts" / "h200", tmp / "h200")
    return tmp / "h200"


@pytest.fixture(scope="module", params=["demo", "nvidia-wheels", "rocm", "host:h200"])
def scanned(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
            ) -> tuple[ScanResult, dict[str, Path]]:
    os.environ.setdefault("SOURCE_DATE_EPOCH", "1700000000")
    name = request.param
    if name.startswith("host:"):
        from gpusbom.host import scan_host

        root = _host_root()
        request.addfinalizer(lambda: shutil.rmtree(root.parent, ignore_errors=True))
        result = scan_host(str(root))
    else:
        from gpusbom.scan import scan

        result = scan(ensure(name).oci_ref)
    d = tmp_path_factory.mktemp(name.replace(":", "-"))
    files = {}
    for fmt in FORMATS:
        buf = io.StringIO()
        get_writer(fmt).write(result, buf, WriterOptions())
        files[fmt] = d / f"sbom.{fmt}"
        files[fmt].write_text(buf.getvalue())
    return result, files


def _ids(r: ScanResult) -> set[tuple[str, str | None, str, str | None]]:
    return {(c.name, c.version, c.type.value, c.purl) for c in r.components}


def _sup(v: str | None) -> str | None:
    return v.replace("(", "[").replace(")", "]") if v else v


def _gpu(c: Component) -> dict[str, str]:
    return {k: v for k, v in c.properties.items() if k in GPU_KEYS or k.startswith("nvidia:")}


def _identities(c: Component) -> list[Any]:
    from gpusbom.advisories.matcher import _identities as ids

    return sorted(ids(c), key=repr)


@pytest.mark.parametrize("fmt", FORMATS)
def test_components_and_gpu_facts_round_trip(scanned: Any, fmt: str) -> None:
    orig, files = scanned
    back = load_sbom(str(files[fmt]))
    assert back.target.reference == f"sbom:{files[fmt]}"
    assert _ids(back) == _ids(orig)
    assert len(back.components) == len(orig.components)
    by_ref = {c.bom_ref: c for c in back.components}
    assert set(by_ref) == {c.bom_ref for c in orig.components}  # bom-refs kept
    for c in orig.components:
        b = by_ref[c.bom_ref]
        assert b.properties == c.properties, c.bom_ref
        assert b.ecosystem == c.ecosystem and b.cpe == c.cpe
        # the SPDX writer turns parentheses in a supplier name into brackets (tag-value)
        assert _sup(b.supplier) == _sup(c.supplier)
        assert _gpu(b) == _gpu(c)
        # what the advisory matcher keys on is the same
        assert _identities(b) == _identities(c), c.bom_ref
        # evidence paths survive (SPDX and native keep every field)
        assert {e.path for e in b.evidence} == {e.path for e in c.evidence}, c.bom_ref
        if fmt in ("json", "spdx-json", "spdx-tag-value", "cyclonedx-json"):
            key = lambda e: (e.collector, e.method, e.path or "", e.layer or "", e.detail or "",
                             e.sha256 or "", e.declared_digest or "")
            assert sorted(map(key, b.evidence)) == sorted(map(key, c.evidence)), c.bom_ref
    # target: what was scanned (not the reference: that is the SBOM's now)
    t, o = back.target, orig.target
    assert (t.kind, t.manifest_digest, t.image_id, t.platform, t.os_release, t.env, t.labels,
            t.tags, t.created) == (o.kind, o.manifest_digest, o.image_id, o.platform,
                                   o.os_release, o.env, o.labels, o.tags, o.created)
    assert [x.diff_id for x in t.layers] == [x.diff_id for x in o.layers]
    assert {(r.source, r.type, r.target) for r in back.relationships} == {
        (r.source, r.type, r.target) for r in orig.relationships}
    assert sorted(back.unknowns, key=repr) == sorted(orig.unknowns, key=repr)
    # advisory findings are matched again by scan --sbom (native JSON keeps them too)
    assert sorted(f.id for f in back.findings if f.kind != "advisory") == sorted(
        f.id for f in orig.findings if f.kind != "advisory")
    assert back.tool.collectors == orig.tool.collectors
    # stack summary: same stacks, releases, parts and refs; a part's versions are equal
    # where the scan knew them (an SBOM cannot say a product's version was unknown)
    assert [(s.stack, s.present, s.release, s.notes) for s in back.stacks] == [
        (s.stack, s.present, s.release, s.notes) for s in orig.stacks]
    for sb, so in zip(back.stacks, orig.stacks):
        assert [(p.product, sorted(p.refs)) for p in sb.parts] == [
            (p.product, sorted(p.refs)) for p in so.parts]
        for pb, po in zip(sb.parts, so.parts):
            assert set(po.versions) <= set(pb.versions)


def test_native_json_is_exact(scanned: Any) -> None:
    orig, files = scanned
    back = load_sbom(str(files["json"]))
    a, b = orig.to_dict(), back.to_dict()
    assert b["target"].pop("reference") == f"sbom:{files['json']}"
    assert b["target"].pop("source") == "sbom"
    a["target"].pop("reference"), a["target"].pop("source")
    assert a == b


def test_deterministic(scanned: Any) -> None:
    _, files = scanned
    for fmt in ("cyclonedx-xml", "spdx-tag-value"):
        one = load_sbom(str(files[fmt])).to_dict()
        two = load_sbom(str(files[fmt])).to_dict()
        assert one == two


def _advisories(doc: dict[str, Any]) -> set[tuple[str, tuple[str, ...], str]]:
    # one entry per (advisory, component): findings on the same file are shown once
    # (advisories/dedupe.py), which groups components by the paths a scan saw; an SBOM read
    # back may hold fewer paths, so the grouping, not the verdicts, can differ
    return {(f["id"], (c,), f["advisory"]["status"])
            for f in doc.get("findings", []) if f["kind"] == "advisory"
            for c in f["components"]}


def test_scan_sbom_findings_equal_direct_scan(scanned: Any, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    from gpusbom.advisories.db import load_active

    orig, files = scanned
    expected = _advisories(orig.to_dict())
    if orig.target.kind != "host":  # a fresh match, as scan --sbom does
        from gpusbom.advisories.matcher import match

        # gpusbom's own SBOM restores the target's kind (an image), so its file-list evidence
        # (parts-searched) counts as it did in the scan
        expected = _advisories({"findings": [f.to_dict() for f in match(
            orig.components, load_active(), target_kind=orig.target.kind)]})
    for fmt in FORMATS:
        out = tmp_path / f"{fmt}.json"
        cdx = tmp_path / f"{fmt}.cdx.json"
        spdx = tmp_path / f"{fmt}.spdx.json"
        code = main(["scan", "--sbom", str(files[fmt]), "-q", "-o", f"json={out}",
                     "-o", f"cyclonedx-json={cdx}", "-o", f"spdx-json={spdx}", "-o", "table"])
        table = capsys.readouterr().out
        assert code == 0
        doc = json.loads(out.read_text())
        assert _advisories(doc) == expected, fmt
        assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(cdx.read_text()) is None
        assert json.loads(spdx.read_text())["spdxVersion"] == "SPDX-2.3"  # validated on write
        assert f"sbom:{files[fmt]}" in table
        # the table lists what remains after analysis (auto-VEX "not affected" is counted only)
        shown = sorted(x for x in expected if x[2] != "not-affected")[:3]
        assert shown or not expected
        for fid, _, _ in shown:
            assert fid in table


def test_recorded_h200_probe_sbom(tmp_path: Path) -> None:
    """A CycloneDX SBOM recorded from `gpusbom probe` on a real 2x H200 machine: the probe
    results come back attached to the device components, and written again they give the
    same gpusbom:probe:* properties."""
    path = ROOT / "tests" / "probe" / "data" / "h200x2-probe.cdx.json"
    raw = json.loads(path.read_text())
    back = load_sbom(str(path))
    assert len([p for p in back.probes if p.device_ref]) >= 2
    cuda = [p for p in back.probes if p.backend == "cuda" and p.device_ref]
    assert {p.outcome for p in cuda} == {"pass"}
    assert {p.facts.get("compute-capability") for p in cuda} == {"9.0"}
    buf = io.StringIO()
    get_writer("cyclonedx-json").write(back, buf, WriterOptions())
    again = json.loads(buf.getvalue())

    def probe_props(doc: dict[str, Any]) -> dict[str, set[tuple[str, str]]]:
        return {c["bom-ref"]: {(p["name"], p["value"]) for p in c.get("properties", [])
                               if p["name"].startswith("gpusbom:probe:")}
                for c in doc["components"]}

    assert probe_props(again) == probe_props(raw)
