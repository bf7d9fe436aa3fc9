"""containerd and containers-storage sources against stores written by the real daemons:
every image reads to the same components as its docker-archive, running containers are
told apart from created ones, and bad stores give one clear line and exit 3."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from node_stores import Containerd, containerd_daemon, podman_store, start_containers

from fixtures.build import ensure
from gpusbom.scan import scan
from gpusbom.sources.containerd import containers, list_images

FIXTURES = ("demo", "multilayer")


def components(ref: str) -> set[tuple[str, str | None, str | None, str]]:
    return {(c.name, c.version, c.purl, c.type) for c in scan(ref, advisories=False).components}


@pytest.fixture(scope="module")
def archives() -> dict[str, Path]:
    return {n: ensure(n).docker_archive for n in FIXTURES}


@pytest.fixture(scope="module")
def expected(archives: dict[str, Path]) -> dict[str, set[tuple[str, str | None, str | None, str]]]:
    return {n: components(f"docker-archive:{a}") for n, a in archives.items()}


@pytest.fixture(scope="module")
def ctd(archives: dict[str, Path]) -> Iterator[Containerd]:
    with containerd_daemon(list(archives.values())) as c:
        start_containers(c, c.images[str(archives["demo"])])
        yield c


@pytest.fixture(scope="module")
def podman(tmp_path_factory: pytest.TempPathFactory, archives: dict[str, Path]) -> dict[
    str, tuple[Path, dict[str, str]]
]:
    d = tmp_path_factory.mktemp("podman")
    out = {}
    for driver in ("overlay", "vfs"):
        out[driver] = (d / driver, podman_store(d / driver, driver, list(archives.values())))
    return out


def _cli(ref: str, tmp: Path) -> tuple[int, str]:
    out = tmp / "o.json"
    r = subprocess.run([sys.executable, "-m", "gpusbom", "scan", "-q", ref, "-o", f"json={out}"],
                       capture_output=True, text=True, check=False)
    assert not out.exists()
    return r.returncode, r.stderr.strip()


@pytest.mark.parametrize("name", FIXTURES)
def test_containerd_parity(ctd: Containerd, archives: dict[str, Path], expected: dict[
    str, set[tuple[str, str | None, str | None, str]]
], name: str) -> None:
    image = ctd.images[str(archives[name])]
    res = scan(f"containerd:{image}?dir={ctd.root}", advisories=False)
    assert res.target.source == "containerd"
    assert f"{res.target.name}:{res.target.tags[0]}" == image
    assert res.target.manifest_digest and res.target.manifest_digest.startswith("sha256:")
    got = {(c.name, c.version, c.purl, c.type) for c in res.components}
    assert len(expected[name]) >= 5 and got == expected[name]


def test_containerd_short_name_namespace_and_running(ctd: Containerd, archives: dict[
    str, Path
]) -> None:
    image = ctd.images[str(archives["demo"])]  # docker.io/gpusbom-fixtures/demo:latest
    short = image.removeprefix("docker.io/").removesuffix(":latest")
    t = scan(f"containerd:{short}?namespace=k8s.io&dir={ctd.root}", advisories=False).target
    assert t.name == image.rsplit(":", 1)[0] and t.tags == ["latest"]
    listed = {(i.namespace, i.name) for i in list_images(str(ctd.root))}
    assert ("k8s.io", image) in listed and len(listed) == len(FIXTURES)
    state = {c.id: (c.image, c.running) for c in containers(str(ctd.root), str(ctd.state))}
    assert state == {ctd.running_id: (image, True), ctd.created_id: (image, False)}
    assert ctd.running_id in ctd.ctr("task", "ls")  # the daemon agrees


def test_containerd_bad_inputs(ctd: Containerd, tmp_path: Path) -> None:
    rc, err = _cli(f"containerd:nope/missing:1?dir={ctd.root}", tmp_path)
    assert rc == 3 and err.count("\n") == 0 and "no such image in namespace k8s.io" in err
    rc, err = _cli(f"containerd:x?namespace=default&dir={tmp_path}/none", tmp_path)
    assert rc == 3 and err.count("\n") == 0 and "no containerd metadata database" in err
    # a copy of the store whose metadata pages are damaged, and one missing a blob
    bad = tmp_path / "bad"
    shutil.copytree(ctd.root / "io.containerd.metadata.v1.bolt", bad / "io.containerd.metadata.v1.bolt")
    db = bad / "io.containerd.metadata.v1.bolt" / "meta.db"
    data = bytearray(db.read_bytes())
    data[0:8192] = b"\xff" * 8192  # both meta pages
    db.write_bytes(bytes(data))
    rc, err = _cli(f"containerd:gpusbom-fixtures/demo?dir={bad}", tmp_path)
    assert rc == 3 and err.count("\n") == 0 and "not a bolt database" in err
    nob = tmp_path / "noblob"
    shutil.copytree(ctd.root / "io.containerd.metadata.v1.bolt", nob / "io.containerd.metadata.v1.bolt")
    (nob / "io.containerd.content.v1.content" / "blobs" / "sha256").mkdir(parents=True)
    rc, err = _cli(f"containerd:gpusbom-fixtures/demo?dir={nob}", tmp_path)
    assert rc == 3 and err.count("\n") == 0 and "is not in the content store" in err


@pytest.mark.parametrize("driver", ["overlay", "vfs"])
@pytest.mark.parametrize("name", FIXTURES)
def test_containers_storage_parity(podman: dict[str, tuple[Path, dict[str, str]]], archives: dict[
    str, Path
], expected: dict[str, set[tuple[str, str | None, str | None, str]]], driver: str,
        name: str) -> None:
    root, names = podman[driver]
    image = names[str(archives[name])]
    res = scan(f"containers-storage:{image}?dir={root}", advisories=False)
    assert res.target.source == "containers-storage"
    assert f"{res.target.name}:{res.target.tags[0]}" == image
    got = {(c.name, c.version, c.purl, c.type) for c in res.components}
    assert got == expected[name]


def test_containers_storage_overlay_whiteouts(podman: dict[str, tuple[Path, dict[str, str]]],
                                              archives: dict[str, Path]) -> None:
    """The multilayer fixture deletes and hides files in upper layers: the overlay diff
    directories carry them as 0:0 character devices and opaque xattrs."""
    root, _ = podman["overlay"]
    layers = sorted((root / "overlay").glob("*/diff"))
    chars = [p for d in layers for p in d.rglob("*") if p.is_char_device()]
    assert chars, "podman wrote no overlay whiteouts for the multilayer image"


def test_containers_storage_bad_inputs(podman: dict[str, tuple[Path, dict[str, str]]],
                                       tmp_path: Path) -> None:
    root, _ = podman["overlay"]
    rc, err = _cli(f"containers-storage:nope:1?dir={root}", tmp_path)
    assert rc == 3 and err.count("\n") == 0 and "no such image" in err
    broken = tmp_path / "broken"
    shutil.copytree(root / "overlay-images", broken / "overlay-images")
    shutil.copytree(root / "overlay-layers", broken / "overlay-layers")
    rc, err = _cli(f"containers-storage:gpusbom-fixtures/demo?dir={broken}", tmp_path)
    assert rc == 3 and err.count("\n") == 0 and "cannot open layer directory" in err


def test_mutated_containerd_metadata_never_crashes(ctd: Containerd) -> None:
    """Seeded random byte changes in a real meta.db: the bolt reader walks it or raises
    BoltError, never anything else (a truncated inline bucket once raised struct.error)."""
    import io
    import random

    from gpusbom.sources.bolt import Bolt, BoltError, Bucket

    data = (ctd.root / "io.containerd.metadata.v1.bolt" / "meta.db").read_bytes()

    def walk(b: Bucket) -> int:
        return sum(1 + (walk(sub) if sub is not None else 0) for _, _, sub in b.items())

    rng = random.Random(18)
    errors = 0
    for _ in range(400):
        d = bytearray(data)
        for _ in range(rng.randint(1, 6)):
            d[rng.randrange(len(d))] = rng.randrange(256)
        try:
            walk(Bolt(io.BytesIO(bytes(d)), len(d), "meta.db").root())
        except BoltError:
            errors += 1
    assert errors > 10
