"""Inventory tests run on SQLite and on a real PostgreSQL server (Debian's), started here.

``db_url`` is parametrized over both backends: each test gets a new empty database.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from inv_pgserver import PgServer, find_bindir

_COMMITTED = Path(__file__).resolve().parents[2] / "fixtures" / "hosts"


@pytest.fixture(scope="session")
def pg() -> Iterator[PgServer]:
    bindir = find_bindir()
    if bindir is None:
        pytest.skip("PostgreSQL server binaries not found (/usr/lib/postgresql/*/bin): "
                    "apt-get install postgresql (scripts/test does)")
    server = PgServer(bindir).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'inventory.db'}"
    server: PgServer = request.getfixturevalue("pg")
    return server.create_db()


@pytest.fixture(scope="session")
def h200_root() -> Path:
    """The committed H200 host snapshot with its placeholder files and links rebuilt."""
    sys.path.insert(0, str(_COMMITTED))
    from placeholders import materialize

    tmp = Path(tempfile.mkdtemp(prefix="gpusbom-inv-hosts-"))
    atexit.register(shutil.rmtree, tmp, True)
    materialize(_COMMITTED / "h200", tmp / "h200")
    return tmp / "h200"


@pytest.fixture(scope="session")
def h200_scan(h200_root: Path):  # type: ignore[no-untyped-def]
    os.environ.setdefault("SOURCE_DATE_EPOCH", "1767225600")
    from gpusbom.host import scan_host

    return scan_host(str(h200_root))
