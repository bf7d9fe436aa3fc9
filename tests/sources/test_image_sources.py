"""Image sources: one small image in every container format reads the same."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from fixtures import imagetools as it
from gpusbom.errors import (
    DigestMismatchError,
    ImageFormatError,
    SourceNotFoundError,
    UnsafeArchiveError,
    UsageError,
)
from gpusbom.fsview import PathMatcher, PathSpec, Spool
from gpusbom.fsview.squash import squash
from gpusbom.model import Target
from gpusbom.sources import (
    DirectorySource,
    DockerArchiveSource,
    DockerEngineSource,
    OciArchiveSource,
    OciLayoutSource,
    ReadContext,
    resolve_source,
)

MATCHER = PathMatcher(
    [PathSpec("/etc/os-release"), PathSpec("/usr/local/cuda*/**"), PathSpec("/opt/**")]
)

LAYERS: list[list[Any]] = [
    [
        ("/etc/os-release", b"ID=debian\nVERSION_ID=12\n"),
        ("/opt/old/file.txt", b"lower"),
        ("/usr/local/cuda-12.4/version.json", b'{"cuda": {"version": "12.4.1"}}'),
        ("/usr/local/cuda", it.Symlink("cuda-12.4")),
    ],
    [
        ("/usr/local/cuda-12.4/lib64/libcudart.so.12.4.127", b"\x7fELF fake", 0o755),
        ("/usr/local/cuda-12.4/lib64/libcudart.so.12", it.Symlink("libcudart.so.12.4.127")),
        ("/etc/os-release", it.WHITEOUT),
    ],
    [
        ("/etc/os-release", b"ID=ubuntu\nVERSION_ID=22.04\n"),
        ("/opt", it.OPAQUE),
        ("/opt/new.txt", b"upper"),
    ],
]
ENV = {"PATH": "/usr/local/cuda/bin:/usr/bin", "CUDA_VERSION": "12.4.1", "EMPTY": ""}
LABELS = {"org.opencontainers.image.title": "tiny", "com.nvidia.cuda.version": "12.4.1"}
EXPECTED_FILES = {
    "/etc/os-release": b"ID=ubuntu\nVERSION_ID=22.04\n",
    "/usr/local/cuda/version.json": b'{"cuda": {"version": "12.4.1"}}',
    "/usr/local/cuda/lib64/libcudart.so.12": b"\x7fELF fake",
    "/opt/new.txt": b"upper",
}
TAG = "test/tiny:1.0"


def make_image(**kw: Any) -> it.Image:
    return it.build_image(LAYERS, env=ENV, labels=LABELS, **kw)


def read(
    ref: str, platform: str | None = None, **kw: Any
) -> tuple[Target, dict[str, bytes | None]]:
    """Resolve, read and squash ``ref``; returns the target and the captured files we expect."""
    with Spool() as spool:
        src = resolve_source(ref, **kw)
        result = src.read(ReadContext(matcher=MATCHER, spool=spool, platform=platform))
        view = result.view if result.view is not None else squash(result.layers, None)
        files: dict[str, bytes | None] = {}
        for path in EXPECTED_FILES:
            files[path] = view.read_bytes(path) if view.exists(path) else None
        files["/opt/old/file.txt"] = (
            view.read_bytes("/opt/old/file.txt") if view.exists("/opt/old/file.txt") else None
        )
        assert [li.ref for li in result.layers] == result.target.layers
        return result.target, files


def check_target(t: Target, img: it.Image, files: dict[str, bytes | None]) -> None:
    assert t.kind == "image"
    assert t.image_id == img.config_digest
    assert [layer.diff_id for layer in t.layers] == [layer.diff_id for layer in img.layers]
    assert [layer.index for layer in t.layers] == list(range(len(img.layers)))
    assert [layer.created_by for layer in t.layers] == [f"imagetools layer {i}" for i in range(3)]
    assert t.env == ENV
    assert t.labels == LABELS
    assert t.platform == "linux/amd64"
    assert t.created == "1970-01-01T00:00:00Z"
    for path, data in EXPECTED_FILES.items():
        assert files[path] == data, path
    assert files["/opt/old/file.txt"] is None  # hidden by the opaque dir


# --------------------------------------------------------------------------- one image, many forms


@pytest.fixture(scope="module")
def forms(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("forms")
    img = make_image()
    it.write_oci_layout(d / "layout", img, tag="1.0")
    it.write_oci_archive(d / "oci.tar", img, tag="1.0")
    it.write_oci_archive(d / "oci.tar.gz", img, tag="1.0", compression="gzip")
    it.write_docker_archive(d / "legacy.tar", img, [TAG])
    it.write_docker_archive(d / "legacy.tar.gz", img, [TAG], compression="gzip")
    it.write_docker_archive(d / "d25.tar", img, [TAG], layout="oci")
    it.write_docker_archive(d / "d25-links.tar", img, [TAG], layout="oci", link_layers=True)
    it.write_docker_archive(
        d / "d25-links.tar.zst", img, [TAG], layout="oci", link_layers=True, compression="zstd"
    )
    return {"dir": d, "img": img}


FORMS = {
    "oci-dir": ("oci:{d}/layout", "oci"),
    "oci-dir-tag": ("oci:{d}/layout:1.0", "oci"),
    "oci-dir-bare": ("{d}/layout", "oci"),
    "oci-archive": ("oci-archive:{d}/oci.tar", "oci-archive"),
    "oci-archive-tag": ("oci-archive:{d}/oci.tar:1.0", "oci-archive"),
    "oci-archive-bare": ("{d}/oci.tar", "oci-archive"),
    "oci-archive-gzip-bare": ("{d}/oci.tar.gz", "oci-archive"),
    "docker-archive": ("docker-archive:{d}/legacy.tar", "docker-archive"),
    "docker-archive-selector": ("docker-archive:{d}/legacy.tar:" + TAG, "docker-archive"),
    "docker-archive-bare": ("{d}/legacy.tar", "docker-archive"),
    "docker-archive-gzip": ("docker-archive:{d}/legacy.tar.gz", "docker-archive"),
    "docker25": ("docker-archive:{d}/d25.tar", "docker-archive"),
    "docker25-links": ("{d}/d25-links.tar", "docker-archive"),
    "docker25-links-zstd": ("{d}/d25-links.tar.zst", "docker-archive"),
}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_same_image_every_form(forms: dict[str, Any], form: str) -> None:
    pattern, scheme = FORMS[form]
    ref = pattern.format(d=forms["dir"])
    t, files = read(ref)
    assert t.source == scheme
    assert t.reference == ref
    check_target(t, forms["img"], files)
    if scheme == "docker-archive":
        assert t.tags == [TAG] and t.name == "test/tiny"
    else:
        assert t.tags == ["1.0"]
        assert t.manifest_digest == forms["img"].manifest_digest
        # compressed blobs: the stored digest is recorded next to the diff_id
        assert [layer.digest for layer in t.layers] == [la.digest for la in forms["img"].layers]
    if form.startswith("docker25"):
        assert t.manifest_digest == forms["img"].uncompressed().manifest_digest


def test_zstd_layers_docker_media_types(tmp_path: Path) -> None:
    img = make_image(compression="zstd", docker_media_types=True)
    it.write_oci_layout(tmp_path / "l", img)
    t, files = read(f"oci:{tmp_path}/l")
    check_target(t, img, files)
    assert t.layers[0].media_type == "application/vnd.docker.image.rootfs.diff.tar.zstd"


def test_uncompressed_and_nondistributable_layers(tmp_path: Path) -> None:
    img = make_image(compression="none")
    files = it.oci_layout_files(img)
    manifest = json.loads(img.manifest_bytes)
    for layer in manifest["layers"]:
        layer["mediaType"] = "application/vnd.oci.image.layer.nondistributable.v1.tar"
    write_with_manifest(tmp_path / "l", img, manifest)
    t, got = read(f"oci:{tmp_path}/l")
    check_target(t, img, got)
    assert all(layer.digest is None for layer in t.layers)  # blob == diff
    assert files  # (the plain layout reads too)


@pytest.mark.skipif(shutil.which("skopeo") is None, reason="skopeo is not installed")
@pytest.mark.parametrize("dest", ["docker-archive", "oci-archive", "oci"])
def test_skopeo_written_forms(tmp_path: Path, dest: str) -> None:
    img = make_image()
    it.write_oci_layout(tmp_path / "src", img, tag="1.0")
    target = {
        "docker-archive": f"docker-archive:{tmp_path}/out.tar:{TAG}",
        "oci-archive": f"oci-archive:{tmp_path}/out.tar:1.0",
        "oci": f"oci:{tmp_path}/out:1.0",
    }[dest]
    it.skopeo_copy(f"oci:{tmp_path}/src:1.0", target)
    ref = f"{tmp_path}/out.tar" if dest != "oci" else f"oci:{tmp_path}/out:1.0"
    t, files = read(ref)
    assert t.source == dest
    check_target(t, img, files)


@pytest.mark.docker
def test_docker_engine(tmp_path: Path, docker_env: str, docker_load: Any) -> None:
    img = make_image()
    it.write_docker_archive(tmp_path / "img.tar", img, [TAG])
    docker_load(tmp_path / "img.tar")
    for ref in (f"docker:{TAG}", TAG, f"docker:{img.config_digest}"):
        src = resolve_source(ref)
        assert isinstance(src, DockerEngineSource)
        t, files = read(ref)
        assert t.source == "docker"
        assert t.tags == [TAG]
        assert t.name == "test/tiny"
        check_target(t, img, files)
    # what the real `docker save` writes, read back as a docker-archive
    saved = tmp_path / "saved.tar"
    subprocess.run(["docker", "save", "-o", str(saved), TAG], check=True, capture_output=True)
    t, files = read(str(saved))
    assert t.source == "docker-archive" and t.tags == [TAG]
    check_target(t, img, files)


@pytest.mark.docker
def test_docker_engine_missing_image(docker_env: str) -> None:
    with pytest.raises(SourceNotFoundError) as e:
        resolve_source("gpusbom-test/nope:1")
    msg = str(e.value)
    assert "\n" not in msg
    assert "image 'gpusbom-test/nope:1' not found: tried docker (no image" in msg
    assert docker_env in msg and "docker-archive:PATH" in msg
    src = resolve_source("docker:gpusbom-test/nope:1")
    with (
        Spool() as spool,
        pytest.raises(SourceNotFoundError, match="no image 'gpusbom-test/nope:1'"),
    ):
        src.read(ReadContext(matcher=MATCHER, spool=spool))


def test_docker_engine_unreachable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    host = f"unix://{tmp_path}/none.sock"
    monkeypatch.setenv("DOCKER_HOST", host)
    with pytest.raises(SourceNotFoundError) as e:
        resolve_source("gpusbom-test/nope:1")
    msg = str(e.value)
    assert "\n" not in msg
    assert f"tried docker (Docker Engine not reachable at {host}" in msg
    assert "it is not a file or directory" in msg


# --------------------------------------------------------------------------- selection


def test_multi_platform_index(tmp_path: Path) -> None:
    amd = make_image()
    arm = it.build_image([[("/etc/os-release", b"ID=arm\n")]], platform="linux/arm64/v8")
    ppc = it.build_image([[("/etc/os-release", b"ID=ppc\n")]], platform="linux/ppc64le")
    it.write_oci_layout(tmp_path / "l", [amd, arm, ppc], tag="multi")
    it.write_oci_archive(tmp_path / "l.tar", [amd, arm, ppc], tag="multi")
    for ref in (f"oci:{tmp_path}/l", f"{tmp_path}/l.tar"):
        t, files = read(ref, platform="linux/arm64")
        assert t.platform == "linux/arm64" and t.image_id == arm.config_digest
        assert files["/etc/os-release"] == b"ID=arm\n"
        assert t.manifest_digest == arm.manifest_digest
        t, _ = read(ref, platform="linux/arm64/v8")
        assert t.image_id == arm.config_digest
        t, _ = read(ref, platform="linux/ppc64le")
        assert t.image_id == ppc.config_digest
        with pytest.raises(SourceNotFoundError) as e:
            read(ref, platform="linux/s390x")
        assert "no image for platform linux/s390x" in str(e.value)
        assert "available: linux/amd64, linux/arm64, linux/ppc64le" in str(e.value)


def test_multi_platform_default_is_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    amd = make_image()
    arm = it.build_image([[("/etc/os-release", b"ID=arm\n")]], platform="linux/arm64/v8")
    it.write_oci_layout(tmp_path / "l", [amd, arm], tag="multi")
    import gpusbom.sources.image.oci as image_mod

    monkeypatch.setattr(image_mod._platform, "machine", lambda: "aarch64")
    t, _ = read(f"oci:{tmp_path}/l")
    assert t.image_id == arm.config_digest
    monkeypatch.setattr(image_mod._platform, "machine", lambda: "x86_64")
    t, _ = read(f"oci:{tmp_path}/l")
    assert t.image_id == amd.config_digest
    monkeypatch.setattr(image_mod._platform, "machine", lambda: "s390x")
    with pytest.raises(SourceNotFoundError, match=r"linux/s390x \(the host's; pass --platform"):
        read(f"oci:{tmp_path}/l")


def test_single_image_platform_mismatch(forms: dict[str, Any]) -> None:
    with pytest.raises(
        SourceNotFoundError, match="image is linux/amd64, not the requested platform linux/arm64"
    ):
        read(f"docker-archive:{forms['dir']}/legacy.tar", platform="linux/arm64")
    t, _ = read(f"oci:{forms['dir']}/layout", platform="linux/amd64")
    assert t.platform == "linux/amd64"


def test_tag_selection(tmp_path: Path) -> None:
    one = make_image()
    two = it.build_image([[("/etc/os-release", b"ID=two\n")]])
    it.write_oci_layout(tmp_path / "l", {"v1": one, "v2": two})
    t, files = read(f"oci:{tmp_path}/l:v2")
    assert t.image_id == two.config_digest and t.tags == ["v2"]
    assert files["/etc/os-release"] == b"ID=two\n"
    t, _ = read(f"oci:{tmp_path}/l:v1")
    assert t.image_id == one.config_digest
    with pytest.raises(
        SourceNotFoundError, match=r"holds 2 images; pass .*:TAG .*\(tags: v1, v2\)"
    ):
        read(f"oci:{tmp_path}/l")
    with pytest.raises(SourceNotFoundError, match=r"no image tagged 'v3' \(tags: v1, v2\)"):
        read(f"oci:{tmp_path}/l:v3")


def test_docker_archive_selector_miss(forms: dict[str, Any]) -> None:
    with pytest.raises(
        SourceNotFoundError, match=r"no image tagged 'other:1' \(tags: test/tiny:1.0\)"
    ):
        read(f"docker-archive:{forms['dir']}/legacy.tar:other:1")


# --------------------------------------------------------------------------- resolution


def test_resolve_kinds(forms: dict[str, Any], tmp_path: Path) -> None:
    d = forms["dir"]
    assert isinstance(resolve_source(f"{d}/layout"), OciLayoutSource)
    assert isinstance(resolve_source(f"{d}/oci.tar"), OciArchiveSource)
    assert isinstance(resolve_source(f"{d}/legacy.tar"), DockerArchiveSource)
    assert isinstance(resolve_source(f"{d}/d25.tar"), DockerArchiveSource)
    assert isinstance(resolve_source(str(tmp_path)), DirectorySource)
    assert isinstance(resolve_source(f"dir:{tmp_path}"), DirectorySource)
    src = resolve_source(f"{d}/legacy.tar", source="docker-archive")
    assert isinstance(src, DockerArchiveSource) and src.location == f"{d}/legacy.tar"
    from gpusbom.sources import RegistrySource

    src = resolve_source("registry:nvcr.io/nvidia/cuda:12.4.1-base")
    assert isinstance(src, RegistrySource) and src.location == "nvcr.io/nvidia/cuda:12.4.1-base"
    with pytest.raises(UsageError, match="unknown source"):
        resolve_source("x", source="ftp")


def test_non_image_file(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello\n")
    it.write_tar(tmp_path / "random.tar", [("/a/b.txt", b"x")])
    for name in ("notes.txt", "random.tar"):
        with pytest.raises(ImageFormatError) as e:
            resolve_source(str(tmp_path / name))
        assert (
            str(e.value)
            == f"{tmp_path / name}: not an image archive (no manifest.json or index.json)"
        )
    with pytest.raises(ImageFormatError, match="not a docker-archive"):
        read(f"docker-archive:{tmp_path}/random.tar")


def test_missing_paths(tmp_path: Path) -> None:
    with pytest.raises(SourceNotFoundError, match="no such file"):
        read(f"docker-archive:{tmp_path}/nope.tar")
    with pytest.raises(SourceNotFoundError, match="no such directory"):
        read(f"oci:{tmp_path}/nope")
    with pytest.raises(SourceNotFoundError, match="no such directory"):
        read(f"dir:{tmp_path}/nope")
    (tmp_path / "plain").mkdir()
    with pytest.raises(ImageFormatError, match="not an OCI image layout"):
        read(f"oci:{tmp_path}/plain")


def test_dir_source(tmp_path: Path) -> None:
    root = tmp_path / "rootfs"
    (root / "etc").mkdir(parents=True)
    (root / "etc/os-release").write_bytes(b"ID=ubuntu\nVERSION_ID=22.04\n")
    with Spool() as spool:
        result = resolve_source(str(root)).read(ReadContext(matcher=MATCHER, spool=spool))
        assert result.layers == [] and result.view is not None
        assert result.target.kind == "directory" and result.target.source == "dir"
        assert result.view.read_bytes("/etc/os-release") == b"ID=ubuntu\nVERSION_ID=22.04\n"


# --------------------------------------------------------------------------- broken and hostile input


def write_with_manifest(
    path: Path, img: it.Image, manifest: dict[str, Any], tag: str = "latest"
) -> Path:
    """An OCI layout of ``img`` whose manifest was replaced by ``manifest``."""
    files = it.oci_layout_files(img, tag=tag)
    del files["blobs/" + img.manifest_digest.replace(":", "/")]
    data = json.dumps(manifest).encode()
    files["blobs/" + it.sha256(data).replace(":", "/")] = data
    index = json.loads(files["index.json"])
    index["manifests"][0].update(digest=it.sha256(data), size=len(data))
    files["index.json"] = json.dumps(index).encode()
    return it.write_files(path, files)


def blob(layout: Path, digest: str) -> Path:
    return layout / "blobs" / digest.replace(":", "/")


def test_garbage_json(tmp_path: Path) -> None:
    img = make_image()
    lay = it.write_oci_layout(tmp_path / "l", img)
    (lay / "index.json").write_bytes(b"{not json")
    with pytest.raises(ImageFormatError, match=r"oci:.*/l: index.json is not valid JSON: "):
        read(f"oci:{lay}")
    files = it.docker_archive_files(img, [TAG])
    files["manifest.json"] = b"[{"
    it.write_tar(tmp_path / "d.tar", files)
    with pytest.raises(ImageFormatError) as e:
        read(f"{tmp_path}/d.tar")
    assert str(e.value).startswith(f"{tmp_path}/d.tar: manifest.json is not valid JSON: ")
    # a config that is not JSON (named so no digest is implied)
    files = it.docker_archive_files(img, [TAG])
    entry = json.loads(files["manifest.json"])
    entry[0]["Config"] = "config.json"
    files["manifest.json"] = json.dumps(entry).encode()
    files["config.json"] = b"\x00\xffgarbage"
    it.write_tar(tmp_path / "c.tar", files)
    with pytest.raises(ImageFormatError, match=r"config config.json is not valid JSON"):
        read(f"docker-archive:{tmp_path}/c.tar")
    # manifest not a list
    files["manifest.json"] = b'{"Config": "x"}'
    it.write_tar(tmp_path / "m.tar", files)
    with pytest.raises(ImageFormatError, match="expected a non-empty list"):
        read(f"docker-archive:{tmp_path}/m.tar")


def test_missing_blobs(tmp_path: Path) -> None:
    img = make_image()
    lay = it.write_oci_layout(tmp_path / "l", img)
    blob(lay, img.layers[1].digest).unlink()
    with pytest.raises(ImageFormatError, match=r"layer 1 blob sha256:[0-9a-f]+ is missing"):
        read(f"oci:{lay}")
    lay2 = it.write_oci_layout(tmp_path / "l2", img)
    blob(lay2, img.config_digest).unlink()
    with pytest.raises(ImageFormatError, match="config sha256:[0-9a-f]+ is missing"):
        read(f"oci:{lay2}")
    files = it.docker_archive_files(img, [TAG])
    victim = json.loads(files["manifest.json"])[0]["Layers"][2]
    del files[victim]
    it.write_tar(tmp_path / "d.tar", files)
    with pytest.raises(
        ImageFormatError, match=r"layer 2 \(.*/layer.tar\) is missing from the archive"
    ):
        read(f"docker-archive:{tmp_path}/d.tar")
    it.write_tar(tmp_path / "d.tar.gz", files, compression="gzip")
    with pytest.raises(
        ImageFormatError, match=r"layer 2 \(.*/layer.tar\) is missing from the archive"
    ):
        read(f"docker-archive:{tmp_path}/d.tar.gz")


def test_foreign_layer(tmp_path: Path) -> None:
    img = make_image()
    manifest = json.loads(img.manifest_bytes)
    manifest["layers"][0]["mediaType"] = "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip"
    manifest["layers"][0]["urls"] = ["https://example.invalid/layer"]
    lay = write_with_manifest(tmp_path / "l", img, manifest)
    blob(lay, img.layers[0].digest).unlink()
    with pytest.raises(
        ImageFormatError, match=r"layer 0 .* is a foreign layer .*https://example.invalid/layer"
    ):
        read(f"oci:{lay}")
    manifest["layers"][0]["mediaType"] = "application/x-unknown"
    lay = write_with_manifest(tmp_path / "l2", img, manifest)
    with pytest.raises(
        ImageFormatError, match="layer 0 has unsupported media type application/x-unknown"
    ):
        read(f"oci:{lay}")


@pytest.mark.parametrize("which", ["layer", "config", "manifest", "blobs-dir", "index.json"])
def test_oci_symlink_to_host_file_refused(
    tmp_path: Path, which: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    img = make_image()
    lay = it.write_oci_layout(tmp_path / "l", img)
    secret = tmp_path / "shadow"
    secret.write_text("root:$6$secret:19000::::::\n")
    opened: list[str] = []
    real_open = os.open

    def spy(path: Any, *a: Any, **kw: Any) -> int:
        opened.append(str(path))
        return real_open(path, *a, **kw)

    victim = {
        "layer": blob(lay, img.layers[0].digest),
        "config": blob(lay, img.config_digest),
        "manifest": blob(lay, img.manifest_digest),
        "blobs-dir": lay / "blobs",
        "index.json": lay / "index.json",
    }[which]
    if victim.is_dir():
        shutil.rmtree(victim)
    else:
        victim.unlink()
    os.symlink("/etc/shadow" if which == "layer" else secret, victim)
    monkeypatch.setattr(os, "open", spy)
    with pytest.raises(UnsafeArchiveError) as e:
        read(f"oci:{lay}")
    msg = str(e.value)
    assert "is a symlink; refusing to follow it" in msg
    if which == "layer":
        assert msg == f"oci:{lay}: blob {img.layers[0].digest} is a symlink; refusing to follow it"
    assert not any("shadow" in p for p in opened)


@pytest.mark.parametrize("link", ["/etc/shadow", "../../../../etc/shadow", "x/../../etc/shadow"])
@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_docker_archive_hostile_links_refused(tmp_path: Path, link: str, compression: str) -> None:
    img = make_image()
    files: dict[str, Any] = dict(it.docker_archive_files(img, [TAG]))
    files["real-manifest.json"] = files.pop("manifest.json")
    files["manifest.json"] = it.Symlink(link)
    path = it.write_tar(tmp_path / "evil.tar", files, compression=compression)
    with pytest.raises(UnsafeArchiveError, match="refusing to follow it|points out of the archive"):
        read(f"docker-archive:{path}")
    # a layer linked out of the archive, too
    files = dict(it.docker_archive_files(img, [TAG]))
    victim = json.loads(files["manifest.json"])[0]["Layers"][0]
    if link.startswith("/"):
        files[victim] = it.Hardlink(link, verbatim=True)
    else:  # the layer sits one directory down
        files[victim] = it.Symlink("../" + link)
    path = it.write_tar(tmp_path / "evil2.tar", files, compression=compression)
    with pytest.raises(UnsafeArchiveError):
        read(f"docker-archive:{path}")


def test_tampered_blobs(tmp_path: Path) -> None:
    img = make_image()
    lay = it.write_oci_layout(tmp_path / "l", img)
    # the same tar compressed differently: valid gzip, same diff_id, another digest
    blob(lay, img.layers[2].digest).write_bytes(gzip.compress(img.layers[2].tar, 1, mtime=0))
    with pytest.raises(DigestMismatchError, match=f"size mismatch: .*{img.layers[2].digest}"):
        read(f"oci:{lay}")
    # same size: flip a bit of the gzip header's mtime (decompresses fine)
    lay = it.write_oci_layout(tmp_path / "l1", img)
    p = blob(lay, img.layers[2].digest)
    data = bytearray(p.read_bytes())
    data[4] ^= 1
    p.write_bytes(bytes(data))
    with pytest.raises(
        DigestMismatchError, match=f"digest mismatch: expected {img.layers[2].digest}"
    ):
        read(f"oci:{lay}")
    lay = it.write_oci_layout(tmp_path / "l2", img)
    cfg = blob(lay, img.config_digest)
    cfg.write_bytes(cfg.read_bytes().replace(b"12.4.1", b"99.9.9"))
    with pytest.raises(DigestMismatchError, match=f"config {img.config_digest}: digest mismatch"):
        read(f"oci:{lay}")
    # a legacy docker-archive layer.tar edited in place: the diff_id no longer matches
    files = dict(it.docker_archive_files(img, [TAG]))
    victim = json.loads(files["manifest.json"])[0]["Layers"][0]
    files[victim] = files[victim].replace(b"ID=debian", b"ID=fedora")  # type: ignore[union-attr]
    for compression in ("none", "gzip"):
        path = it.write_tar(tmp_path / f"d-{compression}.tar", files, compression=compression)
        with pytest.raises(DigestMismatchError, match=f"expected {img.layers[0].diff_id}"):
            read(f"docker-archive:{path}")


def test_json_size_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gpusbom.sources.archive as archive_mod
    import gpusbom.sources.image as image_mod

    monkeypatch.setattr(image_mod, "MAX_JSON_BYTES", 100)
    monkeypatch.setattr(archive_mod, "MAX_JSON_BYTES", 100)
    img = make_image()
    path = it.write_docker_archive(tmp_path / "d.tar", img, [TAG])
    with pytest.raises(
        ImageFormatError,
        match=r"manifest.json \(manifest.json\) is \d+ bytes; image metadata is limited to 100 bytes",
    ):
        read(f"docker-archive:{path}")
