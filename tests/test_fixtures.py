"""The fixture images: pinned inputs, deterministic builds, loadable by Docker."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from fixtures import build as fxbuild  # repo root is on sys.path via tests/conftest.py
from fixtures.debpkg import read_deb
from fixtures.fetch import (
    PACKAGES_FILE,
    Pin,
    PinError,
    apt_base_uris,
    cache_root,
    fetch,
    load_pins,
)
from fixtures.recipes import LARGE, elf_sections

NAMES = sorted(fxbuild.RECIPES)
# Built twice by the determinism test and loaded into Docker; the LARGE ones (hundreds of
# MB each) are only built once, by test_large_gpu_image_contents.
SMALL_NAMES = [n for n in NAMES if n not in LARGE]
# ids of the LARGE ones end in "-large": `-k "not large"` skips building them at all.
ALL_PARAMS = [pytest.param(n, id=f"{n}-large" if n in LARGE else n) for n in NAMES]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _digests(p: fxbuild.FixturePaths) -> dict[str, str]:
    out = {"oci-archive": _sha256(p.oci_archive), "docker-archive": _sha256(p.docker_archive)}
    for blob in sorted((p.oci_dir / "blobs" / "sha256").iterdir()):
        out["blob:" + blob.name] = _sha256(blob)
    out["index.json"] = _sha256(p.oci_dir / "index.json")
    return out


def _layer_tars(p: fxbuild.FixturePaths) -> list[tarfile.TarFile]:
    index = json.loads((p.oci_dir / "index.json").read_text())
    desc = index["manifests"][0]
    blobs = p.oci_dir / "blobs" / "sha256"
    manifest = json.loads((blobs / desc["digest"].split(":")[1]).read_text())
    return [
        tarfile.open(fileobj=io.BytesIO((blobs / la["digest"].split(":")[1]).read_bytes()))
        for la in manifest["layers"]
    ]


# --------------------------------------------------------------------------- pins


def test_pins_are_well_formed() -> None:
    pins = load_pins()
    assert pins
    for (kind, name, version), pin in pins.items():
        assert re.fullmatch(r"[0-9a-f]{64}", pin.sha256), pin
        assert pin.size > 0
        assert "://" not in pin.path, pin  # no download host in the pins
        if kind == "deb":
            assert pin.path.startswith("pool/"), pin.path  # archive-relative, as apt prints it
            assert pin.arch, pin
            upstream = version.split(":", 1)[-1]  # the epoch is not in file names
            assert pin.filename.startswith(f"{name}_{upstream}_"), pin.filename
            assert pin.filename.endswith(f"_{pin.arch}.deb")
        else:
            assert pin.path == pin.filename
            norm = re.sub(r"[-_.]+", "_", name).lower()
            assert pin.filename.lower().startswith(f"{norm}-{version}-"), pin.filename
            assert pin.filename.endswith(".whl")


def test_pin_file_names_no_host() -> None:
    text = PACKAGES_FILE.read_text()
    assert not re.search(r"^\s*url\s*=", text, re.MULTILINE)
    assert not re.search(r"[a-z]+://", text)


def test_pin_mismatch_is_rejected(tmp_path: Path) -> None:
    mirror = tmp_path / "mirror"
    rel = "pool/main/p/pkg/pkg_1.0_all.deb"
    src = mirror / rel
    src.parent.mkdir(parents=True)
    src.write_bytes(b"not the pinned bytes")
    good = hashlib.sha256(src.read_bytes()).hexdigest()
    size = src.stat().st_size
    empty = tmp_path / "empty-mirror"  # has no such file: the next base URI is tried
    empty.mkdir()
    uris = [empty.as_uri(), mirror.as_uri() + "/"]

    ok = fetch(
        Pin("deb", "pkg", "1.0", rel, good, size, "all"), cache=tmp_path / "c1", base_uris=uris
    )
    assert ok.read_bytes() == b"not the pinned bytes"
    assert ok.name == src.name

    with pytest.raises(PinError, match="does not match the pin") as err:
        fetch(
            Pin("deb", "pkg", "1.0", rel, "0" * 64, size, "all"),
            cache=tmp_path / "c2",
            base_uris=uris,
        )
    assert "pkg 1.0" in str(err.value)
    assert empty.as_uri() in str(err.value) and mirror.as_uri() in str(err.value)
    assert not (tmp_path / "c2" / "downloads" / src.name).exists()
    assert not list((tmp_path / "c2" / "downloads").iterdir())  # no partial files left

    # A cached file that was tampered with is replaced by a fresh, verified download.
    cached = tmp_path / "c1" / "downloads" / src.name
    cached.write_bytes(b"tampered!!!!!!!!!!!!")
    again = fetch(
        Pin("deb", "pkg", "1.0", rel, good, size, "all"), cache=tmp_path / "c1", base_uris=uris
    )
    assert again.read_bytes() == b"not the pinned bytes"


def test_apt_base_uris_from_apt_config(tmp_path: Path) -> None:
    etc = tmp_path / "apt"
    (etc / "sources.list.d").mkdir(parents=True)
    (etc / "sources.list").write_text(
        "# a comment\n"
        "deb http://mirror.example/debian bookworm main\n"
        "deb-src http://src.example/debian bookworm main\n"
        "deb [arch=amd64 signed-by=/k.gpg] http://opts.example/debian/ bookworm main # x\n"
    )
    (etc / "sources.list.d" / "a.sources").write_text(
        "Types: deb\n"
        "# URIs: http://commented.example/\n"
        "URIs: http://mirror.example/debian http://one.example/debian\n"
        "Suites: bookworm\nComponents: main\n"
        "\n"
        "Types: deb-src\nURIs: http://src-only.example/debian\nSuites: bookworm\n"
        "\n"
        "Types: deb\nEnabled: no\nURIs: http://disabled.example/debian\nSuites: bookworm\n"
        "\n"
        "Types: deb deb-src\nURIs: http://security.example/debian-security\n"
        "Suites: bookworm-security\nComponents: main\n"
    )
    (etc / "sources.list.d" / "b.list").write_text("deb file:/srv/local-mirror ./\n")
    (etc / "sources.list.d" / "c.list.disabled").write_text("deb http://ignored.example/ x\n")
    assert apt_base_uris(etc) == [
        "http://mirror.example/debian",
        "http://opts.example/debian",
        "http://one.example/debian",
        "http://security.example/debian-security",
        "file:/srv/local-mirror",
    ]
    assert apt_base_uris(tmp_path / "no-apt-here") == []


@pytest.mark.slow
def test_every_pin_downloads_and_verifies() -> None:
    for pin in load_pins().values():
        path = fetch(pin)  # raises PinError on any mismatch
        assert _sha256(path) == pin.sha256
        assert path.stat().st_size == pin.size


@pytest.mark.slow
def test_dpkg_status_entry_matches_real_dpkg() -> None:
    """Where the build host has one of the pinned packages installed (same version), the
    status entry we write must be byte-identical to the one dpkg wrote."""
    status = Path("/var/lib/dpkg/status")
    if not status.is_file():
        pytest.skip("no dpkg database on this host")
    real: dict[tuple[str, str, str], str] = {}
    for entry in status.read_text(errors="replace").split("\n\n"):
        fields = dict(re.findall(r"^(Package|Version|Architecture): (.*)$", entry, re.MULTILINE))
        if len(fields) == 3 and "install ok installed" in entry:
            real[(fields["Package"], fields["Version"], fields["Architecture"])] = (
                entry.strip("\n") + "\n"
            )
    compared = 0
    for (kind, name, version), pin in load_pins().items():
        if kind != "deb":
            continue
        deb = read_deb(fetch(pin).read_bytes(), pin.filename)
        theirs = real.get((deb.name, deb.version, deb.arch))
        if theirs is None:
            continue
        assert deb.status_entry() == theirs
        info_list = Path(f"/var/lib/dpkg/info/{deb.info_name}.list")
        if info_list.is_file():
            assert "\n".join(deb.file_list()) + "\n" == info_list.read_text()
        compared += 1
    if compared == 0:
        pytest.skip("none of the pinned packages is installed here at the pinned version")


# --------------------------------------------------------------------------- builds


@pytest.mark.slow
@pytest.mark.parametrize("name", SMALL_NAMES)
def test_build_is_deterministic(name: str, tmp_path: Path) -> None:
    a = fxbuild.ensure(name, cache=tmp_path / "a", downloads=cache_root())
    b = fxbuild.ensure(name, cache=tmp_path / "b", downloads=cache_root())
    da, db = _digests(a), _digests(b)
    assert da == db
    # blobs are content-addressed: the file name is the digest of the bytes
    for key, digest in da.items():
        if key.startswith("blob:"):
            assert key == "blob:" + digest
    exp_a, exp_b = a.load_expectations(), b.load_expectations()
    assert exp_a == exp_b
    # a second ensure() is a cache hit: nothing is rewritten
    mtime = a.oci_archive.stat().st_mtime_ns
    assert fxbuild.ensure(name, cache=tmp_path / "a", downloads=cache_root()) == a
    assert a.oci_archive.stat().st_mtime_ns == mtime


@pytest.mark.slow
def test_demo_contents_match_expectations() -> None:
    p = fxbuild.ensure("demo")
    exp = p.load_expectations()
    layers = _layer_tars(p)
    assert len(layers) == len(exp["layers"]) == 3
    by_layer = [{m.name for m in t.getmembers()} for t in layers]
    for path, info in exp["files"].items():
        assert path.lstrip("/") in by_layer[info["layer"]], path
    assert "etc/OpenCL/vendors/pocl.icd" in by_layer[1]
    status = layers[1].extractfile("var/lib/dpkg/status").read().decode()  # type: ignore[union-attr]
    for pkg in exp["packages"]:
        if pkg["type"] == "deb":
            entry = next(
                e for e in status.split("\n\n") if e.startswith(f"Package: {pkg['name']}\n")
            )
            assert "\nStatus: install ok installed\n" in entry
            assert f"\nVersion: {pkg['version']}\n" in entry
    config_env = dict(
        e.split("=", 1)
        for e in json.loads(
            (p.oci_dir / "blobs" / "sha256" / exp["config_digest"].split(":")[1]).read_text()
        )["config"]["Env"]
    )
    assert config_env["CUDA_VERSION"] == "12.4.1"
    assert config_env["NVIDIA_REQUIRE_CUDA"].startswith("cuda>=12.4")
    assert exp["uncompressed_size"] < 60 * 1024 * 1024


@pytest.mark.slow
def test_multilayer_has_whiteouts_and_upgrades() -> None:
    p = fxbuild.ensure("multilayer")
    exp = p.load_expectations()
    l0, l1 = _layer_tars(p)
    names1 = set(l1.getnames())
    assert "usr/local/lib/python3.11/site-packages/.wh.six-1.15.0.dist-info" in names1
    assert "etc/gpusbom-fixture/.wh.remove-me.txt" in names1
    assert "opt/plugins/site-packages/.wh..wh..opq" in names1
    assert any(n.startswith("opt/plugins/site-packages/nvidia_nvtx_cu12-") for n in l0.getnames())
    status1 = l1.extractfile("var/lib/dpkg/status").read().decode()  # type: ignore[union-attr]
    assert "Package: unzip\nStatus: install ok installed" in status1
    assert "\nVersion: 6.0-28+deb12u1\n" in status1
    status0 = l0.extractfile("var/lib/dpkg/status").read().decode()  # type: ignore[union-attr]
    assert "\nVersion: 6.0-28\n" in status0
    present = {(x["type"], x["name"]): (x["version"], x["layer"]) for x in exp["packages"]}
    assert present[("deb", "unzip")] == ("6.0-28+deb12u1", 1)
    assert present[("python", "six")] == ("1.16.0", 1)
    assert present[("python", "packaging")] == ("24.1", 0)
    absent = {(x["type"], x["name"], x["version"]) for x in exp["absent_packages"]}
    assert ("python", "nvidia-nvtx-cu12", "12.4.127") in absent
    assert ("python", "six", "1.15.0") in absent
    assert ("deb", "unzip", "6.0-28") in absent
    for path in exp["files_absent"]:
        assert path not in exp["files"]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("skopeo") is None, reason="skopeo not installed")
@pytest.mark.parametrize("name", ALL_PARAMS)
def test_skopeo_reads_all_three_forms(name: str) -> None:
    p = fxbuild.ensure(name)
    exp = p.load_expectations()
    for ref in (
        p.oci_ref,
        f"oci-archive:{p.oci_archive}:{name}",
        f"docker-archive:{p.docker_archive}",
    ):
        out = subprocess.run(
            ["skopeo", "inspect", "--config", ref], capture_output=True, text=True, check=True
        ).stdout
        cfg = json.loads(out)
        assert cfg["rootfs"]["diff_ids"] == [la["diff_id"] for la in exp["layers"]], ref


# --------------------------------------------------------------------------- docker


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.parametrize("name", SMALL_NAMES)
def test_docker_load(name: str, request: pytest.FixtureRequest) -> None:
    try:
        engine = request.getfixturevalue("docker_engine")
    except pytest.FixtureLookupError:
        pytest.skip("tests/conftest.py has no docker_engine fixture yet")
    if shutil.which("docker") is None:
        pytest.skip("docker CLI not installed")
    p = fxbuild.ensure(name)
    exp = p.load_expectations()
    env = dict(os.environ, DOCKER_HOST=engine)  # docker_engine yields the unix:// URL
    subprocess.run(
        ["docker", "load", "-i", str(p.docker_archive)], env=env, check=True, capture_output=True
    )
    out = subprocess.run(
        ["docker", "image", "inspect", p.tag], env=env, check=True, capture_output=True, text=True
    ).stdout
    info = json.loads(out)[0]
    assert info["Id"] == exp["config_digest"]
    assert info["RootFS"]["Layers"] == [la["diff_id"] for la in exp["layers"]]
    assert p.tag in info["RepoTags"]


# --------------------------------------------------------------------------- GPU stack images

BASE_DEBS = {
    ("deb", "base-files", "12.4+deb12u15"),
    ("deb", "gcc-12-base", "12.2.0-14+deb12u1"),
    ("deb", "libc6", "2.36-9+deb12u14"),
    ("deb", "libgcc-s1", "12.2.0-14+deb12u1"),
    ("deb", "libstdc++6", "12.2.0-14+deb12u1"),
}
# What issue 3's acceptance asks of each image, besides the Debian base.
GPU_PACKAGES = {
    "rocm": {
        ("deb", "libhsakmt1", "5.2.3+dfsg-1"),
        ("deb", "libhsa-runtime64-1", "5.2.3-3"),
        ("deb", "libamdhip64-5", "5.2.3-8"),
        ("deb", "rocminfo", "5.2.3-2"),
        ("deb", "librocm-smi64-1", "5.2.3-2"),
        ("deb", "rocm-smi", "5.2.3-2"),
        ("deb", "librocrand1", "5.3.3-4"),
        ("deb", "libhiprand1", "5.3.3-4"),
    },
    "intel": {
        ("deb", "ocl-icd-libopencl1", "2.3.1-1"),
        ("deb", "libigdgmm12", "22.3.3+ds1-1"),
        ("deb", "libigc1", "1.0.12504.6-1+deb12u1"),
        ("deb", "libigdfcl1", "1.0.12504.6-1+deb12u1"),
        ("deb", "intel-opencl-icd", "22.43.24595.41-1"),
        ("deb", "libze1", "1.8.12-1"),
    },
    "ocl-vulkan": {
        ("deb", "ocl-icd-libopencl1", "2.3.1-1"),
        ("deb", "libpocl2-common", "3.1-3+deb12u1"),
        ("deb", "libpocl2", "3.1-3+deb12u1"),
        ("deb", "pocl-opencl-icd", "3.1-3+deb12u1"),
        ("deb", "libvulkan1", "1.3.239.0-1"),
        ("deb", "mesa-vulkan-drivers", "22.3.6-1+deb12u2"),
    },
    "nvidia-wheels": {
        ("python", "nvidia-cuda-runtime-cu12", "12.4.127"),
        ("python", "nvidia-nvjpeg-cu12", "12.4.0.76"),
        ("python", "nvidia-curand-cu12", "10.3.5.147"),
        ("python", "nvidia-nccl-cu12", "2.19.3"),
        ("python", "nvidia-cuda-runtime", "13.0.96"),
        ("python", "nvidia-nvjpeg", "13.0.2.28"),
        ("python", "nvidia-cuda-runtime-cu12", "12.1.105"),
    },
    "triton": {("python", "triton", "3.4.0")},
    "torch-cpu": {("python", "torch", "2.13.0+cpu")},
}
GPU_NAMES = sorted(GPU_PACKAGES)
SP = "/usr/local/lib/python3.11/site-packages"
VENV_SP = "/opt/venv/lib/python3.11/site-packages"
LIB = "/usr/lib/x86_64-linux-gnu"


def _scan_layers(p: fxbuild.FixturePaths, want: dict[int, set[str]]) -> list[dict[str, Any]]:
    """One streaming pass over each layer blob of the OCI layout: per layer, every member
    (name -> (type, linkname, mode)) and the sha256 and bytes-prefix of the files in
    `want[layer]` (paths without the leading "/")."""
    index = json.loads((p.oci_dir / "index.json").read_text())
    blobs = p.oci_dir / "blobs" / "sha256"
    manifest = json.loads((blobs / index["manifests"][0]["digest"].split(":")[1]).read_text())
    out: list[dict[str, Any]] = []
    for i, la in enumerate(manifest["layers"]):
        members: dict[str, tuple[bytes, str, int]] = {}
        digests: dict[str, str] = {}
        small: dict[str, bytes] = {}
        with tarfile.open(blobs / la["digest"].split(":")[1], mode="r|gz") as tf:
            for m in tf:
                members[m.name] = (m.type, m.linkname, m.mode)
                if m.isfile() and (m.name in want.get(i, ()) or m.size <= 1 << 20):
                    f = tf.extractfile(m)
                    assert f is not None
                    h = hashlib.sha256()
                    head = b""
                    for chunk in iter(lambda: f.read(1 << 20), b""):  # noqa: B023
                        h.update(chunk)
                        head = head or chunk
                    digests[m.name] = h.hexdigest()
                    if m.size <= 1 << 20:
                        small[m.name] = head
        out.append({"members": members, "sha256": digests, "small": small})
    return out


def _gpu(exp: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {g["path"]: g for g in exp["gpu_files"]}


def _check_gpu_image(name: str) -> None:
    p = fxbuild.ensure(name)
    exp = p.load_expectations()
    assert exp["image"] == name
    # the exact package set, each at its path and layer
    got = {(x["type"], x["name"], x["version"]) for x in exp["packages"]}
    assert got == BASE_DEBS | GPU_PACKAGES[name]
    want: dict[int, set[str]] = {}
    for g in exp["gpu_files"]:
        if g["kind"] == "file":
            want.setdefault(g["layer"], set()).add(g["path"].lstrip("/"))
    layers = _scan_layers(p, want)
    assert len(layers) == len(exp["layers"])
    for path, info in exp["files"].items():
        assert path.lstrip("/") in layers[info["layer"]]["members"], path
    for g in exp["gpu_files"]:
        assert g["path"] in exp["files"], g["path"]
        typ, linkname, _mode = layers[g["layer"]]["members"][g["path"].lstrip("/")]
        if g["kind"] == "symlink":
            assert typ == tarfile.SYMTYPE and linkname == g["target"], g
            assert g["resolved"] in exp["files"], g  # no dangling library links
        else:
            assert typ == tarfile.REGTYPE, g
            assert layers[g["layer"]]["sha256"][g["path"].lstrip("/")] == g["sha256"], g
        pkg = g["package"]
        assert pkg is not None, f"{g['path']}: no package owns it"
        assert (pkg["type"], pkg["name"], pkg["version"]) in GPU_PACKAGES[name], g
    for x in exp["packages"]:
        if x["type"] == "deb":
            status = layers[x["db_layer"]]["small"]["var/lib/dpkg/status"].decode()
            entry = next(e for e in status.split("\n\n") if e.startswith(f"Package: {x['name']}\n"))
            assert "\nStatus: install ok installed\n" in entry
            assert f"\nVersion: {x['version']}\n" in entry
        else:
            meta = layers[x["layer"]]["small"][x["path"].lstrip("/") + "/METADATA"].decode()
            assert f"\nName: {x['name']}\n" in meta and f"\nVersion: {x['version']}\n" in meta
    config = json.loads(
        (p.oci_dir / "blobs" / "sha256" / exp["config_digest"].split(":")[1]).read_text()
    )
    assert dict(e.split("=", 1) for e in config["config"]["Env"]) == exp["env"]
    assert [la["diff_id"] for la in exp["layers"]] == config["rootfs"]["diff_ids"]
    assert exp["uncompressed_size"] < 1024 * 1024 * 1024
    _STACK_CHECKS[name](exp, layers)


def _rocm(exp: dict[str, Any], layers: list[dict[str, Any]]) -> None:
    g = _gpu(exp)
    assert g[f"{LIB}/libamdhip64.so.5"]["resolved"] == f"{LIB}/libamdhip64.so.5.2.21153"
    assert g[f"{LIB}/libamdhip64.so.5.2.21153"]["package"]["name"] == "libamdhip64-5"
    assert g[f"{LIB}/librocrand.so.1.1"]["gpu_sections"][".hip_fatbin"] > 1_000_000
    assert g["/usr/bin/rocminfo"]["package"]["name"] == "rocminfo"
    assert g["/usr/bin/rocm-smi"]["kind"] == "symlink"
    assert not any(p.startswith("/opt/rocm") for p in exp["files"])  # Debian's layout


def _intel(exp: dict[str, Any], layers: list[dict[str, Any]]) -> None:
    g = _gpu(exp)
    icd = g["/etc/OpenCL/vendors/intel.icd"]
    assert icd["package"]["name"] == "intel-opencl-icd"
    assert icd["content"].strip() == f"{LIB}/intel-opencl/libigdrcl.so"
    assert icd["content"].strip() in exp["files"]
    for link, pkg in (
        ("libze_loader.so.1", "libze1"),
        ("libze_intel_gpu.so.1", "intel-opencl-icd"),
        ("libigc.so.1", "libigc1"),
        ("libigdgmm.so.12", "libigdgmm12"),
        ("libOpenCL.so.1", "ocl-icd-libopencl1"),
    ):
        assert g[f"{LIB}/{link}"]["package"]["name"] == pkg


def _ocl_vulkan(exp: dict[str, Any], layers: list[dict[str, Any]]) -> None:
    g = _gpu(exp)
    pocl = g["/etc/OpenCL/vendors/pocl.icd"]
    assert pocl["content"].strip() == "libpocl.so.2.10.0"  # a bare soname: the loader's path
    assert f"{LIB}/libpocl.so.2.10.0" in exp["files"]
    lvp = json.loads(g["/usr/share/vulkan/icd.d/lvp_icd.x86_64.json"]["content"])
    assert lvp["ICD"]["library_path"] in exp["files"]
    assert g[f"{LIB}/libvulkan.so.1"]["resolved"] == f"{LIB}/libvulkan.so.1.3.239"


def _nvidia_wheels(exp: dict[str, Any], layers: list[dict[str, Any]]) -> None:
    g = _gpu(exp)
    # two copies of cudart, at different paths and versions
    copies = {(c["name"], c["version"], c["path"]) for c in exp["copies"]}
    assert copies == {
        (
            "nvidia-cuda-runtime-cu12",
            "12.4.127",
            f"{SP}/nvidia_cuda_runtime_cu12-12.4.127.dist-info",
        ),
        (
            "nvidia-cuda-runtime-cu12",
            "12.1.105",
            f"{VENV_SP}/nvidia_cuda_runtime_cu12-12.1.105.dist-info",
        ),
    }
    a = g[f"{SP}/nvidia/cuda_runtime/lib/libcudart.so.12"]
    b = g[f"{VENV_SP}/nvidia/cuda_runtime/lib/libcudart.so.12"]
    assert (a["package"]["version"], b["package"]["version"]) == ("12.4.127", "12.1.105")
    assert a["sha256"] != b["sha256"]
    assert "/opt/venv/pyvenv.cfg" in exp["files"]
    # the CUDA 13 layout
    assert g[f"{SP}/nvidia/cu13/lib/libcudart.so.13"]["package"]["version"] == "13.0.96"
    # library wheels carrying fatbins
    for lib in (
        "nvidia/nvjpeg/lib/libnvjpeg.so.12",
        "nvidia/curand/lib/libcurand.so.10",
        "nvidia/nccl/lib/libnccl.so.2",
        "nvidia/cu13/lib/libnvjpeg.so.13",
    ):
        assert g[f"{SP}/{lib}"]["gpu_sections"][".nv_fatbin"] > 0, lib
    assert f"{SP}/nvidia/nccl/include/nccl.h" in g
    env = exp["env"]
    assert env["CUDA_VERSION"] == "12.4.1"
    assert env["NV_CUDA_LIB_VERSION"] == "12.4.1-1"
    assert env["NVIDIA_REQUIRE_CUDA"] == (
        "cuda>=12.4 brand=tesla,driver>=470,driver<471 brand=tesla,driver>=535,driver<536"
    )
    assert env["NV_LIBNCCL_PACKAGE"] == "libnccl2=2.21.5-1+cuda12.4"
    layer_of = {x["name"] + "@" + x["version"]: x["layer"] for x in exp["packages"]}
    assert layer_of["nvidia-nccl-cu12@2.19.3"] != layer_of["nvidia-cuda-runtime-cu12@12.4.127"]


def _triton(exp: dict[str, Any], layers: list[dict[str, Any]]) -> None:
    g = _gpu(exp)
    for tool in ("ptxas", "cuobjdump", "nvdisasm"):
        path = f"{SP}/triton/backends/nvidia/bin/{tool}"
        assert g[path]["elf"] and g[path]["package"]["name"] == "triton"
        assert layers[g[path]["layer"]]["members"][path.lstrip("/")][2] & 0o111, tool
    assert not any("/usr/local/cuda" in p for p in exp["files"])  # no CUDA toolkit here


def _torch_cpu(exp: dict[str, Any], layers: list[dict[str, Any]]) -> None:
    g = _gpu(exp)
    version = g[f"{SP}/torch/version.py"]["content"]
    assert "__version__ = '2.13.0+cpu'" in version
    assert "cuda: Optional[str] = None" in version and "hip: Optional[str] = None" in version
    torch_layer = next(x["layer"] for x in exp["packages"] if x["name"] == "torch")
    assert exp["layers"][torch_layer]["comment"].startswith("torch:")
    assert all(
        x["layer"] != torch_layer for x in exp["packages"] if x["name"] != "torch"
    )  # torch has its own layer


_STACK_CHECKS = {
    "rocm": _rocm,
    "intel": _intel,
    "ocl-vulkan": _ocl_vulkan,
    "nvidia-wheels": _nvidia_wheels,
    "triton": _triton,
    "torch-cpu": _torch_cpu,
}


def test_gpu_images_are_registered() -> None:
    assert set(GPU_NAMES) <= set(NAMES)
    assert LARGE <= set(GPU_NAMES)
    pins = load_pins()
    for name in GPU_NAMES:  # every acceptance package is pinned
        for kind, pkg, version in GPU_PACKAGES[name]:
            assert ("deb" if kind == "deb" else "wheel", pkg, version) in pins


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in GPU_NAMES if n not in LARGE])
def test_gpu_image_contents(name: str) -> None:
    _check_gpu_image(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(LARGE))
def test_large_gpu_image_contents(name: str) -> None:
    """Builds hundreds of MB per image (~15-30 s each here); deselect with -k 'not large'."""
    _check_gpu_image(name)


def test_elf_sections() -> None:
    exe = Path(sys.executable).resolve()
    sections = elf_sections(exe.read_bytes()[: 1 << 26]) if exe.stat().st_size < 1 << 26 else None
    if sections is not None:
        assert ".text" in sections or ".dynamic" in sections
    assert elf_sections(b"#!/bin/sh\n") is None
    assert elf_sections(b"\x7fELF\x01\x01" + b"\0" * 80) is None  # 32-bit: not read
