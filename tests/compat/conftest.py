"""Fixtures of the check tests: the H200 host snapshot scanned (as `gpusbom scan --root`),
the nvcc-built fixture binaries (fixtures/check/build.py, cached outside the repository)."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HOSTS = ROOT / "fixtures" / "hosts"
CHECK = ROOT / "fixtures" / "check"


@pytest.fixture(scope="session")
def h200_json() -> Iterator[Path]:
    """The committed H200 snapshot, materialised and scanned to gpusbom JSON."""
    sys.path.insert(0, str(HOSTS))
    from placeholders import materialize

    from gpusbom.cli.app import main

    tmp = Path(tempfile.mkdtemp(prefix="gpusbom-check-h200-"))
    try:
        materialize(HOSTS / "h200", tmp / "h200")
        os.environ.setdefault("SOURCE_DATE_EPOCH", "1767225600")
        out = tmp / "h200.json"
        assert main(["scan", "--root", str(tmp / "h200"), "-q", "-o", f"json={out}"]) == 0
        yield out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def nvcc_fixtures() -> Path:
    """fixtures/check/build.py output (nvcc 13 fatbins and libraries), built once per key."""
    sys.path.insert(0, str(CHECK))
    import build  # fixtures/check/build.py

    try:
        nvcc = build.find_tool("nvcc")
        build.find_tool("fatbinary")
    except build.ToolMissing as exc:
        pytest.skip(f"nvcc fixtures: {exc}")
    cache = Path(os.environ.get("GPUSBOM_FIXTURE_CACHE",
                                Path.home() / ".cache" / "gpusbom" / "fixtures"))
    out = cache / f"check-{build.key(nvcc)}"
    out.parent.mkdir(parents=True, exist_ok=True)
    build.build(out)
    return out


def load_json(path: Path) -> dict:  # type: ignore[type-arg]
    return json.loads(path.read_text())  # type: ignore[no-any-return]


@pytest.fixture(scope="session")
def wheels_scan(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The nvidia-wheels image's gpusbom JSON (its SBOM as gpusbom writes it)."""
    from fixtures.build import ensure
    from gpusbom.cli.app import main

    paths = ensure("nvidia-wheels")
    out = tmp_path_factory.mktemp("wheels") / "nvidia-wheels.json"
    assert main(["scan", paths.oci_ref, "-q", "-o", f"json={out}"]) == 0
    return out
