"""Bad and hostile inputs through the CLI, exactly as a user runs it.

Each case must give one error line on stderr naming the input and the
problem, exit 3, and leave no output file behind.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures import imagetools as it

GOOD_LAYER = [("/etc/os-release", b'ID=debian\nVERSION_ID="12"\n'), ("/usr/bin/tool", b"x" * 100)]


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpusbom", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def assert_input_error(ref: str, tmp_path: Path, *needles: str, env: dict[str, str] | None = None) -> str:
    out = tmp_path / "out" / "sbom.cdx.json"
    proc = run_cli("scan", "--image", ref, "-q", "-o", f"cyclonedx-json={out}", env=env)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 3, (proc.returncode, proc.stderr)
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("gpusbom: error: "), lines[0]
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert not out.exists()
    assert not out.parent.exists() or not any(out.parent.iterdir())
    assert proc.stdout == ""
    return lines[0]


def _layout_with_layer_blob(tmp_path: Path, blob: bytes, *, tar: bytes | None = None) -> Path:
    """An OCI layout whose single layer blob is ``blob``, with consistent digests."""
    layer = it.Layer(tar if tar is not None else b"", "gzip")
    layer.__dict__["_blob"] = blob  # the manifest then names the digest of these exact bytes
    image = it.Image(layers=[layer])
    return it.write_oci_layout(tmp_path / "layout", image, tag="t")


def test_missing_image_archive(tmp_path: Path) -> None:
    missing = tmp_path / "nope.tar"
    assert_input_error(f"docker-archive:{missing}", tmp_path, str(missing))


def test_missing_image_reference(tmp_path: Path) -> None:
    # no Docker Engine at this socket: resolution says what it tried and what to pass
    line = assert_input_error(
        "no-such/image:tag",
        tmp_path,
        "no-such/image:tag",
        "docker-archive:",
        env={"DOCKER_HOST": f"unix://{tmp_path}/none.sock"},
    )
    assert "docker" in line


def test_non_image_file(tmp_path: Path) -> None:
    f = tmp_path / "notes.txt"
    f.write_text("hello, not an image\n")
    assert_input_error(str(f), tmp_path, str(f))


def test_tar_that_is_not_an_image(tmp_path: Path) -> None:
    f = it.write_tar(tmp_path / "random.tar", {"hello.txt": b"hi"})
    assert_input_error(str(f), tmp_path, str(f))


def test_corrupt_gzip_layer(tmp_path: Path) -> None:
    good = gzip.compress(it.tar_bytes(GOOD_LAYER), mtime=0)
    corrupt = good[:20] + bytes(b ^ 0x5A for b in good[20:60]) + good[60:]
    layout = _layout_with_layer_blob(tmp_path, corrupt)
    assert_input_error(f"oci:{layout}:t", tmp_path, "layer")


def test_truncated_tar_layer(tmp_path: Path) -> None:
    tar = it.tar_bytes(GOOD_LAYER + [("/usr/lib/big.so", b"\x7fELF" + b"z" * 200_000)])
    start = tar.index(b"\x7fELF")
    cut = tar[: start + 100_007]  # in the middle of a member's data, not at a block boundary
    layout = _layout_with_layer_blob(tmp_path, gzip.compress(cut, mtime=0))
    assert_input_error(f"oci:{layout}:t", tmp_path, "truncated")


def test_blob_digest_mismatch(tmp_path: Path) -> None:
    image = it.build_image([GOOD_LAYER])
    layout = it.write_oci_layout(tmp_path / "layout", image, tag="t")
    blob = layout / "blobs" / "sha256" / image.layers[0].digest.split(":")[1]
    tampered = gzip.compress(it.tar_bytes(GOOD_LAYER + [("/evil", b"1")]), mtime=0)
    blob.write_bytes(tampered)
    assert_input_error(f"oci:{layout}:t", tmp_path, "digest", image.layers[0].digest)


def test_blob_digest_mismatch_docker_archive(tmp_path: Path) -> None:
    image = it.build_image([GOOD_LAYER])
    files = it.docker_archive_files(image, ["t/t:1"])
    for name in files:
        if name.endswith("layer.tar"):
            files[name] = it.tar_bytes(GOOD_LAYER + [("/evil", b"1")])
    archive = it.write_tar(tmp_path / "img.tar", files)
    assert_input_error(f"docker-archive:{archive}", tmp_path, "digest")


@pytest.mark.parametrize("which", ["manifest", "config", "index"])
def test_garbage_json(tmp_path: Path, which: str) -> None:
    image = it.build_image([GOOD_LAYER])
    files = it.oci_layout_files(image, tag="t")
    garbage = b'{"schemaVersion": 2, "layers": [ this is not json'
    if which == "index":
        files["index.json"] = garbage
    else:
        old = image.manifest_digest if which == "manifest" else image.config_digest
        new = it.sha256(garbage)
        files.pop(f"blobs/sha256/{old.split(':')[1]}")
        files[f"blobs/sha256/{new.split(':')[1]}"] = garbage
        if which == "config":
            manifest = json.loads(image.manifest_bytes)
            manifest["config"]["digest"] = new
            manifest["config"]["size"] = len(garbage)
            mbytes = json.dumps(manifest).encode()
            files.pop(f"blobs/sha256/{image.manifest_digest.split(':')[1]}")
            files[f"blobs/sha256/{it.sha256(mbytes).split(':')[1]}"] = mbytes
            new = it.sha256(mbytes)
            garbage = mbytes
        index = json.loads(files["index.json"])
        index["manifests"][0]["digest"] = new
        index["manifests"][0]["size"] = len(garbage)
        files["index.json"] = json.dumps(index).encode()
    layout = it.write_files(tmp_path / "layout", files)
    assert_input_error(f"oci:{layout}:t", tmp_path, "JSON")


def test_garbage_docker_manifest_json(tmp_path: Path) -> None:
    image = it.build_image([GOOD_LAYER])
    files = it.docker_archive_files(image, ["t/t:1"])
    files["manifest.json"] = b"[{]"
    archive = it.write_tar(tmp_path / "img.tar", files)
    assert_input_error(f"docker-archive:{archive}", tmp_path, "manifest.json")


def test_tar_entry_escaping_root(tmp_path: Path) -> None:
    image = it.build_image([GOOD_LAYER + [("../../etc/passwd", b"root::0:0::/:/bin/sh\n")]])
    layout = it.write_oci_layout(tmp_path / "layout", image, tag="t")
    assert_input_error(f"oci:{layout}:t", tmp_path, "../../etc/passwd")


def test_blob_symlink_to_host_shadow(tmp_path: Path) -> None:
    image = it.build_image([GOOD_LAYER])
    layout = it.write_oci_layout(tmp_path / "layout", image, tag="t")
    blob = layout / "blobs" / "sha256" / image.layers[0].digest.split(":")[1]
    blob.unlink()
    blob.symlink_to("/etc/shadow")
    assert_input_error(f"oci:{layout}:t", tmp_path, "symlink")


def test_archive_member_symlink_to_host_shadow(tmp_path: Path) -> None:
    image = it.build_image([GOOD_LAYER])
    files: dict[str, object] = dict(it.docker_archive_files(image, ["t/t:1"]))
    files["manifest.json"] = it.Symlink("/etc/shadow")
    archive = it.write_tar(tmp_path / "img.tar", files)  # type: ignore[arg-type]
    assert_input_error(f"docker-archive:{archive}", tmp_path, "manifest.json")


def test_symlink_loop_in_archive(tmp_path: Path) -> None:
    image = it.build_image([GOOD_LAYER])
    files: dict[str, object] = dict(it.docker_archive_files(image, ["t/t:1"]))
    files["manifest.json"] = it.Symlink("loop-a")
    files["loop-a"] = it.Symlink("loop-b")
    files["loop-b"] = it.Symlink("manifest.json")
    archive = it.write_tar(tmp_path / "img.tar", files)  # type: ignore[arg-type]
    assert_input_error(f"docker-archive:{archive}", tmp_path, "links")


def test_symlink_loop_on_a_path_the_scan_needs(tmp_path: Path) -> None:
    layer = [
        ("/etc/os-release", it.Symlink("/etc/os-release.d/current")),
        ("/etc/os-release.d/current", it.Symlink("../os-release")),
    ]
    layout = it.write_oci_layout(tmp_path / "layout", it.build_image([layer]), tag="t")
    assert_input_error(f"oci:{layout}:t", tmp_path, "symlink loop", "/etc/os-release")


def test_links_in_the_image_never_reach_the_host(tmp_path: Path) -> None:
    """Absolute and climbing links resolve inside the image root, like a chroot.

    They are not errors (images are full of absolute links); the host's files
    are simply out of reach.
    """
    layer = [
        ("/etc/os-release", it.Symlink("/etc/shadow")),
        ("/usr/lib/os-release", it.Symlink("../../../../../../etc/passwd")),
        ("/var/lib/dpkg/status", it.Symlink("/etc/shadow")),
    ]
    layout = it.write_oci_layout(tmp_path / "layout", it.build_image([layer]), tag="t")
    out = tmp_path / "scan.json"
    proc = run_cli("scan", "--image", f"oci:{layout}:t", "-q", "-o", f"json={out}")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["target"]["os_release"] == {}
    assert doc["components"] == []
    host_passwd = Path("/etc/passwd").read_text().splitlines()[0]
    assert host_passwd not in out.read_text()
