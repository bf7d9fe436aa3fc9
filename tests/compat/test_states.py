"""The verdict states (issue 31, acceptance 3): a ROCm-only and an Intel-only image on an
NVIDIA GPU are ``not-applicable``, an image with no device code is ``unchecked``, and neither
is green anywhere: the check table and exit code, SARIF, -o html, the gate's policy rule
(JUnit), the dashboard matrix. Real fixture images (rocm, intel, demo) and the real H200
host snapshot scan."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpusbom.cli.app import main
from gpusbom.model import ScanResult

H200 = ["--gpu", "H200", "--driver", "580.159.04"]


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from fixtures.build import ensure

    out = {}
    d = tmp_path_factory.mktemp("states")
    for name in ("rocm", "intel", "demo"):
        p = d / f"{name}.json"
        assert main(["scan", ensure(name).oci_ref, "-q", "-o", f"json={p}"]) == 0
        out[name] = p
    return out


@pytest.mark.parametrize(("name", "want", "says"), [
    ("rocm", "not-applicable", "ROCm/HIP only"),
    ("intel", "not-applicable", "Intel oneAPI/Level Zero only"),
    ("demo", "unchecked", "no CUDA device code found in the image"),
])
def test_states_on_an_nvidia_gpu(images: dict[str, Path], tmp_path: Path, name: str, want: str,
                                 says: str) -> None:
    out = tmp_path / "c.json"
    sarif = tmp_path / "c.sarif"
    html = tmp_path / "c.html"
    rc = main(["check", str(images[name]), *H200, "-o", f"json={out}", "-o", f"sarif={sarif}",
               "-o", f"html={html}"])
    assert rc == 1  # not green: the check fails like a gate
    (v,) = json.loads(out.read_text())["verdicts"]
    assert v["verdict"] == want and any(says in r for r in v["reasons"]), v["reasons"]
    (res,) = json.loads(sarif.read_text())["runs"][0]["results"]
    assert res["ruleId"] == f"check/{want}" and res["level"] in ("error", "warning")
    page = html.read_text()
    assert f'<span class="badge {want}">{want}</span>' in page
    assert '<span class="badge runs">' not in page
    if want == "unchecked":  # a policy that allows unchecked
        assert main(["check", str(images[name]), *H200, "--allow-unchecked",
                     "-o", f"json={tmp_path / 'a.json'}"]) == 0
    else:
        assert main(["check", str(images[name]), *H200, "--allow-unchecked",
                     "-o", f"json={tmp_path / 'a.json'}"]) == 1


def test_rocm_image_on_amd_is_judged(images: dict[str, Path], tmp_path: Path) -> None:
    """The same ROCm image on an AMD GPU is judged per file (not not-applicable)."""
    out = tmp_path / "c.json"
    main(["check", str(images["rocm"]), "--gpu", "gfx90a:xnack-", "-o", f"json={out}"])
    (v,) = json.loads(out.read_text())["verdicts"]
    assert v["verdict"] != "not-applicable"
    assert any(lib["kind"] == "hip-code" and lib["file"] for lib in v["libraries"])


def test_gate_policy_rule(images: dict[str, Path], tmp_path: Path) -> None:
    """compatible_with: not-applicable and unchecked are violations (JUnit failures);
    allow_unchecked turns unchecked into a warning."""
    for allow, expect_rc in ((False, 1), (True, 0)):
        pol = tmp_path / f"p{allow}.yaml"
        pol.write_text("version: 1\nname: h200\nrules:\n  compatible_with:\n"
                       f"    targets: [H200]\n    allow_unchecked: {str(allow).lower()}\n")
        junit = tmp_path / f"g{allow}.xml"
        rc = main(["gate", f"sbom:{images['demo']}", "--policy", str(pol),
                   "-o", f"junit={junit}"])
        assert rc == expect_rc, junit.read_text()
        text = junit.read_text()
        assert ("<failure" in text) is (not allow) and "unchecked on H200" in text
    pol = tmp_path / "na.yaml"
    pol.write_text("version: 1\nname: h200\nrules:\n  compatible_with:\n    targets: [H200]\n"
                   "    allow_unchecked: true\n")
    assert main(["gate", f"sbom:{images['rocm']}", "--policy", str(pol),
                 "-o", f"junit={tmp_path / 'r.xml'}"]) == 1
    assert "not-applicable on H200" in (tmp_path / "r.xml").read_text()


def test_dashboard_matrix(images: dict[str, Path], h200_json: Path, tmp_path: Path) -> None:
    from gpusbom.inventory import Store
    from gpusbom.inventory.web.fleet import cell, matrix
    from gpusbom.inventory.web.pages import Cache

    url = f"sqlite:///{tmp_path}/fleet.db"
    with Store(url) as store:
        store.ingest(ScanResult.from_dict(json.loads(h200_json.read_text())))
        for p in images.values():
            store.ingest(ScanResult.from_dict(json.loads(p.read_text())))
        m = matrix(store, Cache())
        got = {r["image"].split("/")[-1]: [c["verdict"] for c in r["cells"]] for r in m["rows"]}
        assert sorted(v for vs in got.values() for v in vs) == [
            "not-applicable", "not-applicable", "unchecked"], got
        assert m["counts"]["runs"] == 0 and m["counts"]["not-applicable"] == 2
        row = m["rows"][0]
        c = cell(store, Cache(), row["image"], row["cells"][0]["gpu"])
        assert c["verdict"] in ("not-applicable", "unchecked") and c["reasons"]
