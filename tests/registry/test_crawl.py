"""``gpusbom crawl``: a real registry (Debian's docker-registry) holding 200 small images that
share base layers, crawled by 4 shard processes at once (plus one more on an overlapping
shard) into a real PostgreSQL inventory: every image is stored exactly once.

Images are pushed through the registry's HTTP API from layers built by
``fixtures.imagetools`` (the shared base layer is uploaded once): a Debian os-release, and
per image one Python distribution (its own name and version) so every stored scan differs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests
from regutil import Registry

from fixtures import imagetools as it

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "inventory"))
from inv_pgserver import PgServer, find_bindir

REPOS, TAGS = 20, 10  # 200 single-platform images
PREFIX = "crawl"


def _upload(base: str, repo: str, digest: str, data: bytes, s: requests.Session) -> None:
    if s.head(f"{base}/v2/{repo}/blobs/{digest}").status_code == 200:
        return
    r = s.post(f"{base}/v2/{repo}/blobs/uploads/")
    r.raise_for_status()
    loc = r.headers["Location"]
    loc = loc if loc.startswith("http") else base + loc
    sep = "&" if "?" in loc else "?"
    r = s.put(f"{loc}{sep}digest={digest}", data=data,
              headers={"Content-Type": "application/octet-stream"})
    r.raise_for_status()


def _put_manifest(base: str, repo: str, ref: str, body: bytes, mt: str,
                  s: requests.Session) -> None:
    r = s.put(f"{base}/v2/{repo}/manifests/{ref}", data=body, headers={"Content-Type": mt})
    r.raise_for_status()


def _image(i: int, base_layer: list[it.EntrySpec], platform: str = "linux/amd64") -> it.Image:
    name = f"crawl-pkg-{i:03d}"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.{i}.0\n".encode()
    site = "/usr/lib/python3/dist-packages"
    top: list[it.EntrySpec] = [(f"{site}/{name.replace('-', '_')}-1.{i}.0.dist-info/METADATA",
                                meta)]
    return it.build_image([base_layer, top], platform=platform,
                          env={"CUDA_VERSION": "12.4.1"})


def push_images(reg: Registry) -> dict[str, object]:
    base = f"http://{reg.host}"
    base_layer: list[it.EntrySpec] = [("/etc/os-release", b"ID=debian\nVERSION_ID=12\n")]
    s = requests.Session()
    digests: set[str] = set()
    t0 = time.monotonic()

    def push(repo: str, tag: str, img: it.Image, manifest: bool = True) -> None:
        for layer in img.layers:
            _upload(base, repo, layer.digest, layer.blob, s)
        _upload(base, repo, img.config_digest, img.config_bytes, s)
        if manifest:
            _put_manifest(base, repo, tag, img.manifest_bytes,
                          "application/vnd.oci.image.manifest.v1+json", s)

    def push_repo(r: int) -> list[str]:
        out = []
        with requests.Session() as rs:
            for t in range(TAGS):
                img = _image(r * TAGS + t, base_layer)
                repo = f"{PREFIX}/r{r:02d}"
                for layer in img.layers:
                    _upload(base, repo, layer.digest, layer.blob, rs)
                _upload(base, repo, img.config_digest, img.config_bytes, rs)
                _put_manifest(base, repo, f"v{t}", img.manifest_bytes,
                              "application/vnd.oci.image.manifest.v1+json", rs)
                out.append(img.manifest_digest)
        return out

    with ThreadPoolExecutor(8) as pool:  # one repository per worker
        for got in pool.map(push_repo, range(REPOS)):
            digests.update(got)
    # one multi-platform index (2 images) and a second tag of an image already pushed
    amd, arm = _image(900, base_layer), _image(901, base_layer, "linux/arm64")
    repo = f"{PREFIX}/multi"
    for img in (amd, arm):
        push(repo, "", img, manifest=False)
        _put_manifest(base, repo, img.manifest_digest, img.manifest_bytes,
                      "application/vnd.oci.image.manifest.v1+json", s)
        digests.add(img.manifest_digest)
    index = json.dumps({"schemaVersion": 2,
                        "mediaType": "application/vnd.oci.image.index.v1+json",
                        "manifests": [amd.descriptor(platform=True),
                                      arm.descriptor(platform=True)]}).encode()
    _put_manifest(base, repo, "latest", index, "application/vnd.oci.image.index.v1+json", s)
    again = _image(0, base_layer)
    _put_manifest(base, f"{PREFIX}/r00", "also-v0", again.manifest_bytes,
                  "application/vnd.oci.image.manifest.v1+json", s)
    # outside the prefix: never crawled
    push("other/x", "1", _image(950, base_layer))
    return {"digests": digests, "push_seconds": time.monotonic() - t0}


@pytest.fixture(scope="module")
def pushed(registry_plain: Registry) -> dict[str, object]:
    return push_images(registry_plain)


@pytest.fixture(scope="module")
def pg() -> Iterator[PgServer]:
    bindir = find_bindir()
    assert bindir is not None, "PostgreSQL is missing (scripts/test installs postgresql)"
    server = PgServer(bindir).start()
    try:
        yield server
    finally:
        server.stop()


def _crawler(reg: Registry, url: str, shard: str, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "gpusbom", "crawl", f"{reg.host}/{PREFIX}", "--push", url,
         "--shard", shard, "--insecure-registry", reg.host, "-q"],
        stdout=subprocess.DEVNULL, stderr=open(log, "wb"),
    )


def test_crawl_200_images_4_shards_postgres(registry_plain: Registry, pg: PgServer,
                                            pushed: dict[str, object], tmp_path: Path) -> None:
    digests: set[str] = pushed["digests"]  # type: ignore[assignment]
    assert len(digests) == REPOS * TAGS + 2
    url = pg.create_db()
    t0 = time.monotonic()
    procs = [_crawler(registry_plain, url, f"{i}/4", tmp_path / f"s{i}.log") for i in range(4)]
    procs.append(_crawler(registry_plain, url, "1/2", tmp_path / "overlap.log"))  # overlaps
    codes = [p.wait(timeout=900) for p in procs]
    wall = time.monotonic() - t0
    logs = [(tmp_path / f"s{i}.log").read_text() for i in range(4)]
    overlap_log = (tmp_path / "overlap.log").read_text()
    assert codes == [0] * 5, (codes, logs, overlap_log)
    db = url.rsplit("/", 1)[1]
    rows = pg.psql("SELECT digest FROM scans WHERE kind = 'image'", db).split()
    assert len(rows) == len(set(rows)), "an image was stored twice"
    assert set(rows) == digests
    # the shards split the work: each stored some, together all, with no overlap in work items
    stored = [int(line.split(" stored,")[0].rsplit(" ", 1)[1]) for log in logs
              for line in log.splitlines() if line.startswith("crawl shard")]
    in_shard = [int(line.split(" in this shard")[0].rsplit("(", 1)[1]) for log in logs
                for line in log.splitlines() if line.startswith("crawl shard")]
    assert len(stored) == 4 and all(n > 0 for n in in_shard)
    assert sum(in_shard) == REPOS * TAGS + 2  # 200 tags + multi:latest + r00:also-v0
    rate = len(rows) * 60 / wall
    print(f"\ncrawl: {len(rows)} images by 4 shard processes (+1 overlapping) in {wall:.1f} s: "
          f"{rate:.0f} images/min (push {pushed['push_seconds']:.1f} s)")
    # a second run stores nothing new and skips every image by digest
    r = subprocess.run(
        [sys.executable, "-m", "gpusbom", "crawl", f"{registry_plain.host}/{PREFIX}", "--push",
         url, "--insecure-registry", registry_plain.host, "-q"],
        capture_output=True, text=True, check=False, timeout=600,
    )
    assert r.returncode == 0, r.stderr
    assert " 0 stored, 203 already stored" in r.stderr, r.stderr
    assert pg.psql("SELECT count(*) FROM scans WHERE kind = 'image'", db).strip() == str(
        len(digests)
    )


def test_crawl_filters_and_bad_input(registry_plain: Registry, pushed: dict[str, object],
                                     tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'inv.db'}"
    r = subprocess.run(
        [sys.executable, "-m", "gpusbom", "crawl", f"{registry_plain.host}/{PREFIX}", "--push",
         url, "--insecure-registry", registry_plain.host, "--include", f"{PREFIX}/multi",
         "--platform", "linux/arm64", "-q"],
        capture_output=True, text=True, check=False, timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert "1 repositories" in r.stderr and " 1 stored," in r.stderr, r.stderr
    # --since: the test images say they were created in 1970; nothing is scanned or stored
    r = subprocess.run(
        [sys.executable, "-m", "gpusbom", "crawl", f"{registry_plain.host}/{PREFIX}", "--push",
         f"sqlite:///{tmp_path / 'since.db'}", "--insecure-registry", registry_plain.host,
         "--include", f"{PREFIX}/multi", "--since", "30d", "-q"],
        capture_output=True, text=True, check=False, timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert " 0 stored, 0 already stored, 2 older than --since" in r.stderr, r.stderr
    r = subprocess.run(
        [sys.executable, "-m", "gpusbom", "crawl", f"{registry_plain.host}/{PREFIX}", "--push",
         url, "--shard", "4/4"], capture_output=True, text=True, check=False,
    )
    assert r.returncode == 2 and "expected I/N" in r.stderr
    r = subprocess.run(
        [sys.executable, "-m", "gpusbom", "crawl", "127.0.0.1:9/none", "--push", url,
         "--insecure-registry", "127.0.0.1:9"], capture_output=True, text=True, check=False,
        timeout=300,
    )
    assert r.returncode == 3 and r.stderr.strip().count("\n") == 0, r.stderr


def test_crawl_shards_from_indexed_job_env(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpusbom.crawl import parse_shard, shard_of

    monkeypatch.setenv("JOB_COMPLETION_INDEX", "3")
    monkeypatch.setenv("GPUSBOM_SHARDS", "8")
    assert parse_shard(None) == (3, 8)
    keys = [f"r{i}:v{j}" for i in range(50) for j in range(8)]
    counts = [sum(1 for k in keys if shard_of(k, 8) == s) for s in range(8)]
    assert sum(counts) == 400 and min(counts) > 25  # every key in one shard, spread evenly


def test_crawl_manifests_are_indexed_jobs() -> None:
    import kubernetes_validate
    import yaml

    path = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes" / "crawl.yaml"
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert [d["kind"] for d in docs] == ["Job", "CronJob"]
    for d in docs:
        assert kubernetes_validate.validate(d, "1.30", strict=True) == "1.30"
        job = d["spec"] if d["kind"] == "Job" else d["spec"]["jobTemplate"]["spec"]
        assert job["completionMode"] == "Indexed"
        [c] = job["template"]["spec"]["containers"]
        env = {e["name"]: e.get("value") for e in c["env"]}
        assert int(env["GPUSBOM_SHARDS"]) == job["completions"] == job["parallelism"]
        assert c["command"][:2] == ["gpusbom", "crawl"] and "--push" in c["command"]
        assert c["securityContext"]["readOnlyRootFilesystem"] is True
