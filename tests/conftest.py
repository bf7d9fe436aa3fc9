"""Shared pytest fixtures.

* the repository root is put on ``sys.path`` so tests can ``from fixtures import imagetools``;
* ``docker_engine``: a private Docker Engine for the session (root only), yields its DOCKER_HOST;
* ``docker_env``: ``docker_engine`` plus DOCKER_HOST set for one test;
* ``docker_load``: ``docker load -i ARCHIVE`` into ``docker_engine``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DOCKERD_START_TIMEOUT = 60.0

# Tests never see a developer's updated advisory database (gpusbom advisories update writes
# it to the user cache): every process of the test session uses this empty cache instead.
os.environ["GPUSBOM_CACHE_DIR"] = tempfile.mkdtemp(prefix="gpusbom-test-cache-")
# Nor the layer-result cache: tests that damage a blob after a good scan of the same image
# must see it read again. tests/sources/test_layer_cache.py turns it on where it is tested.
os.environ["GPUSBOM_NO_CACHE"] = "1"
# Nor a scan's automatic database update (there is no network here; reports must not depend
# on one): tests/advisories/test_update.py turns it on against its local HTTPS server.
os.environ["GPUSBOM_DB_AUTO_UPDATE"] = "0"


# --- CI cannot pass by skipping ---------------------------------------------------------------

SKIP_ALLOWLIST = ROOT / "tests" / "skip-allowlist.txt"
_SKIPS: list[tuple[str, str]] = []  # (node id, reason) of every skipped test


def _allowlist() -> list[tuple[re.Pattern[str], str]]:
    entries = []
    for n, line in enumerate(SKIP_ALLOWLIST.read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        regex, tab, why = line.partition("\t")
        if not tab or not why.strip():
            raise pytest.UsageError(f"{SKIP_ALLOWLIST}:{n}: want REGEX<TAB>WHY, got {line!r}")
        entries.append((re.compile(regex), why.strip()))
    return entries


_FIGURES: list[str] = []  # ("figure", text) user properties of the tests (fuzz runs, ...)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # a report reaches the xdist controller with its user properties: a figure a test
    # records with record_property("figure", ...) is printed at the end of the session
    if report.when == "call":
        _FIGURES.extend(str(v) for k, v in report.user_properties if k == "figure")
    if report.skipped and not hasattr(report, "wasxfail"):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        _SKIPS.append((report.nodeid, reason.removeprefix("Skipped: ")))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _FIGURES:
        terminalreporter.section("figures")
        for line in sorted(_FIGURES):
            terminalreporter.write_line(line)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Under CI=true, a skip whose reason is not on tests/skip-allowlist.txt fails the run."""
    if os.environ.get("CI", "").lower() != "true" or hasattr(session.config, "workerinput"):
        return
    allowed = _allowlist()
    bad = [(nodeid, reason) for nodeid, reason in _SKIPS
           if not any(rx.search(reason) for rx, _ in allowed)]
    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    write = tr.write_line if tr is not None else print
    write("")
    write(f"CI skip check: {len(_SKIPS) - len(bad)} allowlisted skip(s), "
          f"{len(bad)} not on {SKIP_ALLOWLIST.relative_to(ROOT)}")
    for nodeid, reason in bad:
        write(f"  not allowed under CI: {nodeid}: {reason}")
    if bad and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[str]:
    """Start a private dockerd (vfs storage, no networking) and yield its ``unix://`` URL.

    Load images with ``docker load -i ARCHIVE`` under ``DOCKER_HOST=<url>``. Containers
    cannot run in it (no bridge, no iptables); ``docker load``/``save``/``build FROM
    scratch`` work.
    """
    if os.geteuid() != 0:
        pytest.skip("the test Docker Engine needs root to run dockerd")
    dockerd, docker = shutil.which("dockerd"), shutil.which("docker")
    if dockerd is None or docker is None:
        pytest.skip("dockerd / docker CLI not installed (apt-get install docker.io)")
    # unix socket paths must stay under 108 bytes: keep the state directory short
    tmp = tempfile.mkdtemp(prefix="gpusbom-dockerd-", dir="/tmp")
    host = f"unix://{tmp}/docker.sock"
    log_path = Path(tmp, "dockerd.log")
    cmd = [
        dockerd,
        "--storage-driver=vfs",
        "--iptables=false",
        "--ip6tables=false",
        "--bridge=none",
        "--data-root", f"{tmp}/data",
        "--exec-root", f"{tmp}/exec",
        "-H", host,
        "--pidfile", f"{tmp}/docker.pid",
    ]  # fmt: skip
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    env = dict(os.environ, DOCKER_HOST=host)
    deadline = time.monotonic() + DOCKERD_START_TIMEOUT
    try:
        while True:
            if proc.poll() is not None:
                tail = log_path.read_text(errors="replace")[-2000:]
                pytest.fail(f"dockerd exited with {proc.returncode}:\n{tail}")
            try:
                ok = (
                    subprocess.run(
                        [docker, "version"], env=env, capture_output=True, timeout=10, check=False
                    ).returncode
                    == 0
                )
            except subprocess.TimeoutExpired:
                ok = False
            if ok:
                break
            if time.monotonic() > deadline:
                tail = log_path.read_text(errors="replace")[-2000:]
                pytest.fail(f"dockerd did not answer within {DOCKERD_START_TIMEOUT:.0f}s:\n{tail}")
            time.sleep(0.3)
        yield host
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def docker_env(docker_engine: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """``docker_engine`` with DOCKER_HOST set for this test; returns the URL."""
    monkeypatch.setenv("DOCKER_HOST", docker_engine)
    return docker_engine


@pytest.fixture
def docker_load(docker_engine: str) -> Callable[[str | os.PathLike[str]], str]:
    """A function that ``docker load``s an archive into ``docker_engine``; returns the CLI output."""

    def load(archive: str | os.PathLike[str]) -> str:
        proc = subprocess.run(
            ["docker", "load", "-i", str(archive)],
            env=dict(os.environ, DOCKER_HOST=docker_engine),
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"docker load -i {archive} failed: {proc.stderr.strip()}")
        return proc.stdout

    return load
