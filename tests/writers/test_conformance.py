"""Every SBOM output against its official schema, and the identity every writer shares.

Schemas: CycloneDX 1.5/1.6/1.7 JSON and XML (the ones cyclonedx-python-lib ships,
strict validators), SPDX 2.3 JSON (``schemas/spdx-2.3.schema.json``, from the
spdx/spdx-spec ``support/2.3`` branch; see ``schemas/README.md``).
"""

from __future__ import annotations

import importlib.util
import io
import json
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from cyclonedx.schema import OutputFormat, SchemaVersion
from cyclonedx.validation import make_schemabased_validator

from gpusbom.identity import image_identity, split_repository, target_identity
from gpusbom.model import (
    AdvisoryMatch,
    Component,
    Evidence,
    Finding,
    ScanResult,
    Target,
    ToolInfo,
)
from gpusbom.writers import WriterOptions, get_writer

_here = Path(__file__).parent
_spec = importlib.util.spec_from_file_location("gpusbom_tests_writers_helpers", _here / "helpers.py")
assert _spec and _spec.loader
helpers = sys.modules.get(_spec.name) or importlib.util.module_from_spec(_spec)
if _spec.name not in sys.modules:
    sys.modules[_spec.name] = helpers
    _spec.loader.exec_module(helpers)

SCHEMAS = _here / "schemas"
CDX_VERSIONS = {"1.5": SchemaVersion.V1_5, "1.6": SchemaVersion.V1_6, "1.7": SchemaVersion.V1_7}


def _host_result() -> ScanResult:
    c = Component(name="nvidia-driver", version="580.95.05", ecosystem="generic",
                  purl="pkg:generic/nvidia/nvidia-driver@580.95.05",
                  evidence=[Evidence("nvidia-driver", "version-file", "/proc/driver/nvidia/version")])
    c.assign_ref(set())
    return ScanResult(target=Target(kind="host", reference="host:/", source="host",
                                    name="gpu-node-1", host_id="0123456789abcdef",
                                    platform="linux/amd64"),
                      components=[c], tool=ToolInfo(version="0.1.0"),
                      timestamp="2024-05-01T00:00:00Z")


def _advisory_result() -> ScanResult:
    """One CVE on two components (two advisory findings), one more CVE on one."""
    r = helpers.make_result()
    a, b = r.components[0].bom_ref, r.components[1].bom_ref
    def adv(cve: str, status: str, version: str) -> AdvisoryMatch:
        return AdvisoryMatch(advisory="NVIDIA-5747", vulnerability=cve, status=status,
                             product="cuda-toolkit", installed_version=version,
                             fixed_version="12.8", score=7.8, score_type="CVSS_V3_1",
                             urls=("https://nvidia.custhelp.com/app/answers/detail/a_id/5747",))
    r.findings = [
        Finding(id="CVE-2025-0001", kind="advisory", severity="high", title="t1",
                components=(a,), advisory=adv("CVE-2025-0001", "affected", "12.4")),
        Finding(id="CVE-2025-0001", kind="advisory", severity="high", title="t1",
                components=(b,), advisory=adv("CVE-2025-0001", "review", "12.2")),
        Finding(id="CVE-2025-0002", kind="advisory", severity="high", title="t2",
                components=(a,), advisory=adv("CVE-2025-0002", "affected", "12.4")),
    ]
    return r


LOOSE_SO = "/opt/app/lib/libkernels.so"
LOOSE_SHA = "5d" * 32
DEB_SO = "/usr/lib/x86_64-linux-gnu/librocrand.so.1.1"
DEB_SHA = "e7" * 32


def _hashed_result() -> ScanResult:
    """A GPU binary found as a file of its own (it gets component hashes) and one owned by a
    deb (the file's digest stays on that file's evidence: it is not the package's)."""
    r = helpers.make_result()
    taken = {c.bom_ref for c in r.components}
    loose = Component(name="libkernels", version=None, ecosystem="generic",
                      properties={"cuda:sass": "sm_80,sm_90"},
                      evidence=[Evidence("gpu-binaries", "elf", LOOSE_SO, helpers.CUDA_LAYER,
                                         "GPU code", sha256=LOOSE_SHA)])
    deb = Component(name="librocrand1", version="5.3.3-4", ecosystem="deb",
                    purl="pkg:deb/debian/librocrand1@5.3.3-4?arch=amd64&distro=debian-12",
                    properties={"hip:gfx": "gfx90a:xnack-"},
                    evidence=[Evidence("dpkg", "package-db", "/var/lib/dpkg/status",
                                       helpers.BASE_LAYER, "Package: librocrand1"),
                              Evidence("gpu-binaries", "elf", DEB_SO, helpers.BASE_LAYER,
                                       "GPU code", sha256=DEB_SHA)])
    for c in (loose, deb):
        c.assign_ref(taken)
        r.components.append(c)
    return r


RESULTS = {
    "image": helpers.make_result,
    "directory": helpers.make_directory_result,
    "host": _host_result,
    "advisories": _advisory_result,
    "hashed": _hashed_result,
}


@pytest.mark.parametrize("version", sorted(CDX_VERSIONS))
def test_cyclonedx_hashes_only_on_a_component_that_is_one_file(version: str) -> None:
    doc = json.loads(render("cyclonedx-json", _hashed_result(),
                            WriterOptions(cyclonedx_version=version)))
    by_name = {c["name"]: c for c in doc["components"]}
    assert by_name["libkernels"]["hashes"] == [{"alg": "SHA-256", "content": LOOSE_SHA}]
    assert "hashes" not in by_name["librocrand1"]
    assert [c["name"] for c in doc["components"] if "hashes" in c] == ["libkernels"]
    props = [(p["name"], p["value"]) for p in by_name["librocrand1"]["properties"]]
    assert ("gpusbom:sha256", f"{DEB_SO}={DEB_SHA}") in props
    if version != "1.5":  # 1.5 occurrences have no additionalContext
        ctx = [o for o in by_name["librocrand1"]["evidence"]["occurrences"]
               if o["location"] == DEB_SO]
        assert len(ctx) == 1 and f"sha256={DEB_SHA}" in ctx[0]["additionalContext"]


def test_spdx_checksum_only_on_a_package_that_is_one_file() -> None:
    doc = json.loads(render("spdx-json", _hashed_result()))
    by_name = {p["name"]: p for p in doc["packages"]}
    loose = by_name["libkernels"]
    assert loose["checksums"] == [{"algorithm": "SHA256", "checksumValue": LOOSE_SHA}]
    assert loose["packageFileName"] == LOOSE_SO
    assert "checksums" not in by_name["librocrand1"]
    assert f"sha256={DEB_SHA}" in by_name["librocrand1"]["comment"]
    tv = render("spdx-tag-value", _hashed_result())
    assert f"PackageChecksum: SHA256: {LOOSE_SHA}" in tv


def render(fmt: str, result: ScanResult, options: WriterOptions | None = None) -> str:
    buf = io.StringIO()
    get_writer(fmt).write(result, buf, options or WriterOptions())
    return buf.getvalue()


@pytest.mark.parametrize("kind", sorted(RESULTS))
def test_spdx23_json_validates_against_the_official_schema(kind: str) -> None:
    schema = json.loads((SCHEMAS / "spdx-2.3.schema.json").read_text())
    doc = json.loads(render("spdx-json", RESULTS[kind]()))
    errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(doc), key=str)
    assert errors == [], errors[:3]
    cats = {r["referenceCategory"] for p in doc["packages"] for r in p.get("externalRefs", [])}
    assert "PACKAGE_MANAGER" not in cats
    if kind == "image":
        assert "PACKAGE-MANAGER" in cats


def test_the_schema_catches_the_old_category() -> None:
    """The test above can fail: the official schema rejects spdx-tools' enum spelling."""
    schema = json.loads((SCHEMAS / "spdx-2.3.schema.json").read_text())
    doc = json.loads(render("spdx-json", helpers.make_result()))
    doc["packages"][1]["externalRefs"][0]["referenceCategory"] = "PACKAGE_MANAGER"
    assert list(jsonschema.Draft7Validator(schema).iter_errors(doc))


@pytest.mark.parametrize("version", sorted(CDX_VERSIONS))
@pytest.mark.parametrize("fmt", ["cyclonedx-json", "cyclonedx-xml"])
@pytest.mark.parametrize("kind", sorted(RESULTS))
def test_cyclonedx_validates(kind: str, fmt: str, version: str) -> None:
    text = render(fmt, RESULTS[kind](), WriterOptions(cyclonedx_version=version))
    of = OutputFormat.JSON if fmt.endswith("json") else OutputFormat.XML
    errors = make_schemabased_validator(of, CDX_VERSIONS[version]).validate_str(text)
    assert errors is None, errors
    if of is OutputFormat.JSON:
        doc = json.loads(text)
        assert doc["specVersion"] == version
        # every dependency entry says what it depends on, an empty list for a leaf
        assert all(isinstance(d.get("dependsOn"), list) for d in doc["dependencies"])
    else:
        assert f"http://cyclonedx.org/schema/bom/{version}" in text


def test_one_vulnerability_per_cve_with_every_affected_component() -> None:
    r = _advisory_result()
    doc = json.loads(render("cyclonedx-json", r))
    vulns = {v["id"]: v for v in doc["vulnerabilities"]}
    assert sorted(vulns) == ["CVE-2025-0001", "CVE-2025-0002"]
    a, b = r.components[0].bom_ref, r.components[1].bom_ref
    v1 = vulns["CVE-2025-0001"]
    assert sorted(x["ref"] for x in v1["affects"]) == sorted([a, b])
    by_ref = {x["ref"]: x["versions"] for x in v1["affects"]}
    assert by_ref[a] == [{"version": "12.4", "status": "affected"}]
    assert by_ref[b] == [{"version": "12.2", "status": "unknown"}]
    # a version match is not an analysis: no analysis.state (the status is per affects)
    assert "analysis" not in v1
    assert [x["ref"] for x in vulns["CVE-2025-0002"]["affects"]] == [a]


def test_serial_is_unique_per_document_and_spec_version() -> None:
    r = helpers.make_result()
    serials = {json.loads(render("cyclonedx-json", r, WriterOptions(cyclonedx_version=v)))
               ["serialNumber"] for v in CDX_VERSIONS}
    assert len(serials) == 3
    again = json.loads(render("cyclonedx-json", helpers.make_result()))["serialNumber"]
    assert again in serials  # the same scan (same timestamp) is the same document


# ------------------------------------------------------------------ identity


def test_split_repository() -> None:
    assert split_repository("localhost:5000/a/b:tag") == ("localhost:5000", "a/b")
    assert split_repository("nvcr.io/nvidia/cuda@sha256:" + "0" * 64) == ("nvcr.io", "nvidia/cuda")
    assert split_repository("gpusbom-fixtures/demo:latest") == (None, "gpusbom-fixtures/demo")
    assert split_repository("debian") == (None, "debian")


CONFIG = "sha256:" + "c0" * 32
MANIFEST = "sha256:" + "ee" * 32


@pytest.mark.parametrize("target", [
    Target(kind="image", reference="localhost:5000/gpusbom-fixtures/demo:latest",
           source="registry", name="localhost:5000/gpusbom-fixtures/demo", tags=["latest"],
           manifest_digest=MANIFEST, image_id=CONFIG),
    Target(kind="image", reference="gpusbom-fixtures/demo:latest", source="docker",
           name="gpusbom-fixtures/demo", tags=["gpusbom-fixtures/demo:latest"], image_id=CONFIG),
    Target(kind="image", reference="docker-archive:/tmp/x/demo.docker.tar",
           source="docker-archive", name="gpusbom-fixtures/demo",
           tags=["gpusbom-fixtures/demo:latest"], image_id=CONFIG),
    Target(kind="image", reference="oci-archive:/tmp/x/demo.oci.tar", source="oci-archive",
           tags=["demo"], manifest_digest=MANIFEST, image_id=CONFIG),
    Target(kind="image", reference="oci:/tmp/x/oci", source="oci", tags=["demo"],
           manifest_digest=MANIFEST, image_id=CONFIG),
], ids=["registry", "docker", "docker-archive", "oci-archive", "oci"])
def test_image_identity_is_the_same_for_every_source_form(target: Target) -> None:
    ident = image_identity(target)
    assert ident.root_ref == "target:" + CONFIG
    assert ident.name == "demo"
    assert ident.purl is not None and ident.purl.startswith("pkg:oci/demo@sha256")
    assert "/tmp" not in ident.purl and "/tmp" not in ident.document_name
    if target.manifest_digest:
        assert ident.version == MANIFEST
    else:  # no manifest in a docker save archive / a locally built image: the image ID
        assert ident.version == CONFIG
        assert ("image:version-digest", "config") in ident.properties
    if target.source == "registry":
        assert "repository_url=localhost:5000/gpusbom-fixtures/demo" in ident.purl
    else:
        assert "repository_url" not in ident.purl


def test_an_unnamed_image_is_not_called_by_its_path() -> None:
    t = Target(kind="image", reference="oci:/srv/images/x", source="oci",
               manifest_digest=MANIFEST, image_id=CONFIG)
    ident = image_identity(t)
    assert ident.name == "image-" + "c0" * 6
    assert ident.root_ref == "target:" + CONFIG


def test_host_and_sbom_identities() -> None:
    host = target_identity(_host_result().target)
    assert host.root_ref == "target:host:gpu-node-1:0123456789abcdef"
    assert host.name == "gpu-node-1"
    sb = target_identity(Target(kind="image", reference="sbom:/tmp/a.json", source="sbom",
                                name="app", tags=["1.0"],
                                subject_purl="pkg:container/app@1.0"))
    assert sb.root_ref == "target:pkg:container/app@1.0"
    assert sb.purl == "pkg:container/app@1.0"
    assert "/tmp" not in sb.root_ref


def _metadata(doc: dict[str, Any]) -> dict[str, Any]:
    mc: dict[str, Any] = doc["metadata"]["component"]
    return mc


def test_host_root_in_cyclonedx_and_spdx() -> None:
    cdx = json.loads(render("cyclonedx-json", _host_result()))
    mc = _metadata(cdx)
    assert mc["bom-ref"] == "target:host:gpu-node-1:0123456789abcdef"
    assert mc["name"] == "gpu-node-1" and mc["type"] == "operating-system"
    spdx = json.loads(render("spdx-json", _host_result()))
    assert spdx["name"] == "gpu-node-1"
    assert spdx["documentNamespace"].startswith("https://gpusbom.dev/spdx/host/gpu-node-1-")


def test_product_cpes_from_the_catalog() -> None:
    from gpusbom.catalog import cpe23
    from gpusbom.identity import fill_product_cpes
    from gpusbom.model import Product

    assert cpe23("intel:oneapi_dpc++/c++_compiler", "2024.1") == (
        "cpe:2.3:a:intel:oneapi_dpc\\+\\+\\/c\\+\\+_compiler:2024.1:*:*:*:*:*:*:*")
    toolkit = Component(name="cuda-toolkit-12-4", version="12.4.1-1", ecosystem="deb",
                        purl="pkg:deb/ubuntu/cuda-toolkit-12-4@12.4.1-1",
                        products=[Product("cuda", "cuda-toolkit", "12.4.1")])
    # listed under the amdgpu driver for advisories, but its version is libdrm's
    libdrm = Component(name="libdrm-amdgpu1", version="2.4.125-1", ecosystem="deb",
                       purl="pkg:deb/ubuntu/libdrm-amdgpu1@2.4.125-1")
    cudart = Component(name="nvidia-cuda-runtime-cu12", version="12.4.127", ecosystem="pypi",
                       purl="pkg:pypi/nvidia-cuda-runtime-cu12@12.4.127",
                       products=[Product("cuda", "cudart", "12.4.127")])
    hip = Component(name="libamdhip64-5", version="5.2.3-8", ecosystem="deb",
                    products=[Product("rocm", "hip-runtime", "5.2.3")])
    unversioned = Component(name="libcuda.so", version=None,
                            products=[Product("nvidia-driver", "libcuda")])
    fill_product_cpes([toolkit, cudart, hip, unversioned, libdrm])
    assert libdrm.cpe is None
    # NVD's name, the product version (the deb revision dropped), not marked guessed
    assert toolkit.cpe == "cpe:2.3:a:nvidia:cuda_toolkit:12.4.1:*:*:*:*:*:*:*"
    assert "cpe:guessed" not in toolkit.properties
    assert cudart.cpe == "cpe:2.3:a:nvidia:cuda_runtime:12.4.127:*:*:*:*:*:*:*"
    assert cudart.properties["cpe:guessed"] == "true"
    assert hip.cpe == "cpe:2.3:a:amd:hip:5.2.3:*:*:*:*:*:*:*"
    assert unversioned.cpe is None  # a versionless CPE would match every CVE
