"""Helpers for the registry tests: real registries, a token server, skopeo pushes.

Debian's ``docker-registry`` (CNCF distribution 2.8) runs on 127.0.0.1 on free ports, each
with its own storage root and a config written here:

* ``registry_plain``: plain HTTP, anonymous;
* ``registry_basic``: plain HTTP with htpasswd (bcrypt, made with ``htpasswd -B``) basic auth;
* ``registry_tls``: HTTPS with a certificate from a test CA made here with ``openssl``;
* ``registry_token``: plain HTTP with token auth; the token server is ``TokenServer`` below
  (``http.server``), which signs RS256 JWTs with a key whose certificate is the registry's
  ``rootcertbundle``. Anonymous clients get pull access to ``public/*`` only.

Images are pushed with ``skopeo copy`` from OCI layouts built by ``fixtures.imagetools``.
"""

from __future__ import annotations

import base64
import json
import shutil
import socket
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

USER, PASSWORD = "scanner", "s3cret-Pa55word-xyzzy"
SERVICE, ISSUER = "test-registry", "test-issuer"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _need(*tools: str) -> None:
    for t in tools:
        if shutil.which(t) is None:
            pytest.skip(
                f"{t} is not installed (apt-get install docker-registry skopeo apache2-utils)"
            )


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca(d: Path) -> tuple[Path, Path, Path]:
    """(ca.pem, server.pem, server.key): a test CA and a 127.0.0.1 server certificate."""
    d.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
             "ca.pem", "-days", "2", "-subj", "/CN=gpusbom test CA", cwd=d)  # fmt: skip
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out",
             "server.csr", "-subj", "/CN=127.0.0.1", cwd=d)  # fmt: skip
    (d / "ext.cnf").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n"
        "keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n"
    )
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "ext.cnf", cwd=d)  # fmt: skip
    return d / "ca.pem", d / "server.pem", d / "server.key"


@dataclass
class Registry:
    host: str  # 127.0.0.1:PORT
    root: Path  # storage root
    proc: subprocess.Popen[bytes]
    log: Path
    scheme: str = "http"
    ca: Path | None = None
    creds: str | None = None  # user:password for skopeo
    extra: dict[str, object] = field(default_factory=dict)

    def push(
        self, src: str, repo_tag: str, *, all_platforms: bool = False, fmt: str | None = None
    ) -> None:
        cmd = ["skopeo", "--insecure-policy", "copy", "--quiet", "--dest-tls-verify=false"]
        if all_platforms:
            cmd.append("--all")
        if fmt:
            cmd += ["--format", fmt]
        else:  # keep the layout's manifests and (uncompressed) layers byte for byte
            cmd.append("--preserve-digests")
        if self.creds:
            cmd += ["--dest-creds", self.creds]
        cmd += [src, f"docker://{self.host}/{repo_tag}"]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise RuntimeError(
                f"skopeo push to {self.host}/{repo_tag} failed: {proc.stderr.strip()}"
            )

    def blob_file(self, digest: str) -> Path:
        hexd = digest.split(":", 1)[1]
        return self.root / "docker/registry/v2/blobs/sha256" / hexd[:2] / hexd / "data"

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


def start_registry(
    base: Path, name: str, *, auth: str = "", tls: tuple[Path, Path] | None = None
) -> Registry:
    d = base / name
    root = d / "storage"
    root.mkdir(parents=True)
    port = free_port()
    lines = [
        "version: 0.1",
        "log:",
        "  level: warn",
        "  accesslog:",
        "    disabled: true",
        "storage:",
        "  filesystem:",
        f"    rootdirectory: {root}",
        "  delete:",
        "    enabled: true",
        "http:",
        f"  addr: 127.0.0.1:{port}",
        f"  secret: {uuid.uuid4().hex}",
    ]
    if tls:
        lines += ["  tls:", f"    certificate: {tls[0]}", f"    key: {tls[1]}"]
    if auth:
        lines.append(auth)
    cfg = d / "config.yml"
    cfg.write_text("\n".join(lines) + "\n")
    log = d / "registry.log"
    with open(log, "wb") as f:
        proc = subprocess.Popen(
            ["docker-registry", "serve", str(cfg)], stdout=f, stderr=subprocess.STDOUT
        )
    reg = Registry(f"127.0.0.1:{port}", root, proc, log, "https" if tls else "http")
    deadline = time.monotonic() + 30
    while True:
        if proc.poll() is not None:
            pytest.fail(f"docker-registry exited {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            if time.monotonic() > deadline:
                reg.stop()
                pytest.fail(f"docker-registry did not listen: {log.read_text()[-2000:]}")
            time.sleep(0.1)
    return reg


# --------------------------------------------------------------------------- token server


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class TokenServer:
    """Issues RS256 registry tokens (JWT with an x5c header) for basic-auth'd or anonymous users."""

    def __init__(self, d: Path, user: str = USER, password: str = PASSWORD) -> None:
        self.user, self.password = user, password  # NGC: "$oauthtoken" and the API key
        self.dir = d
        d.mkdir(parents=True, exist_ok=True)
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "token.key", "-out",
                 "token.pem", "-days", "2", "-subj", "/CN=gpusbom token signer", cwd=d)  # fmt: skip
        der = subprocess.run(
            ["openssl", "x509", "-in", "token.pem", "-outform", "DER"],
            cwd=d, check=True, capture_output=True,
        ).stdout  # fmt: skip
        self.x5c = base64.b64encode(der).decode()
        self.cert = d / "token.pem"
        self.requests: list[dict[str, object]] = []
        self.tokens: list[str] = []  # every token issued (the secret-leak tests grep for them)
        self.port = free_port()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: object) -> None:
                pass

            def do_GET(self) -> None:
                server.handle(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def realm(self) -> str:
        return f"http://127.0.0.1:{self.port}/token"

    def sign(self, claims: dict[str, object]) -> str:
        header = {"typ": "JWT", "alg": "RS256", "x5c": [self.x5c]}
        signing_input = (
            f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
        )
        sig = subprocess.run(
            ["openssl", "dgst", "-sha256", "-sign", str(self.dir / "token.key")],
            input=signing_input.encode(), check=True, capture_output=True,
        ).stdout  # fmt: skip
        return f"{signing_input}.{_b64url(sig)}"

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        q = parse_qs(urlsplit(h.path).query)
        user = None
        auth = h.headers.get("Authorization", "")
        if auth.startswith("Basic "):
            u, _, p = base64.b64decode(auth[6:]).decode().partition(":")
            if (u, p) != (self.user, self.password):
                self.requests.append({"user": u, "ok": False})
                h.send_response(401)
                h.send_header("Content-Type", "application/json")
                h.end_headers()
                h.wfile.write(b'{"details": "invalid credentials"}')
                return
            user = u
        access = []
        for scope in q.get("scope", []):
            typ, _, rest = scope.partition(":")
            name, _, actions = rest.rpartition(":")
            if typ != "repository":
                continue
            want = actions.split(",")
            if user is None:
                want = [a for a in want if a == "pull"] if name.startswith("public/") else []
            access.append({"type": "repository", "name": name, "actions": want})
        self.requests.append({"user": user, "ok": True, "scope": q.get("scope", [])})
        now = int(time.time())
        token = self.sign(
            {
                "iss": ISSUER, "sub": user or "", "aud": q.get("service", [SERVICE])[0],
                "exp": now + 600, "nbf": now - 60, "iat": now, "jti": uuid.uuid4().hex,
                "access": access,
            }
        )  # fmt: skip
        self.tokens.append(token)
        body = json.dumps({"token": token, "access_token": token, "expires_in": 600}).encode()
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


__all__ = ["PASSWORD", "USER", "Registry", "TokenServer", "free_port", "make_ca", "start_registry"]


def raw_manifest(reg: Registry, repo_ref: str) -> bytes:
    """The manifest (or index) bytes the registry serves for ``repo_ref`` (``repo:tag`` / ``repo@digest``)."""
    cmd = ["skopeo", "inspect", "--raw", "--tls-verify=false"]
    if reg.creds:
        cmd += ["--creds", reg.creds]
    return subprocess.run(
        [*cmd, f"docker://{reg.host}/{repo_ref}"], check=True, capture_output=True
    ).stdout


def manifest_digest(reg: Registry, repo_ref: str) -> str:
    import hashlib

    return "sha256:" + hashlib.sha256(raw_manifest(reg, repo_ref)).hexdigest()


def platform_digest(reg: Registry, repo_tag: str, arch: str) -> str:
    """The digest of the ``linux/arch`` manifest in the index at ``repo_tag``."""
    doc = json.loads(raw_manifest(reg, repo_tag))
    for d in doc["manifests"]:
        if d.get("platform", {}).get("architecture") == arch:
            return str(d["digest"])
    raise KeyError(arch)
