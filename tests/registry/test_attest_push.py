"""``gpusbom attest --push``: in-toto statements stored as OCI referrers of the image in
Debian's docker-registry (Distribution 2.8, no referrers API: the referrers tag schema),
read back by gpusbom's discover and, independently, by skopeo."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from reg_images import app_image
from regutil import PASSWORD, USER, Registry
from test_registry_source import push_app

from gpusbom.attest.oci import ARTIFACT_TYPE, discover, fetch_statement
from gpusbom.sources.registry import RegistryOptions

GPUSBOM = [sys.executable, "-m", "gpusbom"]
CDX, SPDX = "https://cyclonedx.org/bom", "https://spdx.dev/Document"
VSA = "https://slsa.dev/verification_summary/v1"


def attest(reg: Registry, ref: str, *args: str, stdin: str | None = None
           ) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SOURCE_DATE_EPOCH": "1700000000", "GPUSBOM_NO_CACHE": "1"}
    return subprocess.run([*GPUSBOM, "attest", f"registry:{reg.host}/{ref}", "--push",
                           "--insecure-registry", reg.host, *args],
                          input=stdin, capture_output=True, text=True, env=env, timeout=300,
                          check=False)


def skopeo_raw(reg: Registry, ref: str) -> dict[str, Any]:
    cmd = ["skopeo", "inspect", "--raw", "--tls-verify=false"]
    if reg.creds:
        cmd += ["--creds", reg.creds]
    out = subprocess.run([*cmd, f"docker://{reg.host}/{ref}"], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    doc: dict[str, Any] = json.loads(out)
    return doc


def bundle(path: Path) -> list[dict[str, Any]]:
    return [json.loads(base64.b64decode(json.loads(line)["payload"]))
            for line in path.read_text().splitlines()]


def test_push_and_discover_tag_schema(registry_plain: Registry, tmp_path: Path) -> None:
    reg = registry_plain
    push_app(reg, tmp_path, "attest/app:v1", app_image())
    image_digest = subprocess.run(
        ["skopeo", "inspect", "--tls-verify=false", "--format", "{{.Digest}}",
         f"docker://{reg.host}/attest/app:v1"], capture_output=True, text=True, check=True
    ).stdout.strip()
    out = tmp_path / "app.intoto.jsonl"
    proc = attest(reg, "attest/app:v1", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    statements = bundle(out)
    assert [s["predicateType"] for s in statements] == [CDX, SPDX]
    assert {s["subject"][0]["digest"]["sha256"] for s in statements} == {image_digest[7:]}
    assert proc.stderr.count("tag-schema") == 2, proc.stderr

    opts = RegistryOptions(insecure=(reg.host,))
    image = f"{reg.host}/attest/app:v1"
    found, via = discover(image, image_digest, opts)
    assert via == "tag-schema"
    assert sorted(r.predicate_type or "" for r in found) == sorted([CDX, SPDX])
    assert {r.artifact_type for r in found} == {ARTIFACT_TYPE}
    # what gpusbom stored is the statement it wrote, byte for byte as JSON
    by_type = {r.predicate_type: r for r in found}
    for s in statements:
        assert fetch_statement(image, by_type[s["predicateType"]].digest, opts) == s

    # an independent client sees the same: the fallback index and the artifact manifests
    index = skopeo_raw(reg, f"attest/app:sha256-{image_digest[7:]}")
    assert index["mediaType"] == "application/vnd.oci.image.index.v1+json"
    assert sorted(m["digest"] for m in index["manifests"]) == sorted(r.digest for r in found)
    for r in found:
        manifest = skopeo_raw(reg, f"attest/app@{r.digest}")
        assert manifest["artifactType"] == ARTIFACT_TYPE
        assert manifest["subject"]["digest"] == image_digest
        assert manifest["config"]["mediaType"] == "application/vnd.oci.empty.v1+json"
        assert manifest["layers"][0]["annotations"]["in-toto.io/predicate-type"] == \
            r.predicate_type

    # the same statements again change nothing; a gate decision is added beside them
    assert attest(reg, "attest/app:v1", "-q").returncode == 0
    assert len(discover(image, image_digest, opts)[0]) == 2
    proc = attest(reg, "attest/app:v1", "--policy", "default", "--sbom-format", "cyclonedx")
    assert proc.returncode == 0, proc.stderr
    found, _ = discover(image, image_digest, opts)
    assert sorted(r.predicate_type or "" for r in found) == sorted([CDX, SPDX, VSA])
    (vsa,) = [r for r in found if r.predicate_type == VSA]
    doc = fetch_statement(image, vsa.digest, opts)
    assert doc["predicate"]["verificationResult"] == "PASSED"
    assert doc["subject"][0]["digest"]["sha256"] == image_digest[7:]


def test_push_with_bearer_token(registry_token: Registry, tmp_path: Path) -> None:
    """A token registry: the push asks the token server for pull,push (the challenge's scope)."""
    reg = registry_token
    push_app(reg, tmp_path, "team/app:v1", app_image())
    proc = attest(reg, "team/app:v1", "--username", USER, "--password-stdin", "-q",
                  "--sbom-format", "spdx", stdin=PASSWORD)
    assert proc.returncode == 0, proc.stderr
    scopes = [s for r in reg.extra["token_server"].requests  # type: ignore[attr-defined]
              for s in r.get("scope", [])]
    assert "repository:team/app:pull,push" in scopes
    digest = skopeo_raw(reg, "team/app:v1")
    index_ref = "team/app:sha256-" + __import__("hashlib").sha256(
        subprocess.run(["skopeo", "inspect", "--raw", "--tls-verify=false", "--creds", reg.creds,
                        f"docker://{reg.host}/team/app:v1"], capture_output=True,
                       check=True).stdout).hexdigest()
    assert digest["schemaVersion"] == 2
    index = skopeo_raw(reg, index_ref)
    assert [m["annotations"]["in-toto.io/predicate-type"] for m in index["manifests"]] == [SPDX]


def test_push_needs_a_registry_reference(tmp_path: Path) -> None:
    proc = subprocess.run([*GPUSBOM, "attest", f"oci:{tmp_path}:x", "--push"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("gpusbom: ")]
    assert len(lines) == 1 and "registry reference" in lines[0], proc.stderr


@pytest.mark.parametrize("signer", ["cosign", "sigstore"])
def test_missing_signer_is_a_usage_error(signer: str) -> None:
    """Signing is delegated, never required: a signer that is not there is one line, exit 2,
    before any scan (the registry named here does not exist)."""
    import importlib.util

    if signer == "sigstore" and importlib.util.find_spec("sigstore") is not None:
        pytest.fail("sigstore is installed in the test venv: this test expects it absent")
    env = {**os.environ, "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}  # no cosign in Debian 12
    proc = subprocess.run([*GPUSBOM, "attest", "registry:127.0.0.1:1/x/y:z", "--sign", signer],
                          capture_output=True, text=True, timeout=120, check=False, env=env)
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("gpusbom: ")]
    assert len(lines) == 1 and f"--sign {signer}: {signer} is not installed" in lines[0]
