"""Dashboard fixtures: an inventory on a real PostgreSQL filled with real scans (the H200
host snapshot, the nvidia-wheels fixture image) and a hostile image, served by
``gpusbom inventory serve`` in a child process; headless Debian Chromium via Selenium."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import dash_data

REPO = Path(__file__).resolve().parents[3]
#: screenshots and other artifacts of the browser tests (CI keeps this directory)
ARTIFACTS = Path(os.environ.get("GPUSBOM_TEST_ARTIFACTS", REPO / "test-artifacts")) / "dashboard"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """``gpusbom inventory serve`` in a child process on a free localhost port."""

    def __init__(self, url: str, *extra: str) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}/"
        fd, self.log = tempfile.mkstemp(prefix="gpusbom-serve-", suffix=".log")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gpusbom", "inventory", "serve", "--db", url, "--bind",
             f"127.0.0.1:{self.port}", *extra], stdout=fd, stderr=subprocess.STDOUT)
        os.close(fd)
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"inventory serve exited {self.proc.returncode}: "
                                   f"{self.output()}")
            try:
                requests.get(self.base + "static/style.css", timeout=2)
                break
            except requests.ConnectionError:
                if time.monotonic() > deadline:
                    raise RuntimeError("inventory serve did not answer in 60 s: "
                                       f"{self.output()}") from None
                time.sleep(0.2)

    def output(self) -> str:
        return Path(self.log).read_text(errors="replace")[-3000:]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.unlink(self.log)


@pytest.fixture(scope="session")
def wheels_result() -> Any:
    from fixtures.build import ensure
    from gpusbom.scan import scan

    return scan(ensure("nvidia-wheels").oci_ref)


@pytest.fixture(scope="session")
def dash_db(pg: Any, h200_scan: Any, wheels_result: Any) -> str:
    url: str = pg.create_db()
    dash_data.fill(url, h200_scan, wheels_result)
    return url


@pytest.fixture(scope="session")
def server(dash_db: str) -> Iterator[Server]:
    s = Server(dash_db)
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="session")
def wheels_subject(wheels_result: Any) -> str:
    from gpusbom.inventory.normalize import subject_of

    return str(subject_of(wheels_result))


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    from chromium import chromium  # tests/chromium.py

    with chromium() as d:
        yield d


WRITE_TOKEN = "triage-token-" + "7f3a9c1e"  # the write server's token (a test value)


@pytest.fixture(scope="session")
def syft_sboms(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Syft 1.18.1 (the real binary) run on the nvidia-wheels docker archive: it names the
    image by the archive's local path, which the inventory must not show."""
    sys.path.insert(0, str(REPO / "tests" / "sbomin"))
    from fixtures.build import ensure
    from sbom_tools import syft

    out = tmp_path_factory.mktemp("syft")
    archive = out / "nvidia-wheels.docker.tar"
    archive.symlink_to(ensure("nvidia-wheels").docker_archive)
    cdx, spdx = out / "syft.cdx.json", out / "syft.spdx.json"
    p = subprocess.run([str(syft()), f"docker-archive:{archive}", "-q",
                        "-o", f"cyclonedx-json={cdx}", "-o", f"spdx-json={spdx}"],
                       capture_output=True, text=True, timeout=300, check=False,
                       env={**os.environ, "SYFT_CHECK_FOR_APP_UPDATE": "false"})
    assert p.returncode == 0, p.stderr[-2000:]
    return {"archive": archive, "cyclonedx": cdx, "spdx": spdx}


@pytest.fixture(scope="session")
def triage_db(pg: Any, h200_scan: Any, wheels_result: Any, syft_sboms: dict[str, Path]) -> str:
    """The dashboard inventory plus what the names and driver tests need: the same image
    scanned from its docker archive, Syft's SBOMs of that archive, and a host whose GPUs
    name no kernel driver (dash_data.no_driver_link)."""
    from fixtures.build import ensure
    from gpusbom.inventory import Store
    from gpusbom.sbomin import load_sbom
    from gpusbom.scan import scan

    url: str = pg.create_db()
    dash_data.fill(url, h200_scan, wheels_result)
    with Store(url) as store:
        store.ingest(scan(f"docker-archive:{ensure('nvidia-wheels').docker_archive}"))
        store.ingest(load_sbom(str(syft_sboms["cyclonedx"])))
        store.ingest(dash_data.no_driver_link(h200_scan))
    return url


@pytest.fixture(scope="session")
def write_server(triage_db: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tok = tmp_path_factory.mktemp("tok") / "write-token"
    tok.write_text(WRITE_TOKEN + "\n")
    s = Server(triage_db, "--write-token-file", str(tok))
    try:
        yield s
    finally:
        s.stop()
