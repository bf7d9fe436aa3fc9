"""CycloneDX output validates against the official schemas and carries what we found."""

from __future__ import annotations

import importlib.util
import io
import json
import sys
import warnings
from pathlib import Path
from uuid import UUID

import pytest
from cyclonedx.schema import OutputFormat, SchemaVersion
from cyclonedx.validation import make_schemabased_validator
from cyclonedx.validation.json import JsonStrictValidator
from lxml import etree

from gpusbom.errors import UsageError
from gpusbom.identity import target_identity
from gpusbom.writers import WriterOptions, get_writer

_here = Path(__file__).parent
_spec = importlib.util.spec_from_file_location("gpusbom_tests_writers_helpers", _here / "helpers.py")
assert _spec and _spec.loader
helpers = sys.modules.get(_spec.name) or importlib.util.module_from_spec(_spec)
if _spec.name not in sys.modules:
    sys.modules[_spec.name] = helpers
    _spec.loader.exec_module(helpers)

VERSIONS = {"1.6": SchemaVersion.V1_6, "1.5": SchemaVersion.V1_5}
MAKERS = ["make_result", "make_directory_result"]
NS = {"1.6": "http://cyclonedx.org/schema/bom/1.6", "1.5": "http://cyclonedx.org/schema/bom/1.5"}


def render(fmt: str, version: str, make: str = "make_result") -> str:
    buf = io.StringIO()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the writer must not leak library warnings
        get_writer(fmt).write(getattr(helpers, make)(), buf, WriterOptions(cyclonedx_version=version))
    return buf.getvalue()


@pytest.mark.parametrize("make", MAKERS)
@pytest.mark.parametrize("version", sorted(VERSIONS))
def test_json_validates(version: str, make: str) -> None:
    text = render("cyclonedx-json", version, make)
    errors = JsonStrictValidator(VERSIONS[version]).validate_str(text, all_errors=True)
    assert errors is None, [str(e) for e in errors]
    errors = make_schemabased_validator(OutputFormat.JSON, VERSIONS[version]).validate_str(text)
    assert errors is None, str(errors)
    assert json.loads(text)["specVersion"] == version


@pytest.mark.parametrize("make", MAKERS)
@pytest.mark.parametrize("version", sorted(VERSIONS))
def test_xml_validates(version: str, make: str) -> None:
    text = render("cyclonedx-xml", version, make)
    errors = make_schemabased_validator(OutputFormat.XML, VERSIONS[version]).validate_str(
        text, all_errors=True)
    assert errors is None, [str(e) for e in errors]
    root = etree.fromstring(text.encode())
    assert root.tag == f"{{{NS[version]}}}bom"


def test_bad_version_is_usage_error() -> None:
    with pytest.raises(UsageError):
        get_writer("cyclonedx-json").write(helpers.make_result(), io.StringIO(),
                                           WriterOptions(cyclonedx_version="1.2"))


@pytest.fixture(scope="module")
def bom() -> dict:
    return json.loads(render("cyclonedx-json", "1.6"))


def _props(obj: dict) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for p in obj.get("properties", []):
        out.setdefault(p["name"], []).append(p.get("value", ""))
    return out


def _comp(bom: dict, name: str) -> dict:
    (c,) = [c for c in bom["components"] if c["name"] == name]
    return c


def test_header_is_deterministic(bom: dict) -> None:
    UUID(bom["serialNumber"].removeprefix("urn:uuid:"))
    assert bom["metadata"]["timestamp"].startswith("2024-05-01T00:00:00")
    tools = bom["metadata"]["tools"]["components"]
    assert [(t["name"], t["version"]) for t in tools] == [("gpusbom", "0.1.0")]


def test_metadata_component_is_the_image(bom: dict) -> None:
    mc = bom["metadata"]["component"]
    assert mc["type"] == "container"
    # purl-spec oci: last repository segment, manifest digest, repository_url with the host
    assert mc["name"] == "cuda"
    assert mc["version"] == helpers.MANIFEST_DIGEST
    # the root is anchored to the image ID, the digest every source form of an image shares
    assert mc["bom-ref"] == "target:" + helpers.IMAGE_ID
    assert mc["purl"] == (
        "pkg:oci/cuda@sha256:" + "9e" * 32
        + "?arch=amd64&repository_url=nvcr.io/nvidia/cuda&tag=12.4.1-runtime-debian12"
    )
    p = _props(mc)
    assert p["gpusbom:image:tag"] == ["12.4.1-runtime-debian12"]
    assert p["gpusbom:image:repository"] == ["nvcr.io/nvidia/cuda"]
    assert p["gpusbom:image:version-digest"] == ["manifest"]
    assert p["gpusbom:image:digest"] == [helpers.MANIFEST_DIGEST]
    assert p["gpusbom:image:id"] == [helpers.IMAGE_ID]
    assert p["gpusbom:image:platform"] == ["linux/amd64"]
    assert p["gpusbom:image:layer:0"] == [helpers.BASE_LAYER]
    assert p["gpusbom:image:layer:2"] == [helpers.PIP_LAYER]
    assert p["gpusbom:image:env:CUDA_VERSION"] == ["12.4.1"]
    assert p["gpusbom:image:label:maintainer"] == ["NVIDIA CORPORATION <cudatools@nvidia.com>"]


def test_unknowns_are_not_lost(bom: dict) -> None:
    p = _props(bom["metadata"])
    assert p["gpusbom:complete"] == ["false"]
    # numbered in a stable order (collector, path, reason), not scan order
    assert p["gpusbom:unknown:1"][0].startswith("python: METADATA is not valid UTF-8 (/usr/lib/")
    assert p["gpusbom:unknown:2"] == ["rpm: rpmdb not found; skipped"]


def test_components(bom: dict) -> None:
    result = helpers.make_result()
    assert len(bom["components"]) == len(result.components)
    assert {c["bom-ref"] for c in bom["components"]} == {c.bom_ref for c in result.components}
    libc = _comp(bom, "libc6")
    assert libc["purl"] == "pkg:deb/debian/libc6@2.36-9%2Bdeb12u10?arch=amd64&distro=debian-12"
    assert libc["supplier"]["name"] == "GNU Libc Maintainers"
    # several declared licences: one SPDX expression, all of them applying
    assert libc["licenses"] == [{"expression": "LGPL-2.1-or-later AND GPL-2.0-only"}]
    p = _props(libc)
    assert p["gpusbom:collector"] == ["dpkg"]
    assert p["gpusbom:layer"] == [helpers.BASE_LAYER]
    assert p["gpusbom:path"] == ["/var/lib/dpkg/status"]
    assert p["gpusbom:deb:source"] == ["glibc"]

    gcc = _comp(bom, "libgcc-s1")
    assert gcc["licenses"] == [{"expression": "GPL-3.0-or-later WITH GCC-exception-3.1"}]

    cudart = _comp(bom, "cuda-cudart-12-4")
    assert cudart["cpe"] == "cpe:2.3:a:nvidia:cuda_toolkit:12.4.127:*:*:*:*:*:*:*"
    # a name with no SPDX id: a LicenseRef- expression, never a free name
    assert cudart["licenses"] == [{"expression": "LicenseRef-NVIDIA-Software-License-Agreement"}]
    assert cudart["description"] == "CUDA Runtime native Libraries"
    assert _comp(bom, "nvidia-cuda-runtime-cu12")["purl"] == "pkg:pypi/nvidia-cuda-runtime-cu12@12.4.127"
    # the pypi wheel contains the runtime: recorded on the contained component
    assert _props(cudart)["gpusbom:contained-by"] == [
        _comp(bom, "nvidia-cuda-runtime-cu12")["bom-ref"]]


def test_unparsable_purl_and_mixed_licenses(bom: dict) -> None:
    nvml = _comp(bom, "libnvidia-ml.so")
    assert "purl" not in nvml
    assert "version" not in nvml
    assert nvml["type"] == "device-driver"
    assert _props(nvml)["gpusbom:purl:unparsable"] == ["not a purl at all"]
    # an expression and a free name: one expression, the name as a LicenseRef-
    assert nvml["licenses"] == [{"expression": (
        "(Apache-2.0 OR MIT) AND LicenseRef-Proprietary-confidential-see-EULA")}]
    assert {i["field"] for i in nvml["evidence"]["identity"]} == {"name"}


def test_evidence_16(bom: dict) -> None:
    ev = _comp(bom, "cuda-cudart-12-4")["evidence"]
    fields = {i["field"]: i for i in ev["identity"]}
    assert set(fields) == {"purl", "name", "version"}
    techniques = {m["technique"] for m in fields["purl"]["methods"]}
    assert techniques == {"manifest-analysis", "filename"}
    assert fields["purl"]["confidence"] == 1
    locs = {o["location"]: o.get("additionalContext", "") for o in ev["occurrences"]}
    assert "/usr/local/cuda-12.4/version.json" in locs
    assert f"layer={helpers.CUDA_LAYER}" in locs["/var/lib/dpkg/status"]
    # env evidence has no path: identity only, no occurrence
    cuda_ev = _comp(bom, "cuda")["evidence"]
    assert "occurrences" not in cuda_ev
    assert {m["technique"] for i in cuda_ev["identity"] for m in i["methods"]} == {"other"}


def test_evidence_15() -> None:
    bom = json.loads(render("cyclonedx-json", "1.5"))
    ev = _comp(bom, "cuda-cudart-12-4")["evidence"]
    assert isinstance(ev["identity"], dict) and ev["identity"]["field"] == "purl"
    assert all("additionalContext" not in o for o in ev["occurrences"])
    assert len({o["location"] for o in ev["occurrences"]}) == len(ev["occurrences"])


def test_dependencies_reference_existing_refs(bom: dict) -> None:
    refs = {c["bom-ref"] for c in bom["components"]} | {bom["metadata"]["component"]["bom-ref"]}
    deps = {d["ref"]: d.get("dependsOn", []) for d in bom["dependencies"]}
    assert set(deps) == refs
    for ref, on in deps.items():
        assert set(on) <= refs, ref
    # every component is reachable from the root
    seen: set[str] = set()
    stack = [bom["metadata"]["component"]["bom-ref"]]
    while stack:
        r = stack.pop()
        if r not in seen:
            seen.add(r)
            stack.extend(deps[r])
    assert seen == refs
    libc = _comp(bom, "libc6")["bom-ref"]
    assert libc in deps[_comp(bom, "bash")["bom-ref"]]
    assert libc not in deps[bom["metadata"]["component"]["bom-ref"]]  # not top-level


def test_dependency_cycle_stays_reachable() -> None:
    from gpusbom.model import Relationship
    from gpusbom.writers.cyclonedx import build_bom

    result = helpers.make_result()
    a, b = result.components[0], result.components[1]
    result.relationships = [Relationship(a.bom_ref, "depends-on", b.bom_ref),
                            Relationship(b.bom_ref, "depends-on", a.bom_ref),
                            Relationship(a.bom_ref, "depends-on", "missing#ref")]
    bom = build_bom(result, SchemaVersion.V1_6)
    root = next(d for d in bom.dependencies if d.ref.value == target_identity(result.target).root_ref)
    assert {d.ref.value for d in root.dependencies} & {a.bom_ref, b.bom_ref}
    assert any(p.name == "gpusbom:dangling-relationship:1" for p in bom.metadata.properties)


def test_xml_16_has_evidence_context() -> None:
    root = etree.fromstring(render("cyclonedx-xml", "1.6").encode())
    ns = {"c": NS["1.6"]}
    ctx = root.xpath("//c:component/c:evidence/c:occurrences/c:occurrence/c:additionalContext/text()",
                     namespaces=ns)
    assert any("collector=cuda; method=soname" in t for t in ctx)
