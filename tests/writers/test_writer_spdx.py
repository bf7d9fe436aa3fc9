"""SPDX output parses back with spdx-tools and validates without messages."""

from __future__ import annotations

import importlib.util
import io
import json
import sys
from pathlib import Path

import pytest
from spdx_tools.spdx.model import Document, RelationshipType, SpdxNoAssertion
from spdx_tools.spdx.parser.jsonlikedict.json_like_dict_parser import JsonLikeDictParser
from spdx_tools.spdx.parser.tagvalue.parser import Parser as TagValueParser
from spdx_tools.spdx.validation.document_validator import validate_full_spdx_document

from gpusbom.writers import WriterOptions, get_writer

_here = Path(__file__).parent
_spec = importlib.util.spec_from_file_location("gpusbom_tests_writers_helpers", _here / "helpers.py")
assert _spec and _spec.loader
helpers = sys.modules.get(_spec.name) or importlib.util.module_from_spec(_spec)
if _spec.name not in sys.modules:
    sys.modules[_spec.name] = helpers
    _spec.loader.exec_module(helpers)

MAKERS = ["make_result", "make_directory_result"]


def render(fmt: str, make: str = "make_result") -> str:
    buf = io.StringIO()
    get_writer(fmt).write(getattr(helpers, make)(), buf, WriterOptions())
    return buf.getvalue()


def parse(fmt: str, text: str) -> Document:
    if fmt == "spdx-json":
        return JsonLikeDictParser().parse(json.loads(text))
    return TagValueParser().parse(text)


@pytest.mark.parametrize("make", MAKERS)
@pytest.mark.parametrize("fmt", ["spdx-json", "spdx-tag-value"])
def test_parses_back_and_validates(fmt: str, make: str) -> None:
    doc = parse(fmt, render(fmt, make))
    assert validate_full_spdx_document(doc) == []
    result = getattr(helpers, make)()
    assert len(doc.packages) == len(result.components) + 1


@pytest.fixture(scope="module", params=["spdx-json", "spdx-tag-value"])
def doc(request: pytest.FixtureRequest) -> Document:
    return parse(request.param, render(request.param))


def _root(doc: Document):
    (sid,) = [r.related_spdx_element_id for r in doc.relationships
              if r.spdx_element_id == "SPDXRef-DOCUMENT"]
    (p,) = [p for p in doc.packages if p.spdx_id == sid]
    return p


def _pkg(doc: Document, name: str):
    (p,) = [p for p in doc.packages if p.name == name and p is not _root(doc)]
    return p


def test_document_header(doc: Document) -> None:
    ci = doc.creation_info
    assert ci.spdx_version == "SPDX-2.3"
    # built from the image identity: NAME@MANIFEST-DIGEST, a namespace under image/NAME
    assert ci.name == "cuda@" + helpers.MANIFEST_DIGEST
    assert ci.document_namespace.startswith("https://gpusbom.dev/spdx/image/cuda-")
    assert ci.created.isoformat().startswith("2024-05-01T00:00:00")
    assert [c.name for c in ci.creators] == ["gpusbom-0.1.0"]
    assert "gpusbom:unknown:1=python: METADATA is not valid UTF-8" in ci.document_comment
    assert "gpusbom:unknown:2=rpm: rpmdb not found; skipped" in ci.document_comment


def test_root_and_relationships(doc: Document) -> None:
    root = _root(doc)
    assert root.name == "cuda"
    assert root.primary_package_purpose.name == "CONTAINER"
    assert root.version == helpers.MANIFEST_DIGEST
    assert [(r.category.name, r.locator) for r in root.external_references] == [(
        "PACKAGE_MANAGER", "pkg:oci/cuda@sha256:" + "9e" * 32
        + "?arch=amd64&repository_url=nvcr.io/nvidia/cuda&tag=12.4.1-runtime-debian12")]
    assert f"gpusbom:image:digest={helpers.MANIFEST_DIGEST}" in root.comment
    assert f"gpusbom:image:layer:1={helpers.CUDA_LAYER}" in root.comment
    assert "gpusbom:image:env:CUDA_VERSION=12.4.1" in root.comment
    rels = {(r.spdx_element_id, r.relationship_type, r.related_spdx_element_id)
            for r in doc.relationships}
    assert ("SPDXRef-DOCUMENT", RelationshipType.DESCRIBES, root.spdx_id) in rels
    for p in doc.packages:
        if p is not root:
            assert (root.spdx_id, RelationshipType.CONTAINS, p.spdx_id) in rels
    bash, libc = _pkg(doc, "bash"), _pkg(doc, "libc6")
    assert (bash.spdx_id, RelationshipType.DEPENDS_ON, libc.spdx_id) in rels
    wheel, cudart = _pkg(doc, "nvidia-cuda-runtime-cu12"), _pkg(doc, "cuda-cudart-12-4")
    assert (wheel.spdx_id, RelationshipType.CONTAINS, cudart.spdx_id) in rels
    ids = [p.spdx_id for p in doc.packages]
    assert len(ids) == len(set(ids))


def test_packages(doc: Document) -> None:
    libc = _pkg(doc, "libc6")
    assert libc.version == "2.36-9+deb12u10"
    assert libc.supplier.name == "GNU Libc Maintainers"
    assert libc.supplier.email == "debian-glibc@lists.debian.org"
    assert libc.files_analyzed is False
    assert isinstance(libc.download_location, SpdxNoAssertion)
    assert isinstance(libc.license_concluded, SpdxNoAssertion)
    assert str(libc.license_declared) == "LGPL-2.1-or-later AND GPL-2.0-only"
    assert [(r.reference_type, r.locator) for r in libc.external_references] == [
        ("purl", "pkg:deb/debian/libc6@2.36-9%2Bdeb12u10?arch=amd64&distro=debian-12")]
    assert f"layer={helpers.BASE_LAYER}" in libc.comment
    assert "path=/var/lib/dpkg/status" in libc.comment
    assert libc.primary_package_purpose.name == "LIBRARY"

    cudart = _pkg(doc, "cuda-cudart-12-4")
    assert ("cpe23Type", "cpe:2.3:a:nvidia:cuda_toolkit:12.4.127:*:*:*:*:*:*:*") in [
        (r.reference_type, r.locator) for r in cudart.external_references]
    # no SPDX id: a LicenseRef- (in the extracted licensing info), the text in the comment
    assert str(cudart.license_declared) == "LicenseRef-NVIDIA-Software-License-Agreement"
    assert "NVIDIA Software License Agreement" in cudart.license_comment
    assert _pkg(doc, "cuda").primary_package_purpose.name == "FRAMEWORK"

    wheel = _pkg(doc, "nvidia-cuda-runtime-cu12")
    assert str(wheel.license_declared) == "LicenseRef-NVIDIA-Proprietary"
    assert "LicenseRef-NVIDIA-Proprietary" in [e.license_id for e in doc.extracted_licensing_info]

    nvml = _pkg(doc, "libnvidia-ml.so")
    assert nvml.version is None
    assert nvml.external_references == []
    assert "gpusbom:invalid-purl=not a purl at all" in nvml.comment
    assert str(nvml.license_declared) == (
        "(Apache-2.0 OR MIT) AND LicenseRef-Proprietary-confidential-see-EULA")


def test_json_and_tag_value_agree() -> None:
    a = parse("spdx-json", render("spdx-json"))
    b = parse("spdx-tag-value", render("spdx-tag-value"))
    assert a.creation_info.document_namespace == b.creation_info.document_namespace
    assert sorted(p.spdx_id for p in a.packages) == sorted(p.spdx_id for p in b.packages)
    key = lambda r: (r.spdx_element_id, r.relationship_type.name, r.related_spdx_element_id)
    assert sorted(map(key, a.relationships)) == sorted(map(key, b.relationships))


def test_spdx_ids_are_unique_for_colliding_refs() -> None:
    from gpusbom.writers.spdx import build_document

    result = helpers.make_result()
    # two refs that sanitise to the same SPDXID
    result.components[0].bom_ref = "x:a+b"
    result.components[1].bom_ref = "x:a_b"
    result.relationships = []
    doc = build_document(result)
    ids = [p.spdx_id for p in doc.packages]
    assert len(ids) == len(set(ids))
    assert validate_full_spdx_document(doc) == []


@pytest.mark.parametrize("make", MAKERS)
def test_indexed_validation_gives_the_librarys_messages(make: str) -> None:
    """writers._spdx_validate checks in linear time what validate_full_spdx_document checks
    (quadratic): the same messages, valid documents and broken ones alike."""
    from spdx_tools.spdx.model import Relationship

    from gpusbom.writers import _spdx_impl
    from gpusbom.writers._spdx_validate import validate_document

    def both(doc: Document) -> tuple[list[str], list[str]]:
        return ([m.validation_message for m in validate_document(doc)],
                [m.validation_message for m in validate_full_spdx_document(doc)])

    doc = _spdx_impl.build_document(getattr(helpers, make)())
    ours, lib = both(doc)
    assert ours == lib == []
    # a relationship to an id that is not there, a duplicate id, no DESCRIBES
    doc.relationships.append(Relationship(doc.packages[0].spdx_id, RelationshipType.DEPENDS_ON,
                                          "SPDXRef-nowhere"))
    doc.packages.append(doc.packages[-1])
    ours, lib = both(doc)
    assert ours == lib and any("SPDXRef-nowhere" in m for m in ours) and any("unique" in m for m in ours)
    doc.relationships = [r for r in doc.relationships if r.relationship_type != RelationshipType.DESCRIBES]
    ours, lib = both(doc)
    assert ours == lib and any("DESCRIBES" in m for m in ours)
