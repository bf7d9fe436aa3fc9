"""Every component says which method decided it and how sure that is (#38): exact
(SHA-256 / build-id), high/medium (package records, version files, getters, rodata strings),
low (sonames, headers, env, presence). In JSON and SPDX as properties, in CycloneDX as
``evidence.identity`` (its confidence is the deciding method's level; the deciding method
comes first in ``methods``).

Checked on unit cases and over the whole test corpus (the golden scans, see
test_releases.py for why the golden outputs stand for the corpus).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from golden_files import goldens, read

from gpusbom.collectors.strategies import P_DIR, P_ENV, P_FILE, P_FINGERPRINT, P_HEADER, P_PKG, P_VJSON
from gpusbom.identification import CONFIDENCE_SCORE, LEVELS, annotate, decided_by
from gpusbom.model import Component, Evidence, Product

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "data"


@pytest.mark.parametrize("source, prio, want", [
    ("fingerprint sha256", P_FINGERPRINT, ("sha256", "exact")),
    ("fingerprint build-id", P_FINGERPRINT, ("build-id", "exact")),
    ("version.json cuda", P_VJSON, ("version-file", "high")),
    ("wheel nvidia-cublas-cu12", P_PKG, ("package-metadata", "high")),
    ("elf-symbol cublaslt-getter high", P_FILE, ("elf-symbol", "high")),
    ("elf-symbol cudart-getter medium", P_FILE, ("elf-symbol", "medium")),
    ("elf-rodata cutlass-static-rodata low", P_FILE, ("elf-rodata", "low")),
    ("soname libcudart.so.12.4.127", P_FILE, ("soname", "low")),
    ("cudnn_version.h", P_FILE, ("header", "low")),
    ("env CUDA_VERSION", P_ENV, ("env", "low")),
    ("sibling libcublasLt (same release)", P_HEADER, ("sibling", "medium")),
    ("cuda.h", P_HEADER, ("header", "low")),
    ("directory /usr/local/cuda-12.4", P_DIR, ("filename", "low")),
])
def test_decided_by(source: str, prio: int, want: tuple[str, str]) -> None:
    assert decided_by(source, prio) == want


def _ev(method: str, path: str = "/x") -> Evidence:
    return Evidence("t", method, path, None, None)


def test_annotate_packages_files_and_presence() -> None:
    deb = Component("libcudnn9-cuda-13", "9.14.0.64-1", ecosystem="deb",
                    evidence=[_ev("package-db"), _ev("header")],
                    properties={"product-identification": "cudnn@9.14.0: header (low)"},
                    products=[Product("cuda", "cudnn", "9.14.0")])
    soname = Component("cudart", "12.4.127", ecosystem="generic", evidence=[_ev("soname")])
    decided = Component("cudart", "12.4.127", ecosystem="generic",
                        evidence=[_ev("fingerprint-build-id"), _ev("soname")],
                        properties={"identification-method": "build-id",
                                    "identification-confidence": "exact"})
    presence = Component("cutlass", None, ecosystem="generic", evidence=[_ev("elf-rodata")])
    device = Component("NVIDIA H200", None, evidence=[_ev("device")])
    annotate([deb, soname, decided, presence, device])
    got = {c.name: (c.properties["identification-method"],
                    c.properties["identification-confidence"])
           for c in (deb, soname, decided, presence, device)}
    assert got == {"libcudnn9-cuda-13": ("package-db", "high"), "cudart": ("build-id", "exact"),
                   "cutlass": ("elf-rodata", "low"), "NVIDIA H200": ("device", "high")}
    assert (soname.properties["identification-method"],
            soname.properties["identification-confidence"]) == ("soname", "low")
    assert deb.properties["product-identification"] == "cudnn@9.14.0: header (low)"


def test_fusion_keeps_each_products_identification() -> None:
    from gpusbom.fusion import fuse

    pkg = Component("libcudnn9-cuda-13", "9.14.0.64-1", ecosystem="deb",
                    evidence=[_ev("package-db", "/var/lib/dpkg/status")])
    obs = Component("cudnn", "9.14.0", ecosystem="generic",
                    evidence=[_ev("header", "/usr/include/cudnn_version.h")],
                    properties={"stack": "cuda", "product": "cudnn",
                                "identification-method": "header",
                                "identification-confidence": "low"})
    [out] = fuse([pkg], [obs], lambda p: pkg if p.startswith("/usr/include") else None)
    assert out is pkg
    assert "identification-method" not in pkg.properties  # the package's own is annotate's
    assert pkg.properties["product-identification"] == "cudnn@9.14.0: header (low)"
    annotate([pkg])
    assert pkg.properties["identification-method"] == "package-db"


def _golden_json() -> list[Path]:
    return goldens("json")


def test_every_component_of_the_corpus_says_how_and_how_sure() -> None:
    n = 0
    for path in _golden_json():
        doc = json.loads(read(path))
        for c in doc.get("components", []):
            props = c.get("properties") or {}
            assert props.get("identification-method"), (path.parent.name, c["name"])
            assert props.get("identification-confidence") in LEVELS, (path.parent.name, c["name"])
            n += 1
    assert n > 500


def test_cyclonedx_identity_confidence_is_the_deciding_level() -> None:
    from decimal import Decimal

    n = 0
    for path in goldens("cdx.json"):
        doc = json.loads(read(path))
        for c in doc.get("components", []):
            props = {p["name"]: p["value"] for p in c.get("properties", [])}
            level = props.get("gpusbom:identification-confidence")
            ident = (c.get("evidence") or {}).get("identity")
            if not ident:
                continue
            assert level in LEVELS, (path.parent.name, c["name"])
            for i in ident if isinstance(ident, list) else [ident]:
                assert Decimal(str(i["confidence"])) == Decimal(CONFIDENCE_SCORE[level]), (
                    path.parent.name, c["name"], i["confidence"], level)
                assert i["methods"], (path.parent.name, c["name"])
            n += 1
    assert n > 500
