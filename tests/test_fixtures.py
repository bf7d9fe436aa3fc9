"""The fixture images: pinned inputs, deterministic builds, loadable by Docker."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

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

NAMES = sorted(fxbuild.RECIPES)


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
@pytest.mark.parametrize("name", NAMES)
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
@pytest.mark.parametrize("name", NAMES)
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
@pytest.mark.parametrize("name", NAMES)
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
