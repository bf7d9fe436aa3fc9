"""The registry source against real registries (Debian's docker-registry), pushed with skopeo."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from reg_images import app_image, write_layout
from regutil import PASSWORD, USER, Registry, manifest_digest, platform_digest, raw_manifest

from fixtures import imagetools as it
from gpusbom.errors import DigestMismatchError, SourceNotFoundError, UsageError
from gpusbom.scan import scan
from gpusbom.sources import DockerEngineSource, RegistrySource, resolve_source
from gpusbom.sources.registry import (
    ImageRef,
    RegistryError,
    RegistryOptions,
    Secret,
    load_credentials,
    parse_challenges,
)

GPUSBOM = [sys.executable, "-m", "gpusbom"]
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"


# --------------------------------------------------------------------------- helpers


def comps(result: Any) -> set[tuple[str, str | None, str | None]]:
    return {(c.name, c.version, c.purl) for c in result.components}


def diff_ids(result: Any) -> list[str]:
    return [la.diff_id for la in result.target.layers]


def opts(reg: Registry, **kw: Any) -> RegistryOptions:
    return RegistryOptions(insecure=(reg.host,), **kw)


def cli(
    args: list[str], *, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*GPUSBOM, "scan", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=300,
        check=False,
    )


def one_line_error(proc: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert proc.returncode == 3, (proc.returncode, proc.stdout, proc.stderr)
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("gpusbom: ")]
    assert len(lines) == 1, proc.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


_pushed: dict[tuple[str, str], Any] = {}


def push_app(
    reg: Registry, tmp: Path, repo_tag: str, images: Any, *, fmt: str | None = None
) -> Any:
    """Push an image (or a platform list) once per registry; returns what was pushed."""
    key = (reg.host, repo_tag)
    if key not in _pushed:
        layout = write_layout(tmp / f"layout-{len(_pushed)}", images, "t")
        reg.push(f"oci:{layout}:t", repo_tag, all_platforms=isinstance(images, list), fmt=fmt)
        _pushed[key] = images
    return _pushed[key]


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("work")


@pytest.fixture(scope="module")
def app(registry_plain: Registry, work: Path) -> it.Image:
    return push_app(registry_plain, work, "team/app:v1", app_image("amd64"))


@pytest.fixture(scope="module")
def multi(registry_plain: Registry, work: Path) -> list[it.Image]:
    return push_app(
        registry_plain,
        work,
        "team/multi:v1",
        [app_image("amd64", seed=1), app_image("arm64", seed=1)],
    )


# --------------------------------------------------------------------------- parsing (no server)


@pytest.mark.parametrize(
    ("text", "registry", "repo", "tag", "api"),
    [
        ("ubuntu", "docker.io", "library/ubuntu", "latest", "registry-1.docker.io"),
        ("ubuntu:22.04", "docker.io", "library/ubuntu", "22.04", "registry-1.docker.io"),
        ("docker.io/nvidia/cuda:12.4.1-base", "docker.io", "nvidia/cuda", "12.4.1-base", "registry-1.docker.io"),
        ("index.docker.io/busybox", "docker.io", "library/busybox", "latest", "registry-1.docker.io"),
        ("nvcr.io/nvidia/pytorch:24.01-py3", "nvcr.io", "nvidia/pytorch", "24.01-py3", "nvcr.io"),
        ("localhost/app", "localhost", "app", "latest", "localhost"),
        ("127.0.0.1:5000/a/b/c:x", "127.0.0.1:5000", "a/b/c", "x", "127.0.0.1:5000"),
    ],
)  # fmt: skip
def test_reference_parsing(text: str, registry: str, repo: str, tag: str, api: str) -> None:
    r = ImageRef.parse(text)
    assert (r.registry, r.repository, r.tag, r.api_host) == (registry, repo, tag, api)


def test_reference_digest_and_errors() -> None:
    d = "sha256:" + "ab" * 32
    r = ImageRef.parse(f"ghcr.io/o/r@{d}")
    assert (r.tag, r.digest, r.reference) == (None, d, d)
    r = ImageRef.parse(f"ghcr.io/o/r:1@{d}")
    assert (r.tag, r.reference) == ("1", d)
    for bad in ("ghcr.io/o/UPPER", "x@sha256:short", "a b", "ghcr.io/o/r:bad tag"):
        with pytest.raises(UsageError):
            ImageRef.parse(bad)


def test_challenge_parsing() -> None:
    h = (
        'Bearer realm="https://auth.example/token",service="reg.example",'
        'scope="repository:a/b:pull,push", Basic realm="x \\"q\\""'
    )
    assert parse_challenges(h) == [
        ("bearer", {"realm": "https://auth.example/token", "service": "reg.example",
                    "scope": "repository:a/b:pull,push"}),
        ("basic", {"realm": 'x "q"'}),
    ]  # fmt: skip
    assert parse_challenges("Basic realm=Registry") == [("basic", {"realm": "Registry"})]


def test_secret_hidden() -> None:
    o = RegistryOptions(username="u", password="hunter2-secret")
    assert "hunter2" not in repr(o) and "hunter2" not in str(o.password)
    with pytest.raises(UsageError):
        RegistryOptions(username="u")


def test_docker_config_credentials(
    docker_config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import base64

    auth = base64.b64encode(b"alice:pw-from-auths").decode()
    (docker_config / "config.json").write_text(
        json.dumps({"auths": {"https://reg.example:5000/v2/": {"auth": auth},
                              "https://index.docker.io/v1/": {"auth": auth}}})
    )  # fmt: skip
    c = load_credentials("reg.example:5000", RegistryOptions())
    assert c is not None and c.username == "alice" and c.password.reveal() == "pw-from-auths"
    assert load_credentials("docker.io", RegistryOptions()) is not None
    assert load_credentials("other.example", RegistryOptions()) is None
    # a credential helper wins over auths; it gets the host on stdin
    bindir = tmp_path / "bin"
    bindir.mkdir()
    helper = bindir / "docker-credential-gpusbomtest"
    helper.write_text(
        '#!/bin/sh\nread host\n[ "$1" = get ] || exit 1\n'
        'if [ "$host" = reg.example:5000 ]; then\n'
        '  echo \'{"ServerURL":"reg.example:5000","Username":"bob","Secret":"pw-from-helper"}\'\n'
        "else echo 'credentials not found in native keychain'; exit 1; fi\n"
    )
    helper.chmod(helper.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    (docker_config / "config.json").write_text(
        json.dumps({"auths": {"reg.example:5000": {"auth": auth}},
                    "credHelpers": {"reg.example:5000": "gpusbomtest"}})
    )  # fmt: skip
    c = load_credentials("reg.example:5000", RegistryOptions())
    assert c is not None and (c.username, c.password.reveal()) == ("bob", "pw-from-helper")
    # credsStore: "not found" falls back to auths
    (docker_config / "config.json").write_text(
        json.dumps({"auths": {"other.example": {"auth": auth}}, "credsStore": "gpusbomtest"})
    )
    c = load_credentials("other.example", RegistryOptions())
    assert c is not None and c.username == "alice"
    # explicit options win
    c = load_credentials("reg.example:5000", RegistryOptions(username="carol", password="x"))
    assert c is not None and c.username == "carol"


# --------------------------------------------------------------------------- pulls


def test_matches_docker_archive(
    registry_plain: Registry, app: it.Image, tmp_path: Path, docker_config: Path
) -> None:
    ref = f"registry:{registry_plain.host}/team/app:v1"
    got = scan(ref, registry=opts(registry_plain))
    archive = it.write_docker_archive(tmp_path / "app.tar", app, ["team/app:v1"])
    want = scan(f"docker-archive:{archive}")
    assert comps(got) == comps(want) and len(comps(got)) == 5
    assert diff_ids(got) == diff_ids(want) == [la.diff_id for la in app.layers]
    t = got.target
    assert t.source == "registry" and t.reference == ref
    assert t.name == f"{registry_plain.host}/team/app" and t.tags == ["v1"]
    assert t.manifest_digest == manifest_digest(registry_plain, "team/app:v1")
    assert t.image_id == app.config_digest and t.platform == "linux/amd64"
    assert [la.digest for la in t.layers] == [la.digest for la in app.layers[:2]] + [None]


@pytest.mark.docker
def test_five_source_forms_one_identity(
    registry_plain: Registry, app: it.Image, tmp_path: Path, docker_config: Path,
    docker_env: str, docker_load: Any,
) -> None:  # fmt: skip
    """Registry, Docker Engine, docker-archive, oci-archive and OCI layout of one image:
    the same root bom-ref (anchored to the image ID), name and components."""
    from gpusbom.identity import target_identity

    tagged = "team/app:v1"
    archive = it.write_docker_archive(tmp_path / "app.tar", app, [tagged])
    docker_load(archive)
    results = {
        "registry": scan(f"registry:{registry_plain.host}/{tagged}", registry=opts(registry_plain)),
        "docker": scan(f"docker:{tagged}"),
        "docker-archive": scan(f"docker-archive:{archive}"),
        "oci-archive": scan(f"oci-archive:{it.write_oci_archive(tmp_path / 'app.oci.tar', app, tag='app')}"),
        "oci": scan(f"oci:{it.write_oci_layout(tmp_path / 'layout', app, tag='app')}"),
    }
    idents = {k: target_identity(r.target) for k, r in results.items()}
    assert {r.target.source for r in results.values()} == set(results)
    assert {i.root_ref for i in idents.values()} == {f"target:{app.config_digest}"}
    assert {i.name for i in idents.values()} == {"app"}
    base = comps(results["registry"])
    for k, r in results.items():
        assert comps(r) == base, k
        assert str(tmp_path) not in (idents[k].purl or "") + idents[k].document_name, k
    # the purl version is the manifest digest where the form has one
    assert idents["registry"].version == manifest_digest(registry_plain, tagged)
    assert idents["oci"].version == idents["oci-archive"].version == idents["registry"].version
    assert "repository_url=" + f"{registry_plain.host}/team/app" in (idents["registry"].purl or "")


def test_docker_schema2_manifest(registry_plain: Registry, work: Path, docker_config: Path) -> None:
    img = push_app(registry_plain, work, "team/v2s2:v1", app_image("amd64", seed=7), fmt="v2s2")
    got = scan(f"registry:{registry_plain.host}/team/v2s2:v1", registry=opts(registry_plain))
    assert {c.name for c in got.components} >= {"libc6", "requests"}
    assert diff_ids(got) == [la.diff_id for la in img.layers]
    assert got.target.manifest_digest == manifest_digest(registry_plain, "team/v2s2:v1")
    raw = json.loads(raw_manifest(registry_plain, "team/v2s2:v1"))
    assert raw["mediaType"] == "application/vnd.docker.distribution.manifest.v2+json"


@pytest.mark.parametrize("docker_list", [False, True])
def test_platform_selection(
    registry_plain: Registry, work: Path, docker_config: Path, docker_list: bool
) -> None:
    repo = "team/dlist:v1" if docker_list else "team/multi:v1"
    images = [app_image("amd64", seed=1), app_image("arm64", seed=1)]
    # the Docker manifest list: skopeo converts the OCI index (and manifests) to Docker v2s2
    pushed = push_app(registry_plain, work, repo, images, fmt="v2s2" if docker_list else None)
    raw = json.loads(raw_manifest(registry_plain, repo))
    assert raw["mediaType"] == (DOCKER_LIST if docker_list else it.OCI_INDEX)
    ref = f"registry:{registry_plain.host}/{repo}"
    for img, plat, libc in zip(pushed, ("linux/amd64", "linux/arm64"), ("deb12u4", "deb12u7")):
        r = scan(ref, platform=plat, registry=opts(registry_plain))
        want = platform_digest(registry_plain, repo, plat.split("/")[1])
        assert r.target.platform == plat and r.target.manifest_digest == want
        assert diff_ids(r) == [la.diff_id for la in img.layers]
        assert any(c.name == "libc6" and c.version.endswith(libc) for c in r.components)
    with pytest.raises(SourceNotFoundError, match="no image for platform linux/s390x"):
        scan(ref, platform="linux/s390x", registry=opts(registry_plain))


def test_digest_pinning(
    registry_plain: Registry, app: it.Image, multi: list[it.Image], docker_config: Path
) -> None:
    host = registry_plain.host
    digest = manifest_digest(registry_plain, "team/app:v1")
    r = scan(f"registry:{host}/team/app@{digest}", registry=opts(registry_plain))
    assert r.target.manifest_digest == digest and r.target.tags == []
    r = scan(f"registry:{host}/team/app:v1@{digest}", registry=opts(registry_plain))
    assert r.target.manifest_digest == digest and r.target.tags == ["v1"]
    # pinned to the index: --platform still picks
    index_digest = manifest_digest(registry_plain, "team/multi:v1")
    r = scan(f"registry:{host}/team/multi@{index_digest}", platform="linux/arm64",
             registry=opts(registry_plain))  # fmt: skip
    assert r.target.manifest_digest == platform_digest(registry_plain, "team/multi:v1", "arm64")
    absent = "sha256:" + "0" * 64
    with pytest.raises(SourceNotFoundError, match="has no digest"):
        scan(f"registry:{host}/team/app@{absent}", registry=opts(registry_plain))


def test_manifest_digest_verified(
    registry_plain: Registry, work: Path, docker_config: Path
) -> None:
    """A manifest whose bytes no longer match the digest it is fetched by is refused."""
    push_app(registry_plain, work, "team/badmanifest:v1", app_image("amd64", seed=11))
    digest = manifest_digest(registry_plain, "team/badmanifest:v1")
    f = registry_plain.blob_file(digest)
    data = f.read_bytes()
    f.write_bytes(data.replace(b'"schemaVersion":2', b'"schemaVersion": 2 '))
    assert f.read_bytes() != data
    for ref in (f"team/badmanifest@{digest}", "team/badmanifest:v1"):
        with pytest.raises(DigestMismatchError, match="digest mismatch"):
            scan(f"registry:{registry_plain.host}/{ref}", registry=opts(registry_plain))


# --------------------------------------------------------------------------- resolution


def test_bare_reference_falls_back_to_registry(
    registry_plain: Registry, app: it.Image, docker_config: Path, monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:  # fmt: skip
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    ref = f"{registry_plain.host}/team/app:v1"
    src = resolve_source(ref, registry=opts(registry_plain))
    assert isinstance(src, RegistrySource)
    with pytest.raises(SourceNotFoundError) as e:
        resolve_source(f"{registry_plain.host}/team/nope:v1", registry=opts(registry_plain))
    msg = str(e.value)
    assert "tried docker (Docker Engine not reachable" in msg and "tried registry (" in msg
    assert "repository 'team/nope' not found" in msg and "\n" not in msg
    assert isinstance(resolve_source(ref, source="docker"), DockerEngineSource)
    assert isinstance(resolve_source(ref, source="registry"), RegistrySource)


@pytest.mark.docker
def test_engine_first_when_it_has_the_image(
    registry_plain: Registry, app: it.Image, docker_env: str, docker_load: Any,
    docker_config: Path, tmp_path: Path,
) -> None:  # fmt: skip
    ref = f"{registry_plain.host}/team/app:v1"
    docker_load(it.write_docker_archive(tmp_path / "a.tar", app, [ref]))
    assert isinstance(resolve_source(ref, registry=opts(registry_plain)), DockerEngineSource)
    other = f"{registry_plain.host}/team/multi:v1"
    assert isinstance(resolve_source(other, registry=opts(registry_plain)), RegistrySource)


# --------------------------------------------------------------------------- auth


def test_basic_auth_cli(
    registry_basic: Registry, work: Path, tmp_path: Path, docker_config: Path
) -> None:
    push_app(registry_basic, work, "private/app:v1", app_image("amd64", seed=2))
    ref = f"registry:{registry_basic.host}/private/app:v1"
    out = tmp_path / "sbom.json"
    base = ["--image", ref, "--insecure-registry", registry_basic.host, "-q", "--debug"]
    ok = cli(
        [*base, "-o", f"json={out}", "--username", USER, "--password-stdin"], stdin=PASSWORD + "\n"
    )
    assert ok.returncode == 0, ok.stderr
    assert PASSWORD not in ok.stdout + ok.stderr
    doc = json.loads(out.read_text())
    assert PASSWORD not in out.read_text()
    assert "libc6" in json.dumps(doc)
    bad = cli([*base, "--username", USER, "--password-stdin"], stdin="wrong-" + PASSWORD)
    one_line_error(bad, "authentication failed", f"user {USER!r}")
    assert PASSWORD not in bad.stdout + bad.stderr and "wrong-" not in bad.stdout + bad.stderr
    anon = cli(base)
    one_line_error(anon, "authentication required")


def test_basic_auth_docker_config(
    registry_basic: Registry, work: Path, docker_config: Path
) -> None:
    import base64

    push_app(registry_basic, work, "private/app:v1", app_image("amd64", seed=2))
    auth = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    (docker_config / "config.json").write_text(
        json.dumps({"auths": {registry_basic.host: {"auth": auth}}})
    )
    r = scan(f"registry:{registry_basic.host}/private/app:v1", registry=opts(registry_basic))
    assert "libc6" in {c.name for c in r.components}


def test_token_auth(registry_token: Registry, work: Path, docker_config: Path) -> None:
    ts = registry_token.extra["token_server"]
    push_app(registry_token, work, "private/app:v1", app_image("amd64", seed=3))
    push_app(registry_token, work, "public/app:v1", app_image("amd64", seed=3))
    host = registry_token.host
    n = len(ts.requests)  # type: ignore[attr-defined]
    r = scan(f"registry:{host}/private/app:v1",
             registry=opts(registry_token, username=USER, password=Secret(PASSWORD)))  # fmt: skip
    assert "requests" in {c.name for c in r.components}
    seen = ts.requests[n:]  # type: ignore[attr-defined]
    assert seen and seen[0]["user"] == USER and seen[0]["scope"] == ["repository:private/app:pull"]
    # anonymous token flow: public/* only
    r = scan(f"registry:{host}/public/app:v1", registry=opts(registry_token))
    assert "requests" in {c.name for c in r.components}
    with pytest.raises(RegistryError, match="authentication required"):
        scan(f"registry:{host}/private/app:v1", registry=opts(registry_token))
    bad = cli(["--image", f"registry:{host}/private/app:v1", "--insecure-registry", host, "-q",
               "--debug", "--username", USER, "--password-stdin"], stdin="nope-" + PASSWORD)  # fmt: skip
    one_line_error(bad, "authentication failed")
    assert PASSWORD not in bad.stdout + bad.stderr


# --------------------------------------------------------------------------- TLS


def test_tls_with_test_ca(
    registry_tls: Registry, work: Path, docker_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    push_app(registry_tls, work, "team/app:v1", app_image("amd64", seed=4))
    ref = f"registry:{registry_tls.host}/team/app:v1"
    proc = cli(["--image", ref, "-q"], env={"DOCKER_CONFIG": str(docker_config)})
    one_line_error(proc, "TLS verification failed", "--insecure-registry")
    # trusted through REQUESTS_CA_BUNDLE
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(registry_tls.ca))
    assert "libc6" in {c.name for c in scan(ref).components}
    monkeypatch.delenv("REQUESTS_CA_BUNDLE")
    # trusted through Docker's certs.d/HOST/ca.crt
    d = docker_config / "certs.d" / registry_tls.host
    d.mkdir(parents=True)
    (d / "ca.crt").write_bytes(Path(registry_tls.ca).read_bytes())  # type: ignore[arg-type]
    assert "libc6" in {c.name for c in scan(ref).components}
    (d / "ca.crt").unlink()
    # --insecure-registry: unverified TLS
    assert "libc6" in {c.name for c in scan(ref, registry=opts(registry_tls)).components}


# --------------------------------------------------------------------------- errors


def test_unknown_repository_and_tag(
    registry_plain: Registry, app: it.Image, docker_config: Path
) -> None:
    host = registry_plain.host
    p = cli(["--image", f"registry:{host}/team/nothere:v1", "--insecure-registry", host, "-q"])
    one_line_error(p, "repository 'team/nothere' not found")
    p = cli(["--image", f"registry:{host}/team/app:v9", "--insecure-registry", host, "-q"])
    one_line_error(p, "team/app has no tag 'v9'")
    # plain HTTP without --insecure-registry: a clear error too
    p = cli(["--image", f"registry:{host}/team/app:v1", "-q"])
    one_line_error(p, "--insecure-registry")


def test_tampered_blob(registry_plain: Registry, work: Path, docker_config: Path) -> None:
    img = push_app(registry_plain, work, "team/tampered:v1", app_image("amd64", seed=5))
    layer = img.layers[2]  # uncompressed and unique to this image
    f = registry_plain.blob_file(layer.digest)
    data = bytearray(f.read_bytes())
    at = data.index(b"plain layer")
    data[at] ^= 0x20  # file content only: the tar headers stay valid
    f.write_bytes(bytes(data))
    host = registry_plain.host
    p = cli(["--image", f"registry:{host}/team/tampered:v1", "--insecure-registry", host, "-q"])
    one_line_error(p, "digest mismatch", layer.digest)


class DropProxy:
    """TCP proxy to a registry that cuts a connection after ``limit`` response bytes.

    Only the first ``cuts`` connections that get that far are cut (None: all of them).
    """

    def __init__(self, upstream: str, limit: int, cuts: int | None) -> None:
        self.upstream = upstream.split(":")
        self.limit, self.cuts, self.cut = limit, cuts, 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.host = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c: socket.socket) -> None:
        u = socket.create_connection((self.upstream[0], int(self.upstream[1])))

        def up() -> None:
            try:
                while data := c.recv(65536):
                    u.sendall(data)
            except OSError:
                pass

        threading.Thread(target=up, daemon=True).start()
        sent = 0
        try:
            while data := u.recv(65536):
                if sent + len(data) > self.limit:
                    with self.lock:
                        cut = self.cuts is None or self.cut < self.cuts
                        if cut:
                            self.cut += 1
                    if cut:
                        c.sendall(data[: self.limit - sent])
                        break
                c.sendall(data)
                sent += len(data)
        except OSError:
            pass
        finally:
            for s in (c, u):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def close(self) -> None:
        self.sock.close()


def test_connection_dropped_mid_layer(
    registry_plain: Registry, work: Path, docker_config: Path
) -> None:
    img = push_app(registry_plain, work, "team/big:v1", app_image("amd64", big=3 << 20, seed=6))
    # a flaky registry: the first two big responses are cut, the pull resumes and succeeds
    proxy = DropProxy(registry_plain.host, 256 << 10, cuts=2)
    try:
        r = scan(
            f"registry:{proxy.host}/team/big:v1", registry=RegistryOptions(insecure=(proxy.host,))
        )
        assert proxy.cut == 2
        assert diff_ids(r) == [la.diff_id for la in img.layers]
        assert "requests" in {c.name for c in r.components}
    finally:
        proxy.close()
    # a registry that always drops: retried, then one clear line and exit 3
    proxy = DropProxy(registry_plain.host, 256 << 10, cuts=None)
    try:
        p = cli(
            [
                "--image",
                f"registry:{proxy.host}/team/big:v1",
                "--insecure-registry",
                proxy.host,
                "-q",
            ]
        )
        one_line_error(p, "connection dropped 5 times", img.layers[1].digest, "giving up")
    finally:
        proxy.close()
