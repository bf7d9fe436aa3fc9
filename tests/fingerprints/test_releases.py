"""Vendor release lists (#38): a version that is not a release of its product is never
reported.

- the verdict rules, on a small database of known rows;
- the bundled database on real cases: cuBLAS 10.x getter constants read with the x10000 rule
  (``1.2.1``, ``1.2.2``: no cuBLAS release has major 1), a CUDA release that never existed
  (``12.7``), CUPTI's file numbering (``libcupti.so.2025.3.1``);
- the whole test corpus: every version gpusbom reports for an NVIDIA library in the scans
  of the fixture images, the host snapshots and the SBOMs the tests read is a release the
  fingerprint database or the vendor lists name.

The corpus is what ``tests/golden`` and ``tests/e2e`` scan; their golden outputs are those
scans byte for byte (the golden tests fail when a scan's output differs), so this test reads
the JSON outputs the golden tests compare instead of scanning every image again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from golden_files import goldens, read

from gpusbom.fingerprints import FingerprintDB, Record, Release, ReleaseIndex
from gpusbom.fingerprints.active import load_bundled

ROOT = Path(__file__).resolve().parents[2]
GOLDEN_JSON = [*goldens("json"),
               ROOT / "tests" / "e2e" / "golden" / "demo.json"]


def _index(complete_from: dict[str, str] | None = None) -> ReleaseIndex:
    rows = [Release("cublas", v, "pypi-index:nvidia-cublas-cu12")
            for v in ("12.0.1.189", "12.4.5.8", "12.9.3.13")]
    rows += [Release("cublas", "10.2.2.89", "nvidia-dockerfile:10.2/runtime"),
             Release("cupti", "10.2", "nvidia-dockerfile:dist/10.2")]
    rec = Record("cublas", "13.1.0.3", "libcublas.so.13", None, None, "ab" * 32, 1,
                 "pypi:nvidia-cublas==13.1.0.3")
    cf = {"cublas": "12.0.1.189"} if complete_from is None else complete_from
    return ReleaseIndex(rows, cf, exact=[rec])


@pytest.mark.parametrize("product, version, status, says", [
    ("cublas", "12.4.5.8", "release", "a listed release"),
    ("cublas", "12.4.5", "release", "a short form of the listed release 12.4.5.8"),
    ("cublas", "10.2.2", "release", "a short form of the listed release 10.2.2.89"),
    ("cublas", "13.1.0.3", "release", "a listed release"),  # a fingerprinted wheel's version
    ("cupti", "10.2.75", "release", "in the listed release line 10.2"),
    # the x10000 rule on cuBLAS 10.2.1's 10201: no cuBLAS has major 1
    ("cublas", "1.2.1", "rejected", "no cublas release has major 1 (listed majors: 10, 12, 13)"),
    # in the complete range (12.0.1.189 .. 13.1.0.3) and not listed
    ("cublas", "12.4.6", "rejected", "nearest: 12.4.5.8, 12.9.3.13"),
    ("cublas", "12.7", "rejected", "every cublas release since 12.0.1.189"),
    # below the complete range: the lists cannot say
    ("cublas", "10.1.0", "unlisted", "complete only from 12.0.1.189"),
    # newer than the database: a new release, or a new major
    ("cublas", "13.2.0.9", "unlisted", "newer than the newest listed cublas release 13.1.0.3"),
    ("cublas", "14.0.1", "unlisted", "major 14 is newer"),
    ("cublas", "2025.3.1", "rejected", "no cublas release has major 2025"),
])
def test_verdicts(product: str, version: str, status: str, says: str) -> None:
    check = _index().check(product, version)
    assert check is not None
    assert (check.status, says in check.reason) == (status, True), check


def test_no_verdict_without_a_list_or_a_number() -> None:
    idx = _index()
    assert idx.check("cudnn", "9.1.0") is None  # no list for the product: nothing said
    assert idx.check("cublas", "unknown") is None
    assert idx.check("cublas", None) is None
    # no complete range: an unlisted version of a listed major is never rejected
    assert _index({}).check("cublas", "12.4.6").status == "unlisted"  # type: ignore[union-attr]


def test_bundled_lists_reject_what_no_vendor_released() -> None:
    idx = load_bundled().release_index()
    for product, version in (("cublaslt", "1.2.1"), ("cublaslt", "1.2.2"), ("cublas", "1.2.2"),
                             ("cudart", "12.7"), ("cudart", "12.7.32"),
                             ("cupti", "2025.3.1"), ("cudart", "12.9.99")):
        check = idx.check(product, version)
        assert check is not None and check.status == "rejected", (product, version, check)
    for product, version in (("cublaslt", "10.2.1"), ("cublaslt", "10.2.2"),
                             ("cublaslt", "11.11.3"), ("cublas", "12.9.3.13"),
                             ("cudnn", "7.6.5.32"), ("nccl", "2.4.8"), ("cudart", "10.2"),
                             ("cudart", "12.4.127"), ("cupti", "13.0.85"), ("nvrtc", "10.2.89")):
        check = idx.check(product, version)
        assert check is not None and check.status == "release", (product, version, check)


def test_bundled_lists_name_their_sources() -> None:
    db = load_bundled()
    kinds = {r.source.split(":", 1)[0] for r in db.releases}
    # PyPI index listings, cuda-toolkit metapackage pins, NVIDIA Dockerfiles, distro packages
    assert kinds >= {"pypi-index", "pypi", "nvidia-dockerfile", "debian", "ubuntu"}
    assert db.complete_from["cublas"] == db.complete_from["cublaslt"]
    # complete from CUDA 12.0.0: the cuda-toolkit 12.0.0 metapackage pins these
    assert db.complete_from["cudart"] == "12.0.107"
    assert any(r.product == "cublas" and r.version == "12.0.1.189"
               and r.source == "pypi:cuda-toolkit==12.0.0" for r in db.releases)


def test_release_rows_are_validated() -> None:
    from gpusbom.fingerprints import FingerprintError, load_bytes
    from gpusbom.fingerprints.database import dumps

    good = FingerprintDB([], built="2026-12-07T00:00:00Z", releases=[Release("cublas", "10.2", "ubuntu:focal/x")])
    doc = json.loads(dumps(good.to_document()))
    assert load_bytes(json.dumps(doc).encode(), name="t").releases == good.releases
    for bad, says in ((["cublas", "10.2; rm", "ubuntu:x"], "bad version"),
                      (["cublas", "10.2", "no source"], "bad release source"),
                      (["Cublas", "10.2", "ubuntu:x"], "bad product"),
                      (["cublas", "10.2"], "a release row of 3 values")):
        doc["releases"]["rows"] = [bad]
        with pytest.raises(FingerprintError, match=says):
            load_bytes(json.dumps(doc).encode(), name="t")
    doc["releases"]["rows"] = []
    doc["surprise"] = 1
    with pytest.raises(FingerprintError, match="unknown key"):
        load_bytes(json.dumps(doc).encode(), name="t")


# ------------------------------------------------------------------------------ the corpus


def _reported(doc: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(product, version, where) of every NVIDIA CUDA-stack library version a scan reports:
    its components' products (a package's product version, a stand-alone component's)."""
    out = []
    for c in doc.get("components", []):
        for p in c.get("products") or []:
            if p.get("stack") == "cuda" and p.get("version"):
                loc = (c.get("properties") or {}).get("location") or c.get("name")
                out.append((p["name"], p["version"], f"{c['name']} {c.get('version')} at {loc}"))
    return out


def test_every_version_reported_over_the_corpus_is_a_release() -> None:
    idx = load_bundled().release_index()
    assert all(p.exists() for p in GOLDEN_JSON), GOLDEN_JSON
    seen = bad = 0
    problems = []
    for path in GOLDEN_JSON:
        doc = json.loads(read(path))
        for product, version, where in _reported(doc):
            check = idx.check(product, version)
            if check is None:  # a product no vendor list covers (CUTLASS, cuSPARSELt ...)
                continue
            seen += 1
            if check.status != "release":
                bad += 1
                problems.append(f"{path.parent.name}: {product} {version} ({where}): "
                                f"{check.status}: {check.reason}")
    assert seen >= 30  # the corpus does report NVIDIA libraries
    assert not problems, "\n".join(problems)
