"""One package, two libraries (issue 31, acceptance 1): the per-binary rule.

fixtures/check/twolibs.py builds, with nvcc, one wheel (twolibs 1.0) holding libk90.so (sm_90
SASS) and libk80.so, in two FROM-scratch OCI layouts: libk80.so with sm_80 SASS only
(``oci-sass``) or with sm_80 SASS + compute_80 PTX (``oci-ptx``). Launched for real on an
H200 (driver 580.159.04; fixtures/check/launch_twolibs.py, docs/check.md): the sm_80-only
library fails with error 209, the PTX one runs after the driver JIT-compiles it
(binaryVersion 90 from ptxVersion 80), libk90.so runs as is.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from gpusbom.cli.app import main

CHECK = Path(__file__).resolve().parents[2] / "fixtures" / "check"
SITE = "/usr/local/lib/python3.11/site-packages/twolibs/lib/"
H200 = ["--gpu", "H200", "--driver", "580.159.04"]


@pytest.fixture(scope="module")
def twolibs(nvcc_fixtures: Path) -> Path:  # nvcc_fixtures: skips without nvcc, like the rest
    sys.path.insert(0, str(CHECK))
    import twolibs as tl  # fixtures/check/twolibs.py

    out = nvcc_fixtures.parent / f"twolibs-{tl.key(tl._build.find_tool('nvcc'))}"
    tl.build(out)
    return out


def _check(image: str, tmp: Path, *extra: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    out = tmp / "check.json"
    rc = main(["check", image, *H200, *extra, "-o", f"json={out}"])
    return rc, json.loads(out.read_text())


def test_sm80_only_library_fails_and_is_named(twolibs: Path, tmp_path: Path) -> None:
    rc, doc = _check(f"oci:{twolibs / 'oci-sass'}", tmp_path)
    assert rc == 1
    (v,) = doc["verdicts"]
    assert v["verdict"] == "will-fail"
    files = {lib["file"]: lib for lib in v["libraries"] if lib["file"]}
    assert files[SITE + "libk80.so"]["verdict"] == "will-fail"
    assert files[SITE + "libk80.so"]["targets"] == {"cuda:sass": "sm_80"}
    assert files[SITE + "libk90.so"]["verdict"] == "runs"
    # the package's union (sm_80,sm_90) would have said runs: the reason names the file
    bad = [r for r in v["reasons"] if "libk80.so" in r]
    assert bad and "no SASS for sm_90 (has sm_80); no PTX" in bad[0] and "209" in bad[0]
    assert bad[0].startswith("twolibs 1.0 " + SITE + "libk80.so")
    assert v["evidence"][0] == SITE + "libk80.so"
    assert v["summary"]["will-fail"] == 1


def test_ptx_library_runs_with_jit(twolibs: Path, tmp_path: Path) -> None:
    rc, doc = _check(f"oci:{twolibs / 'oci-ptx'}", tmp_path)
    assert rc == 0
    (v,) = doc["verdicts"]
    assert v["verdict"] == "runs-with-jit"
    lib = next(x for x in v["libraries"] if x["file"] == SITE + "libk80.so")
    assert lib["verdict"] == "runs-with-jit"
    assert lib["targets"]["cuda:sass"] == "sm_80" and lib["targets"]["cuda:ptx"] == "compute_80"
    assert "PTX compute_80" in lib["reason"] and "JIT-compiled" in lib["reason"]
    # --fail-on-jit: a gate that requires runs
    assert main(["check", f"oci:{twolibs / 'oci-ptx'}", *H200, "--fail-on-jit",
                 "-o", f"json={tmp_path / 'j.json'}"]) == 1


def test_cyclonedx_says_which_file_holds_which_targets(twolibs: Path, tmp_path: Path) -> None:
    out = tmp_path / "bom.json"
    assert main(["scan", f"oci:{twolibs / 'oci-sass'}", "-q", "-o", f"cyclonedx-json={out}"]) == 0
    bom = json.loads(out.read_text())
    (pkg,) = [c for c in bom["components"] if c["name"] == "twolibs"]
    props = {p["name"]: p["value"] for p in pkg["properties"]}
    assert props["gpusbom:cuda:sass"] == "sm_80,sm_90"  # the union: a summary
    assert props["gpusbom:device-code:union-of-files"] == "2"
    files = {}
    for f in pkg["components"]:
        assert f["type"] == "file" and f["hashes"][0]["alg"] == "SHA-256"
        fp = {p["name"]: p["value"] for p in f["properties"]}
        files[f["name"]] = (fp.get("gpusbom:cuda:sass"), fp.get("gpusbom:cuda:ptx"))
    assert files == {SITE + "libk80.so": ("sm_80", None), SITE + "libk90.so": ("sm_90", None)}
    # read back, the SBOM alone gives the same per-binary verdict
    rc, doc = _check(str(out), tmp_path)
    assert rc == 1 and doc["verdicts"][0]["verdict"] == "will-fail"
    assert any(lib["file"] == SITE + "libk80.so" and lib["verdict"] == "will-fail"
               for lib in doc["verdicts"][0]["libraries"])


@pytest.mark.parametrize("fmt", ["spdx-json", "spdx3-json"])
def test_spdx_file_elements_carry_each_file_targets(twolibs: Path, tmp_path: Path,
                                                    fmt: str) -> None:
    out = tmp_path / "sbom.json"
    assert main(["scan", f"oci:{twolibs / 'oci-ptx'}", "-q", "-o", f"{fmt}={out}"]) == 0
    text = out.read_text()
    doc = json.loads(text)
    if fmt == "spdx-json":
        els = [p for p in doc["packages"] if p.get("primaryPackagePurpose") == "FILE"]
        comments = {p["name"]: p["comment"] for p in els}
    else:
        els = [e for e in doc["@graph"] if e.get("type") == "software_File"]
        comments = {e["name"]: e["comment"] for e in els}
    assert "gpusbom:cuda:ptx=compute_80" in comments[SITE + "libk80.so"]
    assert "gpusbom:cuda:sass=sm_80" in comments[SITE + "libk80.so"]
    assert "gpusbom:cuda:sass=sm_90" in comments[SITE + "libk90.so"]
    assert "cuda:ptx" not in comments[SITE + "libk90.so"]


def test_table_lists_device_code_per_file(twolibs: Path, tmp_path: Path) -> None:
    out = tmp_path / "scan.txt"
    assert main(["scan", f"oci:{twolibs / 'oci-ptx'}", "-q", "-o", f"table={out}"]) == 0
    text = out.read_text()
    assert "Device code per file (2 files" in text
    rows = [ln.split() for ln in text.splitlines() if "twolibs/lib/lib" in ln]
    assert [r[1:4] for r in rows if r[0] == "twolibs"] == [
        [SITE + "libk80.so", "sm_80", "compute_80"], [SITE + "libk90.so", "sm_90", "-"]]
