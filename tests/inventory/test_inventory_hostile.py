"""Hostile image text and secrets on the way into the inventory.

An image whose file names are not UTF-8, whose labels hold NUL (PostgreSQL rejects NUL in
text) and whose env holds secrets is scanned and pushed to both databases: the push works,
the stored document holds the escaped text, and neither the push URL's password nor the
env secrets appear anywhere (stdout, stderr with --debug, the SBOM, the stored document).
A push to a database that refuses the password, or that is not there, is one error line
without the password.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures import imagetools as it
from gpusbom.inventory.store import Store

ENV_SECRET = "ghp_InventoryLeakCheck0000000000000000"


def gpusbom(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GPUSBOM_PUSH_RETRY_SECONDS": "2"}  # a server that is not there
    return subprocess.run([sys.executable, "-m", "gpusbom", *args], capture_output=True,
                          text=True, timeout=300, env=env)


@pytest.fixture(scope="module")
def hostile_layout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    name = b"/opt/caf\xe9/lib/libcudart.so.12.4.127".decode("utf-8", "surrogateescape")
    image = it.build_image(
        [[("/etc/os-release", b'ID=debian\nVERSION_ID="12"\n'), (name, b"\x7fELF" + bytes(60))]],
        labels={"note": "nul\x00inside"}, env={"GITHUB_TOKEN": ENV_SECRET})
    return it.write_oci_layout(tmp_path_factory.mktemp("hostile") / "layout", image, tag="t")


def test_push_hostile_text_and_no_secret_leaks(db_url: str, hostile_layout: Path,
                                               tmp_path: Path) -> None:
    out = tmp_path / "sbom.cdx.json"
    p = gpusbom("scan", "--image", f"oci:{hostile_layout}:t", "--push", db_url, "--debug",
                "-q", "-o", f"cyclonedx-json={out}")
    assert p.returncode == 0, p.stderr
    with Store(db_url) as store:
        [scan] = store.scans()
        text = store.document(scan.id).decode("utf-8")
    stored = json.loads(text)
    assert stored["target"]["labels"]["note"] == "nul\\x00inside"  # escaped, not dropped
    paths = {e["path"] for c in stored["components"] for e in c["evidence"] if e.get("path")}
    assert any("caf\\xe9" in q for q in paths), paths
    password = db_url.split("://", 1)[1].split("@", 1)[0].partition(":")[2]
    for blob in (p.stdout, p.stderr, out.read_text(), text):
        assert ENV_SECRET not in blob
        if password:
            assert password not in blob


def test_push_failures_name_no_password(pg, hostile_layout: Path) -> None:  # type: ignore[no-untyped-def]
    good = pg.create_db()
    wrong = good.replace(f":{pg.password}@", ":S3cret-but-wrong@")
    gone = f"postgresql://{pg.user}:S3cret-unreachable@127.0.0.1:1/none"
    for url, secret in ((wrong, "S3cret-but-wrong"), (gone, "S3cret-unreachable")):
        base = ("scan", "--image", f"oci:{hostile_layout}:t", "--push", url, "-q",
                "-o", "json=/dev/null")
        p = gpusbom(*base)
        assert p.returncode == 3, p.stderr
        errors = [ln for ln in p.stderr.splitlines() if ln.startswith("gpusbom: error: ")]
        assert len(errors) == 1 and "Traceback" not in p.stderr, p.stderr
        others = [ln for ln in p.stderr.splitlines() if not ln.startswith("gpusbom: ")]
        assert not others, p.stderr  # retries are warning lines, nothing else
        debug = gpusbom(*base, "--debug")  # tracebacks and debug logs: still no password
        assert debug.returncode == 3
        for blob in (p.stdout, p.stderr, debug.stdout, debug.stderr):
            assert secret not in blob and pg.password not in blob
