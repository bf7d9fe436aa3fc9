"""gpusbom's own OCI image: built by scripts/build-image (mmdebstrap + the wheel, pinned),
reproducible, loaded into the test Docker Engine and scanned by gpusbom itself."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

# one worker builds and rebuilds the image: the rebuild replaces the cached layout that the
# other tests read (scripts/test runs xdist with --dist loadgroup)
pytestmark = pytest.mark.xdist_group("own-image")

ROOT = Path(__file__).resolve().parents[2]
BUILD = [sys.executable, str(ROOT / "scripts/image/build.py")]


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def build(*args: str) -> dict[str, Any]:
    proc = subprocess.run([*BUILD, *args], capture_output=True, text=True, timeout=900,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    deploy = tmp_path_factory.mktemp("deploy")
    result = build("--deploy-out", str(deploy), "--repository", "registry.test/gpusbom")
    result["deploy"] = deploy
    return result


def test_rebuild_gives_the_same_digest(image: dict[str, Any]) -> None:
    """The assembly again from the same pinned inputs (root filesystem and wheels from the
    cache, the wheel and every layer rebuilt): the same bytes."""
    again = build("--no-cache")
    assert again["digest"] == image["digest"]
    assert again["key"] == image["key"]


def test_layers_do_not_name_the_build_machine(image: dict[str, Any]) -> None:
    """Nothing in the image depends on where it was built: no file names this checkout or the
    Python that ran the build (the console scripts' RECORD hashes once covered a shebang with
    the venv's path, so two checkouts gave the same inputs key and two digests)."""
    import gzip
    import tarfile

    layout = Path(image["layout"])
    index = json.loads((layout / "index.json").read_text())
    manifest = json.loads((layout / "blobs" / "sha256" /
                           index["manifests"][0]["digest"].split(":")[1]).read_text())
    needles = {str(ROOT).encode(), str(Path(sys.executable).parent).encode()}
    python_layer = manifest["layers"][-1]["digest"].split(":")[1]
    seen = 0
    with gzip.open(layout / "blobs" / "sha256" / python_layer) as raw, \
            tarfile.open(fileobj=raw, mode="r|") as tf:
        for member in tf:
            if not member.isfile():
                continue
            data = tf.extractfile(member).read()  # type: ignore[union-attr]
            seen += 1
            assert not [n for n in needles if n in data], member.name
            if member.name.endswith(".dist-info/RECORD"):
                assert b"../../bin/" not in data, member.name
    assert seen > 1000


def test_loaded_into_docker_and_scanned_by_itself(image: dict[str, Any], docker_engine: str,
                                                  docker_load: Any, tmp_path: Path) -> None:
    archive = tmp_path / "gpusbom.tar"
    subprocess.run(["skopeo", "--insecure-policy", "copy", "--quiet", image["reference"],
                    f"docker-archive:{archive}:gpusbom:{image['tag']}"], check=True, timeout=300)
    assert f"gpusbom:{image['tag']}" in docker_load(archive)
    out = tmp_path / "sbom.json"
    proc = subprocess.run([sys.executable, "-m", "gpusbom", "scan", f"docker:gpusbom:{image['tag']}",
                           "-q", "-o", f"cyclonedx-json={out}"], capture_output=True, text=True,
                          env={**__import__("os").environ, "DOCKER_HOST": docker_engine},
                          timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr
    bom = json.loads(out.read_text())
    have = {(_norm(c["name"]), c.get("version")) for c in bom["components"]}
    assert ("gpusbom", image["tag"]) in have
    lock = [ln.split()[0] for ln in (ROOT / "scripts/image/requirements.lock").read_text()
            .splitlines() if ln and not ln.startswith("#")]
    wanted = {(_norm(n), v) for n, v in (x.split("==") for x in lock)}
    assert len(wanted) > 50
    assert wanted - have == set()  # every pinned Python dependency, at its pinned version
    debs = [ln.split() for ln in (ROOT / "scripts/image/debian.lock").read_text().splitlines()
            if ln and not ln.startswith("#")]
    raw = {(c["name"], c.get("version")) for c in bom["components"]}
    assert {(n, v) for n, v, _ in debs} - raw == set()  # and every Debian package
    purls = {c.get("purl", "") for c in bom["components"]}
    assert any(p.startswith("pkg:pypi/gpusbom@") for p in purls)


def test_own_sbom_is_attached_and_deploy_manifests_pin_the_digest(image: dict[str, Any]) -> None:
    import kubernetes_validate
    import yaml

    layout = Path(image["layout"])
    index = json.loads((layout / "index.json").read_text())
    (art,) = [m for m in index["manifests"] if m.get("artifactType")]
    manifest = json.loads((layout / "blobs/sha256" / art["digest"][7:]).read_text())
    assert manifest["subject"]["digest"] == image["digest"]
    layer = (layout / "blobs/sha256" / manifest["layers"][0]["digest"][7:]).read_bytes()
    statement = json.loads(layer)
    assert statement["predicateType"] == "https://cyclonedx.org/bom"
    assert statement["subject"][0]["digest"] == {"sha256": image["digest"][7:]}
    names = {c["name"] for c in statement["predicate"]["components"]}
    assert {"gpusbom", "typer", "rich"} <= names

    rendered = sorted(Path(image["deploy"]).glob("*.yaml"))
    assert len(rendered) >= 5
    refs = set()
    for f in rendered:
        text = f.read_text()
        assert "sha256:" + "0" * 64 not in text, f.name
        refs |= set(re.findall(r"image:\s*(\S+)", text))
        for doc in yaml.safe_load_all(text):
            if doc:
                kubernetes_validate.validate(doc, "1.30", strict=True)
    assert refs == {f"registry.test/gpusbom@{image['digest']}"}
