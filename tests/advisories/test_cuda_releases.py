"""CUDA toolkit release vs component versions: an advisory naming a toolkit release
matches an image that carries only components (libcudart.so.12.4.127, cuBLAS 12.4.5.8)."""

from __future__ import annotations

import copy

from gpusbom.advisories.cuda_releases import RELEASES, SOURCES, release_of
from gpusbom.advisories.db import AdvisoryDB, load_bundled, load_records
from gpusbom.advisories.matcher import match
from gpusbom.model import Component, Evidence

BUNDLED = load_bundled()


def _no_parts() -> AdvisoryDB:
    """The bundle with NVIDIA 5661 as if its CVEs named no tool or library of the toolkit
    (the case the release rules are for: a CVE in "the CUDA Toolkit" as a whole)."""
    recs = []
    for a in BUNDLED:
        r = copy.deepcopy(a.raw)
        if r["id"] == "NVIDIA-5661":
            for v in r["vulnerabilities"]:
                v.pop("parts", None)
        recs.append(r)
    return load_records(recs, source="test")


DB = _no_parts()


def comp(product: str, version: str, loc: str = "/usr/local/cuda-12.4") -> Component:
    return Component(name=product, version=version, ecosystem="generic",
                     properties={"stack": "cuda", "product": product, "location": loc},
                     evidence=[Evidence("cuda", "soname", f"{loc}/lib64/lib{product}.so.{version}")],
                     bom_ref=f"{product}@{version}")


def status(cs: list[Component], vuln: str) -> list[tuple[str, str, str | None]]:
    return [(f.components[0], f.advisory.status, f.advisory.fixed_version)
            for f in match(cs, DB) if f.id == vuln and f.advisory]


def test_table_rows_cite_sources() -> None:
    assert set(RELEASES) == set(SOURCES)
    assert RELEASES["12.4.1"]["cudart"] == "12.4.127"
    assert release_of("cudart", "12.4.127").release == "12.4.1"
    assert release_of("cublas", "12.4.5.8").release == "12.4.1"
    assert release_of("cudart", "12.6.77").release is None  # not in the table: a 12.6.x
    assert release_of("cudart", "12.6.77").lowest == "12.6"
    assert release_of("cublas", "12.6.4.1") is None  # own numbering: nothing to say


def test_cudart_is_not_the_component_of_an_nvjpeg_cve() -> None:
    # NVIDIA 5661 CVE-2025-23272: "NVIDIA nvJPEG library contains a vulnerability": cudart
    # is another library of the toolkit (cuda-part-absent)
    f = next(x for x in match([comp("cudart", "12.4.127")], BUNDLED) if x.id == "CVE-2025-23272")
    assert f.advisory is not None and f.advisory.status == "not-affected"
    assert f.advisory.rule == "cuda-part-absent"
    assert "this component is cudart of the toolkit, not nvjpeg" in (
        f.advisory.justification or "")


def test_libcudart_matches_toolkit_advisory() -> None:
    # NVIDIA 5661 CVE-2025-23272 with no part named: CUDA Toolkit prior to 12.9 Update 1: a
    # component is matched through its release, but only for review, never as certainly
    # affected (whether it carries the flaw is not stated)
    assert status([comp("cudart", "12.4.127")], "CVE-2025-23272") == [
        ("cudart@12.4.127", "review", "12.9.1")]
    f = next(x for x in match([comp("cudart", "12.4.127")], DB) if x.id == "CVE-2025-23272")
    assert "cudart 12.4.127 ships with CUDA 12.4.1" in (f.detail or "")
    assert "whether cudart carries the vulnerable part is not stated" in (f.detail or "")
    assert status([comp("cublas", "12.4.5.8")], "CVE-2025-23272")[0][1] == "review"
    assert status([comp("cudart", "11.8.89")], "CVE-2025-23272")[0][1] == "review"
    # NVIDIA 5594 CVE-2024-53870 is "in the cuobjdump binary": a library of the toolkit
    # does not contain it (proven, cuda-part-absent)
    f = next(x for x in match([comp("cudart", "12.4.127")], DB) if x.id == "CVE-2024-53870")
    assert f.advisory is not None and f.advisory.status == "not-affected"
    assert f.advisory.rule == "cuda-part-absent"
    assert (f.advisory.justification or "").startswith("component_not_present: ")


def test_major_minor_rule() -> None:
    # every 12.6.x is below 12.9.1: in range without knowing the patch release (review, as
    # every component-through-release match)
    f = next(x for x in match([comp("cudart", "12.6.77")], DB) if x.id == "CVE-2025-23272")
    assert f.advisory is not None and f.advisory.status == "review"
    assert "every such release is in the vendor range" in (f.detail or "")
    # every 13.0.x is fixed for CVE-2025-23272 (fixed in 12.9.1)
    assert status([comp("cudart", "13.0.96")], "CVE-2025-23272") == []
    # a math library outside the table says nothing about the release
    assert status([comp("cublas", "12.6.4.1")], "CVE-2025-23272") == []


def test_toolkit_root_speaks_for_its_components() -> None:
    tk = comp("cuda-toolkit", "12.4.1")
    tk.evidence = [Evidence("cuda", "version-file", "/usr/local/cuda-12.4/version.json")]
    got = status([tk, comp("cudart", "12.4.127")], "CVE-2024-53870")
    assert got == [("cuda-toolkit@12.4.1", "affected", "12.8")]  # once, on the toolkit
    # a cudart elsewhere (a wheel) is still judged on its own
    got = status([tk, comp("cudart", "12.4.127", loc="/opt/venv/nvidia/cuda_runtime")],
                 "CVE-2024-53870")
    assert len(got) == 2
