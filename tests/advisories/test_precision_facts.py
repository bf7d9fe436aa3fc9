"""Advisory precision (issue #32) on vendor facts: 20 NVIDIA bulletins of 2025-2026.

Each case names the bulletin, the CVE, the vendor's product string and version phrase
exactly as NVIDIA's CSAF product tree writes them, the fix, and the source:
https://github.com/NVIDIA/product-security/blob/main/<year>/<id>/<id>.json (snapshot
dbb4ada05315, 2026-08-18; not committed). The bundled database is imported from those
documents by scripts/build_advisory_bundle.py; each case first checks that the bundle holds
the vendor's phrase for that product, then the verdict on a component, written from the
vendor's text: hyphen ranges with and without spaces, the inclusive four-part form,
release candidates, per-tool CUDA debs, a purl-less deb, DCGM vs DCGM Exporter, "for
Windows" descriptions, toolkit parts absent from the image's files.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest

from gpusbom.advisories.db import AdvisoryDB, load_bundled
from gpusbom.advisories.matcher import match
from gpusbom.model import Component, Evidence, Finding, Product

URL = "https://github.com/NVIDIA/product-security/blob/main/{year}/{bid}/{bid}.json"


@functools.lru_cache(maxsize=1)
def _db() -> AdvisoryDB:
    return load_bundled()


def pkg(eco: str, name: str, version: str, **props: str) -> Component:
    path = {"deb": "/var/lib/dpkg/status", "rpm": "/var/lib/rpm/rpmdb.sqlite"}.get(eco)
    return Component(name=name, version=version, ecosystem=eco, properties=dict(props),
                     evidence=[Evidence(eco, "package-db", path)],
                     bom_ref=f"{eco}:{name}@{version}")


def triton(release: str) -> Component:
    return Component(name="tritonserver", version=release, ecosystem="generic",
                     properties={"container-release": release},
                     products=[Product("triton-inference-server", "triton-inference-server")],
                     evidence=[Evidence("triton", "version-file", "/opt/tritonserver/TRITON_VERSION")],
                     bom_ref=f"triton:{release}")


def toolkit(version: str, *, env_only: bool, found: str = "") -> Component:
    """A cuda-toolkit component as the CUDA collector writes it, with the parts search."""
    from gpusbom.collectors.cuda_parts import part_files

    ev = (Evidence("cuda", "env", None, "CUDA_VERSION") if env_only else
          Evidence("cuda", "version-file", "/usr/local/cuda-13.0/version.json"))
    return Component(name="cuda-toolkit", version=version, ecosystem="generic",
                     properties={"stack": "cuda", "product": "cuda-toolkit",
                                 "parts-searched": " ".join(sorted(part_files())),
                                 "parts-found": found},
                     products=[Product("cuda", "cuda-toolkit", version)],
                     evidence=[ev], bom_ref=f"tk:{version}:{found}:{env_only}")


def findings(comps: list[Component], cve: str, **kw: Any) -> list[Finding]:
    return [f for f in match(comps, _db(), **kw) if f.id == cve]


def verdict(comps: list[Component], cve: str, **kw: Any) -> tuple[str, str | None, str] | None:
    got = findings(comps, cve, **kw)
    if not got:
        return None
    a = got[0].advisory
    assert a is not None
    return a.status, a.fixed_version, a.rule


def holds_phrase(bid: str, cve: str, product: str, phrase: str) -> None:
    """The bundle carries the vendor's phrase, as written, for that product and CVE, and
    cites the bulletin."""
    adv = _db().get(f"NVIDIA-{bid}")
    assert adv is not None, bid
    year = adv.published[:4]
    assert any(URL.format(year=y, bid=bid) in adv.sources for y in (year, str(int(year) - 1),
                                                                     str(int(year) + 1)))
    raw = next(v for v in adv.raw["vulnerabilities"] if v["id"] == cve)
    phrases = [p for a in raw["affected"] if a.get("vendor_product") == product
               for p in a.get("vendor_phrases") or []]
    assert phrase in phrases, (bid, cve, product, phrases)


# (bulletin, CVE, vendor product, vendor phrase, component, expected (status, fix, rule) | None)
CASES: list[tuple[str, str, str, str, Component, tuple[str, str | None, str] | None]] = [
    # hyphen without spaces (Triton, July 2026: fixed 26.06)
    ("5865", "CVE-2026-47606", "Triton Inference Server", "0.0-26.05", triton("26.05"),
     ("affected", "26.06", "vendor-range")),
    ("5865", "CVE-2026-47606", "Triton Inference Server", "0.0-26.05", triton("26.06"), None),
    ("5865", "CVE-2026-47627", "Triton Inference Server", "0.0-26.05", triton("25.07"),
     ("affected", "26.06", "vendor-range")),
    # hyphen with spaces
    ("5853", "CVE-2026-47476", "Triton Inference Server", "0.0 - 26.04", triton("26.04"),
     ("affected", "26.05", "vendor-range")),
    ("5853", "CVE-2026-47476", "Triton Inference Server", "0.0 - 26.04", triton("26.05"), None),
    ("5848", "CVE-2026-24264", "Triton Inference Server", "0.0 - 26.03", triton("26.03"),
     ("affected", "26.04", "vendor-range")),
    ("5860", "CVE-2026-47487", "Triton Inference Server", "0.0 - 26.02", triton("26.03"), None),
    # inclusive release-form bound against a four-part build (TensorRT; fixed 11.0)
    ("5855", "CVE-2026-24268", "TensorRT", "v0 - v10.16.1", pkg("pypi", "tensorrt", "10.16.1.11"),
     ("affected", "11.0", "vendor-range")),
    ("5855", "CVE-2026-24268", "TensorRT", "v0 - v10.16.1",
     pkg("deb", "libnvinfer10", "10.16.1.11-1+cuda13.0"), ("affected", "11.0", "vendor-range")),
    ("5855", "CVE-2026-24268", "TensorRT", "v0 - v10.16.1", pkg("pypi", "tensorrt", "11.0"), None),
    # the build of the fixed release is fixed
    ("5836", "CVE-2026-24188", "TensorRT", "All versions prior to v10.16.1",
     pkg("pypi", "tensorrt-cu13", "10.16.1.11"), None),
    # release candidates (TensorRT-LLM, fixed in the next rc)
    ("5840", "CVE-2026-24233", "TensorRT-LLM", "0.0 to v1.3.0 rc14",
     pkg("pypi", "tensorrt-llm", "1.3.0rc14"), ("affected", "1.3.0rc15", "vendor-range")),
    ("5840", "CVE-2026-24233", "TensorRT-LLM", "0.0 to v1.3.0 rc14",
     pkg("pypi", "tensorrt-llm", "1.3.0rc15"), None),
    ("5840", "CVE-2026-24233", "TensorRT-LLM", "0.0 to v1.3.0 rc14",
     pkg("pypi", "tensorrt-llm", "1.2.0"), ("affected", "1.3.0rc15", "vendor-range")),
    ("5840", "CVE-2026-47472", "TensorRT-LLM", "0.0 to v1.3.0 rc16",
     pkg("pypi", "tensorrt-llm", "1.3.0rc16"), ("affected", "1.3.0rc17", "vendor-range")),
    ("5840", "CVE-2026-47472", "TensorRT-LLM", "0.0 to v1.3.0 rc16",
     pkg("pypi", "tensorrt-llm", "1.3.0rc17"), None),
    ("5840", "CVE-2026-24220", "TensorRT-LLM", "0.0  to v1.3.0 rc11",
     pkg("pypi", "tensorrt-llm", "1.3.0rc12"), None),
    ("5805", "CVE-2025-33255", "TensorRT-LLM", "All versions prior to v1.2",
     pkg("pypi", "tensorrt-llm", "1.2.0rc1"), ("affected", "1.2", "vendor-range")),
    # DCGM and DCGM Exporter are separate products (DCGM fixed in 4.5.3, Exporter in 4.8.2)
    ("5857", "CVE-2026-47483", "DCGM", "0.0  to 4.5.2",
     pkg("deb", "datacenter-gpu-manager-4-core", "1:4.5.3-1"), None),
    ("5857", "CVE-2026-47483", "DCGM", "0.0  to 4.5.2",
     pkg("deb", "datacenter-gpu-manager-4-core", "1:4.5.2-1"), ("affected", "4.5.3", "vendor-range")),
    ("5857", "CVE-2026-47483", "DCGM Exporter", "0.0  to 4.8.2",
     pkg("golang", "github.com/NVIDIA/dcgm-exporter", "v4.8.1"), ("affected", "4.8.2", "vendor-range")),
    ("5857", "CVE-2026-47483", "DCGM Exporter", "0.0  to 4.8.2",
     pkg("golang", "github.com/NVIDIA/dcgm-exporter", "v4.8.2"), None),
    # per-tool CUDA debs / rpms / conda packages, judged as their part and release line
    ("5643", "CVE-2025-23247", "NVIDIA CUDA Toolkit", "All versions up to CUDA Toolkit 12.9",
     pkg("deb", "cuda-cuobjdump-12-8", "12.8.90-1"), ("affected", "12.9", "cuda-release")),
    ("5643", "CVE-2025-23247", "NVIDIA CUDA Toolkit", "All versions up to CUDA Toolkit 12.9",
     pkg("deb", "cuda-cuobjdump-12-9", "12.9.82-1"), None),
    ("5643", "CVE-2025-23247", "NVIDIA CUDA Toolkit", "All versions up to CUDA Toolkit 12.9",
     pkg("rpm", "cuda-cuobjdump-12-8", "12.8.90-1"), ("affected", "12.9", "cuda-release")),
    ("5643", "CVE-2025-23247", "NVIDIA CUDA Toolkit", "All versions up to CUDA Toolkit 12.9",
     pkg("conda", "cuda-cuobjdump", "12.8.90"), ("affected", "12.9", "cuda-release")),
    ("5643", "CVE-2025-23247", "NVIDIA CUDA Toolkit", "All versions up to CUDA Toolkit 12.9",
     pkg("deb", "cuda-nvdisasm-12-8", "12.8.90-1"), None),  # the CVE is in cuobjdump
    ("5594", "CVE-2024-53871", "NVIDIA CUDA Toolkit", "All versions up to CUDA Toolkit 12.8",
     pkg("deb", "cuda-nvdisasm-12-6", "12.6.77-1"), ("affected", "12.8", "cuda-release")),
    ("5661", "CVE-2025-23338", "NVIDIA CUDA Toolkit", "All versions prior to CUDA Toolkit 13.0",
     pkg("deb", "cuda-nvdisasm-12-8", "12.8.90-1"), ("affected", "13.0", "cuda-release")),
    ("5661", "CVE-2025-23338", "NVIDIA CUDA Toolkit", "All versions prior to CUDA Toolkit 13.0",
     pkg("deb", "cuda-nvdisasm-13-0", "13.0.85-1"), None),
    ("5661", "CVE-2025-23272", "nvJPEG", "All versions prior to nvJPEG 25.03",
     pkg("deb", "libnvjpeg-12-8", "12.3.5.92-1"), ("affected", "25.03", "vendor-range")),
    ("5661", "CVE-2025-23272", "NVIDIA CUDA Toolkit",
     "All versions prior to CUDA Toolkit 12.9 Update 1",
     pkg("deb", "cuda-cuobjdump-12-8", "12.8.90-1"), None),  # the CVE is in nvJPEG
    ("5661", "CVE-2025-23275", "nvJPEG", "All versions prior to nvJPEG 13.0.0",
     pkg("deb", "libnvjpeg-12-8", "12.3.5.92-1"), ("affected", "13.0.0", "vendor-range")),
    # the driver's per-branch debs
    ("5747", "CVE-2025-33220", "GeForce", "All driver versions prior to 580.126.09",
     pkg("deb", "libnvidia-compute-580", "580.95.05-0ubuntu1"),
     ("affected", "580.126.09", "driver-branch")),
    ("5703", "CVE-2025-23280", "GeForce", "All driver versions prior to 580.95.05",
     pkg("deb", "libnvidia-compute-580", "580.95.05-0ubuntu1"), None),
    ("5821", "CVE-2026-24190", "GeForce", "All driver versions prior to 580.159.03",
     pkg("deb", "nvidia-driver-580", "580.126.09-0ubuntu1"),
     ("affected", "580.159.03", "driver-branch")),
    ("5703", "CVE-2025-23300", "GeForce", "All driver versions prior to 535.274.02",
     pkg("rpm", "nvidia-driver-cuda-libs", "535.261.03-1.el9"),
     ("affected", "535.274.02", "driver-branch")),
    # container toolkit, DALI, NeMo, Dynamo ranges as written
    ("5659", "CVE-2025-23266", "NVIDIA Container Toolkit",
     "All versions up to and including 1.17.7 (CDI mode only for versions prior to 1.17.5)",
     pkg("deb", "nvidia-container-toolkit", "1.17.7-1"), ("affected", "1.17.8", "vendor-range")),
    ("5659", "CVE-2025-23266", "NVIDIA Container Toolkit",
     "All versions up to and including 1.17.7 (CDI mode only for versions prior to 1.17.5)",
     pkg("deb", "nvidia-container-toolkit", "1.17.8-1"), None),
    ("5850", "CVE-2026-24260", "NVIDIA Container Toolkit", "All versions up to and including 1.19.0",
     pkg("rpm", "nvidia-container-toolkit-base", "1.19.0-1"), ("affected", "1.19.1", "vendor-range")),
    ("5814", "CVE-2026-24180", "NVIDIA DALI", "0.0 - 2.0",
     pkg("pypi", "nvidia-dali-cuda120", "2.0.0"), ("affected", "2.1", "vendor-range")),
    ("5814", "CVE-2026-24180", "NVIDIA DALI", "0.0 - 2.0",
     pkg("pypi", "nvidia-dali-cuda120", "2.1.0"), None),
    ("5839", "CVE-2026-24155", "NVIDIA NeMo Framework", "Versions 0.0 to 2.7.2",
     pkg("pypi", "nemo-toolkit", "2.7.2"), ("affected", "2.7.3", "vendor-range")),
    ("5839", "CVE-2026-24155", "NVIDIA NeMo Framework", "Versions 0.0 to 2.7.2",
     pkg("pypi", "nemo-toolkit", "2.7.3"), None),
    ("5842", "CVE-2026-24254", "NVIDIA Dynamo", "0 to v1.1.0",
     pkg("pypi", "ai-dynamo", "1.1.0"), ("affected", "1.1.1", "vendor-range")),
]


@pytest.mark.parametrize("bid,cve,product,phrase,comp,want", CASES,
                         ids=[f"{c[0]}-{c[1]}-{c[4].name}-{c[4].version}" for c in CASES])
def test_vendor_case(bid: str, cve: str, product: str, phrase: str, comp: Component,
                     want: tuple[str, str | None, str] | None) -> None:
    holds_phrase(bid, cve, product, phrase)
    # a host scan: the kernel-mode driver CVEs apply there (an image holds no kernel module)
    assert verdict([comp], cve, target_kind="host") == want


def test_cases_cover_enough_bulletins() -> None:
    assert len(CASES) >= 40
    assert len({c[0] for c in CASES}) >= 15


# ------------------------------------------------------------------ CUDA Toolkit parts and platform

# NVIDIA-5755 (January 2026), descriptions as NVIDIA wrote them:
#  CVE-2025-33228 "NVIDIA Nsight Systems contains a vulnerability in the gfx_hotspot recipe"
#  CVE-2025-33229 "NVIDIA Nsight Visual Studio for Windows contains a vulnerability in Nsight
#                  Monitor"
#  CVE-2025-33230 "NVIDIA Nsight Systems for Linux contains a vulnerability in the .run installer"
#  CVE-2025-33231 "NVIDIA Nsight Systems for Windows contains a vulnerability in the
#                  application's DLL loading mechanism"
# product tree: "NVIDIA CUDA Toolkit" / "All versions prior to CUDA Toolkit 13.1", fixed 13.1


def test_5755_parts_and_windows_from_the_description() -> None:
    adv = _db().get("NVIDIA-5755")
    assert adv is not None
    parts = {v.id: v.parts for v in adv.vulnerabilities}
    assert parts["CVE-2025-33228"] == ("nsight-systems",)
    assert parts["CVE-2025-33229"] == ("nsight-visual-studio",)
    plats = {v.id: {a.platform for a in v.affected} for v in adv.vulnerabilities}
    assert plats["CVE-2025-33229"] == {"windows"} and plats["CVE-2025-33231"] == {"windows"}
    assert plats["CVE-2025-33230"] == {None}  # "for Linux": Linux among the tree's platforms


def test_windows_only_cves_are_not_affected_on_linux_even_with_nsys_present() -> None:
    tk = toolkit("13.0.2", env_only=False, found="nsight-systems")
    for cve in ("CVE-2025-33229", "CVE-2025-33231"):
        assert verdict([tk], cve, target_kind="image") == ("not-affected", None, "windows-only")
    assert verdict([tk], "CVE-2025-33228", target_kind="image") == (
        "affected", "13.1", "vendor-range")


def test_env_only_toolkit_with_no_part_file_is_not_affected_with_the_paths_searched() -> None:
    tk = toolkit("12.4.1", env_only=True)
    f = findings([tk], "CVE-2025-33228", target_kind="image")
    assert len(f) == 1 and f[0].advisory is not None
    assert f[0].advisory.status == "not-affected" and f[0].advisory.rule == "cuda-part-absent"
    j = f[0].advisory.justification or ""
    assert j.startswith("component_not_present:") and "nsys, nsys-ui" in j
    assert "full file list" in j
    # 5594 CVE-2024-53870, "in the cuobjdump binary"
    g = findings([tk], "CVE-2024-53870", target_kind="image")[0].advisory
    assert g is not None and g.rule == "cuda-part-absent" and "cuobjdump" in (g.justification or "")


def test_part_found_keeps_the_finding_and_sbom_input_proves_nothing() -> None:
    # a file of the part is present: the metadata-only review stays, naming why
    got = verdict([toolkit("12.4.1", env_only=True, found="cuobjdump nsight-systems")],
                  "CVE-2024-53870", target_kind="image")
    assert got == ("review", "12.8", "metadata-only")
    # an SBOM (no file list): no absence is proven
    got = verdict([toolkit("12.4.1", env_only=True)], "CVE-2024-53870", target_kind=None)
    assert got == ("review", "12.8", "metadata-only")


def test_cudart_wheel_is_not_the_component_of_an_nvjpeg_or_nsight_cve() -> None:
    c = Component(name="nvidia-cuda-runtime-cu12", version="12.4.127", ecosystem="pypi",
                  products=[Product("cuda", "cudart", "12.4.127")], bom_ref="cudart",
                  evidence=[Evidence("python", "dist-info", "/x/METADATA")])
    for cve in ("CVE-2025-23272", "CVE-2025-33228"):
        got = verdict([c], cve, target_kind="image")
        assert got is not None and got[0] == "not-affected" and got[2] == "cuda-part-absent"


# ------------------------------------------------------------------ purl-less deb (Syft)


def test_purl_less_syft_deb_is_matched_by_name_and_ecosystem_hint(tmp_path: Path) -> None:
    from gpusbom.sbomin import load_sbom

    # Syft writes no purl for a deb when it found no os-release; it keeps the type
    doc = {"bomFormat": "CycloneDX", "specVersion": "1.5", "version": 1,
           "metadata": {"tools": {"components": [{"type": "application", "name": "syft",
                                                  "version": "1.18.1"}]}},
           "components": [{"bom-ref": "a1", "type": "library", "name": "libnvidia-compute-535",
                           "version": "535.183.01-0ubuntu0.22.04.1",
                           "properties": [{"name": "syft:package:foundBy",
                                           "value": "dpkg-db-cataloger"},
                                          {"name": "syft:package:type", "value": "deb"}]}]}
    p = tmp_path / "syft.cdx.json"
    p.write_text(json.dumps(doc))
    res = load_sbom(str(p))
    comp = next(c for c in res.components if c.name == "libnvidia-compute-535")
    assert comp.ecosystem == "deb"
    # 5703 CVE-2025-23300: R535 "All driver versions prior to 535.274.02"
    assert verdict([comp], "CVE-2025-23300") == ("affected", "535.274.02", "driver-branch")


# ------------------------------------------------------------------ one finding per file


def test_same_file_duplicates_are_shown_once() -> None:
    ev = Evidence("dpkg", "package-db", "/usr/lib/x86_64-linux-gnu/libnvinfer.so.10.16.1")
    a = Component(name="libnvinfer10", version="10.16.1.11-1+cuda13.0", ecosystem="deb",
                  evidence=[ev], bom_ref="a")
    b = Component(name="tensorrt", version="10.16.1.11", ecosystem="generic",
                  purl="pkg:generic/nvidia/tensorrt@10.16.1.11", evidence=[ev], bom_ref="b")
    got = findings([a, b], "CVE-2026-24268", target_kind="image")
    assert len(got) == 1 and set(got[0].components) == {"a", "b"}
    # different files: two findings
    b2 = Component(name="tensorrt", version="10.16.1.11", ecosystem="pypi", bom_ref="c",
                   evidence=[Evidence("python", "dist-info", "/site/tensorrt/METADATA")])
    assert len(findings([a, b2], "CVE-2026-24268", target_kind="image")) == 2


# ------------------------------------------------------------------ version semantics (properties)

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from gpusbom.advisories.versions import Range, compare  # noqa: E402

_N = st.integers(min_value=0, max_value=999)


@settings(max_examples=200, deadline=None)
@given(rel=st.lists(_N, min_size=3, max_size=3), build=_N,
       scheme=st.sampled_from(["semver", "pep440", "intel"]), v=st.booleans())
def test_a_build_of_a_release_is_within_its_inclusive_bound(rel: list[int], build: int,
                                                           scheme: str, v: bool) -> None:
    r = ".".join(map(str, rel))
    b = f"{r}.{build}"
    assert Range(scheme, "0", None, ("v" if v and scheme != "pep440" else "") + r).contains(b)
    assert not Range(scheme, "0", r, None).contains(b)  # a build of the fix is fixed


@settings(max_examples=200, deadline=None)
@given(rel=st.lists(_N, min_size=1, max_size=4), a=st.integers(0, 99), b=st.integers(0, 99))
def test_release_candidates_order_in_every_spelling(rel: list[int], a: int, b: int) -> None:
    r = ".".join(map(str, rel))
    for scheme in ("pep440", "semver"):
        for sp in (f"{r}rc{a}", f"{r}~rc.{a}", f"{r}-rc.{a}" if scheme == "semver" else f"{r}rc.{a}"):
            assert compare(scheme, sp, r) == -1  # a candidate precedes its release
            want = (a > b) - (a < b)
            assert compare(scheme, sp, f"{r}rc{b}") == want
