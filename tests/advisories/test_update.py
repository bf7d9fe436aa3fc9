"""``gpusbom advisories update`` against real local servers (HTTPS with a self-signed CA
made by the openssl CLI, and plain HTTP on loopback) serving feed files written for the
tests in the feeds' formats: NVIDIA's CVE_index.csv + CSAF + .sha256 layout, OSV all.zip
with GCS's x-goog-hash header, and a curated bundle with its .sha256.

Interrupted download, offline, an invalid curated bundle: exit 3, one line, the old
database byte for byte intact. A bulletin with a bad checksum or bad data is skipped alone
and named in the summary; a bulletin re-listing an older CVE is merged. Success: the next scan matches against the new database
and reports it (source, build date, age).

CISA's KEV catalog and per-CVE descriptions (CSAF notes, OSV details, Intel's and AMD's CVE
JSON 5 records in cvelistV5's layout) are fetched into the user cache only: findings carry them in the table, JSON, CycloneDX, HTML and the gate's
SARIF; a bad KEV download keeps the old database like any other feed."""

from __future__ import annotations

import base64
import hashlib
import http.server
import io
import json
import os
import shutil
import socket
import ssl
import subprocess
import threading
import time
import zipfile
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

from gpusbom.advisories.db import load_active, load_bundled, user_db_path
from gpusbom.cli.app import main

from .test_csaf import _doc as csaf_doc
from .test_vex import _rootfs


@pytest.fixture(autouse=True)
def _wall_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests publish feeds for the machine's current year and ages by its clock: a
    SOURCE_DATE_EPOCH another package's session fixture left in this worker's environment
    (tests/policy's) made the feed list years up to that date, not today's (seen under
    faketime '+400 days', where the two differ)."""
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)

# --------------------------------------------------------------------------- feed files

Y = datetime.now(timezone.utc).year  # the update reads the index of every year up to now


def _osv_vllm() -> dict:
    # written for the test in OSV 1.6 form (as GHSA entries for PyPI packages look)
    return {
        "schema_version": "1.6.0", "id": "GHSA-test-vllm-0001",
        "modified": "2099-02-01T00:00:00Z", "published": "2099-01-15T00:00:00Z",
        "aliases": ["CVE-2099-1111"], "summary": "Test: vllm deserialisation",
        "details": VLLM_DETAILS,
        "severity": [{"type": "CVSS_V3",
                      "score": "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H"}],
        "affected": [{"package": {"ecosystem": "PyPI", "name": "vllm", "purl": "pkg:pypi/vllm"},
                      "ranges": [{"type": "ECOSYSTEM",
                                  "events": [{"introduced": "0.5.0"}, {"fixed": "0.8.5"}]}]}],
        "references": [{"type": "ADVISORY",
                        "url": "https://github.com/advisories/GHSA-test-vllm-0001"}],
    }


VLLM_DETAILS = ("Test: vllm deserialises untrusted data\x1b[31m in its RPC server "
                "(written for the test).")
CSAF_NOTE = "Test: the driver's kernel-mode layer has an out-of-bounds write (for the test)."


def _kev(entries: list[tuple[str, str]], count: int | None = None) -> bytes:
    # written for the test in CISA's format (known_exploited_vulnerabilities_schema.json)
    vulns = [{"cveID": cve, "vendorProject": "Test", "product": "Test",
              "vulnerabilityName": "Test vulnerability", "dateAdded": added,
              "shortDescription": "Test.", "requiredAction": "Apply updates.",
              "dueDate": "2099-04-01", "knownRansomwareCampaignUse": "Unknown",
              "notes": "", "cwes": []} for cve, added in entries]
    return json.dumps({"title": "CISA Catalog of Known Exploited Vulnerabilities",
                       "catalogVersion": "2099.03.01", "dateReleased": "2099-03-01T12:00:00.000Z",
                       "count": len(vulns) if count is None else count,
                       "vulnerabilities": vulns}).encode()


def _osv_requests() -> dict:
    # not a GPU package: filtered out
    return {"id": "GHSA-test-req-0001", "modified": "2099-01-01T00:00:00Z",
            "published": "2099-01-01T00:00:00Z", "aliases": ["CVE-2099-2222"],
            "summary": "requests test", "affected": [{
                "package": {"ecosystem": "PyPI", "name": "requests"},
                "ranges": [{"type": "ECOSYSTEM",
                            "events": [{"introduced": "0"}, {"fixed": "9.0"}]}]}]}


def _zip(entries: list[dict]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for e in entries:
            zf.writestr(f"{e['id']}.json", json.dumps(e))
    return buf.getvalue()


def _sha(data: bytes) -> bytes:
    return hashlib.sha256(data).hexdigest().encode()  # NVIDIA's files: the bare hex digest


class Feeds:
    """What the server serves: path -> (body, headers); plus misbehaviours per path."""

    def __init__(self) -> None:
        self.files: dict[str, tuple[bytes, dict[str, str]]] = {}
        self.truncate: set[str] = set()
        self.hits: list[str] = []

    def put(self, path: str, body: bytes, **headers: str) -> None:
        self.files[path] = (body, headers)

    @classmethod
    def standard(cls) -> Feeds:
        f = cls()
        d = csaf_doc()
        d["vulnerabilities"][0]["notes"] = [
            {"category": "description", "text": CSAF_NOTE, "title": "Vulnerability Description"}]
        doc = json.dumps(d).encode()
        f.put(f"/csaf/{Y}/CVE_index.csv",
              b"CVE;CVSS;Severity;Vector;CWE;Bulletin;Affected Product;Affected Version;"
              b"Fixed In\nCVE-2099-0001;7.8;HIGH;x;CWE-20;9901;Tesla;x;y\n")
        f.put(f"/csaf/{Y}/9901/9901.json", doc)
        f.put(f"/csaf/{Y}/9901/9901.json.sha256", _sha(doc))
        z = _zip([_osv_vllm(), _osv_requests()])
        md5 = base64.b64encode(hashlib.md5(z).digest()).decode()
        f.put("/osv/PyPI/all.zip", z, **{"x-goog-hash": f"crc32c=AAAAAA==,md5={md5}"})
        cur = (Path(__file__).resolve().parents[2] / "src/gpusbom/data/advisories.json")
        body = cur.read_bytes()
        f.put("/curated/advisories.json", body)
        f.put("/curated/advisories.json.sha256", _sha(body))
        f.put("/kev/known_exploited_vulnerabilities.json",
              _kev([("CVE-2099-1111", "2099-03-01"), ("CVE-2021-44228", "2021-12-10")]))
        return f


def _handler(feeds: Feeds) -> type[http.server.BaseHTTPRequestHandler]:
    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            feeds.hits.append(self.path)
            hit = feeds.files.get(self.path)
            if hit is None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            body, headers = hit
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            if self.path in feeds.truncate:
                self.wfile.write(body[: len(body) // 2])  # then the connection drops
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    return H


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl CLI not installed")
    d = tmp_path_factory.mktemp("tls")
    key, crt = d / "key.pem", d / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
         "-out", str(crt), "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )
    return crt, key


def _serve(feeds: Feeds, tls: tuple[Path, Path] | None) -> Iterator[str]:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(feeds))
    srv.daemon_threads = True
    if tls is not None:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(tls[0]), str(tls[1]))
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    scheme = "https" if tls else "http"
    try:
        yield f"{scheme}://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.fixture()
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cert: tuple[Path, Path]) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("GPUSBOM_CACHE_DIR", str(cache))
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(cert[0]))  # trust the test CA only
    for var in ("GPUSBOM_NVIDIA_CSAF_URL", "GPUSBOM_OSV_URL", "GPUSBOM_CURATED_URL",
                "GPUSBOM_KEV_URL"):
        monkeypatch.delenv(var, raising=False)
    # the Intel/AMD CVE record feed only where a test serves it (never the real one)
    monkeypatch.setenv("GPUSBOM_CVE5_URL", "off")
    return cache


@pytest.fixture()
def https(cert: tuple[Path, Path]) -> Iterator[tuple[Feeds, str]]:
    feeds = Feeds.standard()
    for url in _serve(feeds, cert):
        yield feeds, url


def _args(url: str) -> list[str]:
    return ["advisories", "update", "-q", "--source", f"nvidia-csaf={url}/csaf",
            "--source", f"osv={url}/osv", "--source", f"curated={url}/curated/advisories.json",
            "--source", f"kev={url}/kev/known_exploited_vulnerabilities.json",
            "--ecosystem", "PyPI"]


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


# --------------------------------------------------------------------------- tests


def test_update_over_https_then_scan_uses_it(
    env: Path, https: tuple[Feeds, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    feeds, url = https
    assert main(_args(url)) == 0
    out = capsys.readouterr().out
    assert "nvidia-csaf: 1 records" in out and "osv: 1 records" in out
    assert f"/csaf/{Y}/9901/9901.json.sha256" in feeds.hits
    db = load_active()
    assert db.source == str(user_db_path())
    ids = {a.id for a in db}
    assert {"NVIDIA-9901", "GHSA-test-vllm-0001"} <= ids
    assert "GHSA-test-req-0001" not in ids  # not a GPU package
    assert {a.id for a in load_bundled()} <= ids  # the curated records are all there
    assert len(db) == len(load_bundled()) + 2
    # the next scan matches against the new database and says so
    root = _vllm_root(tmp_path)
    report = tmp_path / "scan.json"
    assert main(["scan", f"dir:{root}", "-q", "-o", f"json={report}",
                 "--max-db-age", "1"]) == 0
    doc = json.loads(report.read_text())
    (f,) = [x for x in doc["findings"] if x["id"] == "CVE-2099-1111"]
    assert f["advisory"]["status"] == "affected" and f["advisory"]["fixed_version"] == "0.8.5"
    assert f["severity"] == "critical"  # 9.8 computed from the vector
    assert doc["advisory_db"]["source"] == str(user_db_path())
    assert doc["advisory_db"]["advisories"] == len(db)


def _old_db(url: str, capsys: pytest.CaptureFixture[str]) -> bytes:
    assert main(_args(url)) == 0
    capsys.readouterr()
    return user_db_path().read_bytes()


def _relisting_doc() -> dict:
    """Bulletin 9902 (newer) re-lists CVE-2099-0001 of 9901 for one more branch (R590)
    and adds CVE-2099-0003: the shape of NVIDIA's re-listing bulletins."""
    d = csaf_doc()
    d["document"]["tracking"].update(id="9902", initial_release_date="2099-03-01T00:00:00Z",
                                     current_release_date="2099-03-01T00:00:00Z")
    fam = d["product_tree"]["branches"][0]["branches"]
    fam.append({"category": "architecture", "name": "Linux(R590)", "branches": [
        {"category": "product_version", "name": "Tesla", "product": {
            "name": "All driver versions prior to 590.48.01", "product_id": "r590_aff"}},
        {"category": "product_version", "name": "Tesla", "product": {
            "name": "590.48.01", "product_id": "r590_fix"}}]})
    d["vulnerabilities"] = [
        {"cve": "CVE-2099-0001", "product_status": {"known_affected": ["r590_aff"],
                                                    "fixed": ["r590_fix"]}},
        {"cve": "CVE-2099-0003", "product_status": {"known_affected": ["r535_aff"],
                                                    "fixed": ["r535_fix"]}},
    ]
    return d


def _add_9902(feeds: Feeds) -> None:
    doc = json.dumps(_relisting_doc()).encode()
    body, _ = feeds.files[f"/csaf/{Y}/CVE_index.csv"]
    feeds.put(f"/csaf/{Y}/CVE_index.csv", body + b"CVE-2099-0003;7.8;HIGH;x;CWE-20;9902;Tesla;x;y\n")
    feeds.put(f"/csaf/{Y}/9902/9902.json", doc)
    feeds.put(f"/csaf/{Y}/9902/9902.json.sha256", _sha(doc))


def test_bad_checksum_skips_only_that_bulletin(
    env: Path, https: tuple[Feeds, str], capsys: pytest.CaptureFixture[str]
) -> None:
    feeds, url = https
    _add_9902(feeds)
    body, _ = feeds.files[f"/csaf/{Y}/9901/9901.json"]
    feeds.put(f"/csaf/{Y}/9901/9901.json", body.replace(b"Tesla", b"Tesl4"))
    assert main([*_args(url)[:2], *_args(url)[3:]]) == 0  # without -q: the summary
    out = capsys.readouterr().out
    assert "1 entries skipped" in out
    assert f"skipped: {url}/csaf/{Y}/9901/9901.json: checksum mismatch" in out
    ids = {a.id for a in load_active()}
    assert "NVIDIA-9902" in ids and "NVIDIA-9901" not in ids
    assert [p.name for p in user_db_path().parent.iterdir()] == ["advisories.json"]  # no debris


def test_crlf_hash_accepted_only_when_published_for_that_form(
    env: Path, https: tuple[Feeds, str], capsys: pytest.CaptureFixture[str]
) -> None:
    feeds, url = https
    body = json.dumps(csaf_doc(), indent=1).encode()  # LF line ends, as stored by git
    feeds.put(f"/csaf/{Y}/9901/9901.json", body)
    feeds.put(f"/csaf/{Y}/9901/9901.json.sha256", _sha(body.replace(b"\n", b"\r\n")))
    assert main(_args(url)) == 0
    capsys.readouterr()
    assert "NVIDIA-9901" in {a.id for a in load_active()}
    feeds.put(f"/csaf/{Y}/9901/9901.json.sha256", _sha(body + b"\n"))  # neither form
    assert main(_args(url)[:2] + _args(url)[3:]) == 0
    assert "9901.json: checksum mismatch" in capsys.readouterr().out
    assert "NVIDIA-9901" not in {a.id for a in load_active()}


def test_relisting_bulletin_is_merged_not_dropped(
    env: Path, https: tuple[Feeds, str], capsys: pytest.CaptureFixture[str]
) -> None:
    feeds, url = https
    _add_9902(feeds)
    assert main(_args(url)) == 0
    db = load_active()
    old, new = db.get("NVIDIA-9901"), db.get("NVIDIA-9902")
    assert old is not None and new is not None and new.id == "NVIDIA-9902"
    # CVE-2099-0001 is kept once, in the newer bulletin, with the branches of both
    assert [v.id for v in old.vulnerabilities] == ["CVE-2099-0002"]
    v1 = next(v for v in new.vulnerabilities if v.id == "CVE-2099-0001")
    assert {a.branch for a in v1.affected if a.target == "nvidia-driver"} >= {"580", "535", "590"}
    assert {v.id for v in new.vulnerabilities} == {"CVE-2099-0001", "CVE-2099-0003"}


def test_osv_md5_mismatch_keeps_old_db(
    env: Path, https: tuple[Feeds, str], capsys: pytest.CaptureFixture[str]
) -> None:
    feeds, url = https
    old = _old_db(url, capsys)
    _, headers = feeds.files["/osv/PyPI/all.zip"]
    feeds.put("/osv/PyPI/all.zip", _zip([_osv_requests()]), **headers)
    assert main(_args(url)) == 3
    assert "checksum mismatch" in _one_line(capsys)
    assert user_db_path().read_bytes() == old


@pytest.mark.parametrize("path", [f"/csaf/{Y}/9901/9901.json", "/osv/PyPI/all.zip",
                                  "/curated/advisories.json"])
def test_interrupted_download_keeps_old_db(
    env: Path, https: tuple[Feeds, str], capsys: pytest.CaptureFixture[str], path: str
) -> None:
    feeds, url = https
    old = _old_db(url, capsys)
    feeds.truncate.add(path)
    assert main(_args(url)) == 3
    line = _one_line(capsys)
    assert "interrupted" in line and path.rsplit("/", 1)[1] in line
    assert user_db_path().read_bytes() == old


def test_invalid_data_keeps_old_db(
    env: Path, https: tuple[Feeds, str], capsys: pytest.CaptureFixture[str]
) -> None:
    feeds, url = https
    old = _old_db(url, capsys)
    cur_body, _ = feeds.files["/curated/advisories.json"]
    bad = b'{"schema": "gpusbom/advisories/1", "built": "2099-01-01", "advisories": [{"id": 1}]}'
    feeds.put("/curated/advisories.json", bad)
    feeds.put("/curated/advisories.json.sha256", _sha(bad))  # checksum fine, content not
    assert main(_args(url)) == 3
    assert "invalid data" in _one_line(capsys)
    assert user_db_path().read_bytes() == old
    # a bulletin that is not JSON (its checksum fine) skips that bulletin only
    feeds.put("/curated/advisories.json", cur_body)
    feeds.put("/curated/advisories.json.sha256", _sha(cur_body))
    feeds.put(f"/csaf/{Y}/9901/9901.json", b"{not json")
    feeds.put(f"/csaf/{Y}/9901/9901.json.sha256", _sha(b"{not json"))
    assert main(_args(url)[:2] + _args(url)[3:]) == 0
    assert "9901.json: invalid data: not JSON" in capsys.readouterr().out
    assert "NVIDIA-9901" not in {a.id for a in load_active()}


def test_offline_keeps_old_db_and_bundled_is_used_without_one(
    env: Path, https: tuple[Feeds, str], capsys: pytest.CaptureFixture[str]
) -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there: connection refused
    dead = f"https://127.0.0.1:{port}"
    # never updated and offline: exit 3, and scans keep using the bundled snapshot
    assert main(_args(dead)) == 3
    assert "cannot connect" in _one_line(capsys)
    assert not user_db_path().exists()
    assert load_active().source == "bundled"
    _, url = https
    old = _old_db(url, capsys)
    assert main(_args(dead)) == 3
    assert "cannot connect" in _one_line(capsys)
    assert user_db_path().read_bytes() == old


def test_untrusted_certificate_is_refused(
    env: Path, https: tuple[Feeds, str], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, url = https
    monkeypatch.delenv("REQUESTS_CA_BUNDLE")
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(Path(ssl.get_default_verify_paths().cafile
                                                       or "/etc/ssl/certs/ca-certificates.crt")))
    assert main(_args(url)) == 3
    assert "TLS" in _one_line(capsys)
    assert not user_db_path().exists()


def test_plain_http_only_on_loopback(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    feeds = Feeds.standard()
    for url in _serve(feeds, None):
        assert main(_args(url)) == 0
    capsys.readouterr()
    assert main(["advisories", "update", "-q", "--source", "osv=http://example.com/osv"]) == 3
    assert "not an https:// URL" in _one_line(capsys)


def test_broken_user_db_falls_back_to_bundled(env: Path) -> None:
    p = user_db_path()
    p.parent.mkdir(parents=True)
    p.write_text("{half a file")
    assert load_active().source == "bundled"


def test_reset(env: Path, https: tuple[Feeds, str], capsys: pytest.CaptureFixture[str]) -> None:
    _, url = https
    _old_db(url, capsys)
    assert main(["advisories", "update", "--reset"]) == 0
    assert not user_db_path().exists() and load_active().source == "bundled"


def test_max_db_age_through_cli(env: Path, tmp_path: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    root = _rootfs(tmp_path)
    out = tmp_path / "o.json"
    # the bundled snapshot is dated by its newest record: far more than 0.001 days old
    assert main(["scan", f"dir:{root}", "-q", "--max-db-age", "0.001",
                 "-o", f"json={out}"]) == 3
    line = _one_line(capsys)
    assert "days old, older than --max-db-age" in line and "advisories update" in line
    assert not out.exists()
    assert main(["scan", f"dir:{root}", "-q", "--max-db-age", "100000",
                 "-o", f"json={out}"]) == 0
    assert json.loads(out.read_text())["advisory_db"]["source"] == "bundled"


# --------------------------------------------------------------------------- auto-update,
# export / import (the air-gapped path), status


def _feeds_env(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.setenv("GPUSBOM_NVIDIA_CSAF_URL", f"{url}/csaf")
    monkeypatch.setenv("GPUSBOM_OSV_URL", "off")
    monkeypatch.setenv("GPUSBOM_CURATED_URL", f"{url}/curated/advisories.json")
    monkeypatch.setenv("GPUSBOM_KEV_URL", f"{url}/kev/known_exploited_vulnerabilities.json")


def _auto_update_from(monkeypatch: pytest.MonkeyPatch, https: tuple[Feeds, str]) -> Feeds:
    """Automatic updates on, from the local feeds; their hit list back."""
    feeds, url = https
    _feeds_env(monkeypatch, url)
    monkeypatch.setenv("GPUSBOM_DB_AUTO_UPDATE", "1")
    return feeds


def test_first_scan_updates_a_stale_database_like_grype(
    env: Path, https: tuple[Feeds, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str]
) -> None:
    feeds = _auto_update_from(monkeypatch, https)
    root = _rootfs(tmp_path)
    # --offline: nothing fetched, no database written
    assert main(["scan", f"dir:{root}", "--offline", "-o", f"json={tmp_path / 'a.json'}"]) == 0
    assert feeds.hits == [] and not user_db_path().exists()
    # the bundled snapshot is older than 5 days: the scan updates first and says so
    assert main(["scan", f"dir:{root}", "-o", f"json={tmp_path / 'b.json'}"]) == 0
    err = capsys.readouterr().err
    assert "days old: updating (--offline to skip)" in err
    assert f"/csaf/{Y}/9901/9901.json" in feeds.hits
    doc = json.loads((tmp_path / "b.json").read_text())
    assert doc["advisory_db"]["source"] == str(user_db_path())
    # fresh now: the next scan fetches nothing
    feeds.hits.clear()
    old = user_db_path().read_bytes()
    assert main(["scan", f"dir:{root}", "-o", f"json={tmp_path / 'c.json'}"]) == 0
    assert feeds.hits == [] and user_db_path().read_bytes() == old


def test_auto_update_failure_is_one_line_and_the_scan_goes_on(
    env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GPUSBOM_DB_AUTO_UPDATE", "1")
    monkeypatch.setenv("GPUSBOM_NVIDIA_CSAF_URL", "http://127.0.0.1:9/csaf")  # nothing listens
    monkeypatch.setenv("GPUSBOM_OSV_URL", "off")
    monkeypatch.setenv("GPUSBOM_KEV_URL", "off")
    root = _rootfs(tmp_path)
    assert main(["scan", f"dir:{root}", "-q", "-o", f"json={tmp_path / 'a.json'}"]) == 0
    lines = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("advisory update failed, using the bundled")
    assert "next try in 2 h" in lines[0]
    assert not user_db_path().exists()
    # remembered: the next scans neither try nor say it again (as grype's update-check
    # frequency), until the retry interval has passed
    assert (env / "advisories" / "auto-update-failed").exists()
    assert main(["scan", f"dir:{root}", "-q", "-o", f"json={tmp_path / 'b.json'}"]) == 0
    assert capsys.readouterr().err.strip() == ""
    monkeypatch.setenv("GPUSBOM_DB_AUTO_UPDATE_RETRY_HOURS", "0")
    assert main(["scan", f"dir:{root}", "-q", "-o", f"json={tmp_path / 'c.json'}"]) == 0
    assert capsys.readouterr().err.startswith("advisory update failed, using the bundled")


def test_a_successful_auto_update_forgets_an_earlier_failure(
    env: Path, https: tuple[Feeds, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str]
) -> None:
    feeds = _auto_update_from(monkeypatch, https)
    mark = env / "advisories" / "auto-update-failed"
    mark.parent.mkdir(parents=True)
    mark.write_text(f"{time.time()}\nearlier failure\n")  # gpusbom's format: when, why
    root = _rootfs(tmp_path)
    # within the retry interval: no attempt
    assert main(["scan", f"dir:{root}", "-q", "-o", f"json={tmp_path / 'a.json'}"]) == 0
    assert feeds.hits == [] and not user_db_path().exists()
    # a clock set back (the mark in the future) does not stop updates for good
    mark.write_text(f"{time.time() + 86400}\nearlier failure\n")
    assert main(["scan", f"dir:{root}", "-q", "-o", f"json={tmp_path / 'b.json'}"]) == 0
    assert feeds.hits and user_db_path().exists() and not mark.exists()
    capsys.readouterr()


def test_export_import_round_trip_for_air_gapped_sites(
    env: Path, https: tuple[Feeds, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str]
) -> None:
    feeds, url = https
    assert main(_args(url)) == 0  # the connected machine
    connected = user_db_path().read_bytes()
    bundle = tmp_path / "gpusbom-advisories.json"
    assert main(["advisories", "export", str(bundle)]) == 0
    assert bundle.read_bytes() == connected
    assert (tmp_path / "gpusbom-advisories.json.sha256").read_text().split()[0] == \
        hashlib.sha256(connected).hexdigest()
    # the air-gapped machine: an empty cache
    monkeypatch.setenv("GPUSBOM_CACHE_DIR", str(tmp_path / "offline-cache"))
    assert load_active().source == "bundled"
    capsys.readouterr()
    # a damaged copy is refused whole
    bad = tmp_path / "bad.json"
    bad.write_bytes(connected.replace(b"NVIDIA-9901", b"NVIDIA-9902", 1))
    (tmp_path / "bad.json.sha256").write_text(hashlib.sha256(connected).hexdigest() + "\n")
    assert main(["advisories", "import", str(bad)]) == 3
    assert "checksum mismatch" in _one_line(capsys) and not user_db_path().exists()
    assert main(["advisories", "import", str(bundle)]) == 0
    assert user_db_path().read_bytes() == connected
    assert "NVIDIA-9901" in {a.id for a in load_active()}
    capsys.readouterr()
    assert main(["advisories", "status"]) == 0
    out = capsys.readouterr().out
    assert f"database: {user_db_path()} (updated or imported)" in out
    assert "build date: " in out and "newest data: " in out and "by vendor: " in out
    assert "source: nvidia-csaf: " in out and "bundled snapshot: built " in out
    assert "known exploited (CISA KEV): 2 CVEs" in out and "descriptions: 2" in out


# --------------------------------------------------------------------------- KEV, descriptions


def _vllm_root(tmp_path: Path) -> Path:
    root = _rootfs(tmp_path)
    site = root / "usr/lib/python3/dist-packages"
    (site / "vllm-0.8.4.dist-info").mkdir()
    (site / "vllm-0.8.4.dist-info/METADATA").write_text(
        "Metadata-Version: 2.1\nName: vllm\nVersion: 0.8.4\n")
    (site / "vllm-0.8.4.dist-info/RECORD").write_text("vllm-0.8.4.dist-info/METADATA,,\n")
    return root


def test_kev_flag_and_descriptions_reach_every_report(
    env: Path, https: tuple[Feeds, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, url = https
    assert main(_args(url)) == 0
    out = capsys.readouterr().out
    assert "kev: 2 known exploited CVEs (catalog 2099.03.01)" in out
    assert "; 2 descriptions;" in out  # CVE-2099-0001 (CSAF note), CVE-2099-1111 (OSV)
    db = load_active()
    assert db.kev["CVE-2099-1111"]["dateAdded"] == "2099-03-01"
    assert db.descriptions["CVE-2099-0001"] == CSAF_NOTE
    # the terminal escape sequence of the OSV text is gone, the words kept
    want = ("Test: vllm deserialises untrusted data [31m in its RPC server "
            "(written for the test).")
    assert db.descriptions["CVE-2099-1111"] == want
    # the shipped snapshot holds neither (no vendor prose in the repository)
    shipped = json.loads((Path(__file__).resolve().parents[2]
                          / "src/gpusbom/data/advisories.json").read_text())
    assert "kev" not in shipped and "descriptions" not in shipped
    assert load_bundled().kev == {} and load_bundled().descriptions == {}

    root = _vllm_root(tmp_path)
    rep, cdx, html = tmp_path / "s.json", tmp_path / "s.cdx.json", tmp_path / "s.html"
    assert main(["scan", f"dir:{root}", "--offline", "-o", f"json={rep}",
                 "-o", f"cyclonedx-json={cdx}", "-o", f"html={html}", "-o", "table"]) == 0
    table = capsys.readouterr().out
    assert "Known exploited (CISA KEV, 1): CVE-2099-1111 (added 2099-03-01)" in table
    assert "CVE-2099-1111 KEV" in table
    (f,) = [x for x in json.loads(rep.read_text())["findings"] if x["id"] == "CVE-2099-1111"]
    assert f["advisory"]["kev"] == "2099-03-01" and f["advisory"]["description"] == want
    others = [x for x in json.loads(rep.read_text())["findings"]
              if x["id"] != "CVE-2099-1111" and x.get("advisory")]
    assert others and all("kev" not in x["advisory"] for x in others)  # torch's: not in KEV
    (v,) = [x for x in json.loads(cdx.read_text())["vulnerabilities"]
            if x["id"] == "CVE-2099-1111"]
    assert v["description"] == want
    assert {"name": "gpusbom:kev", "value": "2099-03-01"} in v["properties"]
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(cdx.read_text()) is None
    page = html.read_text()
    assert "KEV since 2099-03-01" in page and "vllm deserialises untrusted data" in page
    # the gate's SARIF message says so too
    pol = tmp_path / "p.yaml"
    pol.write_text("version: 1\nrules:\n  advisories: {fail_on: high}\n")
    sarif = tmp_path / "g.sarif"
    assert main(["gate", "-q", "--policy", str(pol), f"dir:{root}", "-o",
                 f"sarif={sarif}"]) == 1
    msgs = [r["message"]["text"] for run in json.loads(sarif.read_text())["runs"]
            for r in run["results"] if "CVE-2099-1111" in r["message"]["text"]]
    assert msgs and all("in CISA KEV since 2099-03-01" in m for m in msgs)


@pytest.mark.parametrize("damage", ["truncated", "count", "not-json", "bad-id", "offline"])
def test_bad_kev_download_keeps_old_db(
    env: Path, https: tuple[Feeds, str], capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    feeds, url = https
    old = _old_db(url, capsys)
    path = "/kev/known_exploited_vulnerabilities.json"
    if damage == "truncated":
        feeds.truncate.add(path)
        want = "download interrupted"
    elif damage == "count":  # a catalog cut short at an entry boundary
        feeds.put(path, _kev([("CVE-2099-1111", "2099-03-01")], count=1300))
        want = "invalid data: 'count' is 1300 but the catalog lists 1 entries"
    elif damage == "not-json":
        feeds.put(path, b"<html>maintenance</html>")
        want = "invalid data: not JSON"
    elif damage == "bad-id":
        feeds.put(path, _kev([("CVE-99-1", "2099-03-01")]))
        want = "invalid data: entry 0: 'cveID' is not a CVE id"
    else:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        args = _args(url)
        args[args.index(f"kev={url}{path}")] = f"kev=https://127.0.0.1:{port}{path}"
        assert main(args) == 3
        assert "cannot connect" in _one_line(capsys)
        assert user_db_path().read_bytes() == old
        return
    assert main(_args(url)) == 3
    line = _one_line(capsys)
    assert path in line and want in line, line
    assert user_db_path().read_bytes() == old
    assert load_active().kev["CVE-2099-1111"]["dateAdded"] == "2099-03-01"


# --------------------------------------------------------------------------- Intel/AMD CVE 5


def _cve5(cve: str, assigner: str, product: str, version: str, status: str, ref: str,
          text: str, cve_id: str | None = None) -> bytes:
    """A CVE JSON 5 record in the shape Intel's and AMD's records have in
    CVEProject/cvelistV5 (cves/<year>/<N>xxx/<id>.json); the product, version and
    reference are the vendor's, the description is written for the test."""
    return json.dumps({
        "dataType": "CVE_RECORD", "dataVersion": "5.1",
        "cveMetadata": {"cveId": cve_id or cve, "state": "PUBLISHED",
                        "assignerShortName": assigner, "datePublished": "2025-11-11T16:50:53Z"},
        "containers": {"cna": {
            "affected": [{"vendor": "n/a" if assigner == "intel" else "AMD",
                          "product": product, "defaultStatus": "unaffected"
                          if status == "affected" else "affected",
                          "versions": [{"version": version, "status": status}]}],
            "descriptions": [{"lang": "en", "value": text}],
            "references": [{"url": ref}]}}}).encode()


def test_intel_and_amd_descriptions_from_their_cve_records(
    env: Path, https: tuple[Feeds, str], capsys: pytest.CaptureFixture[str]
) -> None:
    feeds, url = https
    # the curated copy: three shipped Intel/AMD records (their CVEs are asked for)
    shipped = json.loads((Path(__file__).resolve().parents[2]
                          / "src/gpusbom/data/advisories.json").read_text())
    keep = {"INTEL-SA-01366", "INTEL-SA-01365", "AMD-SB-6019"}
    cur = json.dumps({**shipped, "advisories": [a for a in shipped["advisories"]
                                                if a["id"] in keep]}).encode()
    feeds.put("/curated/advisories.json", cur)
    feeds.put("/curated/advisories.json.sha256", _sha(cur))
    mkl = "Test: oneMKL input validation (written for the test)."
    amd = "Test: amdgpu \x1b[1mdescription\x1b[0m (written for the test)."
    # CVE-2025-31948, INTEL-SA-01366: oneMKL before 2025.2
    feeds.put("/cve5/2025/31xxx/CVE-2025-31948.json", _cve5(
        "CVE-2025-31948", "intel", "Intel(R) oneAPI Math Kernel Library",
        "before version 2025.2", "affected",
        "https://intel.com/content/www/us/en/security-center/advisory/intel-sa-01366.html", mkl))
    # CVE-2024-36353, AMD-SB-6019: fixed in Radeon Software for Linux 25.10.1
    feeds.put("/cve5/2024/36xxx/CVE-2024-36353.json", _cve5(
        "CVE-2024-36353", "AMD", "AMD Radeon(TM) RX 7000 Series Graphics Products",
        "Radeon Software For Linux 25.10.1", "unaffected",
        "https://www.amd.com/en/resources/product-security/bulletin/amd-sb-6019.html", amd))
    # CVE-2025-27712 (INTEL-SA-01365): the server answers with another CVE's record
    feeds.put("/cve5/2025/27xxx/CVE-2025-27712.json", _cve5(
        "CVE-2025-27712", "intel", "Intel(R) Neural Compressor software",
        "before version v3.4", "affected",
        "https://intel.com/content/www/us/en/security-center/advisory/intel-sa-01365.html",
        "Test.", cve_id="CVE-2025-31948"))
    args = [a for a in _args(url)] + ["--source", f"cve5={url}/cve5"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "cve5: 2 records" in out and "1 entries skipped" in out
    assert (f"skipped: {url}/cve5/2025/27xxx/CVE-2025-27712.json: invalid data: not the CVE "
            "JSON 5 record of CVE-2025-27712 (cveMetadata.cveId 'CVE-2025-31948')") in out
    db = load_active()
    assert db.descriptions["CVE-2025-31948"] == mkl
    assert db.descriptions["CVE-2024-36353"] == ("Test: amdgpu [1mdescription [0m "
                                                  "(written for the test).")
    assert "CVE-2025-27712" not in db.descriptions
    assert {"INTEL-SA-01366", "AMD-SB-6019"} <= {a.id for a in db}
    # the facts still come from the records built into the snapshot; only the text is new
    (rec,) = [a for a in db if a.id == "INTEL-SA-01366"]
    assert rec.raw["vulnerabilities"][0]["affected"][0]["ranges"] == [{"fixed": "2025.2"}]
    # a record the server does not have is skipped alone; an unreachable server fails whole
    del feeds.files["/cve5/2024/36xxx/CVE-2024-36353.json"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert f"{url}/cve5/2024/36xxx/CVE-2024-36353.json: not published (HTTP 404)" in out
    before = user_db_path().read_bytes()
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    assert main([*_args(url), "--source", f"cve5=https://127.0.0.1:{port}/cve5"]) == 3
    assert "cannot connect" in _one_line(capsys)
    assert user_db_path().read_bytes() == before
