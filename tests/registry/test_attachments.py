"""Registry attachments against a real registry (Debian's docker-registry 2.8, which has no
referrers API, so the referrers tag schema is what it serves): an image pushed with skopeo,
an OpenVEX document, CycloneDX / SPDX SBOMs and in-toto attestations attached as OCI 1.1
artifacts (``attach.Pusher``). ``scan registry:...`` applies the vendor's VEX and names the
attachment; ``reconcile`` reports exactly the differences planted in the declared SBOM;
hostile attachments are one warning each and the scan goes on."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from attach import Pusher, dsse
from reg_images import dist_info, dpkg_status
from regutil import Registry, make_ca, manifest_digest, start_registry, TokenServer

from fixtures import imagetools as it

GPUSBOM = [sys.executable, "-m", "gpusbom"]
CVE = "CVE-2025-32434"  # torch.load with weights_only=True; torch 2.5.1 is affected
OPENVEX_CTX = "https://openvex.dev/ns/v0.2.0"


def image(seed: str = "", arch: str = "amd64") -> it.Image:
    """Debian-ish dpkg (libc6, zlib1g) and Python (requests, urllib3, torch 2.5.1) layers."""
    base = [
        ("/etc/os-release", b'ID=debian\nVERSION_ID="12"\nPRETTY_NAME="Debian 12"\n'),
        ("/var/lib/dpkg/status", dpkg_status([("libc6", "2.36-9+deb12u4", "amd64"),
                                              ("zlib1g", "1:1.2.13.dfsg-1", "amd64")])),
    ]
    py = dist_info("requests", "2.31.0") + dist_info("urllib3", "2.0.7") + dist_info(
        "torch", "2.5.1")
    py.append(("/opt/seed.txt", seed.encode()))
    return it.build_image([base, py], platform=f"linux/{arch}")


def push(reg: Registry, tmp: Path, repo_tag: str, seed: str) -> str:
    """Push a fresh image; its manifest digest."""
    layout = tmp / f"layout-{hashlib.sha256(repo_tag.encode()).hexdigest()[:8]}"
    it.write_oci_layout(layout, image(seed), tag="t")
    reg.push(f"oci:{layout}:t", repo_tag)
    return manifest_digest(reg, repo_tag)


def pusher(reg: Registry, repo: str, **kw: Any) -> Pusher:
    return Pusher(f"{reg.scheme}://{reg.host}", repo, **kw)


def openvex(product: str, status: str = "not_affected", **extra: Any) -> dict[str, Any]:
    st = {"vulnerability": {"name": CVE}, "products": [{"@id": product}], "status": status,
          "justification": "vulnerable_code_not_in_execute_path",
          "impact_statement": "the image never loads untrusted weights", **extra}
    return {"@context": OPENVEX_CTX, "@id": "https://vendor.example/vex/1",
            "author": "Vendor PSIRT", "timestamp": "2026-05-01T00:00:00Z", "version": 1,
            "statements": [st]}


def cdx(components: list[tuple[str, str, str]], subject: str) -> dict[str, Any]:
    return {
        "bomFormat": "CycloneDX", "specVersion": "1.5", "version": 1,
        "metadata": {"component": {"type": "container", "name": "app", "version": subject}},
        "components": [{"type": "library", "name": n, "version": v, "purl": p, "bom-ref": p}
                       for n, v, p in components]
        + [{"type": "operating-system", "name": "debian", "version": "12"}],
    }


DEB = "?arch=amd64&distro=debian-12"
#: the declared SBOM with three planted differences: curl declared but absent, urllib3
#: present but undeclared, zlib1g at another version; libc6, requests, torch agree
DECLARED = [
    ("libc6", "2.36-9+deb12u4", f"pkg:deb/debian/libc6@2.36-9%2Bdeb12u4{DEB}"),
    ("zlib1g", "1:1.2.13.dfsg-1+deb12u1", f"pkg:deb/debian/zlib1g@1%3A1.2.13.dfsg-1%2Bdeb12u1{DEB}"),
    ("curl", "7.88.1-10+deb12u5", f"pkg:deb/debian/curl@7.88.1-10%2Bdeb12u5{DEB}"),
    ("requests", "2.31.0", "pkg:pypi/requests@2.31.0"),
    ("torch", "2.5.1", "pkg:pypi/torch@2.5.1"),
]  # fmt: skip
PLANTED = [
    {"kind": "declared-absent", "ecosystem": "deb", "name": "curl",
     "declared": ["7.88.1-10+deb12u5"], "observed": [], "paths": []},
    {"kind": "undeclared", "ecosystem": "pypi", "name": "urllib3", "declared": [],
     "observed": ["2.0.7"],
     "paths": ["/usr/local/lib/python3.11/site-packages/urllib3-2.0.7.dist-info/METADATA"]},
    {"kind": "version-mismatch", "ecosystem": "deb", "name": "zlib1g",
     "declared": ["1:1.2.13.dfsg-1+deb12u1"], "observed": ["1:1.2.13.dfsg-1"],
     "paths": ["/var/lib/dpkg/status"]},
]  # fmt: skip


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*GPUSBOM, *args], capture_output=True, text=True, timeout=300,
                          check=False, env={**os.environ, **(env or {})})


def scan_json(reg: Registry, repo_tag: str, *extra: str,
              env: dict[str, str] | None = None) -> tuple[dict[str, Any], str]:
    args = ["scan", f"registry:{reg.host}/{repo_tag}", "-o", "json", "--offline", *extra]
    if reg.scheme == "http":
        args += ["--insecure-registry", reg.host]
    proc = run(*args, env=env)
    assert proc.returncode == 0, (proc.returncode, proc.stderr)
    return json.loads(proc.stdout), proc.stderr


def statuses(doc: dict[str, Any], vuln: str = CVE) -> list[tuple[str, str | None]]:
    out = [(f["advisory"]["status"], f["advisory"].get("justification"))
           for f in doc["findings"] if f["id"] == vuln and f.get("advisory")]
    assert out, f"no {vuln} finding"
    return out


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("attach")


# --------------------------------------------------------------------------- vendor VEX


def test_scan_applies_the_attached_openvex(registry_plain: Registry, work: Path) -> None:
    subject = push(registry_plain, work, "vendor/vex:1", "vex")
    p = pusher(registry_plain, "vendor/vex")
    before, _ = scan_json(registry_plain, "vendor/vex:1")
    assert {s for s, _ in statuses(before)} == {"affected"}
    vex = openvex(f"pkg:oci/vex@{subject}")  # the image itself: every component
    art = p.attach(subject, "application/openvex+json", json.dumps(vex).encode(),
                   "application/openvex+json")
    doc, err = scan_json(registry_plain, "vendor/vex:1")
    got = statuses(doc)
    assert {s for s, _ in got} == {"not-affected"}, got
    want = ("vulnerable_code_not_in_execute_path: the image never loads untrusted weights "
            f"(vendor VEX: registry attachment {art} in {registry_plain.host})")
    assert {j for _, j in got} == {want}
    assert doc["unknowns"] == [] and "warning" not in err
    # --no-attachments: nothing read, the finding stands
    off, _ = scan_json(registry_plain, "vendor/vex:1", "--no-attachments")
    assert {s for s, _ in statuses(off)} == {"affected"}


def test_user_vex_decides_over_the_vendor(registry_plain: Registry, work: Path,
                                          tmp_path: Path) -> None:
    subject = push(registry_plain, work, "vendor/override:1", "override")
    pusher(registry_plain, "vendor/override").attach(
        subject, "application/openvex+json",
        json.dumps(openvex("pkg:pypi/torch@2.5.1")).encode(), "application/openvex+json")
    mine = tmp_path / "mine.openvex.json"
    mine.write_text(json.dumps(openvex(f"pkg:oci/override@{subject}", status="affected")))
    doc, _ = scan_json(registry_plain, "vendor/override:1", "--vex", str(mine))
    # the user's "affected" is read last: the vendor's not_affected no longer suppresses
    assert {s for s, _ in statuses(doc)} == {"affected"}


def test_dsse_in_toto_vex_and_cyclonedx_vex(registry_plain: Registry, work: Path) -> None:
    subject = push(registry_plain, work, "vendor/dsse:1", "dsse")
    p = pusher(registry_plain, "vendor/dsse")
    hexd = subject.split(":")[1]
    stmt = {"_type": "https://in-toto.io/Statement/v1", "predicateType": OPENVEX_CTX,
            "subject": [{"name": "vendor/dsse", "digest": {"sha256": hexd}}],
            "predicate": openvex("pkg:pypi/torch@2.5.1")}
    art = p.attach(subject, "application/vnd.dsse.envelope.v1+json", dsse(stmt),
                   "application/vnd.dsse.envelope.v1+json")
    # the same statement about another image: refused, one warning
    other = dict(stmt, subject=[{"name": "x", "digest": {"sha256": "0" * 64}}])
    bad = p.attach(subject, "application/vnd.dsse.envelope.v1+json", dsse(other),
                   "application/vnd.dsse.envelope.v1+json")
    # a CycloneDX VEX for the stack component (pkg:generic/pytorch/torch) of the same CVE
    cvex = {"bomFormat": "CycloneDX", "specVersion": "1.5", "version": 1,
            "vulnerabilities": [{"id": CVE, "analysis": {"state": "not_affected",
                                                         "justification": "code_not_reachable"},
                                 "affects": [{"ref": "pkg:generic/pytorch/torch@2.5.1"}]}]}
    doc, err = scan_json(registry_plain, "vendor/dsse:1")
    # torch's wheel and its stack component stand for the same file: one finding names both
    (f,) = [f for f in doc["findings"] if f["id"] == CVE]
    assert {r.split(":")[0] for r in f["components"]} == {"pypi", "generic"}
    assert f["advisory"]["status"] == "not-affected"
    assert art in f["advisory"]["justification"]
    # a CycloneDX VEX attached to another image, for the stack component
    # (pkg:generic/pytorch/torch) of the same CVE, settles that image's finding
    csub = push(registry_plain, work, "vendor/cvex:1", "cvex")
    cart = pusher(registry_plain, "vendor/cvex").attach(
        csub, "application/vnd.cyclonedx+json", json.dumps(cvex).encode(),
        "application/vnd.cyclonedx+json")
    cdoc, _ = scan_json(registry_plain, "vendor/cvex:1")
    (cf,) = [f for f in cdoc["findings"] if f["id"] == CVE]
    assert cf["advisory"]["status"] == "not-affected"
    assert cart in cf["advisory"]["justification"]
    reasons = [u["reason"] for u in doc["unknowns"] if u["collector"] == "registry-attachments"]
    assert len(reasons) == 1 and bad in reasons[0] and "not this image" in reasons[0]
    assert err.count("gpusbom: warning:") == 1 and bad in err


def test_hostile_attachments_are_one_warning_each(registry_plain: Registry, work: Path) -> None:
    subject = push(registry_plain, work, "vendor/hostile:1", "hostile")
    p = pusher(registry_plain, "vendor/hostile")
    bad_vex = openvex("pkg:pypi/torch@2.5.1", status="definitely_fine")
    a1 = p.attach(subject, "application/openvex+json", json.dumps(bad_vex).encode(),
                  "application/openvex+json")
    a2 = p.attach(subject, "application/openvex+json", b'{"@context": "' + b"[" * 5000,
                  "application/openvex+json")
    # a blob whose bytes no longer match its digest (the registry's storage tampered with)
    a3 = p.attach(subject, "application/openvex+json",
                  json.dumps(openvex("pkg:pypi/torch@2.5.1")).encode(),
                  "application/openvex+json")
    layer = json.loads(p.get_manifest(a3, "application/vnd.oci.image.manifest.v1+json")[0])
    blob = registry_plain.blob_file(layer["layers"][0]["digest"])
    blob.write_bytes(blob.read_bytes().replace(b"not_affected", b"not_affectee"))
    doc, err = scan_json(registry_plain, "vendor/hostile:1")
    assert {s for s, _ in statuses(doc)} == {"affected"}  # nothing suppressed
    reasons = [u["reason"] for u in doc["unknowns"] if u["collector"] == "registry-attachments"]
    assert len(reasons) == 3, reasons
    assert any(a1 in r and "definitely_fine" in r for r in reasons)
    assert any(a2 in r and "JSON" in r for r in reasons)
    assert any(a3 in r and "digest mismatch" in r for r in reasons)
    assert err.count("gpusbom: warning:") == 3
    # --strict: the unreadable attachments make the scan incomplete (exit 4)
    proc = run("scan", f"registry:{registry_plain.host}/vendor/hostile:1", "-o", "json",
               "--offline", "--strict", "--insecure-registry", registry_plain.host)
    assert proc.returncode == 4, proc.stderr


def test_a_misdirected_referrer_is_one_warning(registry_plain: Registry, work: Path) -> None:
    """The tag-schema index of one image lists an artifact whose subject is another image
    (a tampered or confused index): refused, the scan goes on."""
    subject = push(registry_plain, work, "vendor/misdirected:1", "misdirected")
    other = push(registry_plain, work, "vendor/misdirected:2", "misdirected-other")
    p = pusher(registry_plain, "vendor/misdirected")
    art = p.attach(other, "application/openvex+json",
                   json.dumps(openvex("pkg:pypi/torch@2.5.1")).encode(),
                   "application/openvex+json", index=False)
    body = p.get_manifest(art, "application/vnd.oci.image.manifest.v1+json")[0]
    p.add_to_index(subject, {"mediaType": "application/vnd.oci.image.manifest.v1+json",
                             "digest": art, "size": len(body),
                             "artifactType": "application/openvex+json"})
    doc, err = scan_json(registry_plain, "vendor/misdirected:1")
    assert {s for s, _ in statuses(doc)} == {"affected"}
    reasons = [u["reason"] for u in doc["unknowns"] if u["collector"] == "registry-attachments"]
    assert len(reasons) == 1 and art in reasons[0] and f"is not {subject}" in reasons[0]
    assert err.count("gpusbom: warning:") == 1
    assert {c["name"] for c in doc["components"]} >= {"libc6", "torch", "urllib3"}


# --------------------------------------------------------------------------- reconcile


def reconcile(reg: Registry, repo_tag: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return run("reconcile", f"registry:{reg.host}/{repo_tag}", "--insecure-registry",
               reg.host, *extra)


def test_reconcile_reports_the_planted_differences(registry_plain: Registry, work: Path) -> None:
    subject = push(registry_plain, work, "vendor/declared:1", "declared")
    art = pusher(registry_plain, "vendor/declared").attach(
        subject, "application/vnd.cyclonedx+json", json.dumps(cdx(DECLARED, subject)).encode(),
        "application/vnd.cyclonedx+json")
    proc = reconcile(registry_plain, "vendor/declared:1", "-o", "json")
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["schema"] == "gpusbom/reconcile/1"
    assert doc["differences"] == PLANTED
    assert doc["summary"] == {"matched": 3, "declared-absent": 1, "undeclared": 1,
                              "version-mismatch": 1}
    assert doc["declared"]["source"] == f"registry attachment {art} in {registry_plain.host}"
    assert (doc["declared"]["components"], doc["observed"]["components"]) == (5, 5)
    table = reconcile(registry_plain, "vendor/declared:1")
    assert table.returncode == 1
    rows = [ln.split()[:3] for ln in table.stdout.splitlines()[5:] if ln.strip()]
    assert rows == [["KIND", "ECOSYSTEM", "NAME"], ["declared-absent", "deb", "curl"],
                    ["undeclared", "pypi", "urllib3"], ["version-mismatch", "deb", "zlib1g"]]


def test_reconcile_with_an_spdx_file_and_an_agreeing_sbom(registry_plain: Registry, work: Path,
                                                          tmp_path: Path) -> None:
    subject = push(registry_plain, work, "vendor/agree:1", "agree")
    spdx = {
        "spdxVersion": "SPDX-2.3", "dataLicense": "CC0-1.0", "SPDXID": "SPDXRef-DOCUMENT",
        "name": "app", "documentNamespace": "https://example.com/spdx/app-1",
        "creationInfo": {"created": "2026-05-01T00:00:00Z", "creators": ["Tool: test"]},
        "packages": [
            {"SPDXID": f"SPDXRef-{i}", "name": n, "versionInfo": v, "downloadLocation": "NOASSERTION",
             "externalRefs": [{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl",
                               "referenceLocator": p}]}
            for i, (n, v, p) in enumerate(DECLARED)
        ],
    }  # fmt: skip
    path = tmp_path / "declared.spdx.json"
    path.write_text(json.dumps(spdx))
    proc = reconcile(registry_plain, "vendor/agree:1", "--declared", str(path), "-o", "json")
    assert proc.returncode == 1, proc.stderr
    assert json.loads(proc.stdout)["differences"] == PLANTED
    # the image's true package list, attached: it agrees (exit 0)
    true = [d for d in DECLARED if d[0] != "curl" and d[0] != "zlib1g"] + [
        ("zlib1g", "1:1.2.13.dfsg-1", f"pkg:deb/debian/zlib1g@1%3A1.2.13.dfsg-1{DEB}"),
        ("urllib3", "2.0.7", "pkg:pypi/urllib3@2.0.7")]
    pusher(registry_plain, "vendor/agree").attach(
        subject, "application/vnd.cyclonedx+json", json.dumps(cdx(true, subject)).encode(),
        "application/vnd.cyclonedx+json")
    ok = reconcile(registry_plain, "vendor/agree:1")
    assert ok.returncode == 0, (ok.stdout, ok.stderr)
    assert "the declared SBOM agrees with the image" in ok.stdout


def test_reconcile_without_a_declared_sbom_is_exit_3(registry_plain: Registry,
                                                     work: Path) -> None:
    push(registry_plain, work, "vendor/bare:1", "bare")
    proc = reconcile(registry_plain, "vendor/bare:1")
    assert proc.returncode == 3 and proc.stdout == ""
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("gpusbom: ")]
    assert len(lines) == 1 and "no declared SBOM" in lines[0] and "--declared" in lines[0]


# --------------------------------------------------------------------------- NGC


@pytest.fixture(scope="module")
def ngc(registry_base: Path) -> Any:
    """An HTTPS registry (openssl-made certificate for 127.0.0.1) with token auth that,
    like nvcr.io, takes the user ``$oauthtoken`` and an NGC API key as the password."""
    key = "nvapi-TEST-" + hashlib.sha256(b"ngc").hexdigest()[:32]
    ca, cert, pkey = make_ca(registry_base / "ngc-pki")
    ts = TokenServer(registry_base / "ngc-token", user="$oauthtoken", password=key)
    auth = (f"auth:\n  token:\n    realm: {ts.realm}\n    service: test-registry\n"
            f"    issuer: test-issuer\n    rootcertbundle: {ts.cert}")
    reg = start_registry(registry_base, "ngc", auth=auth, tls=(cert, pkey))
    reg.ca, reg.creds = ca, f"$oauthtoken:{key}"
    yield reg, key, ts
    reg.stop()
    ts.stop()


def test_ngc_api_key_reads_nim_vex(ngc: Any, work: Path) -> None:
    reg, key, ts = ngc
    subject = push(reg, work, "nim/meta/llm:1.0", "nim")
    p = pusher(reg, "nim/meta/llm", creds=("$oauthtoken", key), verify=str(reg.ca))
    art = p.attach(subject, "application/vnd.openvex+json",
                   json.dumps(openvex(f"pkg:oci/llm@{subject}")).encode(),
                   "application/vnd.openvex+json")
    env = {"REQUESTS_CA_BUNDLE": str(reg.ca), "GPUSBOM_NGC_REGISTRY": reg.host,
           "NGC_API_KEY": key, "DOCKER_CONFIG": str(work / "no-docker-config")}
    doc, err = scan_json(reg, "nim/meta/llm:1.0", env=env)
    got = statuses(doc)
    assert {s for s, _ in got} == {"not-affected"}
    assert all(art in (j or "") for _, j in got)
    assert key not in json.dumps(doc) and key not in err
    assert {r.get("user") for r in ts.requests} == {"$oauthtoken"}
    # without the key: authentication required, one line, exit 3
    proc = run("scan", f"registry:{reg.host}/nim/meta/llm:1.0", "-o", "json", "--offline",
               env={**env, "NGC_API_KEY": ""})
    assert proc.returncode == 3, proc.stderr
    assert "authentication required" in proc.stderr


# --------------------------------------------------------------------------- referrers API


class ReferrersFront:
    """A front for the 2.8 registry that adds the OCI 1.1 referrers API (the registry has
    none): ``GET /v2/<name>/referrers/<digest>`` answers the index the registry holds at the
    tag-schema tag; every other GET is passed through. A test double of the one endpoint
    Debian's registry lacks, so the API path of ``referrers.discover`` runs against real
    storage; every path asked for is recorded."""

    def __init__(self, reg: Registry) -> None:
        import re
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        import requests

        self.paths: list[str] = []
        front = self
        pattern = re.compile(r"^/v2/(.+)/referrers/(sha256:[0-9a-f]{64})$")

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: object) -> None:
                pass

            def do_GET(self) -> None:
                front.paths.append(self.path)
                m = pattern.match(self.path.split("?")[0])
                if m:
                    tag = m.group(2).replace(":", "-")
                    r = requests.get(f"http://{reg.host}/v2/{m.group(1)}/manifests/{tag}",
                                     headers={"Accept": "application/vnd.oci.image.index.v1+json"},
                                     timeout=30)
                    body = r.content if r.status_code == 200 else json.dumps(
                        {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                         "manifests": []}).encode()
                    self._send(200, {"Content-Type": "application/vnd.oci.image.index.v1+json"},
                               body)
                    return
                h = {k: v for k, v in self.headers.items() if k.lower() in ("accept", "range")}
                r = requests.get(f"http://{reg.host}{self.path}", headers=h, timeout=60)
                keep = ("content-type", "docker-content-digest", "www-authenticate")
                self._send(r.status_code, {k: v for k, v in r.headers.items()
                                           if k.lower() in keep}, r.content)

            def _send(self, status: int, headers: dict[str, str], body: bytes) -> None:
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.host = f"127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_the_referrers_api_is_asked_first(registry_plain: Registry, work: Path) -> None:
    subject = push(registry_plain, work, "vendor/api:1", "api")
    art = pusher(registry_plain, "vendor/api").attach(
        subject, "application/openvex+json",
        json.dumps(openvex(f"pkg:oci/api@{subject}")).encode(), "application/openvex+json")
    front = ReferrersFront(registry_plain)
    try:
        proc = run("scan", f"registry:{front.host}/vendor/api:1", "-o", "json", "--offline",
                   "--insecure-registry", front.host)
    finally:
        front.stop()
    assert proc.returncode == 0, proc.stderr
    got = statuses(json.loads(proc.stdout))
    assert {s for s, _ in got} == {"not-affected"} and all(art in (j or "") for _, j in got)
    assert f"/v2/vendor/api/referrers/{subject}" in front.paths
    # no tag-schema fallback (cosign's .att tag is asked for beside the API)
    assert not [p for p in front.paths if "/manifests/sha256-" in p and not p.endswith(".att")]


def test_vex_attached_to_the_index_applies_to_each_platform(registry_plain: Registry,
                                                            work: Path) -> None:
    layout = work / "layout-multi"
    it.write_oci_layout(layout, [image("m", "amd64"), image("m", "arm64")], tag="t")
    registry_plain.push(f"oci:{layout}:t", "vendor/multi:1", all_platforms=True)
    index = manifest_digest(registry_plain, "vendor/multi:1")
    art = pusher(registry_plain, "vendor/multi").attach(
        index, "application/openvex+json",
        json.dumps(openvex(f"pkg:oci/multi@{index}")).encode(), "application/openvex+json")
    for arch in ("amd64", "arm64"):
        doc, _ = scan_json(registry_plain, "vendor/multi:1", "--platform", f"linux/{arch}")
        got = statuses(doc)
        assert {s for s, _ in got} == {"not-affected"}, (arch, got)
        assert all(art in (j or "") for _, j in got)


def test_discover_and_fetch(registry_plain: Registry, work: Path) -> None:
    """The library API (``referrers.discover`` / ``fetch``) on its own."""
    from gpusbom.errors import ImageFormatError
    from gpusbom.sources.registry import ImageRef, RegistryClient, RegistryOptions
    from gpusbom.sources.registry.referrers import Budget, discover, fetch

    subject = push(registry_plain, work, "vendor/lib:1", "lib")
    bare = push(registry_plain, work, "vendor/lib:2", "lib-bare")
    vex = openvex(f"pkg:oci/lib@{subject}")
    art = pusher(registry_plain, "vendor/lib").attach(
        subject, "application/openvex+json", json.dumps(vex).encode(),
        "application/openvex+json", annotations={"org.opencontainers.image.created": "2026"})
    host = registry_plain.host
    client = RegistryClient(ImageRef.parse(f"{host}/vendor/lib:1"),
                            RegistryOptions(insecure=(host,)))
    try:
        found = discover(client, subject)
        assert found.via == "tag" and [r.digest for r in found.referrers] == [art]
        ref = found.referrers[0]
        assert ref.artifact_type == "application/openvex+json" and ref.subject == subject
        assert ref.annotations == {"org.opencontainers.image.created": "2026"}
        docs = fetch(client, ref)
        assert [(d.kind, d.format) for d in docs] == [("vex", "openvex")]
        assert json.loads(docs[0].document) == vex and docs[0].digest == art
        with pytest.raises(ImageFormatError, match="bytes left for attached documents"):
            fetch(client, ref, budget=Budget(left=10))
        assert discover(client, subject, artifact_type="application/spdx+json").referrers == ()
        assert discover(client, bare).via == "none"
    finally:
        client.close()


def test_cosign_att_tag_attestations(registry_plain: Registry, work: Path) -> None:
    """cosign's default store (no OCI 1.1): ``sha256-<hex>.att`` with DSSE layers: an in-toto
    OpenVEX applies, an SLSA provenance beside it is recorded, not used."""
    subject = push(registry_plain, work, "vendor/cosign:1", "cosign")
    hexd = subject.split(":")[1]
    vex = {"_type": "https://in-toto.io/Statement/v1", "predicateType": OPENVEX_CTX,
           "subject": [{"name": "vendor/cosign", "digest": {"sha256": hexd}}],
           "predicate": openvex(f"pkg:oci/cosign@{subject}")}
    prov = dict(vex, predicateType="https://slsa.dev/provenance/v1", predicate={"b": 1})
    att = pusher(registry_plain, "vendor/cosign").cosign_att(
        subject, [dsse(prov), dsse(vex)], OPENVEX_CTX)
    doc, err = scan_json(registry_plain, "vendor/cosign:1")
    got = statuses(doc)
    assert {s for s, _ in got} == {"not-affected"} and all(att in (j or "") for _, j in got)
    assert doc["unknowns"] == [] and "warning" not in err
