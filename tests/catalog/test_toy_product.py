"""Adding a product is one catalog row: a toy product, written only as a row in an extra
catalog file (``$GPUSBOM_CATALOG``), flows through the real CLI to

- the collector output (its library, ``libtoyaccel.so.1.2.3`` in a root filesystem, becomes
  a component of the toy stack and product, version from the soname),
- ``scan --sbom`` classification (a CycloneDX SBOM listing the deb ``libtoyaccel1``),
- the stack summary (the row's ``stack_name`` / ``display``),
- advisory matching (an advisory this test writes for the row's id matches both scans;
  the fixed version decides affected vs not),
- and the product's CPE (the row's ``cpe`` vendor:product with the product version).

A second toy row, ``toyaccel-blas``, is a CUDA-like library: its row names its library
(``libraries``, ``sonames``) and a header with its version macros (``headers``), and the CUDA
collector's generic strategies (``collectors/strategies``) find it by those fields alone:
a ``cuda`` stack component, its version from the soname and the header, in the stack
summary under the row's ``display``, matched by an advisory for the row's id.

No gpusbom code names the toy products; without the extra file nothing is recognised.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TOY_ROW = """\
- id: toyaccel-runtime
  vendor: ToyVendor
  stack: toyaccel
  stack_name: ToyAccel
  name: ToyVendor ToyAccel Runtime
  display: runtime
  scheme: semver
  version_rule: upstream
  collect: catalog
  collector: [toyaccel-runtime]
  libraries: [libtoyaccel]
  version_sources: [soname, package]
  deb: ['libtoyaccel\\d*']
  pypi: ['toyaccel']
  cpe: ['toyvendor:toyaccel_runtime']
  vendor_strings: ['^ToyAccel Runtime$']

- id: toyaccel-blas
  vendor: ToyVendor
  stack: cuda
  name: ToyVendor ToyBLAS for CUDA
  scheme: semver
  collector: [toyblas]
  display: ToyBLAS
  libraries: [libtoyblas]
  sonames: ['libtoyblas.so*']
  headers:
    - {file: toyblas_version.h, macros: [TOYBLAS_MAJOR, TOYBLAS_MINOR, TOYBLAS_PATCH], rank: file}
  cpe: ['toyvendor:toyblas']
"""

ADVISORY = {
    "id": "TOY-2026-0001",
    "title": "ToyAccel runtime bulletin (test data)",
    "vendor": "ToyVendor",
    "published": "2026-01-01",
    "sources": ["https://example.invalid/toy-2026-0001"],
    "vulnerabilities": [{
        "id": "CVE-2099-0001",
        "severity": [{"type": "CVSS_V3_1", "score": 8.1, "vector": None}],
        "affected": [{"target": "toyaccel-runtime", "scheme": "semver",
                      "ranges": [{"fixed": "1.3.0"}], "fixed": ["1.3.0"]}],
    }, {
        "id": "CVE-2099-0002",
        "severity": [{"type": "CVSS_V3_1", "score": 7.5, "vector": None}],
        "affected": [{"target": "toyaccel-blas", "scheme": "semver",
                      "ranges": [{"fixed": "2.1.0"}], "fixed": ["2.1.0"]}],
    }],
}


def _gpusbom(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpusbom", *args], env=env, text=True,
                          capture_output=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path | dict[str, str]]:
    tmp = tmp_path_factory.mktemp("toy")
    (tmp / "toy.yaml").write_text(TOY_ROW, encoding="utf-8")
    root = tmp / "root"
    lib = root / "usr/lib/x86_64-linux-gnu"
    lib.mkdir(parents=True)
    (lib / "libtoyaccel.so.1.2.3").write_bytes(b"\x7fELF toy library, never executed\n")
    os.symlink("libtoyaccel.so.1.2.3", lib / "libtoyaccel.so.1")
    blas = root / "opt/toyblas"
    (blas / "lib").mkdir(parents=True)
    (blas / "lib/libtoyblas.so.2.0.1").write_bytes(b"\x7fELF toy BLAS, never executed\n")
    os.symlink("libtoyblas.so.2.0.1", blas / "lib/libtoyblas.so.2")
    (blas / "include").mkdir()
    (blas / "include/toyblas_version.h").write_text(
        "#define TOYBLAS_MAJOR 2\n#define TOYBLAS_MINOR 0\n#define TOYBLAS_PATCH 1\n",
        encoding="utf-8")
    (root / "etc").mkdir()
    (root / "etc/os-release").write_text('ID=debian\nVERSION_ID="12"\n', encoding="utf-8")
    cache = tmp / "cache"
    (cache / "advisories").mkdir(parents=True)
    bundled = json.loads((Path(__file__).parents[2] / "src/gpusbom/data/advisories.json")
                         .read_text(encoding="utf-8"))
    db = {"schema": bundled["schema"], "built": bundled["built"], "advisories": [ADVISORY]}
    (cache / "advisories/advisories.json").write_text(json.dumps(db), encoding="utf-8")
    sbom = {
        "bomFormat": "CycloneDX", "specVersion": "1.5", "version": 1,
        "metadata": {"component": {"type": "container", "name": "toy-image"}},
        "components": [
            {"type": "library", "name": "libtoyaccel1", "version": "1.2.3-1",
             "purl": "pkg:deb/debian/libtoyaccel1@1.2.3-1?arch=amd64", "bom-ref": "toy1"},
            {"type": "library", "name": "toyaccel", "version": "1.3.0",
             "purl": "pkg:pypi/toyaccel@1.3.0", "bom-ref": "toy2"},
        ],
    }
    (tmp / "toy.cdx.json").write_text(json.dumps(sbom), encoding="utf-8")
    env = dict(os.environ, GPUSBOM_CACHE_DIR=str(cache), GPUSBOM_DB_AUTO_UPDATE="0",
               GPUSBOM_NO_CACHE="1")
    env.pop("GPUSBOM_CATALOG", None)
    return {"tmp": tmp, "env": env}


def _scan(toy: dict[str, Path | dict[str, str]], args: list[str], with_row: bool) -> dict:  # type: ignore[type-arg]
    tmp = toy["tmp"]
    assert isinstance(tmp, Path)
    env = dict(toy["env"])  # type: ignore[arg-type]
    if with_row:
        env["GPUSBOM_CATALOG"] = str(tmp / "toy.yaml")
    out = tmp / f"out-{len(list(tmp.glob('out-*')))}.json"
    r = _gpusbom(["scan", *args, "-q", "-o", f"json={out}"], env)
    assert r.returncode == 0, r.stderr
    return json.loads(out.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def _toy_components(doc: dict) -> list[dict]:  # type: ignore[type-arg]
    return [c for c in doc["components"] if c["properties"].get("stack") == "toyaccel"]


def _toy_stack(doc: dict) -> dict | None:  # type: ignore[type-arg]
    return next((s for s in doc["stacks"] if s["stack"] == "toyaccel"), None)


def _toy_findings(doc: dict, cve: str = "CVE-2099-0001") -> dict[str, str]:  # type: ignore[type-arg]
    return {c: f["advisory"]["status"] for f in doc.get("findings", [])
            if f["id"] == cve for c in f["components"]}


def _toyblas(doc: dict) -> list[dict]:  # type: ignore[type-arg]
    return [c for c in doc["components"] if c["properties"].get("product") == "toyblas"]


def test_toy_row_reaches_collector_summary_cpe_and_advisories(toy) -> None:  # type: ignore[no-untyped-def]
    tmp = toy["tmp"]
    doc = _scan(toy, [f"dir:{tmp / 'root'}"], with_row=True)
    comps = _toy_components(doc)
    assert len(comps) == 1, doc["components"]
    c = comps[0]
    assert (c["name"], c["version"], c["properties"]["product"]) == ("toyaccel-runtime", "1.2.3", "toyaccel-runtime")
    assert c["purl"] == "pkg:generic/toyvendor/toyaccel-runtime@1.2.3"
    assert c["cpe"] == "cpe:2.3:a:toyvendor:toyaccel_runtime:1.2.3:*:*:*:*:*:*:*"
    assert c["evidence"][0]["path"] == "/usr/lib/x86_64-linux-gnu/libtoyaccel.so.1.2.3"
    assert doc["tool"]["collectors"]["catalog"].startswith("1+")
    st = _toy_stack(doc)
    assert st is not None and st["present"] and st["display"] == "ToyAccel"
    assert [(p["product"], p["display"], p["versions"]) for p in st["parts"]] == [
        ("toyaccel-runtime", "runtime", ["1.2.3"])]
    assert _toy_findings(doc) == {c["bom_ref"]: "affected"}


def test_toy_row_reaches_sbom_classification_and_advisories(toy) -> None:  # type: ignore[no-untyped-def]
    tmp = toy["tmp"]
    doc = _scan(toy, ["--sbom", str(tmp / "toy.cdx.json")], with_row=True)
    comps = {c["name"]: c for c in _toy_components(doc)}
    assert set(comps) == {"libtoyaccel1", "toyaccel"}
    deb = comps["libtoyaccel1"]["properties"]
    assert deb == {**deb, "stack": "toyaccel", "product": "toyaccel-runtime",
                   "classified-by": "package-name", "product-version": "1.2.3"}
    st = _toy_stack(doc)
    assert st is not None and st["display"] == "ToyAccel"
    assert st["parts"][0]["versions"] == ["1.2.3", "1.3.0"]
    # 1.2.3 is below the fixed 1.3.0: affected; the wheel at 1.3.0 is fixed
    found = _toy_findings(doc)
    assert found.get(comps["libtoyaccel1"]["bom_ref"]) == "affected"
    assert found.get(comps["toyaccel"]["bom_ref"]) in (None, "not-affected")


def test_a_cuda_like_row_reaches_the_cuda_strategies(toy) -> None:  # type: ignore[no-untyped-def]
    tmp = toy["tmp"]
    doc = _scan(toy, [f"dir:{tmp / 'root'}"], with_row=True)
    comps = _toyblas(doc)
    assert len(comps) == 1, comps
    c = comps[0]
    assert (c["name"], c["version"]) == ("toyblas", "2.0.1")
    assert c["properties"]["stack"] == "cuda" and c["properties"]["location"] == "/opt/toyblas"
    assert {e["path"] for e in c["evidence"]} == {
        "/opt/toyblas/lib/libtoyblas.so.2.0.1", "/opt/toyblas/include/toyblas_version.h"}
    assert "disagreement" not in c["properties"]  # the soname and the header agree
    st = next(s for s in doc["stacks"] if s["stack"] == "cuda")
    assert [(p["display"], p["versions"]) for p in st["parts"] if p["product"] == "toyblas"] == [
        ("ToyBLAS", ["2.0.1"])]
    assert _toy_findings(doc, "CVE-2099-0002") == {c["bom_ref"]: "affected"}


def test_without_the_row_nothing_is_recognised(toy) -> None:  # type: ignore[no-untyped-def]
    tmp = toy["tmp"]
    for args in ([f"dir:{tmp / 'root'}"], ["--sbom", str(tmp / "toy.cdx.json")]):
        doc = _scan(toy, args, with_row=False)
        assert _toy_components(doc) == [] and _toy_stack(doc) is None
        assert _toyblas(doc) == []
        assert "catalog" not in doc["tool"]["collectors"]
        assert _toy_findings(doc) == {}


def test_a_broken_extra_catalog_is_a_config_error(toy) -> None:  # type: ignore[no-untyped-def]
    tmp = toy["tmp"]
    bad = tmp / "bad.yaml"
    bad.write_text("- id: Bad Id\n  vendor: x\n  stack: y\n  name: z\n", encoding="utf-8")
    env = dict(toy["env"], GPUSBOM_CATALOG=str(bad))
    r = _gpusbom(["scan", f"dir:{tmp / 'root'}", "-q", "-o", f"json={tmp / 'never.json'}"], env)
    assert r.returncode == 3, r.stderr
    assert str(bad) in r.stderr and "id must be lower-case" in r.stderr
    assert not (tmp / "never.json").exists()
