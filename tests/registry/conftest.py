"""Fixtures for the registry tests: real registries on 127.0.0.1 (see regutil)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from regutil import (
    ISSUER,
    PASSWORD,
    SERVICE,
    USER,
    Registry,
    TokenServer,
    _need,
    make_ca,
    start_registry,
)

# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def registry_base() -> Iterator[Path]:
    _need("docker-registry", "skopeo", "openssl")
    d = Path(tempfile.mkdtemp(prefix="gpusbom-registry-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def registry_plain(registry_base: Path) -> Iterator[Registry]:
    reg = start_registry(registry_base, "plain")
    yield reg
    reg.stop()


@pytest.fixture(scope="session")
def registry_basic(registry_base: Path) -> Iterator[Registry]:
    _need("htpasswd")
    htp = registry_base / "htpasswd"
    line = subprocess.run(
        ["htpasswd", "-Bbn", USER, PASSWORD], check=True, capture_output=True, text=True
    ).stdout.strip()
    htp.write_text(line + "\n")
    auth = f"auth:\n  htpasswd:\n    realm: gpusbom-test\n    path: {htp}"
    reg = start_registry(registry_base, "basic", auth=auth)
    reg.creds = f"{USER}:{PASSWORD}"
    yield reg
    reg.stop()


@pytest.fixture(scope="session")
def registry_tls(registry_base: Path) -> Iterator[Registry]:
    ca, cert, key = make_ca(registry_base / "pki")
    reg = start_registry(registry_base, "tls", tls=(cert, key))
    reg.ca = ca
    yield reg
    reg.stop()


@pytest.fixture(scope="session")
def registry_token(registry_base: Path) -> Iterator[Registry]:
    ts = TokenServer(registry_base / "token")
    auth = (
        f"auth:\n  token:\n    realm: {ts.realm}\n    service: {SERVICE}\n"
        f"    issuer: {ISSUER}\n    rootcertbundle: {ts.cert}"
    )
    reg = start_registry(registry_base, "token", auth=auth)
    reg.creds = f"{USER}:{PASSWORD}"
    reg.extra["token_server"] = ts
    yield reg
    reg.stop()
    ts.stop()


@pytest.fixture
def docker_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty DOCKER_CONFIG directory for this test (no host credentials leak in)."""
    d = tmp_path / "docker-config"
    d.mkdir()
    monkeypatch.setenv("DOCKER_CONFIG", str(d))
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    return d
