"""``pip install gpusbom`` without extras (issue #36): the wheel, built from this checkout,
installed into a clean virtual environment, scans an image and writes CycloneDX in under
150 MB of installed size; the inventory and the probe name the ``pip install`` to run.

The wheel is built once per session (``pip wheel --no-deps``) and installed with this
interpreter's pip into a venv made ``--without-pip``, so that the venv's site-packages holds
exactly what ``pip install gpusbom`` puts there; pip's download cache (~/.cache/pip) makes
the install a few seconds.
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cyclonedx.schema import OutputFormat, SchemaVersion
from cyclonedx.validation import make_schemabased_validator

from fixtures.build import ensure

REPO = Path(__file__).resolve().parents[2]
#: the acceptance bound on the installed size of gpusbom and its required dependencies
MAX_INSTALLED_MB = 150


def _build_image() -> Any:
    """scripts/image/build.py as a module (its wheel-build lock)."""
    spec = importlib.util.spec_from_file_location("gpusbom_build_image",
                                                  REPO / "scripts/image/build.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _pip(*args: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True,
                          timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]


@pytest.fixture(scope="session")
def lean(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin/ directory of a clean venv with the wheel of this checkout and no extras."""
    root = tmp_path_factory.mktemp("lean")
    # one in-tree wheel build at a time: the own-image test builds one on the other worker
    with open(_build_image().wheel_lock_path(REPO), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _pip("wheel", "-q", "--no-deps", "-w", str(root / "dist"), str(REPO))
    wheels = sorted((root / "dist").glob("gpusbom-*.whl"))
    assert len(wheels) == 1, wheels
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    _pip("--python", str(venv / "bin" / "python"), "install", "-q", str(wheels[0]))
    return venv / "bin"


def _site_packages(bin_dir: Path) -> Path:
    [site] = (bin_dir.parent / "lib").glob("python3*/site-packages")
    return site


def _run(bin_dir: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    return subprocess.run([str(bin_dir / "gpusbom"), *args], capture_output=True, text=True,
                          timeout=300, check=False, cwd=cwd, env=env)


def test_no_extra_is_installed(lean: Path) -> None:
    code = ("import importlib.util as u; "
            "print([m for m in ('sqlalchemy', 'alembic', 'psycopg', 'starlette', 'uvicorn', "
            "'prometheus_client', 'pyopencl', 'numpy', 'vulkan', 'lxml') if u.find_spec(m)])")
    out = subprocess.run([str(lean / "python"), "-c", code], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    assert out.strip() == "[]"


def test_installed_size_under_150_mb(lean: Path, record_property: Any) -> None:
    site = _site_packages(lean)
    du = subprocess.run(["du", "-sk", str(site)], capture_output=True, text=True, check=True)
    mib = int(du.stdout.split()[0]) / 1024
    record_property("figure", f"site-packages of gpusbom without extras: {mib:.1f} MiB")
    assert 20 < mib < MAX_INSTALLED_MB, mib


def test_scans_an_image_and_writes_cyclonedx(lean: Path, tmp_path: Path) -> None:
    demo = ensure("demo")
    out = tmp_path / "demo.cdx.json"
    proc = _run(lean, "scan", demo.oci_ref, "--offline", "-q", "-o", f"cyclonedx-json={out}",
                cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    errors = make_schemabased_validator(OutputFormat.JSON, SchemaVersion.V1_6).validate_str(text)
    assert errors is None, errors
    names = {c["name"] for c in json.loads(text)["components"]}
    assert "base-files" in names  # the image's Debian packages
    assert len(names) > 10


@pytest.mark.parametrize(("argv", "extra"), [
    (["inventory"], "inventory"),
    (["inventory", "hosts"], "inventory"),
    (["probe"], "probe"),
])
def test_a_missing_extra_is_one_line_naming_the_install(lean: Path, tmp_path: Path,
                                                        argv: list[str], extra: str) -> None:
    proc = _run(lean, *argv, cwd=tmp_path)
    assert proc.returncode == 3, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("gpusbom: error: ")
    assert lines[0].endswith(f"pip install 'gpusbom[{extra}]'"), lines[0]
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_version_records_the_commit_built_from(lean: Path, tmp_path: Path) -> None:
    proc = _run(lean, "version", "-o", "json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    info = json.loads(proc.stdout)
    assert info["commit"] == head  # from gpusbom/data/build-info.json (setup.py's build_py)
    assert info["advisory_db"]["advisories"] > 0  # the bundled database is in the wheel


def test_the_wheel_carries_the_json_schema(lean: Path, tmp_path: Path) -> None:
    proc = _run(lean, "schema", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (REPO / "src" / "gpusbom" / "data" / "schema" / "scan-1.json").read_text()
