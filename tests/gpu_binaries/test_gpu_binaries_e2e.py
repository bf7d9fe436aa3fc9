"""End to end: the gpu-binaries collector on real fixture images; its targets land on the
owning packages after fusion."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from gpusbom.fusion import union_values
from gpusbom.scan import scan

SP = "/usr/local/lib/python3.11/site-packages"

NV_SASS = {
    "nvidia-nvjpeg-cu12": (
        f"{SP}/nvidia/nvjpeg/lib/libnvjpeg.so.12",
        "sm_50,sm_52,sm_60,sm_61,sm_70,sm_75,sm_80,sm_86,sm_89,sm_90,sm_100,sm_101,sm_103,"
        "sm_120,sm_121",
        "compute_121",
    ),
    "nvidia-nvjpeg": (
        f"{SP}/nvidia/cu13/lib/libnvjpeg.so.13",
        "sm_75,sm_80,sm_86,sm_89,sm_90,sm_100,sm_103,sm_110,sm_120,sm_121",
        "compute_121",
    ),
    "nvidia-curand-cu12": (
        f"{SP}/nvidia/curand/lib/libcurand.so.10",
        "sm_50,sm_60,sm_70,sm_75,sm_80,sm_86,sm_89,sm_90",
        "compute_90",
    ),
    "nvidia-nccl-cu12": (
        f"{SP}/nvidia/nccl/lib/libnccl.so.2",
        "sm_50,sm_60,sm_61,sm_70,sm_80,sm_90",
        "compute_90",
    ),
}


def _scan(name: str):  # type: ignore[no-untyped-def]
    from fixtures.build import ensure

    # a fixture that cannot be built is a failure of the test setup, never a skip
    return scan(f"oci:{ensure(name).oci_dir}")


def test_nvidia_wheels_targets_on_wheel_components() -> None:
    result = _scan("nvidia-wheels")
    with_sass = {c.name: c for c in result.components if "cuda:sass" in c.properties}
    assert set(with_sass) == set(NV_SASS)
    for name, (lib, sass, ptx) in NV_SASS.items():
        c = with_sass[name]
        assert c.ecosystem == "pypi"
        assert c.properties["cuda:sass"] == sass
        assert c.properties["cuda:ptx"] == ptx
        assert c.stack in (None, "cuda")
        ev = [e for e in c.evidence if e.collector == "gpu-binaries"]
        assert [(e.method, e.path) for e in ev] == [("elf", lib)]
    # the binary facts do not rename the product of a package
    assert with_sass["nvidia-nccl-cu12"].properties.get("product") in (None, "nccl")
    # nothing stand-alone is left over from gpu-binaries
    assert not [
        c for c in result.components
        if c.ecosystem == "generic" and any(e.collector == "gpu-binaries" for e in c.evidence)
    ]  # fmt: skip
    assert not [u for u in result.unknowns if u.collector == "gpu-binaries"]


def test_rocm_rocrand_gfx_on_the_deb() -> None:
    result = _scan("rocm")
    hits = [c for c in result.components if "hip:gfx" in c.properties]
    assert [(c.name, c.version, c.ecosystem) for c in hits] == [("librocrand1", "5.3.3-4", "deb")]
    assert hits[0].properties["hip:gfx"] == (
        "gfx1030,gfx803,gfx900:xnack-,gfx906:xnack-,gfx908:xnack-,gfx90a:xnack+,gfx90a:xnack-"
    )
    assert "host" not in hits[0].properties["hip:targets"]
    assert [e.path for e in hits[0].evidence if e.collector == "gpu-binaries"] == [
        "/usr/lib/x86_64-linux-gnu/librocrand.so.1.1"
    ]


def test_union_of_targets_from_several_files() -> None:
    assert union_values("sm_90,sm_100", "sm_80,sm_90a,sm_90") == "sm_80,sm_90,sm_90a,sm_100"
    assert union_values("8.8", "8.10,8.4") == "8.4,8.8,8.10"


def _blob(oci_dir: Path, digest: str) -> Path:
    alg, _, hexd = digest.partition(":")
    return oci_dir / "blobs" / alg / hexd


def _manifest(oci_dir: Path) -> dict[str, Any]:
    index = json.loads((oci_dir / "index.json").read_text())
    return json.loads(_blob(oci_dir, index["manifests"][0]["digest"]).read_text())  # type: ignore[no-any-return]


def _file_sha256_from_layers(oci_dir: Path, path: str) -> str:
    """The SHA-256 of ``path`` in the image, computed here from the layer tars themselves
    (tarfile, the last layer that holds the path wins): independent of gpusbom's reader."""
    manifest = _manifest(oci_dir)
    want = {path.lstrip("/"), "./" + path.lstrip("/")}
    found: str | None = None
    for layer in manifest["layers"]:
        with tarfile.open(_blob(oci_dir, layer["digest"]), "r:*") as tar:
            for m in tar:
                if m.name in want and m.isfile():
                    f = tar.extractfile(m)
                    assert f is not None
                    h = hashlib.sha256()
                    while chunk := f.read(1 << 20):
                        h.update(chunk)
                    found = h.hexdigest()
    assert found is not None, f"{path} not in {oci_dir}"
    return found


@pytest.mark.parametrize(
    ("image", "component", "path"),
    [
        ("nvidia-wheels", "nvidia-nvjpeg-cu12", NV_SASS["nvidia-nvjpeg-cu12"][0]),
        ("nvidia-wheels", "nvidia-nccl-cu12", NV_SASS["nvidia-nccl-cu12"][0]),
        ("rocm", "librocrand1", "/usr/lib/x86_64-linux-gnu/librocrand.so.1.1"),
    ],
)
def test_gpu_binary_sha256_is_the_files(image: str, component: str, path: str) -> None:
    """The digest hashed while the layer streamed is the file's, on its evidence and in the
    CycloneDX / SPDX output; a package (wheel, deb) gets no component hash of one file."""
    from fixtures.build import ensure
    from gpusbom.writers import WriterOptions, get_writer

    oci_dir = Path(ensure(image).oci_dir)
    expected = _file_sha256_from_layers(oci_dir, path)
    result = scan(f"oci:{oci_dir}")
    comp = next(c for c in result.components if c.name == component)
    ev = [e for e in comp.evidence if e.collector == "gpu-binaries"]
    assert [(e.path, e.sha256) for e in ev] == [(path, expected)]
    # every binary with device code carries one, nothing else does
    for c in result.components:
        for e in c.evidence:
            assert (e.sha256 is not None) == (e.collector == "gpu-binaries"), (c.name, e)
    buf = io.StringIO()
    get_writer("cyclonedx-json").write(result, buf, WriterOptions())
    cdx = {c["name"]: c for c in json.loads(buf.getvalue())["components"]}[component]
    assert "hashes" not in cdx
    occ = [o for o in cdx["evidence"]["occurrences"] if o["location"] == path]
    assert any(f"sha256={expected}" in o.get("additionalContext", "") for o in occ)
    buf = io.StringIO()
    get_writer("spdx-json").write(result, buf, WriterOptions())
    pkg = next(p for p in json.loads(buf.getvalue())["packages"] if p["name"] == component)
    assert "checksums" not in pkg and f"sha256={expected}" in pkg["comment"]


def test_wheel_record_declares_the_same_digest() -> None:
    """The nvjpeg wheel's RECORD (the package-declared digest, urlsafe base64 SHA-256)
    agrees with the digest computed from the layer stream."""
    from fixtures.build import ensure

    oci_dir = Path(ensure("nvidia-wheels").oci_dir)
    result = scan(f"oci:{oci_dir}")
    lib = NV_SASS["nvidia-nvjpeg-cu12"][0]
    comp = next(c for c in result.components if c.name == "nvidia-nvjpeg-cu12")
    (ours,) = [e.sha256 for e in comp.evidence if e.collector == "gpu-binaries"]
    assert ours is not None
    rel = lib.removeprefix(SP + "/") + ","
    declared = []
    for layer in _manifest(oci_dir)["layers"]:
        with tarfile.open(_blob(oci_dir, layer["digest"]), "r:*") as tar:
            for m in tar:
                if m.isfile() and m.name.endswith(".dist-info/RECORD"):
                    f = tar.extractfile(m)
                    assert f is not None
                    for line in f.read().decode().splitlines():
                        if line.startswith(rel):
                            declared.append(line[len(rel):].rsplit(",", 1)[0])
    b64 = base64.urlsafe_b64encode(bytes.fromhex(ours)).rstrip(b"=").decode()
    assert declared == ["sha256=" + b64]
