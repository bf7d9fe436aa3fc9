from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpusbom.host import scan_host
from gpusbom.model import ScanResult

import atexit
import shutil
import sys
import tempfile

_COMMITTED = Path(__file__).resolve().parents[2] / "fixtures" / "hosts"
sys.path.insert(0, str(_COMMITTED))
from placeholders import materialize  # noqa: E402


def _materialized_hosts() -> Path:
    """A replayable copy of fixtures/hosts: snapshots with their placeholder files and links.

    The repository keeps empty library placeholders and symlinks as lists (see
    fixtures/hosts/placeholders.py); each test process rebuilds them once.
    """
    tmp = Path(tempfile.mkdtemp(prefix="gpusbom-hosts-"))
    atexit.register(shutil.rmtree, tmp, True)
    for entry in _COMMITTED.iterdir():
        if (entry / "gpusbom-snapshot").is_dir():
            materialize(entry, tmp / entry.name)
        elif entry.is_dir():
            shutil.copytree(entry, tmp / entry.name, symlinks=True)
    return tmp


HOSTS = _materialized_hosts()


@pytest.fixture(scope="session")
def h200() -> ScanResult:
    os.environ.setdefault("SOURCE_DATE_EPOCH", "1767225600")
    return scan_host(str(HOSTS / "h200"))


@pytest.fixture(scope="session")
def cpu_only() -> ScanResult:
    os.environ.setdefault("SOURCE_DATE_EPOCH", "1767225600")
    return scan_host(str(HOSTS / "cpu-only"))
